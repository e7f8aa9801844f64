"""Follower fetchers: one thread per leader broker copies the leader's batches for every partition this
broker follows from it, with the Fetch API (replica_id = this broker), as Kafka's ReplicaFetcherThread does.

Before fetching a partition for a new leader epoch the follower truncates any diverged tail, by leader
epoch (KIP-101/279): it asks the leader (OffsetForLeaderEpoch) where its own latest epoch ended on the
leader, and cuts its log there (or at its own end of the epoch the leader knows, if the leader never had the
latest one). A follower behind the leader's log start restarts empty at the leader's log start. Batches are
appended as they came (offsets, epochs, CRCs kept), and the follower's high watermark follows the leader's,
never past its own log end.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from ..client import BrokerConnection
from ..errors import NetworkError, OffsetOutOfRangeError, SeglogError, for_code
from ..protocol import ApiKey

log = logging.getLogger("seglog.replication")

BACKOFF_S = 0.2


@dataclass
class _Followed:
    partition: object                  # seglog.node.Partition
    leader_epoch: int
    truncated: bool = False            # diverged tail already cut for this epoch


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
                for f in work:
                    if not f.truncated:
                        self._truncate(conn, f)
                self._fetch(conn, [f for f in work if f.truncated])
            except (NetworkError, OSError) as e:
                log.info("fetcher for leader %d: %s", self.leader_id, e)
                self._drop_connection()
                self._stop_event.wait(BACKOFF_S)
            except Exception:
                log.exception("fetcher for leader %d failed; retrying", self.leader_id)
                self._drop_connection()
                self._stop_event.wait(BACKOFF_S)
        self._drop_connection()

    def _connection(self) -> BrokerConnection:
        address = self.manager.broker_address(self.leader_id)
        if address is None:
            raise NetworkError(f"leader {self.leader_id} is not registered")
        if self._conn is None or self._address != address:
            self._drop_connection()
            self._conn = BrokerConnection(*address, client_id=f"seglog-replica-{self.manager.broker_id}",
                                          timeout=10.0)
            self._address = address
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- truncation by leader epoch -------------------------------------------------------------------------

    def _truncate(self, conn: BrokerConnection, f: _Followed) -> None:
        part = f.partition
        lg = part.log
        epochs = lg.leader_epochs
        if not epochs:                          # no epoch history: keep only what was known committed
            if lg.high_watermark < lg.end_offset:
                log.info("%s: no leader epochs; truncating to the high watermark %d", part, lg.high_watermark)
                lg.truncate_to(lg.high_watermark)
            f.truncated = True
            return
        latest = epochs[-1][0]
        body = {"replica_id": self.manager.broker_id, "topics": [{"topic": part.topic, "partitions": [
            {"partition": part.index, "current_leader_epoch": f.leader_epoch, "leader_epoch": latest}]}]}
        resp = conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body)
        r = resp["topics"][0]["partitions"][0]
        if r["error_code"]:
            raise _retry_later(r["error_code"], f"OffsetForLeaderEpoch of {part}")
        leader_epoch, end = r["leader_epoch"], r["end_offset"]
        if leader_epoch < 0 or end < 0:
            target = lg.high_watermark             # the leader knows none of our epochs: keep what was committed
        elif leader_epoch == latest:
            target = min(end, lg.end_offset)
        else:
            own_end = lg.end_offset_for_epoch(leader_epoch)[1]
            target = min(end, own_end if own_end >= 0 else end, lg.end_offset)
        if target < lg.end_offset:
            log.info("%s: truncating diverged tail %d..%d (leader epoch %d ended at %d on broker %d)", part,
                     target, lg.end_offset, leader_epoch, end, self.leader_id)
            lg.truncate_to(target)
        f.truncated = True

    # -- fetching ---------------------------------------------------------------------------------------------

    def _fetch(self, conn: BrokerConnection, work: list[_Followed]) -> None:
        if not work:
            self._stop_event.wait(BACKOFF_S)
            return
        cfg = self.manager.config
        by_topic: dict[str, list] = {}
        for f in work:
            by_topic.setdefault(f.partition.topic, []).append({
                "partition": f.partition.index, "current_leader_epoch": f.leader_epoch,
                "fetch_offset": f.partition.log.end_offset, "log_start_offset": f.partition.log.start_offset,
                "partition_max_bytes": cfg.replica_fetch_max_bytes})
        body = {"replica_id": self.manager.broker_id, "max_wait_ms": cfg.replica_fetch_wait_max_ms, "min_bytes": 1,
                "max_bytes": 10 * cfg.replica_fetch_max_bytes, "isolation_level": 0, "session_id": 0,
                "session_epoch": -1, "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}
        resp = conn.request(ApiKey.FETCH, body, extra_timeout=cfg.replica_fetch_wait_max_ms / 1000)
        if resp["error_code"]:
            raise _retry_later(resp["error_code"], "replica fetch")
        backoff = False
        for t in resp["responses"]:
            for r in t["partitions"]:
                with self._lock:
                    f = self.followed.get((t["topic"], r["partition_index"]))
                if f is None:
                    continue
                try:
                    self._apply(f, r)
                except SeglogError as e:
                    log.info("%s: replica fetch from %d: %s", f.partition, self.leader_id, e)
                    backoff = True
        if backoff:
            self._stop_event.wait(BACKOFF_S)

    def _apply(self, f: _Followed, r: dict) -> None:
        part, lg = f.partition, f.partition.log
        code = r["error_code"]
        if code == OffsetOutOfRangeError.code:
            leader_start = r["log_start_offset"]
            if leader_start > lg.end_offset:
                log.info("%s: behind the leader's log start %d; restarting there", part, leader_start)
                lg.truncate_fully_and_start_at(leader_start)
            else:
                f.truncated = False             # ahead of the leader: find the divergence again
            return
        if code:
            raise _retry_later(code, "fetch")
        records = r["records"]
        if records is not None and len(records):
            lg.append_as_follower(records)
        hw = min(r["high_watermark"], lg.end_offset)
        if hw > lg.high_watermark:
            lg.high_watermark = hw


def _retry_later(code: int, what: str) -> SeglogError:
    return for_code(code)(f"{what}: error {for_code(code).kafka_name}")
