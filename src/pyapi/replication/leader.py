"""What a partition leader tracks about its followers: their log end offsets, when each last caught up,
the in-sync replica set, the high watermark, and the produce requests waiting for acks=all.

High watermark = the smallest log end offset among the in-sync replicas (the leader's own included); it
only moves forward while this broker leads. A follower is caught up when its fetch offset reaches the
leader's log end offset as it was at the follower's previous fetch (Kafka's rule); a follower not caught up
for replica.lag.time.max.ms leaves the ISR, and one whose log end offset reaches the high watermark (and the
current leader epoch's start) comes back. ISR changes are decided here and written to the metadata store
by the replica manager (compare-and-set on the partition state's version).

Thread-safety: one lock per partition; called from the broker's event loop (follower fetches, produces),
the replica manager's thread (ISR checks) and in-process producers.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

from ..errors import NotEnoughReplicasAfterAppendError, NotLeaderOrFollowerError


@dataclass
class _Follower:
    leo: int = -1                       # the follower's log end offset (its last fetch offset)
    caught_up: float = 0.0              # monotonic time it was last known caught up
    last_fetch: float = 0.0
    leader_leo_at_last_fetch: int = -1


@dataclass
class _Waiter:
    required: int                       # the high watermark that acknowledges the produce
    loop: asyncio.AbstractEventLoop | None
    future: object                      # asyncio.Future or concurrent.futures.Future


class LeaderState:
    """Leadership of one partition by this broker, from the epoch it became leader in through the newer epochs it
    is re-elected in while it stays leader (``new_epoch``); a new leadership gets a new LeaderState."""

    def __init__(self, partition, broker_id: int, leader_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...],
                 removing: tuple[int, ...] = ()):
        self.partition = partition
        self.log = partition.log
        self.broker_id = broker_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.removing = frozenset(removing)
        self.isr: set[int] = set(isr) | {broker_id}
        self.epoch_start = self.log.end_offset
        now = time.monotonic()
        self.followers = {r: _Follower(caught_up=now) for r in (*replicas, *isr) if r != broker_id}
        self._waiters: list[_Waiter] = []
        self._lock = threading.Lock()
        self.active = True

    def new_epoch(self, leader_epoch: int) -> None:
        """Still leader, in a newer epoch: followers rejoin the ISR from its start (Kafka's leader epoch start
        offset); followers' offsets and waiting produces are kept."""
        with self._lock:
            if leader_epoch <= self.leader_epoch:
                raise ValueError(f"{self.partition}: epoch {leader_epoch} is not newer than {self.leader_epoch}")
            self.leader_epoch = leader_epoch
            self.epoch_start = self.log.end_offset

    def may_join(self, replica_id: int) -> bool:
        """Whether the follower may be added to the ISR: an assigned replica a reassignment is not removing."""
        return replica_id in self.replicas and replica_id not in self.removing

    def set_replicas(self, replicas: tuple[int, ...], removing: tuple[int, ...] = ()) -> None:
        """The partition's replicas changed (a reassignment) within this epoch: track new followers; forget
        removed ones once they are out of the ISR."""
        now = time.monotonic()
        with self._lock:
            self.replicas, self.removing = tuple(replicas), frozenset(removing)
            self.followers = {r: self.followers.get(r) or _Follower(caught_up=now)
                              for r in (*replicas, *self.isr) if r != self.broker_id}

    @property
    def min_isr(self) -> int:
        """min.insync.replicas as the log's config says now (an altered topic config applies at once)."""
        return self.log.config.min_insync_replicas

    # -- offsets ----------------------------------------------------------------------------------------------

    def follower_fetched(self, replica_id: int, fetch_offset: int, now: float | None = None) -> bool:
        """A follower asked for fetch_offset: it holds everything below. Returns True when the ISR should
        grow to include it (the caller writes that to the store)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            f = self.followers.get(replica_id)
            if f is None:
                raise NotLeaderOrFollowerError(f"broker {replica_id} is not a replica of {self.partition}")
            leo = self.log.end_offset
            f.leo = fetch_offset
            if fetch_offset >= leo:
                f.caught_up = now
            elif fetch_offset >= f.leader_leo_at_last_fetch >= 0:
                f.caught_up = max(f.caught_up, f.last_fetch)
            f.last_fetch = now
            f.leader_leo_at_last_fetch = leo
            grow = (replica_id not in self.isr and self.may_join(replica_id)
                    and fetch_offset >= self.log.high_watermark and fetch_offset >= self.epoch_start)
        self.update_high_watermark()
        return grow

    def update_high_watermark(self) -> int:
        """Recompute the high watermark from the ISR; wake the produces it acknowledges and the consumers
        waiting for data. Returns it."""
        with self._lock:
            if not self.active:
                return self.log.high_watermark
            hw = self.log.end_offset
            for r in self.isr:
                if r != self.broker_id:
                    hw = min(hw, self.followers[r].leo)
            current = self.log.high_watermark
            advanced = hw > current
            if advanced:
                self.log.high_watermark = hw
                current = hw
            ready = [w for w in self._waiters if w.required <= current]
            if ready:
                self._waiters = [w for w in self._waiters if w.required > current]
        for w in ready:
            _resolve(w, None)
        if advanced:
            self.partition.node._data_arrived(self.partition)
        return current

    def lagging(self, now: float, max_lag_ms: int) -> list[int]:
        """ISR followers that have not caught up for max_lag_ms (they should leave the ISR)."""
        with self._lock:
            return [r for r in self.isr if r != self.broker_id
                    and (now - self.followers[r].caught_up) * 1000 > max_lag_ms]

    def set_isr(self, isr) -> None:
        """The store now holds `isr` for this epoch: use it, and check the high watermark again."""
        now = time.monotonic()
        with self._lock:
            self.isr = set(isr) | {self.broker_id}
            for r in self.isr - set(self.followers) - {self.broker_id}:
                self.followers[r] = _Follower(caught_up=now)
        self.update_high_watermark()

    # -- acks=all -----------------------------------------------------------------------------------------------

    def add_waiter(self, required: int, future, loop=None) -> None:
        """Resolve `future` once the high watermark reaches `required` (an asyncio future needs its loop)."""
        w = _Waiter(required, loop, future)
        with self._lock:
            if self.active and self.log.high_watermark < required:
                self._waiters.append(w)
                return
            error = None if self.active else NotLeaderOrFollowerError(f"{self.partition} lost its leader")
        _resolve(w, error)

    def remove_waiter(self, future) -> None:
        with self._lock:
            self._waiters = [w for w in self._waiters if w.future is not future]

    def check_after_append(self) -> None:
        """Kafka completes acks=all produces with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
        min.insync.replicas while they waited."""
        if len(self.isr) < self.min_isr:
            raise NotEnoughReplicasAfterAppendError(
                f"{self.partition}: ISR {sorted(self.isr)} fell below min.insync.replicas={self.min_isr}")

    def resign(self) -> None:
        """This broker no longer leads this epoch: fail every waiting produce with NOT_LEADER_OR_FOLLOWER."""
        with self._lock:
            self.active = False
            waiters, self._waiters = self._waiters, []
        for w in waiters:
            _resolve(w, NotLeaderOrFollowerError(f"{self.partition}: leadership moved before the write was "
                                                 f"replicated"))


def _resolve(w: _Waiter, error: BaseException | None) -> None:
    def set_():
        if not w.future.done():
            if error is None:
                w.future.set_result(None)
            else:
                w.future.set_exception(error)
    if w.loop is not None:
        w.loop.call_soon_threadsafe(set_)
    else:
        set_()
