"""Broker mode: plan through Metadata / ListOffsets and read through Fetch, from any Kafka-protocol broker.

``.option("kafka.bootstrap.servers", "host:9092")`` instead of ``path``, for clusters whose executors cannot
see the brokers' disks. The client is seglog's own (seglog.client, seglog.remote): no Kafka library needed.

Driver: :class:`BrokerCatalog` is the :class:`~seglog.spark.catalog.Catalog` the planner and the stream
reader use. Topics and partitions come from one Metadata request (topics the brokers mark internal, and
"__" names, are never matched by a pattern); ``prepare`` lists the start offset (ListOffsets EARLIEST) and
the committed end (LATEST: the high watermark, read_uncommitted as Spark's Kafka source defaults to) of
every selected partition at once, grouped by leader; ``offset_for_timestamp`` is ListOffsets by timestamp.
Sizes are offsets, so a partition's range is one split unless minPartitions / maxRecordsPerPartition cut it
(any offset may start a split: Fetch returns the batch holding it and the decoder drops what is before).
Bad addresses and unknown topics fail at planning time (BrokerUnavailableError, TopicNotFoundError).

Executors: :func:`fetch_columns` reads one split with Fetch requests (max_wait 0, ``FETCH_BYTES`` per
request) to the partition's leader (the split carries the leader planning saw; a connection to it is all an
executor needs) and decodes the record batches of each response with the engine's ``arrow_columns``, the
same decoder as in local mode, CRCs checked (network data). It never reads past the split's end, which
planning capped at the high watermark, and a broker never returns records at or above its high watermark.

- NOT_LEADER_OR_FOLLOWER (and the other "leader moved" codes), lost connections and unreachable brokers:
  fresh metadata from the bootstrap servers, the new leader, retried with backoff for up to
  ``kafka.request.timeout.ms``.
- A response that ends with a cut-short batch (brokers stop at their byte limit): the decoder stops before
  it and the next Fetch starts there. A first batch larger than the request's limit doubles the limit.
- OFFSET_OUT_OF_RANGE below the log start (retention ran after planning) and a high watermark that stays
  below the split's end (the log was truncated, e.g. an unclean leader election) follow failOnDataLoss:
  DataLossError, or skip the missing offsets. A new leader whose high watermark has not caught up yet is
  waited for first (the same retry deadline).
- isolation: read_uncommitted by default, as Spark's Kafka source; with kafka.isolation.level=read_committed
  planning ends at the last stable offset (ListOffsets LATEST with isolation 1), Fetch asks for isolation 1 and
  the records of the aborted transactions it lists are skipped (isolation.AbortedFilter), as in local mode.
"""

from __future__ import annotations

import logging
from typing import Iterator

from .. import _engine, wire_fetch
from ..client import (EARLIEST, LATEST, LEADER_MOVED, BrokerConnection, ClusterClient, RetryDeadline, error_for,
                      parse_bootstrap)
from ..errors import (CorruptRecordError, LeaderNotAvailableError, NetworkError, OffsetOutOfRangeError, SeglogError,
                      UnknownTopicOrPartitionError, for_code)
from ..isolation import AbortedFilter
from ..wire_fetch import Fetched, Position
from .catalog import Catalog, PartitionMeta, SegmentExtent
from .errors import BrokerUnavailableError, DataLossError, TopicNotFoundError
from .splits import OffsetRangeSplit

__all__ = ["BrokerCatalog", "BrokerPartition", "fetch_columns", "FETCH_BYTES", "CLIENT_ID"]

log = logging.getLogger("seglog.spark")

CLIENT_ID = "seglog-spark"
FETCH_BYTES = 16 << 20              # bytes asked for per Fetch request (partition and response limit)
MAX_FETCH_BYTES = 1 << 30           # the limit is doubled up to this for a single batch larger than it
_UNBOUNDED = 1 << 62


def _unreachable(servers: str, e: BaseException) -> BrokerUnavailableError:
    return BrokerUnavailableError(f"cannot reach the Kafka brokers at {servers} ({e}); check option "
                                  "kafka.bootstrap.servers (host:port of a running broker)")


