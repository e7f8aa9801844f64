"""Writes: ``df.write.format("seglog").option("path", "data").option("topic", "pet").mode("append").save()``.

Input columns, as Spark's Kafka sink takes them: ``value`` (binary or string, required), ``key`` (binary or
string), ``topic`` (string; required unless the ``topic`` option is set, which then wins), ``partition``
(int; null or absent: chosen like Kafka's Java producer, murmur2(key) for keyed rows, round-robin per task
for the others) and ``headers`` (array<struct<key: string, value: binary>>). Other columns are ignored.
Strings are written as UTF-8. Timestamps are the append time (CreateTime = now), as Kafka's sink does.

The topic must exist (its ``<topic>-<p>`` directories; topics are not created from Spark) with partitions
0..n-1. Each task groups its rows by partition and appends them with ``Log.append_batch`` (about
``FLUSH_BYTES`` at a time, taking the partition's directory lock only for that append, so tasks writing
the same partition interleave whole chunks). Topic configs stored by a seglog node in topics.json
(compression.type, message.timestamp.type, segment.bytes...) are applied.

Delivery guarantee: at-least-once. Appends are not transactional: rows a task appended stay appended if the
task then fails, and Spark's retry of that task appends them again (duplicates); ``abort`` cannot take them
back because other tasks may have appended after them. Each chunk is all-or-nothing (append_batch).

Concurrency: a task holds a shared lock on the data dir's ``.lock`` while it writes, so a seglog node or
broker (which holds that lock exclusively) cannot open the data dir meanwhile, and the write fails at once
if one already runs (write through it with a Producer instead). Only ``mode("append")`` is supported.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Iterator

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, ShortType, StringType, StructType

from ..config import LogConfig
from ..errors import InvalidArgumentError, StorageError
from ..log import Log
from ..partitioner import DefaultPartitioner
from .catalog import DataDir, check_not_internal
from .errors import SourceOptionError, TopicNotFoundError, WriteLockTimeoutError
from .options import WriteOptions

__all__ = ["SeglogWriter", "WriteSummary", "WriteSchemaError", "check_write_schema"]

log = logging.getLogger("seglog.spark")

FLUSH_BYTES = 16 << 20


class WriteSchemaError(InvalidArgumentError):
    """The DataFrame's columns cannot be written (missing value, wrong types, no topic)."""


@dataclass
class WriteSummary(WriterCommitMessage):
    """What one task appended: (topic, partition) -> [records, first offset, last offset]."""
    appended: dict = field(default_factory=dict)

    def add(self, topic: str, partition: int, first: int, last: int) -> None:
        entry = self.appended.setdefault((topic, partition), [0, first, last])
        entry[0] += last - first + 1
        entry[2] = last

    @property
    def records(self) -> int:
        return sum(v[0] for v in self.appended.values())


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """WriteSchemaError unless the columns can be written (see the module docstring)."""
    fields = {f.name: f.dataType for f in schema.fields}
    text = (StringType, BinaryType)
    if "value" not in fields:
        raise WriteSchemaError("the DataFrame needs a 'value' column (binary or string) to write to seglog")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], text):
            raise WriteSchemaError(f"column '{name}' must be binary or string, not {fields[name].simpleString()}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise WriteSchemaError(f"column 'topic' must be a string, not {fields['topic'].simpleString()}")
    if options.topic is None and "topic" not in fields:
        raise WriteSchemaError("no topic to write to: set option topic or add a 'topic' column")
    if "partition" in fields and not isinstance(fields["partition"], (IntegerType, LongType, ShortType)):
        raise WriteSchemaError(f"column 'partition' must be an int, not {fields['partition'].simpleString()}")
    if "headers" in fields:
        t = fields["headers"]
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [f.name for f in t.elementType.fields] == ["key", "value"]
              and isinstance(t.elementType.fields[0].dataType, StringType)
              and isinstance(t.elementType.fields[1].dataType, text))
        if not ok:
            raise WriteSchemaError("column 'headers' must be array<struct<key: string, value: binary>>, not "
                                   f"{t.simpleString()}")


