"""Read-committed filtering of fetched batches (Kafka's consumer: Fetcher's aborted transactions queue).

A read_committed reader reads up to the last stable offset and gets the aborted transactions overlapping what
it reads (from the .txnindex files). Walking the batches in offset order it drops, as Kafka's consumer does:
every control batch (markers never reach applications), and a transactional batch whose producer has an
aborted transaction whose first offset is at or before the batch, until that producer's ABORT marker.
"""

from __future__ import annotations

import heapq
from typing import Iterable, Iterator

from . import _engine

__all__ = ["AbortedFilter", "ISOLATION_LEVELS", "isolation_level"]

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


def isolation_level(name) -> int:
    """Kafka's isolation.level value as the wire's int8 (0 read_uncommitted, 1 read_committed); ValueError
    naming the accepted values otherwise."""
    level = ISOLATION_LEVELS.get(name)
    if level is None:
        raise ValueError(f"isolation level must be one of {', '.join(ISOLATION_LEVELS)}, not {name!r}")
    return level


class AbortedFilter:
    """Feed it batches in offset order (``keep``); ``runs`` cuts a view of whole batches into the consecutive
    stretches to keep. Not thread-safe (one per reader)."""

    def __init__(self, aborted: Iterable = ()):
        self._pending = [(t.first_offset, t.producer_id) for t in aborted]
        heapq.heapify(self._pending)
        self._aborting: set[int] = set()
        self.dropped_records = 0          # records of the aborted data batches runs() left out

    def add(self, aborted: Iterable) -> None:
        """More aborted transactions (the next fetch's)."""
        for t in aborted:
            heapq.heappush(self._pending, (t.first_offset, t.producer_id))

    def keep(self, view, b) -> bool:
        """Whether batch `b` (a BatchInfo of `view`) reaches the application."""
        if b.is_control:
            if b.producer_id in self._aborting and _engine.control_marker(view, b.position)[0] is False:
                self._aborting.discard(b.producer_id)
            return False
        pending = self._pending
        while pending and pending[0][0] <= b.last_offset:
            self._aborting.add(heapq.heappop(pending)[1])
        return not (b.is_transactional and b.producer_id in self._aborting)

    def runs(self, view, keep_control: bool = False) -> Iterator[memoryview]:
        """The consecutive stretches of batches of `view` to keep (with keep_control, control batches too: the
        cleaner drops aborted data and keeps the markers)."""
        start = end = -1
        for b in _engine.batches(view, False):
            if self.keep(view, b) or (keep_control and b.is_control):
                if start < 0:
                    start = b.position
                end = b.position + b.size
                continue
            if not b.is_control:
                self.dropped_records += b.records_count
            if start >= 0:
                yield view[start:end]
                start = -1
        if start >= 0:
            yield view[start:end]
