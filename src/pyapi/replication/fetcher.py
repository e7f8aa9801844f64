"""Follower fetchers: one thread per leader broker copies the leader's batches for every partition this
broker follows from it, with the Fetch API (replica_id = this broker), as Kafka's ReplicaFetcherThread does.

Before fetching a partition for a new leader epoch the follower truncates any diverged tail, by leader
epoch (KIP-101/279): it asks the leader (OffsetForLeaderEpoch) where its own latest epoch ended on the
leader, and cuts its log where the two agree (``truncation_offset``, Kafka's decision: the leader's end of
that epoch, or the end of the older epoch the leader answered with; a follower that never had the epoch the
leader answered with cuts back to its own older epochs and asks again). A follower behind the leader's log
start restarts empty at the leader's log start. Batches are appended as they came (offsets, epochs, CRCs
kept), and the follower's high watermark follows the leader's, never past its own log end.

A partition-level error (the leader does not lead that partition yet, a fenced epoch) delays only that
partition; the others go on. While the leader cannot be reached the fetcher backs off exponentially from
``RETRY_BACKOFF_S`` up to replica.fetch.backoff.ms, and logs the first failure of a streak, then one line
every ``FAILURE_LOG_INTERVAL_S`` while it lasts, and one when fetching works again.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from .. import _engine, wire_fetch
from ..client import BrokerConnection
from ..errors import NetworkError, OffsetOutOfRangeError, SeglogError, StorageError, for_code
from ..protocol import ApiKey
from ..wire_fetch import Fetched, Position
from .throttle import FOLLOWER

log = logging.getLogger("seglog.replication")

BACKOFF_S = 0.2                 # idle wait, and after a partition-level fetch error
RETRY_BACKOFF_S = 0.1           # first wait after a failed round trip; doubles up to replica.fetch.backoff.ms
FAILURE_LOG_INTERVAL_S = 30.0   # while failing, one log line per this many seconds
MAX_TRUNCATION_ROUNDS = 100     # each non-final round drops at least one local epoch


# -- the truncation decision (pure) ---------------------------------------------------------------------------

def end_offset_for_epoch(epochs: Sequence[tuple[int, int]], epoch: int, log_end: int) -> tuple[int, int]:
    """(largest epoch <= `epoch` in `epochs`, the offset where it ends: the next epoch's start, or `log_end` for
    the latest); (-1, -1) when every epoch is newer. `epochs`: (epoch, start offset) pairs, both increasing."""
    i = bisect.bisect_right([e for e, _ in epochs], epoch)
    if i == 0:
        return -1, -1
    return epochs[i - 1][0], (epochs[i][1] if i < len(epochs) else log_end)


def truncation_offset(epochs: Sequence[tuple[int, int]], log_end: int, high_watermark: int,
                      leader_epoch: int, leader_end: int) -> tuple[int, bool]:
    """Where a follower cuts its log, given its leader epoch cache `epochs` ((epoch, start offset) pairs), its
    log end and high watermark, and the leader's OffsetForLeaderEpoch answer (`leader_epoch`, `leader_end`) for
    the follower's latest epoch. Returns (offset, final): keep everything below `offset` (>= log_end: nothing to
    cut); `final` False means ask the leader again about the (new) latest epoch after cutting. Kafka's rules
    (AbstractFetcherThread.getOffsetTruncationState):

    - the leader has no epoch that old (end offset -1): fall back to the high watermark;
    - the follower has the epoch the leader answered with: cut at the smaller of the two ends of that epoch
      (when it is the epoch asked about, the follower's end is its log end);
    - the follower never had that epoch: cut back to the end of its largest older epoch, not final;
    - the follower has no epoch that old at all: cut at the leader's end.
    Never past the log end."""
    if leader_end < 0:
        return min(high_watermark, log_end), True
    if leader_epoch < 0:                                    # an answer without an epoch (OffsetForLeaderEpoch v0)
        return min(leader_end, log_end), True
    own_epoch, own_end = end_offset_for_epoch(epochs, leader_epoch, log_end)
    if own_epoch < 0:
        return min(leader_end, log_end), True
    if own_epoch != leader_epoch:
        return min(own_end, log_end), False
    return min(own_end, leader_end, log_end), True


class RetryBackoff:
    """Exponential backoff (``initial`` doubling up to ``maximum`` seconds) for one failing activity, and when to
    log about it: the first failure of a streak, then at most once per ``log_interval`` seconds."""

    def __init__(self, initial: float, maximum: float, log_interval: float,
                 clock: Callable[[], float] = time.monotonic):
        self.initial, self.maximum, self.log_interval = initial, max(maximum, initial), log_interval
        self.clock = clock
        self.failures = 0
        self.since = 0.0
        self._next_log = 0.0

    def failed(self) -> tuple[float, bool]:
        """Count a failure: (seconds to wait before the next attempt, whether to log this one)."""
        now = self.clock()
        if self.failures == 0:
            self.since = now
            self._next_log = now
        self.failures += 1
        delay = min(self.initial * 2 ** min(self.failures - 1, 30), self.maximum)
        log_it = now >= self._next_log
        if log_it:
            self._next_log = now + self.log_interval
        return delay, log_it

    def succeeded(self) -> int:
        """The activity works again: reset; returns how many failures the streak had."""
        failures, self.failures = self.failures, 0
        return failures


@dataclass
class _Followed:
    partition: object                  # seglog.node.Partition
    leader_epoch: int
    truncated: bool = False            # diverged tail already cut for this epoch
    retry_at: float = 0.0              # time.monotonic() before which its failed truncation is not retried
    failing: str | None = None         # the error of its current streak of failed truncations (logged once)


class LeaderFetcher(threading.Thread):
    """Fetches every followed partition of one leader broker. ``add``/``remove`` from any thread."""

    def __init__(self, manager, leader_id: int):
        super().__init__(name=f"seglog-fetcher-{manager.broker_id}-from-{leader_id}", daemon=True)
        self.manager = manager
        self.leader_id = leader_id
        self.followed: dict[tuple[str, int], _Followed] = {}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._conn: BrokerConnection | None = None
        self._address: tuple[str, int] | None = None
        self.backoff = RetryBackoff(RETRY_BACKOFF_S, manager.config.replica_fetch_backoff_ms / 1000,
                                    FAILURE_LOG_INTERVAL_S)

    def add(self, partition, leader_epoch: int) -> None:
        with self._lock:
            self.followed[(partition.topic, partition.index)] = _Followed(partition, leader_epoch)

    def remove(self, topic: str, index: int) -> None:
        with self._lock:
            self.followed.pop((topic, index), None)

    def empty(self) -> bool:
        with self._lock:
            return not self.followed

    def stop(self) -> None:
        self._stop_event.set()
        conn = self._conn
        if conn is not None:
            conn.close()

    # -- loop -------------------------------------------------------------------------------------------------

    def run(self) -> None:
        while not self._stop_event.is_set():
            with self._lock:
                work = list(self.followed.values())
            if not work:
                self._stop_event.wait(BACKOFF_S)
                continue
            try:
                conn = self._connection()
                now = time.monotonic()
                for f in work:
                    if not f.truncated and f.retry_at <= now:
                        self._truncate_or_delay(conn, f)
                self._fetch(conn, [f for f in work if f.truncated])
            except (SeglogError, OSError) as e:          # unreachable, or an error answer: retry later
                self._failed(e, unexpected=False)
            except Exception as e:
                self._failed(e, unexpected=True)
            else:
                failures = self.backoff.succeeded()
                if failures:
                    log.info("fetcher for leader %d: fetching again after %d failed attempts", self.leader_id,
                             failures)
        self._drop_connection()

    def _failed(self, error: BaseException, unexpected: bool) -> None:
        """Drop the connection, log (rate-limited), back off."""
        self._drop_connection()
        delay, log_it = self.backoff.failed()
        if log_it:
            streak = self.backoff.failures
            note = "" if streak == 1 else (f" (failing for {self.backoff.clock() - self.backoff.since:.0f} s, "
                                           f"{streak} attempts)")
            if unexpected:
                log.exception("fetcher for leader %d failed%s; retrying", self.leader_id, note)
            else:
                log.info("fetcher for leader %d: %s%s; retrying with backoff", self.leader_id, error, note)
        else:
            log.debug("fetcher for leader %d: %r", self.leader_id, error)
        self._stop_event.wait(delay)

    def _connection(self) -> BrokerConnection:
        address = self.manager.broker_address(self.leader_id)
        if address is None:
            raise NetworkError(f"leader {self.leader_id} is not registered")
        if self._conn is None or self._address != address:
            self._drop_connection()
            self._conn = BrokerConnection(*address, client_id=f"seglog-replica-{self.manager.broker_id}",
                                          timeout=10.0, security=self.manager.security)
            self._address = address
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- truncation by leader epoch -------------------------------------------------------------------------

    def _truncate_or_delay(self, conn: BrokerConnection, f: _Followed) -> None:
        """Truncate `f`; an error answer for this partition alone (the leader has not yet learned it leads it,
        NOT_LEADER_OR_FOLLOWER; a fenced epoch) delays only this partition by BACKOFF_S, as Kafka's fetcher
        delays a failed partition: the others keep replicating. Connection errors propagate (the whole
        fetcher backs off)."""
        try:
            self._truncate(conn, f)
        except NetworkError:
            raise
        except SeglogError as e:
            failed = self.manager.on_log_dir_failure
            if isinstance(e, StorageError) and failed is not None:
                failed(e)
            f.retry_at = time.monotonic() + BACKOFF_S
            if f.failing != str(e):
                log.info("%s: truncation before fetching from %d: %s; retrying this partition with backoff",
                         f.partition, self.leader_id, e)
            f.failing = str(e)
            return
        if f.failing is not None:
            log.info("%s: truncation before fetching from %d works again", f.partition, self.leader_id)
            f.failing = None

    def _truncate(self, conn: BrokerConnection, f: _Followed) -> None:
        part = f.partition
        lg = part.log
        for _ in range(MAX_TRUNCATION_ROUNDS):
            epochs = lg.leader_epochs
            if not epochs:                      # no epoch history: keep only what was known committed
                target, final, why = min(lg.high_watermark, lg.end_offset), True, "no leader epochs"
            else:
                latest = epochs[-1][0]
                leader_epoch, end = self._leader_end_offset(conn, f, latest)
                target, final = truncation_offset(epochs, lg.end_offset, lg.high_watermark, leader_epoch, end)
                why = (f"asked for epoch {latest}, broker {self.leader_id} answered epoch {leader_epoch} ending "
                       f"at {end}")
            if target < lg.end_offset:
                log.info("%s: truncating diverged tail %d..%d (%s)", part, target, lg.end_offset, why)
                lg.truncate_to(target)
            if final:
                f.truncated = True
                return
        raise SeglogError(f"{part}: no truncation point found after {MAX_TRUNCATION_ROUNDS} rounds")

    def _leader_end_offset(self, conn: BrokerConnection, f: _Followed, epoch: int) -> tuple[int, int]:
        """The leader's OffsetForLeaderEpoch answer for `epoch`: (largest epoch <= it, where that one ends)."""
        part = f.partition
        body = {"replica_id": self.manager.broker_id, "topics": [{"topic": part.topic, "partitions": [
            {"partition": part.index, "current_leader_epoch": f.leader_epoch, "leader_epoch": epoch}]}]}
        resp = conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body)
        r = resp["topics"][0]["partitions"][0]
        if r["error_code"]:
            raise _retry_later(r["error_code"], f"OffsetForLeaderEpoch of {part}")
        return r["leader_epoch"], r["end_offset"]

    # -- fetching ---------------------------------------------------------------------------------------------

    def _fetch(self, conn: BrokerConnection, work: list[_Followed]) -> None:
        # follower-throttled partitions out of the ISR wait while this broker's quota is exceeded
        # (seglog.replication.throttle); their bytes are recorded in it
        me, throttles = self.manager.broker_id, self.manager.throttles
        work = [f for f in work if not self.manager.hold_back(FOLLOWER, f.partition.topic, f.partition.index, me)]
        if not work:
            self._stop_event.wait(BACKOFF_S)
            return
        cfg = self.manager.config
        wanted = {(f.partition.topic, f.partition.index): Position(
            f.partition.log.end_offset, cfg.replica_fetch_max_bytes, f.partition.log.start_offset, f.leader_epoch)
            for f in work}
        answer = wire_fetch.fetch(conn, wanted, replica_id=self.manager.broker_id,
                                  max_wait_ms=cfg.replica_fetch_wait_max_ms, min_bytes=1,
                                  max_bytes=10 * cfg.replica_fetch_max_bytes, what="replica fetch")
        backoff = False
        for key, r in answer.items():
            with self._lock:
                f = self.followed.get(key)
            if f is None:
                continue
            if throttles is not None and throttles.throttled(FOLLOWER, *key):
                throttles.record(FOLLOWER, len(r.records))
            try:
                self._apply(f, r)
            except SeglogError as e:
                log.info("%s: replica fetch from %d: %s", f.partition, self.leader_id, e)
                backoff = True
                failed = self.manager.on_log_dir_failure
                if isinstance(e, StorageError) and failed is not None:
                    failed(e)
        if backoff:
            self._stop_event.wait(BACKOFF_S)

    def _apply(self, f: _Followed, r: Fetched) -> None:
        part, lg = f.partition, f.partition.log
        code = r.error_code
        if code == OffsetOutOfRangeError.code:
            leader_start = r.log_start_offset
            if leader_start > lg.end_offset:
                log.info("%s: behind the leader's log start %d; restarting there", part, leader_start)
                lg.truncate_fully_and_start_at(leader_start)
            else:
                f.truncated = False             # ahead of the leader: find the divergence again
            return
        if code:
            raise _retry_later(code, "fetch")
        if len(r.records):
            first = _engine.batches(r.records, False)[0]
            if first.base_offset < lg.end_offset == lg.start_offset <= first.last_offset:
                # the leader's log start offset is inside this batch (DeleteRecords) and this replica's log is
                # empty, restarted there: as Kafka's Partition, restart it at the batch, whose records before
                # the leader's start offset the log start offset below hides again
                log.info("%s: the first batch from the leader starts at %d, before this empty log's start %d; "
                         "restarting the log there", part, first.base_offset, lg.start_offset)
                lg.truncate_fully_and_start_at(first.base_offset)
            lg.append_as_follower(r.records)
        hw = min(r.high_watermark, lg.end_offset)
        if hw > lg.high_watermark:
            lg.high_watermark = hw
        # as Kafka's followers: the leader's log start offset (raised by DeleteRecords or retention) becomes
        # this replica's, up to its high watermark, so a new leader never serves records deleted before
        start = min(r.log_start_offset, lg.high_watermark)
        if start > lg.start_offset:
            lg.delete_records_before(start)


def _retry_later(code: int, what: str) -> SeglogError:
    return for_code(code)(f"{what}: error {for_code(code).kafka_name}")
