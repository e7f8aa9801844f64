"""Executor side: read one split into ``pyarrow.RecordBatch`` es of Spark's Kafka source schema, or of the
columns a user schema projects (``split.columns``, see seglog.spark.projection): only those Arrow arrays are
built and sent to the JVM (the engine still decodes every column of a batch).

A broker-mode split (``split.bootstrap_servers``) is fetched through the Kafka protocol by
seglog.spark.broker.fetch_columns and decoded by the same ``arrow_columns``; the rest of this docstring is
about local splits.

The split's partition is opened read-only (pread based: the writer may append, roll or truncate meanwhile
without faulting this process). Whole batches come from ``Log.read_next`` (CRC-checked, one segment at a
time, about ``CHUNK_BYTES`` per call) and are decoded by the engine's ``arrow_columns`` straight into Arrow
buffers, wrapped here without copying (``pyarrow.py_buffer`` over the memoryviews the engine returns). The
read copies and those buffers are the engine's pooled scratch objects: once pyspark has sent a batch and
dropped it, the next batch is written into the same pages, so a task reading GiBs touches a few tens of MiB
of memory and no Python code runs per record. A RecordBatch holds about ``BATCH_BYTES`` of keys and values
(about 80 000 records of 100 bytes): small enough for Spark's JVM side to start converting while the next
one is decoded; the constant topic and partition columns are built once per split (BatchBuilder).

Guarantees: records come in offset order, exactly those with ``split.start <= offset < split.end``;
control batches are skipped; nothing at or past the committed end as planned. If offsets of the split
vanished after planning (retention, truncation), ``fail_on_data_loss`` decides: raise DataLossError, or
read what is left.

Arrow types are exactly the ones Spark expects for the schema (binary, not large_binary; int64;
timestamp[us, tz=UTC]; list items named "element"): :func:`arrow_schema` spells them out.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

import pyarrow as pa
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from .. import _engine
from ..errors import OffsetOutOfRangeError, StorageError
from ..isolation import AbortedFilter
from ..log import Log
from .broker import fetch_columns
from .catalog import open_readonly_log
from .errors import DataLossError
from .splits import OffsetRangeSplit

__all__ = ["spark_schema", "arrow_schema", "read_split", "BatchBuilder", "CHUNK_BYTES"]

log = logging.getLogger("seglog.spark")

CHUNK_BYTES = 16 << 20              # bytes of whole batches read per Log.read_next call
BATCH_BYTES = 8 << 20               # about this much key + value data per RecordBatch
READ_RETRIES = 5                    # consecutive failed reads at one offset before the error is raised
_HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_HEADERS = pa.list_(pa.field("element", _HEADER_STRUCT))
_TIMESTAMP = pa.timestamp("us", tz="UTC")


def spark_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (every field nullable), plus ``headers`` when include_headers."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                                   StructField("value", BinaryType())]))))
    return StructType(fields)


def arrow_schema(include_headers: bool, columns: tuple[str, ...] | None = None) -> pa.Schema:
    """The Arrow schema of the batches read() yields: what pyspark derives from spark_schema() with UTC.
    ``columns`` (names as a user schema spells them, checked by seglog.spark.projection) selects and orders
    the fields instead; include_headers is then ignored."""
    fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
              pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
              pa.field("timestamp", _TIMESTAMP), pa.field("timestampType", pa.int32()),
              pa.field("headers", _HEADERS)]
    if columns is None:
        return pa.schema(fields if include_headers else fields[:-1])
    by_name = {f.name.lower(): f for f in fields}
    return pa.schema([by_name[c.lower()].with_name(c) for c in columns])


def _buf(b):
    return None if b is None else pa.py_buffer(b)


def _binary(kind, n: int, col) -> pa.Array:
    validity, offsets, data, nulls = col
    return pa.Array.from_buffers(kind, n, [_buf(validity), pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _headers(cols: dict, n: int) -> pa.Array:
    list_validity, list_offsets, list_nulls, hkey, hvalue = cols["headers"]
    items = len(hkey[1]) // 4 - 1
    struct = pa.StructArray.from_arrays([_binary(pa.string(), items, hkey), _binary(pa.binary(), items, hvalue)],
                                        fields=list(_HEADER_STRUCT))
    return pa.Array.from_buffers(_HEADERS, n, [_buf(list_validity), pa.py_buffer(list_offsets)],
                                 null_count=list_nulls, children=[struct])


def _fixed(kind, name: str):
    return lambda cols, n: pa.Array.from_buffers(kind, n, [None, pa.py_buffer(cols[name])], null_count=0)


_DECODED = {        # lower-case column name -> its array built from (engine columns, rows)
    "key": lambda cols, n: _binary(pa.binary(), n, cols["key"]),
    "value": lambda cols, n: _binary(pa.binary(), n, cols["value"]),
    "offset": _fixed(pa.int64(), "offset"),
    "timestamp": _fixed(_TIMESTAMP, "timestamp"),
    "timestamptype": _fixed(pa.int32(), "timestamp_type"),
    "headers": _headers,
}


class BatchBuilder:
    """Builds the RecordBatches of one partition's ``_engine.arrow_columns`` results: `schema`'s columns only
    (an arrow_schema(); headers need cols decoded with them), wrapping the engine's buffers without copying.
    The constant topic and partition columns are built once, at the most rows a batch has had so far, and
    sliced (zero-copy) for each batch."""

    def __init__(self, topic: str, partition: int, schema: pa.Schema):
        self.schema = schema
        self._constants = {"topic": pa.scalar(topic, pa.string()), "partition": pa.scalar(partition, pa.int32())}
        self._built: dict[str, pa.Array] = {}
        self._makers = [(f.name.lower(), _DECODED.get(f.name.lower())) for f in schema]

    def _constant(self, name: str, n: int) -> pa.Array:
        array = self._built.get(name)
        if array is None or len(array) < n:
            array = self._built[name] = pa.repeat(self._constants[name], n)
        return array if len(array) == n else array.slice(0, n)

    def build(self, cols: dict) -> pa.RecordBatch:
        n = cols["rows"]
        return pa.RecordBatch.from_arrays([self._constant(name, n) if make is None else make(cols, n)
                                           for name, make in self._makers], schema=self.schema)


def _open(split: OffsetRangeSplit) -> Log | None:
    """The split's partition, read-only; None (after a warning) when it is gone and data loss is tolerated."""
    try:
        return open_readonly_log(split.location, split.topic, split.partition)
    except StorageError as e:
        if split.fail_on_data_loss:
            raise DataLossError(f"partition {split.topic}-{split.partition} cannot be opened on this executor "
                                f"({e}): the topic was deleted after planning, or the data dir is not on a file "
                                "system every executor sees", split.start) from None
        log.warning("%s-%d: partition gone (%s); skipping offsets %d..%d", split.topic, split.partition, e,
                    split.start, split.end)
        return None