# -- driver ----------------------------------------------------------------------------------------------------

class BrokerCatalog(Catalog):
    """The topics of a Kafka-protocol cluster (see the module docstring). Holds connections: close it."""

    def __init__(self, bootstrap_servers: str, request_timeout_ms: int = 30_000, read_committed: bool = False,
                 security: tuple[tuple[str, str], ...] = ()):
        self.read_committed = read_committed
        self.bootstrap_servers = bootstrap_servers
        self.request_timeout_ms = request_timeout_ms
        self.security = security
        self.where = f"on the brokers at {bootstrap_servers}"
        seconds = request_timeout_ms / 1000
        self.cluster = ClusterClient(bootstrap_servers, client_id=CLIENT_ID, timeout=seconds, retry_timeout=seconds,
                                     security=dict(security))
        self._offsets: dict[tuple[str, int], tuple[int, int]] = {}
        self._internal: set[str] = set()
        try:
            md = self.cluster.metadata(None)
        except NetworkError as e:
            self.cluster.close()
            raise _unreachable(bootstrap_servers, e) from None
        self._topics: dict[str, list[int]] = {}
        for t in md["topics"]:
            if t["error_code"] == 0:
                self._topics[t["name"]] = sorted(p["partition_index"] for p in t["partitions"])
                if t.get("is_internal"):
                    self._internal.add(t["name"])

    def topics(self) -> dict[str, list[int]]:
        """topic -> sorted partition numbers, from the Metadata response this catalog was created with."""
        return {t: list(ps) for t, ps in self._topics.items()}

    def internal(self, topic: str) -> bool:
        return topic in self._internal or topic.startswith("__")

    def prepare(self, partitions: list[tuple[str, int]]) -> None:
        todo = [tp for tp in dict.fromkeys(partitions) if tp not in self._offsets]
        if not todo:
            return
        try:
            starts = self.cluster.list_offsets(todo, EARLIEST)
            ends = self.cluster.list_offsets(todo, LATEST, 1 if self.read_committed else 0)
        except NetworkError as e:
            raise _unreachable(self.bootstrap_servers, e) from None
        for tp in todo:
            start, end = starts.get(tp), ends.get(tp)
            if start is None or end is None:
                raise TopicNotFoundError(f"partition {tp[0]}-{tp[1]} does not exist {self.where}")
            self._offsets[tp] = (start.offset, max(end.offset, start.offset))

    def open(self, topic: str, partition: int) -> "BrokerPartition":
        self.prepare([(topic, partition)])
        start, end = self._offsets[(topic, partition)]
        return BrokerPartition(self, topic, partition, start, end)

    def split_target(self, split_bytes: int) -> int:
        return _UNBOUNDED                   # one split per range unless minPartitions/maxRecordsPerPartition

    def leader_address(self, topic: str, partition: int) -> str:
        """"host:port" of the partition's leader now; "" when it has none (the executor looks again)."""
        try:
            leader = self.cluster.leader_id(topic, partition)       # may refresh (replace) the broker table
            host, port = self.cluster.brokers[leader]
        except (SeglogError, KeyError):
            return ""
        return f"{host}:{port}"

    def make_split(self, topic: str, partition: int, start: int, end: int, size: int,
                   **read_args) -> OffsetRangeSplit:
        return OffsetRangeSplit(topic=topic, partition=partition, start=start, end=end,
                                location=self.leader_address(topic, partition), estimated_bytes=0,
                                bootstrap_servers=self.bootstrap_servers,
                                request_timeout_ms=self.request_timeout_ms, security=self.security, **read_args)

    def close(self) -> None:
        self.cluster.close()


