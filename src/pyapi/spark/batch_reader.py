"""Batch reads: ``spark.read.format("seglog")``.

:class:`SeglogBatchReader` plans on the driver (``partitions()``: select partitions, resolve offset ranges,
cut them into splits from segment metadata, or from a broker's Metadata/ListOffsets) and reads on executors
(``read()``: one split into Arrow RecordBatches). :class:`SeglogPushdownBatchReader` adds ``pushFilters``;
the data source hands it out only for ``option("pushFilters", "true")`` (pyspark refuses it unless
``spark.sql.python.filterPushdown.enabled`` is true; see seglog.spark.filters for why it is opt-in). Both
give the same rows for one query that scans its DataFrame once.
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition

from .arrow_reader import read_split
from .locate import open_catalog
from .filters import Pushed, push
from .options import ReadOptions
from .planning import PartitionRange, plan_splits, resolve_ranges
from .splits import OffsetRangeSplit

__all__ = ["SeglogBatchReader", "SeglogPushdownBatchReader", "plan_batch"]


def plan_batch(options: ReadOptions, pushed: Pushed | None = None) -> list[OffsetRangeSplit]:
    """The splits of a batch query (driver side), from a data dir or through brokers. Raises NotADataDirError,
    BrokerUnavailableError, TopicNotFoundError, SourceOptionError, DataLossError."""
    with open_catalog(options.location, options.read_committed) as catalog:
        chosen = catalog.select(options.selection, allow_empty=False)
        if pushed is not None:
            chosen = [tp for tp in chosen if pushed.keeps(*tp)]
        ranges = resolve_ranges(catalog, chosen, options.starting, options.ending, options.fail_on_data_loss,
                                options.timestamp_strategy, start_default="earliest")
        min_ts = None
        if pushed is not None:
            narrowed = []
            for r in ranges:
                start, end = pushed.narrow(r.start, r.end)
                if pushed.min_timestamp is not None and start < end:
                    with catalog.open(r.topic, r.partition) as part:
                        first = part.offset_for_timestamp(pushed.min_timestamp)
                    start = min(max(start, first if first is not None else end), end)
                narrowed.append(PartitionRange(r.topic, r.partition, start, end))
            ranges = narrowed
            min_ts = pushed.min_timestamp
        return plan_splits(catalog, ranges, options.split_bytes, options.min_partitions,
                           options.max_records_per_partition, include_headers=options.include_headers,
                           columns=options.columns, fail_on_data_loss=options.fail_on_data_loss, min_timestamp=min_ts,
                           read_committed=options.read_committed)


class SeglogBatchReader(DataSourceReader):
    """Reads the selected partitions' offset ranges; see seglog.spark.options for the options."""

    def __init__(self, options: ReadOptions):
        self.options = options
        self.pushed: Pushed | None = None

    def partitions(self) -> list[InputPartition]:
        return list(plan_batch(self.options, self.pushed))

    def read(self, partition: InputPartition) -> Iterator:
        if not isinstance(partition, OffsetRangeSplit):      # pyspark's placeholder when nothing is to be read
            return iter(())
        return read_split(partition)


class SeglogPushdownBatchReader(SeglogBatchReader):
    """SeglogBatchReader that also takes Spark's pushed filters (see seglog.spark.filters)."""

    def pushFilters(self, filters):
        self.pushed = Pushed()
        return push(filters, self.pushed)
