"""Log compaction for ``cleanup.policy=compact`` (and ``compact,delete``), as Kafka's LogCleaner does it.

What a pass does
----------------
1. **Range.** The *clean* section is ``[first segment, first dirty offset)``, the *dirty* section
   ``[first dirty offset, first uncleanable offset)``. The first dirty offset comes from the cleaner checkpoint
   (the log start offset when there is none, or when it lies outside ``[start_offset, end_offset]``). The first
   uncleanable offset is the smallest of: the active segment's base (never cleaned), the base of the first
   segment that reaches past the last stable offset (only data below it is ever read or rewritten), and the base
   of the first dirty segment whose largest timestamp is newer than ``now - min.compaction.lag.ms``. Only
   whole sealed segments are cleaned.
2. **Offset map.** The dirty section is read in offset order into a dict ``key -> latest offset`` (records
   without a key are not mapped). The map stops at a chunk boundary once it holds ``max_map_keys`` keys or
   ``max_dirty_bytes`` were read (Kafka's dedupe buffer plays this role): ``map_end`` is then where mapping
   stopped, otherwise the first uncleanable offset. Records at or past ``map_end`` are kept untouched.
3. **Groups.** The sealed segments below ``map_end`` (clean and dirty) are grouped in order, as Kafka's
   ``groupSegmentsBySize``: a group's .log sizes sum to at most ``segment.bytes``, its index files to at most
   ``segment.index.bytes``, and every offset in it is within int32 of its first base offset. Each group is
   rewritten into one segment that keeps the first segment's base offset.
4. **Filter** (Kafka's ``MemoryRecords.filterTo`` with the cleaner's record filter), batch by batch:

   - a keyed record below ``map_end`` is kept only if its offset is the latest for its key (or the key is
     not in the map: it was already the latest when the clean section was cleaned);
   - a tombstone (null value) is kept until its batch's *delete horizon* has passed. The horizon is Kafka
     3.x's (KIP-534), not the segment modification time of older Kafka: the first pass that keeps a tombstone
     sets attribute bit 6 on its batch and stores ``now + delete.retention.ms`` in the batch's baseTimestamp
     (record timestamp deltas are rewritten relative to it, so every record keeps its timestamp); a later
     pass at or after that time drops the tombstone. The horizon therefore travels with the batch (copies,
     replicas) and does not depend on file times;
   - a record without a key below ``map_end`` is dropped (counted in ``keyless_dropped``), as Kafka's cleaner
     discards it as invalid. A compacted Log refuses such records (InvalidRecordError, as Kafka's produce
     path does), so they only come from before the topic turned compacted or from replicas of such data;
   - transactions (Kafka's CleanedTransactionMetadata): the records of aborted transactions (the .txnindex
     entries of the range, isolation.AbortedFilter) never enter the key map and are dropped whole; committed
     transactional batches are filtered like any other. A COMMIT / ABORT marker stays as it is while any batch
     of its transaction stays before it (a marker always outlives its data); once none does, the pass gives it
     a delete horizon (now + delete.retention.ms, re-encoded as KIP-534 does) and the first pass after that
     horizon removes it, so consumers have delete.retention.ms to read it. The cleanable range ends at the last
     stable offset, so no undecided transaction is ever cleaned;
   - a batch whose records all stay, and that needs no new delete horizon, is copied byte for byte. One that
     loses records is re-encoded with the *original* base offset, lastOffsetDelta (Kafka preserves the last
     offset so the producer's last sequence survives), partition leader epoch, producer id/epoch, base
     sequence, timestamp type and codec; offsetDeltas keep their original values, so offsets inside a batch
     may have gaps (legal in v2 after compaction). maxTimestamp is recomputed over the kept records
     (LogAppendTime batches keep theirs);
   - a batch left with no records is dropped, unless it holds the last offset of a producer that is still in
     the log's producer state: then a header-only batch (recordsCount 0, same base offset, lastOffsetDelta,
     producer id/epoch, base sequence, maxTimestamp; baseTimestamp -1, no codec) is kept, as Kafka's
     ``RETAIN_EMPTY`` does, so idempotent deduplication state survives compaction.

   A group that loses every record is removed without a replacement, except the log's first segment, which
   is replaced by an empty segment so the log start offset does not move.
5. **Swap** (crash-safe, as Kafka's ``replaceSegments``): the group is written with the engine's Segment in
   a work directory under ``<partition>/.cleaner/`` (sealed: indexes trimmed, everything fsynced), moved to
   ``<base>.log.cleaned`` / ``.index.cleaned`` / ``.timeindex.cleaned``, and ``Log.replace_segments`` then,
   under the log lock, renames them to ``.swap`` (``.log.swap`` last, then a directory fsync: the commit
   point), unlinks the old segments' indexes and renames their .log files to ``.deleted`` (unlinked after
   ``file.delete.delay.ms``; views hold their mappings, so readers are unaffected), and renames the ``.swap``
   files to their final names. When a Log opens, leftover ``.cleaned`` files are deleted and a leftover
   ``.log.swap`` completes its swap (``log_loader.complete_interrupted_swaps``: segments whose base offset lies in
   ``[swap base, last offset in the swap + 1)`` are deleted). Segments of a group that lie above that range
   after a crash hold only records this pass dropped (superseded by later records, expired tombstones), so
   leaving them is harmless and the next pass removes them (the checkpoint only moves after a whole pass).
   Before swapping, the cleaner checks under the lock that the group's segments and the last mapped segment
   are still the same files (device, inode, size, mtime): a truncation or deletion meanwhile aborts the pass
   without touching the log.
6. **Checkpoint.** After every group is swapped, ``map_end`` becomes the first dirty offset, written to
   ``<partition>/cleaner-offset-checkpoint`` in Kafka's ``cleaner-offset-checkpoint`` format (version 0,
   entry count, ``topic partition offset`` lines) — one file per partition directory instead of Kafka's one
   per log directory, so a partition directory stays self-contained.

Scheduling
----------
``Log.maintain()`` calls :func:`maybe_clean` for compact logs (the log's maintenance tick runs at least every
``CLEANER_BACKOFF_MS``, Kafka's ``log.cleaner.backoff.ms``): at most one check per backoff period, and a pass
only when the dirty ratio ``dirty bytes / (clean + dirty bytes)`` exceeds ``min.cleanable.dirty.ratio`` or a
dirty segment's first batch is older than ``max.compaction.lag.ms`` (Kafka's rules). A pass is bounded by
``max_map_keys`` and ``max_dirty_bytes``; when a bound cut it short, the next tick continues. An unexpected
error marks the log uncleanable until it is reopened (logged once), as Kafka does. :func:`clean` (also
``Log.compact()``) runs a pass now, whatever the ratio, and raises errors.

Locking: one pass per Log at a time (a per-log cleaner lock). The log lock is held only to read a chunk of a
segment, to snapshot the segment list, and for the swap itself; appends and reads go on meanwhile.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import logging
import mmap
import os
import re
import shutil
import threading
import time
import weakref

from . import _engine
from .checkpoints import CorruptCheckpointError, read_checkpoint, write_checkpoint
from .errors import InvalidArgumentError, LogClosedError, ReadOnlyLogError, StorageError
from .isolation import AbortedFilter

__all__ = ["clean", "maybe_clean", "cleanable", "CleanResult", "LogToClean", "CHECKPOINT_FILE", "WORK_DIR",
           "CLEANER_BACKOFF_MS", "SWAP_FILE_RE"]

logger = logging.getLogger("seglog.cleaner")

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
WORK_DIR = ".cleaner"                  # per-partition scratch directory; each pass writes in its own subdirectory
SWAP_FILE_RE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)\.swap$")
CLEANER_BACKOFF_MS = 15_000            # Kafka's log.cleaner.backoff.ms: between checks of one log
MAX_MAP_KEYS = 1_000_000               # keys in one pass's offset map (~120 MB with 30-byte keys)
MAX_DIRTY_BYTES = 256 << 20            # dirty bytes mapped by one pass
READ_CHUNK_BYTES = 1 << 20
WRITE_CHUNK_BYTES = 1 << 20
INT32_MAX = (1 << 31) - 1


# ------------------------------------------------------------------------------------------------- results

@dataclasses.dataclass
class CleanResult:
    """What one pass did. ``aborted`` names why it stopped early without finishing (the log changed under it);
    ``capped`` says the offset map bound stopped it before the first uncleanable offset."""
    first_dirty: int
    map_end: int
    first_uncleanable: int
    groups: int = 0
    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0
    keyless_dropped: int = 0
    empty_batches_kept: int = 0
    aborted_dropped: int = 0          # records of aborted transactions removed
    markers_removed: int = 0          # transaction markers removed past their delete horizon
    keys_mapped: int = 0
    capped: bool = False
    aborted: str | None = None
    seconds: float = 0.0


@dataclasses.dataclass
class _Seg:
    base: int
    upper: int                 # the next segment's base offset: every offset here is below it
    size: int
    ident: tuple               # (device, inode, size, mtime ns) of the .log when the pass started
    index_bytes: int
    timeindex_bytes: int


@dataclasses.dataclass
class LogToClean:
    """The cleanable range of a log (Kafka's LogToClean): sealed segments below the first uncleanable offset."""
    first_dirty: int
    first_uncleanable: int
    segments: list
    clean_bytes: int
    dirty_bytes: int
    needs_compaction_now: bool           # max.compaction.lag.ms has passed for some dirty data
    first_base: int                      # the log's first segment at planning time
    producers: dict                      # producer id -> last offset it wrote (batches to retain)

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def should_clean(self, min_ratio: float) -> bool:
        """Kafka's rule: the max compaction lag forces a pass over any dirty bytes; else the ratio must exceed
        min.cleanable.dirty.ratio."""
        return (self.needs_compaction_now and self.dirty_bytes > 0) or self.dirty_ratio > min_ratio


class _Aborted(Exception):
    """The log changed under the pass (segments truncated, deleted or replaced); nothing was swapped."""


class _State:
    __slots__ = ("lock", "last_check_ms", "uncleanable", "last_result")

    def __init__(self):
        self.lock = threading.Lock()
        self.last_check_ms: int | None = None
        self.uncleanable: str | None = None
        self.last_result: CleanResult | None = None


_states: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_states_lock = threading.Lock()
_pass_ids = itertools.count()


def _state(log) -> _State:
    with _states_lock:
        st = _states.get(log)
        if st is None:
            st = _states[log] = _State()
        return st


def last_result(log) -> CleanResult | None:
    """The result of the last pass that ran on this Log object (None if none ran)."""
    return _state(log).last_result


def uncleanable_reason(log) -> str | None:
    """Why maybe_clean() gave up on this Log object after an unexpected error (None if it did not)."""
    return _state(log).uncleanable


# --------------------------------------------------------------------------------------------- checkpoint

def _checkpoint_path(log) -> str:
    return os.path.join(log.path, CHECKPOINT_FILE)


def _checkpoint_key(log) -> tuple[str, int]:
    topic = log.topic if log.topic else os.path.basename(os.path.normpath(log.path))
    return topic, log.partition


def read_first_dirty(log) -> int | None:
    """The first dirty offset stored in the partition's cleaner checkpoint (None: none, or unreadable)."""
    try:
        rows = read_checkpoint(_checkpoint_path(log), 3)
    except (CorruptCheckpointError, StorageError) as e:
        logger.warning("%s: cleaner checkpoint unreadable (%s); cleaning from the log start", log.path, e)
        return None
    topic, partition = _checkpoint_key(log)
    for t, p, off in rows or ():
        if t == topic and p == str(partition):
            try:
                return int(off)
            except ValueError:
                return None
    return None


def _write_first_dirty(log, offset: int) -> None:
    topic, partition = _checkpoint_key(log)
    write_checkpoint(_checkpoint_path(log), [(topic, partition, offset)])


# ------------------------------------------------------------------------------------------------ planning

def _check_open(log) -> None:
    """Raise unless the log is open for writing. Unlike Log._check_writable() it does not count as a change
    (that would drop a kept clean-shutdown marker): planning and reading change nothing; the swap itself goes
    through Log.replace_segments, which does."""
    if log._closed:
        raise LogClosedError(f"log {log.path} is closed")
    if log.readonly:
        raise ReadOnlyLogError(f"log {log.path} is open read-only")


def _ident(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _size_or_zero(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def cleanable(log, now_ms: int | None = None) -> LogToClean | None:
    """The log's cleanable range now (see the module docstring, step 1), or None when the segment list changed
    while it was being read (try again later). Raises LogClosedError, ReadOnlyLogError."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cfg = log.config
    with log._lock:
        _check_open(log)
        bases = list(log._local.bases)
        active = log._local.active.base_offset
        hw = log._last_stable_offset_locked()      # never past an undecided transaction (Kafka: firstUnstableOffset)
        start, end = log.start_offset, log.end_offset
        producers = {pid: e.last_offset for pid, e in log._producers.entries.items() if e.batches}
    first_dirty = read_first_dirty(log)
    if first_dirty is None or first_dirty < start or first_dirty > end:
        first_dirty = start
    segs: list[_Seg] = []
    for i, base in enumerate(bases):
        if base == active or i + 1 >= len(bases) or bases[i + 1] > hw:
            break
        stem = os.path.join(log.path, _engine.segment_name(base))
        ident = _ident(stem + ".log")
        if ident is None:
            return None
        segs.append(_Seg(base, bases[i + 1], ident[2], ident, _size_or_zero(stem + ".index"),
                         _size_or_zero(stem + ".timeindex")))
    min_lag, lag_cutoff = cfg.min_compaction_lag_ms, now - cfg.max_compaction_lag_ms
    needs_now = False
    if min_lag > 0 or lag_cutoff > 0:
        with log._lock:
            _check_open(log)
            if bases != log._local.bases:
                return None
            if min_lag > 0:        # the first dirty segment with data newer than min.compaction.lag.ms stops it
                for i, s in enumerate(segs):
                    if s.upper > first_dirty and log._local.segment(s.base).largest_timestamp > now - min_lag:
                        del segs[i:]
                        break
            if lag_cutoff > 0:     # Kafka: the earliest first-batch timestamp of the dirty non-active segments
                for base in bases[max(bisect.bisect_right(bases, first_dirty) - 1, 0):]:
                    if base == active:
                        break
                    seg = log._local.segment(base)
                    if seg.size:
                        ts = _engine.batches(seg.read(0, 1)[0], False)[0].max_timestamp
                        if 0 < ts < lag_cutoff:
                            needs_now = True
                            break
    first_uncleanable = segs[-1].upper if segs else (bases[0] if bases else first_dirty)
    clean_bytes = sum(s.size for s in segs if s.base < first_dirty)
    dirty_bytes = sum(s.size for s in segs if s.upper > first_dirty)
    return LogToClean(first_dirty, first_uncleanable, segs, clean_bytes, dirty_bytes, needs_now,
                      bases[0] if bases else 0, producers)


# ------------------------------------------------------------------------------------------------- entry points

def maybe_clean(log, now_ms: int | None = None) -> CleanResult | None:
    """Log.maintain()'s hook: at most one check per CLEANER_BACKOFF_MS per log; a pass only when the dirty ratio
    or max.compaction.lag.ms asks for one. Never raises: an unexpected error is logged and marks this Log object
    uncleanable (Kafka's uncleanable partitions). Returns the pass's result, or None when none ran."""
    st = _state(log)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if st.uncleanable is not None:
        return None
    if st.last_check_ms is not None and st.last_check_ms <= now < st.last_check_ms + CLEANER_BACKOFF_MS:
        return None
    if not st.lock.acquire(blocking=False):
        return None
    try:
        st.last_check_ms = now
        ltc = cleanable(log, now)
        if ltc is None or not ltc.should_clean(log.config.min_cleanable_dirty_ratio):
            return None
        result = _run_pass(log, ltc, now, MAX_MAP_KEYS, MAX_DIRTY_BYTES)
        st.last_result = result
        if result.capped and result.aborted is None:
            st.last_check_ms = None              # more dirty data than one pass takes: continue next tick
        return result
    except (LogClosedError, ReadOnlyLogError):
        return None
    except Exception as e:
        st.uncleanable = f"{type(e).__name__}: {e}"
        logger.exception("%s: compaction failed; not cleaning this log again until it is reopened", log.path)
        return None
    finally:
        st.lock.release()


def clean(log, now_ms: int | None = None, *, max_map_keys: int | None = None,
          max_dirty_bytes: int | None = None) -> CleanResult:
    """Run one compaction pass now, whatever the dirty ratio (waits for a pass already running on this log).
    ``now_ms`` is the cleaner's clock (delete horizons, compaction lags). Returns a CleanResult; one whose
    ``aborted`` is set changed nothing. Raises InvalidArgumentError if cleanup.policy lacks compact,
    LogClosedError, ReadOnlyLogError, StorageError, CorruptRecordError (a corrupt batch in a cleanable segment)."""
    if not log.config.compact:
        policy = ",".join(log.config.cleanup_policy)
        raise InvalidArgumentError(f"log {log.path} is not compacted (cleanup.policy={policy})")
    keys = MAX_MAP_KEYS if max_map_keys is None else max_map_keys
    nbytes = MAX_DIRTY_BYTES if max_dirty_bytes is None else max_dirty_bytes
    if keys < 1 or nbytes < 1:
        raise InvalidArgumentError("max_map_keys and max_dirty_bytes must be positive")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    st = _state(log)
    with st.lock:
        ltc = cleanable(log, now)
        if ltc is None:
            result = CleanResult(-1, -1, -1, aborted="segment list changed while planning")
        else:
            result = _run_pass(log, ltc, now, keys, nbytes)
        st.last_result = result
        return result


# --------------------------------------------------------------------------------------------------- the pass

def _chunks(log, seg: _Seg, position: int = 0):
    """(view, next_offset) of whole batches of one sealed segment from `position`, ~1 MiB at a time. Takes the
    log lock per chunk; raises _Aborted if the segment left the log or the log closed."""
    pos = position
    while True:
        with log._lock:
            if log._closed:
                raise _Aborted("log closed")
            if seg.base not in log._local.bases or seg.base == log._local.active.base_offset:
                raise _Aborted(f"segment {seg.base} left the log")
            s = log._local.segment(seg.base)
            if pos >= s.size:
                return
            view, pos, next_offset = s.read(pos, READ_CHUNK_BYTES)
        if next_offset < 0:
            return
        yield view, next_offset


def _position_of(log, seg: _Seg, offset: int) -> int:
    with log._lock:
        if log._closed:
            raise _Aborted("log closed")
        if seg.base not in log._local.bases:
            raise _Aborted(f"segment {seg.base} left the log")
        pos = log._local.segment(seg.base).find_position(offset)
    return pos


def _run_pass(log, ltc: LogToClean, now: int, max_keys: int, max_bytes: int) -> CleanResult:
    """Steps 2-6 of the module docstring over the range `ltc`. _Aborted becomes ``result.aborted``; other errors
    propagate. The pass's scratch directory is its own, so a pass of a Log closed meanwhile (and reopened by a
    new Log object) cannot disturb the new one's."""
    t0 = time.perf_counter()
    res = CleanResult(ltc.first_dirty, ltc.first_dirty, ltc.first_uncleanable)
    work = os.path.join(log.path, WORK_DIR, f"{os.getpid()}-{next(_pass_ids)}")
    try:
        offset_map, map_end, last_mapped = _build_offset_map(log, ltc, max_keys, max_bytes, res)
        res.map_end = map_end
        res.keys_mapped = len(offset_map)
        upto = map_end if last_mapped is not None else ltc.first_uncleanable
        to_clean = [s for s in ltc.segments if s.base < upto]
        groups = _group_segments(to_clean, log.config)
        txns = _Transactions(now, log.config.delete_retention_ms, res)     # in offset order across the groups
        for group in groups:
            _clean_group(log, work, group, offset_map, map_end, last_mapped, ltc, now, res, txns)
            res.groups += 1
        if last_mapped is not None:
            with log._lock:
                _check_open(log)
                _write_first_dirty(log, map_end)
    except _Aborted as e:
        res.aborted = str(e)
        logger.info("%s: compaction pass aborted: %s", log.path, e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(work))
        except OSError:
            pass                                   # another pass's directory is in it, or it is gone
        res.seconds = time.perf_counter() - t0
    if res.aborted is None and res.groups:
        logger.info("%s: compacted %d segments into %d (%d -> %d bytes, %d of %d records kept) in %.3f s",
                    log.path, res.segments_in, res.segments_out, res.bytes_in, res.bytes_out, res.records_kept,
                    res.records_read, res.seconds)
    return res


def _build_offset_map(log, ltc: LogToClean, max_keys: int, max_bytes: int, res: CleanResult):
    """key -> latest offset over the dirty section, from first_dirty on. Returns (map, map_end, last mapped
    segment or None when nothing was mapped)."""
    offset_map: dict = {}
    map_end = ltc.first_dirty
    last_mapped = None
    read = 0
    first = ltc.first_dirty
    aborted = AbortedFilter(log.aborted_transactions(first, ltc.first_uncleanable))
    for seg in ltc.segments:
        if seg.upper <= first:
            continue
        pos = _position_of(log, seg, first) if seg.base < first else 0
        if pos < 0:                           # nothing at or after first_dirty in this segment
            map_end, last_mapped = seg.upper, seg
            continue
        for view, next_offset in _chunks(log, seg, pos):
            if len(offset_map) >= max_keys or read >= max_bytes:
                res.capped = True
                return offset_map, map_end, last_mapped
            for run in aborted.runs(view):       # records of aborted transactions never supersede a key
                _engine.compaction_map_keys(run, first, offset_map, log.path)
            read += len(view)
            map_end, last_mapped = next_offset, seg
        map_end, last_mapped = seg.upper, seg
    return offset_map, map_end, last_mapped


def _group_segments(segs: list, cfg) -> list[list]:
    """Consecutive segments whose .log files fit in segment.bytes, whose indexes fit in segment.index.bytes,
    and whose offsets stay within int32 of the group's first base offset (Kafka's groupSegmentsBySize)."""
    groups, i = [], 0
    while i < len(segs):
        group = [segs[i]]
        size, isize, tsize = segs[i].size, segs[i].index_bytes, segs[i].timeindex_bytes
        i += 1
        while i < len(segs):
            s = segs[i]
            if size + s.size > cfg.segment_bytes or isize + s.index_bytes > cfg.segment_index_bytes \
                    or tsize + s.timeindex_bytes > cfg.segment_index_bytes \
                    or (s.size and s.upper - 1 - group[0].base > INT32_MAX):
                break
            group.append(s)
            size, isize, tsize = size + s.size, isize + s.index_bytes, tsize + s.timeindex_bytes
            i += 1
        groups.append(group)
    return groups


def _clean_group(log, work: str, group: list, offset_map: dict, map_end: int, last_mapped, ltc: LogToClean,
                 now: int, res: CleanResult, txns: "_Transactions") -> None:
    cfg = log.config
    base = group[0].base
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out_seg = _engine.Segment(work, base, index_interval_bytes=cfg.index_interval_bytes,
                              max_index_bytes=cfg.segment_index_bytes, create=True)
    try:
        filt = _BatchFilter(offset_map, map_end, now, cfg.delete_retention_ms, ltc.producers, res)
        aborted = AbortedFilter(log.aborted_transactions(base, group[-1].upper))
        out = bytearray()
        for seg in group:
            res.bytes_in += seg.size
            for view, _ in _chunks(log, seg):
                for run in aborted.runs(view, keep_control=True):     # aborted data goes
                    txns.filter_into(run, out, filt, log.path)
                if len(out) >= WRITE_CHUNK_BYTES:
                    out_seg.append(out)
                    del out[:]
        if out:
            out_seg.append(out)
        res.aborted_dropped += aborted.dropped_records
        out_seg.seal()
        size = out_seg.size
    finally:
        out_seg.close()
    res.segments_in += len(group)
    keep_empty = base == ltc.first_base           # the log's first segment keeps the start offset in place
    new_base = base if size or keep_empty else None
    stem = os.path.join(log.path, _engine.segment_name(base))
    if new_base is not None:
        work_stem = os.path.join(work, _engine.segment_name(base))
        for suffix in (".index", ".timeindex", ".log"):
            _engine.file_rename(work_stem + suffix, stem + suffix + ".cleaned")
        mtime = group[-1].ident[3]                 # as Kafka: the cleaned file keeps the last old file's mtime
        os.utime(stem + ".log.cleaned", ns=(mtime, mtime))
    checks = [(os.path.join(log.path, _engine.segment_name(s.base) + ".log"), s.ident) for s in group]
    if last_mapped is not None and last_mapped not in group:
        checks.append((os.path.join(log.path, _engine.segment_name(last_mapped.base) + ".log"), last_mapped.ident))

    def unchanged() -> bool:
        return all(_ident(path) == ident for path, ident in checks)

    try:
        swapped = log.replace_segments([s.base for s in group], new_base, unchanged)
    except BaseException:
        _unlink_cleaned(stem)
        raise
    if not swapped:
        _unlink_cleaned(stem)
        raise _Aborted(f"segments {group[0].base}..{group[-1].upper - 1} changed while being cleaned")
    res.bytes_out += size
    res.segments_out += new_base is not None


def _unlink_cleaned(stem: str) -> None:
    for suffix in (".index", ".timeindex", ".log"):
        try:
            _engine.file_unlink(stem + suffix + ".cleaned")
        except FileNotFoundError:
            pass


def remove_work_dir(path: str) -> None:
    """Delete the cleaner's scratch directory of a partition directory (log_loader, at open)."""
    shutil.rmtree(os.path.join(path, WORK_DIR), ignore_errors=True)


class _BatchFilter:
    """Applies the record and batch rules of the module docstring (step 4) to whole batches: decoding,
    filtering and re-encoding are the engine's (compact.pxi), per batch, with no Python object per record."""

    def __init__(self, offset_map: dict, map_end: int, now: int, delete_retention_ms: int, producers: dict,
                 res: CleanResult):
        self.map = offset_map
        self.map_end = map_end
        self.now = now
        self.new_horizon = now + delete_retention_ms
        self.producers = producers
        self.res = res

    def filter_into(self, view, out: bytearray, path: str) -> None:
        """Filter the whole batches of `view` into `out` (the engine's compaction_filter) and count."""
        read, kept, keyless, tombstones, empties = _engine.compaction_filter(
            view, out, self.map, self.map_end, self.now, self.new_horizon, self.producers, path)
        res = self.res
        res.records_read += read
        res.records_kept += kept
        res.keyless_dropped += keyless
        res.tombstones_dropped += tombstones
        res.empty_batches_kept += empties


class _Transactions:
    """One pass's view of transactions, fed every kept batch in offset order (Kafka's
    CleanedTransactionMetadata): the producers whose current transaction still has a batch in the cleaned
    output, and what becomes of each marker (see the module docstring, step 4)."""

    def __init__(self, now: int, delete_retention_ms: int, res: CleanResult):
        self.now = now
        self.new_horizon = now + delete_retention_ms
        self.res = res
        self.with_data: set[int] = set()

    def filter_into(self, view, out: bytearray, filt: _BatchFilter, path: str) -> None:
        """Data batches of `view` through `filt`, markers by the rules, into `out`."""
        start = None
        transactional = False
        for b in _engine.batches(view, False):
            if not b.is_control:
                if start is None:
                    start = b.position
                transactional |= b.is_transactional
                continue
            if start is not None:
                self._data(view[start:b.position], out, filt, path, transactional)
                start, transactional = None, False
            self._marker(view, b, out)
        if start is not None:
            self._data(view[start:], out, filt, path, transactional)

    def _data(self, view, out: bytearray, filt: _BatchFilter, path: str, transactional: bool) -> None:
        before = len(out)
        filt.filter_into(view, out, path)
        if transactional:       # which transactions keep a batch (an emptied one kept for its sequence counts)
            self.with_data.update(b.producer_id for b in _engine.batches(bytes(out[before:]), False)
                                  if b.is_transactional)

    def _marker(self, view, b, out: bytearray) -> None:
        commit, coordinator_epoch = _engine.control_marker(view, b.position)
        had_data = b.producer_id in self.with_data
        self.with_data.discard(b.producer_id)
        if had_data or commit is None:
            out += view[b.position:b.position + b.size]
        elif b.attributes & 0x40:                  # its delete horizon is set: removed once it has passed
            if self.now >= b.base_timestamp:
                self.res.markers_removed += 1
            else:
                out += view[b.position:b.position + b.size]
        else:
            out += _engine.control_batch(b.producer_id, b.producer_epoch, commit, coordinator_epoch, b.max_timestamp,
                                         b.base_offset, b.leader_epoch, self.new_horizon)


# ------------------------------------------------------------------------------------------- swap recovery

def swap_next_offset(path: str, base: int) -> int:
    """Last offset + 1 of the batches in a .log.swap file (base when it is empty): the end of the range of old
    segments a swap replaces (log_loader.complete_interrupted_swaps). Batch headers only; CRCs are checked by the
    usual recovery and reads."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return base
        with mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as m:
            infos = _engine.batches(m, False)
            return infos[-1].next_offset if infos else base
