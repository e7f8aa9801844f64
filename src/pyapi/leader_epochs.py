"""Leader epoch cache of one log: for each leader epoch, the offset of the first batch written in it.

Persisted as Kafka's ``leader-epoch-checkpoint`` (version 0, count, ``<epoch> <start offset>`` lines).
Replicas use it to answer OffsetForLeaderEpoch and to find where a diverged tail starts after a failover.
Invariant: epochs and start offsets both strictly increase. Not thread-safe: the owning Log's lock guards it.
"""

from __future__ import annotations

import bisect
import logging
import os

from .checkpoints import CorruptCheckpointError, read_checkpoint, write_checkpoint

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED = (-1, -1)
log = logging.getLogger("seglog.log")


class LeaderEpochCache:
    """Ordered (epoch, start_offset) entries of one log directory."""

    def __init__(self, directory: str, writable: bool = True):
        self.path = os.path.join(directory, FILE_NAME)
        self.writable = writable
        self.entries: list[tuple[int, int]] = []
        try:
            rows = read_checkpoint(self.path, 2) or []
            self.entries = [(int(e), int(o)) for e, o in rows]
        except (CorruptCheckpointError, ValueError):
            log.warning("leader epoch checkpoint %s is corrupt; starting with an empty cache", self.path)
            self.entries = []

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`. Older or equal epochs, or offsets not beyond the
        latest entry's start, are ignored (as Kafka does) and nothing is written."""
        if epoch < 0:
            return
        if self.entries and (epoch <= self.entries[-1][0] or start_offset <= self.entries[-1][1]):
            if epoch > self.entries[-1][0] and start_offset == self.entries[-1][1]:
                self.entries[-1] = (epoch, start_offset)      # the previous epoch wrote nothing
                self._persist()
            return
        self.entries.append((epoch, start_offset))
        self._persist()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest known epoch <= `epoch`, the offset where that epoch ended), Kafka's OffsetForLeaderEpoch.

        The latest epoch ends at the log end offset; an epoch older than every entry gives (-1, -1)."""
        if not self.entries or epoch < self.entries[0][0]:
            return UNDEFINED
        if epoch >= self.entries[-1][0]:
            return self.entries[-1][0], log_end_offset
        i = bisect.bisect_right([e for e, _ in self.entries], epoch)
        return self.entries[i - 1][0], self.entries[i][1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after end_offset (the log was truncated there)."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at start_offset: drop epochs wholly before it, clamp the one spanning it."""
        i = bisect.bisect_right([o for _, o in self.entries], start_offset)
        if i == 0:
            return
        kept = [(self.entries[i - 1][0], max(self.entries[i - 1][1], start_offset))] + self.entries[i:]
        if kept != self.entries:
            self.entries = kept
            self._persist()

    def clear(self) -> None:
        if self.entries:
            self.entries = []
            self._persist()

    def _persist(self) -> None:
        if self.writable:
            write_checkpoint(self.path, self.entries)
