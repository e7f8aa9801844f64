"""A partition log opened read-only by another process than its writer (part of log.Log): following the
writer's segments, checkpoint and append journal.

``LogReadonly`` is a base class of ``log.Log``; a read-only Log (``readonly=True``) keeps ``_tail``, the
journal's batches that continue its segments, which read_next() and get() serve through ``read_batches``.
Invariants: a reader presents a prefix of the log with no gap the writer's log does not have: its segments are
every one the writer had up to the newest it lists (local_log.listed_bases: one directory listing may miss a
segment rolled while it runs), so end_offset is the offset after the last whole batch it read, never the base
of a newer segment past one it missed. What a reader has seen never disappears unless the writer removed it
(the journal is read before the segments are scanned). Locking as stated per method.
"""

from __future__ import annotations

import os

from . import _engine
from . import log_loader
from .errors import StorageError
from .local_log import listed_bases
from .log_loader import JOURNAL_FILE

__all__ = ["LogReadonly", "read_batches"]


class LogReadonly:
    """refresh() and the journal tail of a read-only log.Log."""

    def refresh(self) -> None:
        """Read-only logs: pick up segments and batches the writing process added (or removed) since open, and
        its start offset and high watermark (a writable log: no-op). What was seen before never disappears
        unless the writer removed it. Raises StorageError if the directory has no segments any more."""
        with self._lock:
            if not self.readonly:
                return
            # the journal first: a batch the writer moves from it to a segment meanwhile is in a segment listed
            # and scanned after, so nothing seen before disappears (see _set_tail)
            journal = _engine.read_journal(os.path.join(self.path, JOURNAL_FILE))
            bases = listed_bases(self.path)
            if not bases:
                raise StorageError("log directory has no segments any more", self.path)
            state = log_loader.read_state(self.path) or {}   # unparsable: the writer rewrites it at its next open
            self._start_offset = max(state.get("log-start-offset", 0), bases[0])
            self._hw = state.get("high-watermark")
            self._local.reload(bases)
            self._points.clear()
            self._set_tail(journal)

    def _set_tail(self, journal: bytes) -> None:
        """Read-only logs: keep the journal's batches that continue the segments (read before the segments were
        scanned, so any the writer moved to a segment meanwhile are found there and dropped here)."""
        self._tail = None
        end = self._local.active.next_offset
        for b in _engine.batches(journal) if journal else ():
            if b.base_offset == end:
                self._tail = (end, memoryview(journal)[b.position:])
                return
            if b.base_offset > end:
                return


def read_batches(data: memoryview, offset: int, max_bytes: int, max_offset: int, min_one: bool):
    """read_next() over whole batches in memory (a read-only log's journal tail): from the batch holding
    offset, those that fit max_bytes (at least one if min_one), none holding an offset >= max_offset."""
    start = stop = None
    next_offset = -1
    for b in _engine.batches(data):
        if b.next_offset <= offset:
            continue
        if start is None:
            start = b.position
        if b.last_offset >= max_offset:
            break
        if b.position + b.size - start > max_bytes and (stop is not None or not min_one):
            break
        stop, next_offset = b.position + b.size, b.next_offset
    if stop is None:
        return memoryview(b""), -1
    return data[start:stop], next_offset