def _bounds(split: OffsetRangeSplit, lg: Log) -> tuple[int, int]:
    """The split's range checked against the log as it is now (see the module docstring)."""
    start, end = split.start, split.end
    lo, hi = lg.start_offset, min(lg.high_watermark, lg.end_offset)
    where = f"{split.topic}-{split.partition}"
    if start < lo:
        if split.fail_on_data_loss:
            raise DataLossError(f"offsets {start}..{min(end, lo) - 1} of {where} were deleted after the query "
                                f"was planned (the log now starts at {lo})", start, lo, hi)
        log.warning("%s: offsets %d..%d were deleted; skipping them", where, start, min(end, lo) - 1)
        start = min(lo, end)
    if end > hi:
        if split.fail_on_data_loss:
            raise DataLossError(f"offsets {max(start, hi)}..{end - 1} of {where} are no longer in the log (it "
                                f"ends at {hi} now: truncated after the query was planned)", end, lo, hi)
        log.warning("%s: offsets %d..%d are gone (log truncated); skipping them", where, max(start, hi), end - 1)
        end = max(hi, start)
    return start, end


def read_split(split: OffsetRangeSplit) -> Iterator[pa.RecordBatch]:
    """RecordBatches of the split's records (see the module docstring). Raises DataLossError,
    CorruptRecordError, StorageError (after retries); in broker mode BrokerUnavailableError or the broker's
    error once retries are used up."""
    build = BatchBuilder(split.topic, split.partition, arrow_schema(split.include_headers, split.columns)).build
    if split.start >= split.end:
        return
    if split.bootstrap_servers is not None:
        min_ts = split.min_timestamp if split.min_timestamp is not None else -(1 << 63)
        for cols in fetch_columns(split, min_ts, BATCH_BYTES):
            yield build(cols)
        return
    lg = _open(split)
    if lg is None:
        return
    decode = _engine.arrow_columns
    min_ts = split.min_timestamp if split.min_timestamp is not None else -(1 << 63)
    where = f"{split.topic}-{split.partition}"
    failures = 0
    try:
        start, end = _bounds(split, lg)
        offset = start
        # read_committed: the split ends at or below the last stable offset planning saw
        aborted = AbortedFilter(lg.aborted_transactions(start, end)) if split.read_committed else None
        while offset < end:
            try:
                view, next_offset = lg.read_next(offset, CHUNK_BYTES)
            except (OffsetOutOfRangeError, StorageError):
                # retention deleted segments meanwhile, or a writer truncated the segment being read: look again
                failures += 1
                lg.close()
                lg = open_readonly_log(split.location, split.topic, split.partition)
                if offset < lg.start_offset:
                    if split.fail_on_data_loss:
                        raise DataLossError(f"offsets {offset}..{lg.start_offset - 1} of {where} were deleted "
                                            "while the task was reading them", offset, lg.start_offset,
                                            lg.end_offset) from None
                    log.warning("%s: offsets %d..%d were deleted while reading; skipping them", where, offset,
                                lg.start_offset - 1)
                    offset = lg.start_offset
                elif failures > READ_RETRIES:
                    raise
                time.sleep(0.01 * failures)
                continue
            if next_offset < 0:
                break                   # the log ends earlier than planned: _bounds saw it as it was at open
            failures = 0
            done = False
            for data in aborted.runs(memoryview(view)) if aborted is not None else (memoryview(view),):
                pos = 0
                while pos < len(data):
                    cols = decode(data[pos:], start, end, split.include_headers, min_ts, BATCH_BYTES,
                                  path=split.location)
                    if cols["rows"]:
                        yield build(cols)
                    done = cols["done"]
                    if done or cols["consumed"] == 0:
                        break
                    pos += cols["consumed"]
                if done:
                    break
            if done:
                break
            offset = next_offset
    finally:
        lg.close()

