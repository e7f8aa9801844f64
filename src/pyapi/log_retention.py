"""The partition log's retention and maintenance (part of log.Log): DeleteRecords, time and size retention,
the periodic maintain() (flush.ms, producer expiry, retention, compaction) and its scheduling, and the entry
points of log compaction (cleaner.py runs it; the swap of cleaned segments happens here).

``LogRetention`` is a base class of ``log.Log`` and works on its state (``_lock``, ``_local``, ``_start_offset``,
``_epochs``, ``_producers``, ``_task``). Invariants: retention never deletes a segment holding offsets at or above
the high watermark, and the log start offset only rises here. Locking as stated per method; ``_locked``
methods run with the Log's lock held.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Sequence

from . import cleaner as _cleaner
from .errors import InvalidArgumentError, LogClosedError, OffsetOutOfRangeError
from .log_args import int_arg as _int_arg
from .log_transactions import PRODUCER_ID_EXPIRATION_MS

__all__ = ["LogRetention"]

log = logging.getLogger("seglog.log")


class LogRetention:
    """Retention, DeleteRecords, maintenance and the compaction swap of a log.Log (see the module docstring)."""

    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset to `offset` (Kafka's DeleteRecords); whole segments below it are deleted
        by the next retention pass. As Kafka's: -1 means the high watermark (delete every committed record);
        an offset at or below start_offset changes nothing. Returns the log start offset after the call (the
        request's low watermark). Raises OffsetOutOfRangeError for an offset above the high watermark or
        negative other than -1, InvalidArgumentError for one that is not an int."""
        if not (type(offset) is int and offset < 0):      # negative ints are judged below, as Kafka does
            offset = _int_arg(offset, "delete records offset")
        with self._lock:
            self._check_writable()
            hw = self.high_watermark
            if offset == -1:
                offset = hw
            if not 0 <= offset <= hw:
                raise OffsetOutOfRangeError(offset=offset, start=self._start_offset, end=hw, what="delete records")
            if offset > self._start_offset:
                self._start_offset = offset
                self._epochs.truncate_from_start(offset)
                self._write_state()
            return self._start_offset

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole old segments (cleanup.policy=delete): those wholly below the log start offset, those
        whose largest timestamp is older than retention.ms, and the oldest while the log exceeds
        retention.bytes; never a segment holding offsets at or above the high watermark. If every segment
        goes, the log rolls first so it keeps its end offset. Returns the number of segments deleted."""
        with self._lock:
            self._check_writable()
            if not self.config.delete:
                return 0
            self._seal_pending()
            return self._retention_locked(int(time.time() * 1000) if now_ms is None else now_ms)

    def _retention_locked(self, now_ms: int) -> int:
        """enforce_retention with the lock held and the buffered records written (the caller checks the
        delete policy); `now_ms` is the time retention.ms is measured from."""
        cfg = self.config
        hw = self.high_watermark
        excess = self._local.size_bytes() - cfg.retention_bytes if cfg.retention_bytes >= 0 else -1
        doomed = []
        for i, base in enumerate(self._local.bases):
            upper = self._local.bases[i + 1] if i + 1 < len(self._local.bases) else self.end_offset
            seg = self._local.segment(base)
            if upper > hw or seg.size == 0:
                break
            by_start = upper <= self._start_offset
            by_time = cfg.retention_ms >= 0 and seg.largest_timestamp < now_ms - cfg.retention_ms
            by_size = excess >= 0 and excess - seg.size >= 0
            if not (by_start or by_time or by_size):
                break
            doomed.append(base)
            if excess >= 0:
                excess -= seg.size
        if not doomed:
            return 0
        self._check_writable()
        if doomed[-1] == self._local.active.base_offset:
            self._roll()
        self._local.delete_segments(doomed)
        self._points.clear()
        self._start_offset = max(self._start_offset, self._local.bases[0])
        self._epochs.truncate_from_start(self._start_offset)
        self._producers.delete_snapshots(below=self._local.bases[0])
        self._write_state()
        log.info("%s: retention deleted %d segments; log start offset now %d", self.path, len(doomed),
                 self._start_offset)
        return len(doomed)

    def maintain(self, now_ms: int | None = None) -> None:
        """Time-based work: flush when flush.ms has passed, expire idle producers, retention (under the lock);
        then compaction (compacted logs, outside the lock: the cleaner takes it briefly). The scheduler calls it
        periodically; a closed or read-only log does nothing."""
        with self._lock:
            if self._closed or self.readonly:
                return
            cfg = self.config
            self._seal_pending()
            if cfg.flush_ms is not None and (time.monotonic() - self._last_flush) * 1000 >= cfg.flush_ms \
                    and self._unflushed:
                self._flush_locked()
            now = int(time.time() * 1000) if now_ms is None else now_ms
            self._producers.expire(now, PRODUCER_ID_EXPIRATION_MS)
            if cfg.delete:
                self._retention_locked(now)
        if self.config.compact:            # log compaction (cleaner.py), outside the lock: it takes it briefly
            _cleaner.maybe_clean(self, now_ms)

    def _maintain_quietly(self) -> None:
        """The scheduler's periodic call: maintain(), a log closed meanwhile being no error."""
        try:
            self.maintain()
        except LogClosedError:
            pass

    def _schedule_maintenance(self) -> None:
        """(Re)schedule the periodic maintain() at the interval the config asks for: every
        retention_check_interval_ms, or more often for flush.ms or the cleaner's backoff (compacted logs)."""
        cfg = self.config
        interval = self._retention_check_s
        if cfg.flush_ms is not None:
            interval = min(interval, max(cfg.flush_ms / 1000, 0.01))
        if cfg.compact:                    # log compaction: the cleaner looks every log.cleaner.backoff.ms
            interval = min(interval, _cleaner.CLEANER_BACKOFF_MS / 1000)
        if interval == self._task_interval:
            return
        if self._task is not None:
            self._task.cancel()
        ref = weakref.ref(self)

        def tick():
            owner = ref()
            if owner is not None:
                owner._maintain_quietly()
        self._task = self._scheduler.schedule(tick, interval, interval, f"maintain {self.path}")
        self._task_interval = interval

    def compact(self, now_ms: int | None = None):
        """Run one compaction pass now, whatever the dirty ratio (cleanup.policy must include compact; see
        cleaner.clean for the rules and errors). Not under the lock: the cleaner takes it per step, and the swap
        goes through replace_segments. Returns a cleaner.CleanResult."""
        return _cleaner.clean(self, now_ms)

    def replace_segments(self, old_bases: Sequence[int], new_base: int | None, precondition=None) -> bool:
        """Swap a cleaned segment in for consecutive sealed segments, crash-safely (Kafka's replaceSegments).

        The cleaned segment is ``<new_base>.log.cleaned`` (+ ``.index.cleaned``, ``.timeindex.cleaned``), fsynced,
        with new_base == old_bases[0]; new_base None drops the old segments without a replacement. Under the lock:
        the .cleaned files become .swap (.log last, then a directory fsync: from there a crash completes the swap
        when the log opens, see log_loader.complete_interrupted_swaps), the old segments' indexes are unlinked and their
        .log files go to .deleted (unlinked after file.delete.delay.ms; views of them stay valid), and the .swap
        files get their final names. Returns False, changing nothing, if the old segments are not consecutive
        sealed segments of the log any more or ``precondition()`` (called under the lock) is false. Raises
        LogClosedError, ReadOnlyLogError, InvalidArgumentError, StorageError (after the commit point the swap
        then completes at the next open)."""
        with self._lock:
            self._check_writable()
            old = list(old_bases)
            if not old or (new_base is not None and new_base != old[0]):
                raise InvalidArgumentError("replace_segments: new_base must be the first old base offset or None")
            self._points.clear()
            return self._local.replace_segments(old, new_base, precondition)