def topic_partitions(data_dir: DataDir, topic: str) -> int:
    """The partition count of an existing topic; TopicNotFoundError if it has no partition directories,
    SourceOptionError if they are not 0..n-1."""
    check_not_internal(topic)
    parts = data_dir.topics().get(topic)
    if not parts:
        raise TopicNotFoundError(f"topic {topic!r} does not exist in data directory {data_dir.path}; create it "
                                 "first (seglog.open(path).create_topic(...) or the seglog CLI)")
    if parts != list(range(len(parts))):
        raise SourceOptionError(f"topic {topic!r} has partition directories {parts}, not 0..{len(parts) - 1}")
    return len(parts)


def topic_config(data_dir: DataDir, topic: str) -> LogConfig:
    """The topic's LogConfig: the overrides a seglog node stored in topics.json over defaults."""
    try:
        with open(os.path.join(data_dir.path, "topics.json"), encoding="utf-8") as f:
            overrides = json.load(f).get("topics", {}).get(topic, {}).get("config", {})
    except FileNotFoundError:
        overrides = {}
    except (OSError, ValueError) as e:
        raise StorageError(f"cannot read topic metadata: {e}", os.path.join(data_dir.path, "topics.json")) from None
    return LogConfig.from_kafka(overrides) if overrides else LogConfig()


class SeglogWriter(DataSourceArrowWriter):
    """Appends each task's rows to the topic's partition logs (see the module docstring)."""

    def __init__(self, options: WriteOptions, schema: StructType):
        self.options = options
        self.columns = [f.name for f in schema.fields]

    def write(self, iterator: Iterator) -> WriteSummary:
        task = _TaskWriter(self.options)
        try:
            for batch in iterator:
                task.add(batch)
            task.flush_all()
        finally:
            task.close()
        return task.summary

    def commit(self, messages) -> None:
        total = sum(m.records for m in messages if m is not None)
        log.info("seglog write committed: %d records", total)

    def abort(self, messages) -> None:
        done = [m for m in messages if m is not None]
        ranges = ", ".join(f"{t}-{p}: {first}..{last}" for m in done for (t, p), (_, first, last) in m.appended.items())
        log.warning("seglog write aborted; records appended by successful tasks stay in the log "
                    "(at-least-once): %s", ranges or "none")


