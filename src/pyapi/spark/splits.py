"""The unit of work of one Spark task: a (topic, partition, offset range) and how to read it.

A split is plain picklable data sent from the driver to an executor. It names offsets, not files: the
executor reopens the partition read-only and finds the segments itself, so a split stays valid while the
writer appends, rolls or applies retention (offsets that vanished meanwhile follow ``fail_on_data_loss``).
``location`` is the partition directory; a broker-mode split (``bootstrap_servers`` set) carries the
address of the partition's leader at planning time there instead and is read through Kafka Fetch requests,
which return the same v2 batches (seglog.spark.broker): executors then need no file system access at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

__all__ = ["OffsetRangeSplit"]


@dataclass(frozen=True)
class OffsetRangeSplit(InputPartition):
    """Records of ``topic``-``partition`` with ``start <= offset < end``.

    ``estimated_bytes``: segment bytes planning attributed to it (from index positions; informational).
    ``min_timestamp``: a pushed-down lower bound (ms) that lets the reader skip whole batches whose
    maxTimestamp is below it; Spark still applies the timestamp filter itself, so this only prunes.
    ``bootstrap_servers``: set for broker mode (``location`` is then the leader's "host:port", a hint: the
    executor asks the cluster again when the leader moved); ``request_timeout_ms`` bounds its requests and
    retries; ``security``: the client settings of a TLS or SASL listener ((name, value) pairs, left out of
    the repr: they may hold a password).
    ``columns``: the columns to build, as a user schema names them (seglog.spark.projection); None for the whole
    schema (with headers when ``include_headers``). ``include_headers`` is what the engine decodes: true
    whenever ``columns`` names headers.
    ``read_committed``: skip the records of aborted transactions (planning capped ``end`` at the last stable
    offset).
    """
    topic: str
    partition: int
    start: int
    end: int
    location: str
    estimated_bytes: int = 0
    include_headers: bool = False
    fail_on_data_loss: bool = True
    min_timestamp: int | None = None
    bootstrap_servers: str | None = None
    request_timeout_ms: int = 30_000
    columns: tuple[str, ...] | None = None
    read_committed: bool = False
    security: tuple[tuple[str, str], ...] = field(default=(), repr=False)
