"""LocalLog: a partition directory's ordered segments and their I/O (Kafka's LocalLog).

It holds the base offsets of the segments (``bases``, ascending), the active segment (the last one, the only one
appended to), a bounded cache of open sealed segments, and the directory's writer lock. It rolls, deletes,
truncates and finds positions; it knows nothing of offsets' meaning (start offset, high watermark, epochs,
producers), which the partition log (log.Log) keeps.

Invariants: ``bases`` is non-empty and sorted once loaded, ``active.base_offset == bases[-1]``; a cached
segment's ``offset_limit`` is the next segment's base, so its walks refuse batches reaching past it; at most
``max_open`` sealed segments are open.

Locking: none of its own. Every method runs under the owning Log's lock (the loader runs before the Log is
shared), so the segment list and the cache never change under a caller.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
from collections import OrderedDict
from typing import Callable, Sequence

from . import _engine
from .checkpoints import fsync_dir, lock_directory, storage_errors
from .config import LogConfig
from .errors import CorruptRecordError, StorageError
from .scheduler import Scheduler
from .txn_index import SUFFIX as TXN_INDEX, AbortedTxn, append_entries, read_index, sync_index, write_index

__all__ = ["LocalLog", "SEGMENT_RE", "listed_bases", "segment_bases", "unlink_all"]

log = logging.getLogger("seglog.log")

READ_CHUNK_BYTES = 1 << 20           # views() reads this much per step
SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
INT64_MAX = (1 << 63) - 1


def unlink_all(paths: list[str]) -> None:
    """Unlink each path that exists. Raises StorageError."""
    for p in paths:
        with storage_errors("cannot delete", p, missing_ok=True):
            _engine.file_unlink(p)


def segment_bases(names: list[str]) -> list[int]:
    """The base offsets of the ``.log`` files among directory entry names, ascending."""
    return sorted(int(m.group(1)) for m in map(SEGMENT_RE.match, names) if m)


def listed_bases(path: str) -> list[int]:
    """Read-only logs: the base offsets of directory `path`'s segments, ascending, while the writing process
    may be rolling. A directory listing is no snapshot: an entry created while it runs may be left out while a
    later one is returned (ext4 lists in hash order), so one listing may hold the newest segment but not the
    one before it. Every entry there when a listing starts is returned, and a writer creates segments in base
    order (a roll's base is above every other), so a second listing holds every segment up to the newest of
    the first. Invariant: every segment the writer created before the last one returned, and has not deleted
    since, is returned (segments it creates meanwhile are left to the next listing). Raises StorageError."""
    with storage_errors("cannot list log directory", path):
        first = segment_bases(os.listdir(path))
        if not first:
            return first
        return [b for b in segment_bases(os.listdir(path)) if b <= first[-1]]


class LocalLog:
    """The segments of one partition directory. ``config`` is the owning Log's (it assigns a new one on
    change; index settings apply to segments opened later). ``recovery`` is the loader's RecoveryReport, which
    index rebuilds of segments opened later count into. ``scheduler`` runs delayed deletions (None: at once)."""

    def __init__(self, path: str, config: LogConfig, *, readonly: bool, max_open: int,
                 scheduler: Scheduler | None = None):
        self.path = path
        self.config = config
        self.readonly = readonly
        self.max_open = max_open
        self.scheduler = scheduler
        self.bases: list[int] = []
        self.active: _engine.Segment | None = None     # set by the loader; None only before it ran
        self.open_segments: OrderedDict[int, _engine.Segment] = OrderedDict()
        self.aborted: dict[int, list[AbortedTxn]] = {}     # base -> its .txnindex entries, read on first use
        self.recovery = None
        self._lock_fd = -1

    # ------------------------------------------------------------------------------------ directory lock

    def take_dir_lock(self) -> None:
        """flock ``.lock``: one writing process per directory. Raises StorageError if another holds it."""
        self._lock_fd = lock_directory(self.path, "log directory is locked by another writer (open it with "
                                                  "readonly=True to read it from a second process)",
                                       _engine.file_open)

    def release_dir_lock(self) -> None:
        """Drop the directory lock (idempotent)."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def close(self) -> None:
        """Close the active segment and every cached one (idempotent; views handed out stay valid)."""
        if self.active is not None:
            self.active.close()             # kept: a closed log still answers end_offset from it
        for seg in self.open_segments.values():
            seg.close()
        self.open_segments.clear()

    # ------------------------------------------------------------------------------------------ segments

    def map_bytes(self) -> int:
        """How much of the active segment's file is mapped ahead (segment.bytes, at least 1 MiB)."""
        return max(self.config.segment_bytes, 1 << 20)

    def new_segment(self, base: int) -> _engine.Segment:
        """Create empty segment files at `base` (not yet listed in ``bases`` nor activated)."""
        return _engine.Segment(self.path, base, index_interval_bytes=self.config.index_interval_bytes,
                               max_index_bytes=self.config.segment_index_bytes, create=True)

    def segment(self, base: int, check: bool = True) -> _engine.Segment:
        """The Segment for `base`: the active one, or a sealed one opened on demand (least recently used closed
        past max_open). A segment opened after load has its indexes checked (check_or_rebuild) unless `check`
        is false. Raises StorageError, CorruptRecordError from the check."""
        active = self.active
        if active is not None and active.base_offset == base:
            return active
        i = bisect.bisect_right(self.bases, base)
        limit = self.bases[i] if i < len(self.bases) else INT64_MAX
        seg = self.open_segments.get(base)
        if seg is not None:
            self.open_segments.move_to_end(base)
            seg.offset_limit = limit
            return seg
        seg = _engine.Segment(self.path, base, index_interval_bytes=self.config.index_interval_bytes,
                              max_index_bytes=self.config.segment_index_bytes, writable=not self.readonly)
        seg.offset_limit = limit
        if check and active is not None:
            try:
                self.check_or_rebuild(seg)
            except BaseException:
                seg.close()
                raise
        self.open_segments[base] = seg
        self._trim_cache()
        return seg

    def _trim_cache(self) -> None:
        while len(self.open_segments) > self.max_open:
            _, old = self.open_segments.popitem(last=False)
            old.close()

    def take_active(self, seg: _engine.Segment) -> None:
        """Make `seg` (the last segment, out of the cache) the active one, mapped for appends. On failure the
        segment is closed (it is nobody's yet)."""
        self.open_segments.pop(seg.base_offset, None)
        try:
            seg.activate(self.map_bytes())
        except BaseException:
            seg.close()
            raise
        self.active = seg

    def roll(self, before_new: Callable[[int], None]) -> int:
        """Seal the active segment (fsync, trim its indexes), call ``before_new(base)`` (the producer snapshot at
        the new base offset), then start an empty active segment at the old one's next offset. Returns that
        base. Raises StorageError."""
        old = self.active
        base = old.next_offset
        old.seal()
        sync_index(self.txn_index_path(old.base_offset))
        before_new(base)
        seg = self.new_segment(base)
        seg.activate(self.map_bytes())
        self.open_segments[old.base_offset] = old
        self.bases.append(base)
        self.active = seg
        self._trim_cache()
        return base

    def delete_segments(self, bases: Sequence[int], delay: bool = True) -> None:
        """Drop segments from the list and rename their files to *.deleted; unlink them after
        file.delete.delay.ms (at once when `delay` is false). Views of them stay valid: their mappings hold the
        (unlinked) files. Deleting the active segment leaves ``active`` closed: the caller installs another."""
        renamed = []
        for base in bases:
            seg = self.open_segments.pop(base, None)
            if seg is None and self.active is not None and self.active.base_offset == base:
                seg = self.active
            if seg is not None:
                seg.close()
            self.bases.remove(base)
            self.aborted.pop(base, None)
            stem = os.path.join(self.path, _engine.segment_name(base))
            for suffix in (".index", ".timeindex", TXN_INDEX, ".log"):   # the .log last: never indexes without it
                with storage_errors("cannot delete segment file", stem + suffix, missing_ok=True):
                    _engine.file_rename(stem + suffix, stem + suffix + ".deleted")
                    renamed.append(stem + suffix + ".deleted")
        if not renamed:
            return
        wait = self.config.file_delete_delay_ms / 1000 if delay else 0
        if wait > 0 and self.scheduler is not None:
            self.scheduler.schedule(lambda: unlink_all(renamed), wait, name="delete segments")
        else:
            unlink_all(renamed)

    def replace_segments(self, old: list[int], new_base: int | None, precondition=None) -> bool:
        """Swap a cleaned segment in for the consecutive sealed segments `old` (Kafka's replaceSegments; the
        files and the crash-safe order are described at Log.replace_segments). False, changing nothing, when
        `old` are not consecutive sealed segments any more or ``precondition()`` is false. Raises
        StorageError."""
        i = bisect.bisect_left(self.bases, old[0])
        if self.bases[i:i + len(old)] != old or self.active.base_offset in old:
            return False
        if precondition is not None and not precondition():
            return False
        stem = os.path.join(self.path, _engine.segment_name(old[0]))
        # the aborted transactions of the old segments stay with the cleaned one (their markers are kept)
        aborted = [t for b in old for t in self.aborted_in(b)]
        try:
            if new_base is not None:
                if aborted:
                    write_index(stem + TXN_INDEX + ".swap", aborted)
                for suffix in (".index", ".timeindex", ".log"):
                    _engine.file_rename(stem + suffix + ".cleaned", stem + suffix + ".swap")
                fsync_dir(self.path)
            # indexes go first: a crash between renames must not leave an index without its .log (a segment
            # created later at that base would reopen it); a .log without indexes gets them rebuilt
            unlink_all([os.path.join(self.path, _engine.segment_name(b)) + suffix
                        for b in old for suffix in (".index", ".timeindex", TXN_INDEX)])
            self.delete_segments(old)
            if new_base is not None:
                for suffix in (".index", ".timeindex") + ((TXN_INDEX,) if aborted else ()) + (".log",):
                    _engine.file_rename(stem + suffix + ".swap", stem + suffix)
                bisect.insort(self.bases, new_base)
                self.aborted[new_base] = aborted
            fsync_dir(self.path)
        except OSError as e:
            raise StorageError(f"segment swap failed: {e.strerror}", self.path, e.errno) from None
        return True

    def truncate_to(self, offset: int) -> None:
        """Cut the segments at `offset` (start offset <= offset < active.next_offset): segments above the one
        holding it are deleted, that one is cut (a batch holding `offset` goes whole; the segment fsyncs the cut
        file) and becomes the active segment."""
        i = bisect.bisect_right(self.bases, offset) - 1
        above = self.bases[i + 1:]
        seg = self.segment(self.bases[i])
        if seg is not self.active:
            self.open_segments.pop(seg.base_offset, None)
            self.active.close()
            self.delete_segments(above)
            self.active = seg
        else:
            self.delete_segments(above)
        seg.truncate_to(offset)           # fsyncs the cut file (and the directory after a copy-and-rename)
        seg.activate(self.map_bytes())
        kept = [t for t in self.aborted_in(seg.base_offset) if t.last_offset < offset]
        if len(kept) != len(self.aborted_in(seg.base_offset)):
            write_index(self.txn_index_path(seg.base_offset), kept)
            self.aborted[seg.base_offset] = kept

    def truncate_fully(self, offset: int) -> None:
        """Delete every segment and start one empty active segment at `offset`."""
        self.delete_segments(list(self.bases))
        seg = self.new_segment(offset)
        seg.activate(self.map_bytes())
        self.bases = [offset]
        self.active = seg

    def reload(self, bases: list[int]) -> None:
        """Read-only logs: take the segment list the writer left (`bases`, non-empty): segments gone are closed,
        a new last segment becomes the active one, else the active one's indexes and tail are read again."""
        self.aborted.clear()
        for gone in set(self.bases) - set(bases):
            seg = self.open_segments.pop(gone, None)
            if seg is not None:
                seg.close()
        self.bases = bases
        if self.active.base_offset != bases[-1]:
            self.active.close()
            self.active = _engine.Segment(self.path, bases[-1], writable=False,
                                          index_interval_bytes=self.config.index_interval_bytes,
                                          max_index_bytes=self.config.segment_index_bytes)
        else:
            self.active.offset_index.reload()
            self.active.time_index.reload()
        self.active.scan_tail()

    # ------------------------------------------------------------------------ aborted-transaction index

    def txn_index_path(self, base: int) -> str:
        return os.path.join(self.path, _engine.segment_name(base) + TXN_INDEX)

    def aborted_in(self, base: int) -> list[AbortedTxn]:
        """The .txnindex entries of the segment at `base` (read once, then kept)."""
        found = self.aborted.get(base)
        if found is None:
            found = self.aborted[base] = read_index(self.txn_index_path(base))
        return found

    def add_aborted(self, txns: list[AbortedTxn]) -> None:
        """Index aborted transactions in the segments holding their markers (entries already there are
        skipped, so a replay may offer them again). Raises StorageError."""
        for t in txns:
            base = self.bases[max(bisect.bisect_right(self.bases, t.last_offset) - 1, 0)]
            entries = self.aborted_in(base)
            if any(e.producer_id == t.producer_id and e.last_offset == t.last_offset for e in entries):
                continue
            append_entries(self.txn_index_path(base), [t])
            entries.append(t)

    def collect_aborted(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping offsets [start, end) (Kafka's collectAbortedTransactions): their
        markers lie in the segment holding `start` or later ones; the walk stops after a segment with an entry
        whose last stable offset reaches `end` (no later abort can overlap the range)."""
        out = []
        for base in self.bases[max(bisect.bisect_right(self.bases, start) - 1, 0):]:
            entries = self.aborted_in(base)
            out.extend(t for t in entries if t.last_offset >= start and t.first_offset < end)
            if any(t.last_stable_offset >= end for t in entries):
                break
        return out

    # ----------------------------------------------------------------------------------------- reading

    def size_bytes(self) -> int:
        """Bytes of all .log files (the trusted size of open segments, the file system's for the others)."""
        total = 0
        for base in self.bases:
            seg = self.open_segments.get(base)
            if base == self.active.base_offset:
                seg = self.active
            if seg is not None:
                total += seg.size
                continue
            with storage_errors("cannot stat segment", self.path):
                total += os.stat(os.path.join(self.path, _engine.segment_name(base) + ".log")).st_size
        return total

    def find(self, offset: int) -> tuple[_engine.Segment, int] | None:
        """(segment, position) of the batch holding `offset`, or of the first batch after a gap in the
        segments; None past the last segment's data."""
        i = bisect.bisect_right(self.bases, offset) - 1
        while i < len(self.bases):
            seg = self.segment(self.bases[max(i, 0)])
            pos = seg.find_position(offset)
            if pos >= 0:
                return seg, pos
            i += 1                  # past this segment's data (a gap): the next segment
        return None

    def views(self, start: int, end: int):
        """Whole-batch views covering offsets [start, end), segment by segment, ~1 MiB at a time."""
        i = max(bisect.bisect_right(self.bases, start) - 1, 0)
        offset = start
        while offset < end and i < len(self.bases):
            seg = self.segment(self.bases[i])
            pos = seg.find_position(offset)
            while 0 <= pos < seg.size:
                view, pos, next_offset = seg.read(pos, READ_CHUNK_BYTES)
                if next_offset < 0:
                    break
                yield view
                offset = next_offset
            i += 1

    # ------------------------------------------------------------------------------ index checks at open

    def check_or_rebuild(self, seg: _engine.Segment, active: bool = False) -> None:
        """Check a segment's indexes (and the batches after the last entry) as it opens; rebuild the indexes
        from the .log if they fail. Damage in the .log itself is cut only from the segment that becomes active
        at open (appends need a log that ends on whole batches in order, as after a crash); a sealed segment
        keeps every byte, rather than lose records quietly: reads before the damage work, reads reaching it
        raise CorruptRecordError. Read-only logs cannot rebuild another process's files: they scan without
        the indexes."""
        missing = not (os.path.exists(seg.index_path) and os.path.exists(seg.timeindex_path))
        try:
            if missing:
                raise _engine.CorruptIndexError("index file missing", path=seg.index_path)
            seg.check_indexes()
        except (_engine.CorruptIndexError, StorageError) as e:
            if self.readonly:
                seg.offset_index.discard()
                seg.time_index.discard()
            else:
                log.warning("%s: rebuilding indexes of %s (%s)", self.path, seg.log_path, e)
                self.rebuild(seg, cut=active)
        except CorruptRecordError as e:
            if active:
                log.warning("%s: recovering the active segment %s (%s)", self.path, seg.log_path, e)
                self.rebuild(seg, cut=True)
            else:
                log.warning("%s: %s is damaged (%s); reads reaching the damage raise", self.path, seg.log_path, e)

    def rebuild(self, seg: _engine.Segment, cut: bool) -> None:
        """Segment.recover (cutting at the first invalid batch if `cut`), then trim and fsync as at a roll;
        counted in ``recovery``."""
        truncated, reason = seg.recover(cut)
        seg.seal()
        self.recovery.indexes_rebuilt += 1
        if reason is not None:
            self.recovery.bytes_truncated += truncated
            self.recovery.corruption = f"{reason} in {seg.log_path}"
            log.warning("%s: %s in %s: %s", self.path, reason, seg.log_path,
                        f"cut {truncated} bytes" if cut else "kept; reads reaching it raise CorruptRecordError")