class _TaskWriter:
    """One task's buffers: rows grouped per (topic, partition), appended FLUSH_BYTES at a time."""

    def __init__(self, options: WriteOptions):
        self.options = options
        self.data_dir = DataDir(options.path)
        self.summary = WriteSummary()
        self.partitioner = DefaultPartitioner()
        self._counts: dict[str, int] = {}
        self._configs: dict[str, LogConfig] = {}
        self._pending: dict[tuple[str, int], tuple[list, list, list]] = {}
        self._pending_bytes: dict[tuple[str, int], int] = {}
        self._dir_lock = _shared_dir_lock(self.data_dir.path)

    def close(self) -> None:
        os.close(self._dir_lock)

    def _partition_count(self, topic: str) -> int:
        n = self._counts.get(topic)
        if n is None:
            n = self._counts[topic] = topic_partitions(self.data_dir, topic)
            self._configs[topic] = topic_config(self.data_dir, topic)
        return n

    def add(self, batch) -> None:
        import pyarrow as pa

        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names

        def column(name):
            if name not in names:
                return None
            col = batch.column(names.index(name))
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                col = col.cast(pa.binary())
            return col.to_pylist()

        values, keys = column("value"), column("key")
        headers = None
        if "headers" in names:
            headers = [None if h is None else [(e["key"], _as_bytes(e["value"])) for e in h]
                       for h in batch.column(names.index("headers")).to_pylist()]
        if self.options.topic is not None:
            topics = None
            topic_list = [self.options.topic]
        else:
            topics = batch.column(names.index("topic")).to_pylist()
            if None in topics:
                raise WriteSchemaError("a row has a null topic and no topic option is set")
            topic_list = sorted(set(topics))
        explicit = batch.column(names.index("partition")).to_pylist() if "partition" in names else None
        for topic in topic_list:
            rows = range(n) if topics is None else [i for i in range(n) if topics[i] == topic]
            self._route(topic, rows, values, keys, headers, explicit)

    def _route(self, topic, rows, values, keys, headers, explicit) -> None:
        count = self._partition_count(topic)
        rows = list(rows)
        chosen = [explicit[i] if explicit is not None else None for i in rows]
        todo = [j for j, p in enumerate(chosen) if p is None]
        if todo:
            picked = self.partitioner.partition_many(topic, [keys[rows[j]] if keys else None for j in todo], count)
            for j, p in zip(todo, picked):
                chosen[j] = p
        for j, p in enumerate(chosen):
            if not 0 <= p < count:
                raise WriteSchemaError(f"row has partition {p}, but topic {topic!r} has partitions 0..{count - 1}")
        for j, i in enumerate(rows):
            tp = (topic, chosen[j])
            buf = self._pending.get(tp)
            if buf is None:
                buf = self._pending[tp] = ([], [], [])
                self._pending_bytes[tp] = 0
            v = values[i]
            k = keys[i] if keys else None
            buf[0].append(v)
            buf[1].append(k)
            buf[2].append(headers[i] if headers else None)
            self._pending_bytes[tp] += (len(v) if v is not None else 0) + (len(k) if k is not None else 0) + 16
        for tp in [tp for tp, size in self._pending_bytes.items() if size >= FLUSH_BYTES]:
            self._flush(tp)

    def flush_all(self) -> None:
        for tp in list(self._pending):
            self._flush(tp)

    def _flush(self, tp) -> None:
        values, keys, headers = self._pending.pop(tp)
        self._pending_bytes.pop(tp)
        if not values:
            return
        topic, p = tp
        cfg = self._configs[topic]
        codec = self.options.compression
        if codec is None and cfg.compression_type not in ("producer", "uncompressed", "none"):
            codec = cfg.compression_type
        lg = _open_for_append(self.data_dir.partition_path(topic, p), cfg, topic, p,
                              self.options.lock_timeout_ms / 1000)
        try:
            first, last = lg.append_batch(values, keys=keys if any(k is not None for k in keys) else None,
                                          headers=headers if any(h for h in headers) else None,
                                          compression=codec)
        finally:
            lg.close()
        self.summary.add(topic, p, first, last)


def _as_bytes(v):
    return v.encode("utf-8") if isinstance(v, str) else v


def _shared_dir_lock(path: str) -> int:
    """A shared flock on the data dir's .lock (an fd to close when done); StorageError if a node holds it."""
    fd = os.open(os.path.join(path, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StorageError("data directory is in use by a running seglog node or broker; write through it "
                           "(seglog.Producer or a Kafka client) instead of to its files", path) from None
    return fd


def _lock_held(path: str) -> bool:
    """Whether some process holds the partition directory's lock right now."""
    try:
        fd = os.open(os.path.join(path, ".lock"), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _open_for_append(path: str, config: LogConfig, topic: str, partition: int, timeout_s: float) -> Log:
    """The partition's Log opened for writing, waiting up to timeout_s for another task to release it."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    free_once = False
    while True:
        try:
            return Log(path, config, create=False, topic=topic, partition=partition)
        except StorageError:
            if not _lock_held(path):
                if free_once:            # refused twice with the lock free: not another writer's lock
                    raise
                free_once = True         # the other writer may have let go since: try again at once
                continue
            free_once = False
            if time.monotonic() >= deadline:
                raise WriteLockTimeoutError(f"partition {topic}-{partition} stayed locked by another writer for "
                                            f"{timeout_s:g} s (option lockTimeoutMs)", path) from None
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
