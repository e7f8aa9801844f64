"""The group coordinator's deadlines: one heap of timers, each of a kind the coordinator maps to its handler.

Kinds (Kafka's delayed operations and expirations): a member's session, a MEMBER_ID_REQUIRED member that must
rejoin, the rebalance timeout of a JoinGroup round and of the SyncGroup that follows, and
``group.initial.rebalance.delay.ms``. An entry carries the group and a payload that tells a stale deadline
from a current one (the member, its id, the rebalance epoch or the generation); handlers check it.

Locking: guarded by the coordinator's lock; ``wakeup`` is a Condition over that lock, notified when the
earliest deadline changes, which the coordinator's timer thread waits on.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import threading
from typing import Any, Iterator

__all__ = ["TimerKind", "Deadlines"]


class TimerKind(enum.Enum):
    SESSION = "session"          # payload: the Member whose session may expire
    PENDING = "pending"          # payload: the member id that got MEMBER_ID_REQUIRED
    JOIN = "join"                # payload: the rebalance epoch whose JoinGroup round times out
    SYNC = "sync"                # payload: the generation whose members must have sent SyncGroup
    INITIAL = "initial"          # payload: the rebalance epoch of the initial rebalance delay
    CONSUMER_SESSION = "consumer-session"   # payload: the ConsumerMember (KIP-848) whose session may expire
    CONSUMER_REVOKE = "consumer-revoke"     # payload: the ConsumerMember that must have revoked partitions


class Deadlines:
    """A min-heap of (deadline ms, sequence, kind, group, payload); the sequence keeps equal deadlines in
    push order and spares comparing groups."""

    def __init__(self, wakeup: threading.Condition) -> None:
        self._heap: list[tuple[float, int, TimerKind, Any, Any]] = []
        self._seq = itertools.count()
        self._wakeup = wakeup

    def push(self, deadline: float, kind: TimerKind, group, payload: Any) -> None:
        """Add a deadline (lock held); wakes the timer thread if it is the earliest now."""
        entry = (deadline, next(self._seq), kind, group, payload)
        heapq.heappush(self._heap, entry)
        if self._heap[0] is entry:
            self._wakeup.notify()

    def due(self, now: float) -> Iterator[tuple[TimerKind, Any, Any]]:
        """Pop the entries at or before `now`, earliest first, as (kind, group, payload) (lock held; a handler
        may push more, and those due already are popped too)."""
        while self._heap and self._heap[0][0] <= now:
            _, _, kind, group, payload = heapq.heappop(self._heap)
            yield kind, group, payload

    def seconds_until_next(self, now: float) -> float | None:
        """How long the timer thread sleeps: until the earliest deadline (0 if past), None if there is none."""
        return None if not self._heap else max(0.0, (self._heap[0][0] - now) / 1000.0)