class BrokerPartition(PartitionMeta):
    """A partition's offsets as its leader reported them to :meth:`BrokerCatalog.prepare`; sizes are offsets."""

    def __init__(self, catalog: BrokerCatalog, topic: str, partition: int, start: int, end: int):
        self.catalog = catalog
        self.topic = topic
        self.partition = partition
        self.start_offset = start
        self.committed_end = end

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        tp = (self.topic, self.partition)
        try:
            found = self.catalog.cluster.list_offsets([tp], timestamp).get(tp)
        except NetworkError as e:
            raise _unreachable(self.catalog.bootstrap_servers, e) from None
        if found is None or found.offset >= self.committed_end:
            return None
        return max(found.offset, self.start_offset)

    def extents(self, start: int, end: int) -> list[SegmentExtent]:
        return [SegmentExtent(start, end, end - start)] if start < end else []

    def position(self, extent: SegmentExtent, offset: int) -> int:
        return min(max(offset - extent.base, 0), extent.size)

    def cut_points(self, extent: SegmentExtent, lo: int, hi: int, step: int) -> list[tuple[int, int]]:
        """[lo, hi) cut into the fewest equal parts of at most `step` offsets (a Fetch may start anywhere)."""
        n = hi - lo
        parts = -(-n // max(step, 1))
        cuts = [lo + n * i // parts for i in range(1, parts)] if parts > 1 else []
        return [(off, off - extent.base) for off in cuts]


# -- executors -------------------------------------------------------------------------------------------------

class _Fetcher:
    """Fetch requests for one partition at its leader; a leader move asks the bootstrap servers again."""

    def __init__(self, split: OffsetRangeSplit):
        self.split = split
        self.timeout = split.request_timeout_ms / 1000
        self.where = f"{split.topic}-{split.partition}"
        self._conn: BrokerConnection | None = None
        self._cluster: ClusterClient | None = None
        self._hint = split.location or None
        self.address = self._hint or "?"

    def cluster(self) -> ClusterClient:
        if self._cluster is None:
            self._cluster = ClusterClient(self.split.bootstrap_servers, client_id=CLIENT_ID, timeout=self.timeout,
                                          retry_timeout=self.timeout, security=dict(self.split.security))
        return self._cluster

    def _connection(self) -> BrokerConnection:
        if self._conn is None:
            if self._hint:
                host, port = parse_bootstrap(self._hint)[0]
                self._hint = None
            else:
                cluster = self.cluster()
                cluster.forget(self.split.topic)
                leader = cluster.leader_id(self.split.topic, self.split.partition)   # refreshes the broker table
                host, port = cluster.brokers[leader]
            self._conn = self.cluster().open(host, port)
            self.address = f"{host}:{port}"
        return self._conn

    def moved(self) -> None:
        """Forget the leader: the next request finds it again through fresh metadata."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._hint = None

    def fetch(self, offset: int, max_bytes: int) -> Fetched:
        """The partition's answer to a Fetch that does not wait (wire_fetch.fetch)."""
        key = (self.split.topic, self.split.partition)
        fetched = wire_fetch.fetch(self._connection(), {key: Position(offset, max_bytes)}, max_bytes=max_bytes,
                                   what=f"fetch of {self.where}",
                                   isolation_level=1 if self.split.read_committed else 0).get(key)
        if fetched is None:
            raise UnknownTopicOrPartitionError(f"the fetch response has no {self.where}")
        return fetched

    def log_bounds(self) -> tuple[int, int]:
        """(log start offset, high watermark) now, by ListOffsets."""
        cluster = self.cluster()
        tp = (self.split.topic, self.split.partition)
        start = cluster.list_offsets([tp], EARLIEST).get(tp)
        end = cluster.list_offsets([tp], LATEST).get(tp)
        if start is None or end is None:
            raise UnknownTopicOrPartitionError(f"{self.where} no longer exists on the brokers at "
                                               f"{self.split.bootstrap_servers}")
        return start.offset, end.offset

    def close(self) -> None:
        self.moved()
        if self._cluster is not None:
            self._cluster.close()


def fetch_columns(split: OffsetRangeSplit, min_timestamp: int, max_output_bytes: int) -> Iterator[dict]:
    """``_engine.arrow_columns`` results (rows > 0) for the records of a broker-mode split, in offset order.
    Raises DataLossError (failOnDataLoss), BrokerUnavailableError / the broker's error after retries."""
    fetcher = _Fetcher(split)
    where = fetcher.where
    decode = _engine.arrow_columns
    offset, end = split.start, split.end
    max_bytes = FETCH_BYTES
    retry = RetryDeadline(fetcher.timeout)
    try:
        while offset < end:
            moved: SeglogError | None = None
            try:
                p = fetcher.fetch(offset, max_bytes)
            except (NetworkError, LeaderNotAvailableError, UnknownTopicOrPartitionError) as e:
                moved = e
            else:
                code = p.error_code
                if code in LEADER_MOVED:           # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION ...
                    moved = error_for(code, f"fetch of {where} from {fetcher.address}: {for_code(code).kafka_name}")
            if moved is not None:
                fetcher.moved()                    # the next request asks the cluster for the leader
                if retry.expired():
                    if isinstance(moved, NetworkError):
                        raise _unreachable(split.bootstrap_servers, moved) from None
                    raise moved
                log.info("%s: %s; retrying with fresh metadata", where, moved)
                retry.sleep()
                continue
            if code == OffsetOutOfRangeError.code:
                lo, hi = fetcher.log_bounds()
                if offset < lo:
                    if split.fail_on_data_loss:
                        raise DataLossError(f"offsets {offset}..{min(end, lo) - 1} of {where} were deleted after the "
                                            f"query was planned (the log now starts at {lo})", offset, lo, hi)
                    log.warning("%s: offsets %d..%d were deleted; skipping them", where, offset, min(end, lo) - 1)
                    offset = lo
                    continue
                _truncated(split, offset, hi)
                return
            if code:
                raise error_for(code, f"fetch of {where}: {for_code(code).kafka_name}")
            view = p.records
            if len(view) == 0 and not p.cut_short:
                # nothing at `offset`: a new leader whose high watermark has not caught up yet, or a log truncated
                # after planning. Wait for the first, then treat it as the second.
                if retry.expired():
                    _truncated(split, offset, p.high_watermark)
                    return
                retry.sleep()
                continue
            consumed = 0
            for chunk in AbortedFilter(p.aborted_transactions).runs(view) if split.read_committed else (view,):
                pos = 0
                while pos < len(chunk):
                    cols = decode(chunk[pos:], offset, end, split.include_headers, min_timestamp,
                                  max_output_bytes, verify_crc=True, path=where)
                    if cols["consumed"] == 0:
                        break
                    pos += cols["consumed"]
                    offset = max(offset, cols["next_offset"])
                    if cols["rows"]:
                        yield cols
                    if cols["done"]:
                        return
                consumed += pos
            if split.read_committed and p.next_offset > offset:
                offset = p.next_offset                # past the aborted batches and markers skipped at the end
                consumed += 1
            if consumed == 0:
                if max_bytes >= MAX_FETCH_BYTES:
                    raise CorruptRecordError(f"the batch at offset {offset} of {where} does not fit in a "
                                             f"{MAX_FETCH_BYTES}-byte fetch response", path=where, offset=offset)
                max_bytes *= 2              # a broker that does not return a first batch larger than the limit
                continue
            retry.reset()
    finally:
        fetcher.close()


def _truncated(split: OffsetRangeSplit, offset: int, high_watermark: int) -> None:
    """The leader has no records for offsets [offset, split.end) any more: DataLossError, or a warning."""
    where = f"{split.topic}-{split.partition}"
    if high_watermark <= offset:
        why = f"its high watermark is {high_watermark} now: truncated after the query was planned"
    else:           # Kafka moves the high watermark by whole batches; a broker that did not cannot serve these
        why = f"the leader returns no batch at offset {offset} although its high watermark is {high_watermark}"
    if split.fail_on_data_loss:
        raise DataLossError(f"offsets {offset}..{split.end - 1} of {where} are no longer in the log ({why})",
                            offset, -1, high_watermark)
    log.warning("%s: offsets %d..%d cannot be read (%s); skipping them", where, offset, split.end - 1, why)
