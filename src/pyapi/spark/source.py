"""The ``seglog`` Python data source: schema, batch reader, stream reader and writer.

Options are documented in seglog.spark.options. ``schema()`` (called by ``load()``) already checks the
options every query shares (path is a data dir or the brokers answer, named topics exist), so mistakes fail
at ``load()``;
``reader()`` / ``streamReader()`` check the rest (offset specs, batch- or stream-only options), and a
batch query's offsets are checked against the logs when Spark plans it (``partitions()``).

A user-specified schema (``spark.read.format("seglog").schema("value binary")``) replaces ``schema()`` (so the
load()-time checks then happen at planning) and is a projection: ``reader(schema)`` checks it against the
source's columns (seglog.spark.projection) and the reader builds only those. Spark's own Kafka source
refuses a user schema; seglog accepts a subset because the Python Data Source API cannot prune columns.

Batch filter pushdown is off unless the query sets ``option("pushFilters", "true")`` (which also needs
``spark.sql.python.filterPushdown.enabled=true``, or pyspark refuses the reader): Spark keeps the plan of the
last pushdown on the loaded DataFrame and reuses it for later scans that push nothing, so a reused DataFrame
would return the filtered rows (see seglog.spark.filters).
"""

from __future__ import annotations

import dataclasses

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .batch_reader import SeglogBatchReader, SeglogPushdownBatchReader
from .catalog import DataDir
from .locate import open_catalog
from .errors import SourceOptionError
from .arrow_reader import spark_schema
from .options import (ReadOptions, lower_keys, parse_bool, parse_location, parse_read_options, parse_selection,
                      parse_write_options)
from .projection import project
from .stream_reader import SeglogStreamReader
from .writer import SeglogWriter, check_write_schema, topic_partitions

__all__ = ["SeglogDataSource"]


class SeglogDataSource(DataSource):
    """``spark.read/readStream.format("seglog")`` and ``df.write.format("seglog")``."""

    @classmethod
    def name(cls) -> str:
        return "seglog"

    def schema(self) -> StructType:
        opts = lower_keys(self.options)
        include_headers = parse_bool(opts.get("includeheaders", "false"), "includeHeaders")
        location = parse_location(opts)
        selection = parse_selection(opts)
        with open_catalog(location) as catalog:        # a bad path or bootstrap address fails at load()
            if selection.kind != "subscribePattern":
                catalog.select(selection, allow_empty=True)
        return spark_schema(include_headers)

    def _read_options(self, schema: StructType, streaming: bool) -> ReadOptions:
        """The reader options with `schema` (the user's, or schema()'s) as the projection."""
        options = parse_read_options(self.options, streaming=streaming)
        columns = project(schema)
        return dataclasses.replace(options, columns=columns,
                                   include_headers=any(c.lower() == "headers" for c in columns))

    def reader(self, schema: StructType) -> SeglogBatchReader:
        options = self._read_options(schema, streaming=False)
        if options.push_filters:
            return SeglogPushdownBatchReader(options)
        return SeglogBatchReader(options)

    def streamReader(self, schema: StructType) -> SeglogStreamReader:
        return SeglogStreamReader(self._read_options(schema, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> SeglogWriter:
        if overwrite:
            raise SourceOptionError("seglog topics are append-only: save with mode('append') (overwriting a "
                                    "topic is not supported)")
        options = parse_write_options(self.options)
        check_write_schema(schema, options)
        data_dir = DataDir(options.path)
        if options.topic is not None:
            topic_partitions(data_dir, options.topic)
        return SeglogWriter(options, schema)

