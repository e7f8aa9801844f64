"""Opening a partition directory (Kafka's LogLoader): clean-up, recovery, index rebuild, the state checkpoint.

``load(local)`` runs once, before the Log is shared (no lock needed): it removes temporary files, completes
segment swaps a crash cut short (log compaction), drops indexes without their .log, reads
``log-state-checkpoint`` (recovery point, log start offset, high watermark), and after a crash (no
``.clean-shutdown`` marker) rescans every segment from the recovery point on: the .log is cut at the first
invalid batch, later segments are deleted, indexes are rebuilt. It leaves ``local`` with its segment list and
an active segment (a read-only one's tail not yet scanned: the Log reads the journal first), and returns the
checkpoint's offsets for the Log to reconcile with the journal, the leader epochs and the producer state. A
read-only open changes nothing on disk.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os
import time
from typing import NamedTuple

from . import _engine
from . import cleaner as _cleaner
from .checkpoints import CorruptCheckpointError, fsync_dir, read_checkpoint, storage_errors, write_checkpoint
from .errors import StorageError
from .local_log import LocalLog, listed_bases, segment_bases, unlink_all

__all__ = ["RecoveryReport", "Loaded", "load", "read_state", "write_state", "STATE_FILE", "CLEAN_SHUTDOWN_FILE"]

log = logging.getLogger("seglog.log")

STATE_FILE = "log-state-checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
JOURNAL_FILE = ".append-journal"     # append()'s buffered records, as they survive kill -9 (engine journal.pxi)
_TEMP_SUFFIXES = (".deleted", ".trunc", ".cleaned", ".tmp")


@dataclasses.dataclass
class RecoveryReport:
    """What opening the log had to repair (all zero after a clean shutdown with a readable checkpoint)."""
    clean_shutdown: bool
    segments_scanned: int = 0
    bytes_scanned: int = 0
    bytes_truncated: int = 0
    segments_deleted: int = 0
    corruption: str | None = None        # the first invalid batch found: why, where
    indexes_rebuilt: int = 0
    corrupt_checkpoint: bool = False     # the state checkpoint did not parse: every segment was rescanned
    promised_end_offset: int = 0         # the end the checkpoint vouches for: max(recovery point, high watermark)
    lost_offsets: int = 0                # offsets below promised_end_offset the log no longer holds (damage or
                                         # deleted files: the data is gone, a replica must fetch it again)
    journal_records: int = 0             # records append() had returned before a crash, written from the journal


class Loaded(NamedTuple):
    """The checkpoint as load() found it (offsets not yet reconciled with the segments' end)."""
    clean: bool                          # the clean-shutdown marker was there (and the checkpoint parsed)
    recovery_point: int
    start_offset: int
    high_watermark: int | None
    state: dict[str, int]                # the checkpoint's entries as read ({} if missing or unparsable)


def read_state(path: str) -> dict[str, int] | None:
    """The state checkpoint's entries in directory `path` ({} before the first one is written); None if it does
    not parse."""
    try:
        rows = read_checkpoint(os.path.join(path, STATE_FILE), 2) or []
        return {k: int(v) for k, v in rows}
    except (CorruptCheckpointError, ValueError):
        return None


def write_state(path: str, recovery_point: int, start_offset: int, high_watermark: int | None) -> float:
    """Write the state checkpoint atomically (fsynced, directory too); returns the monotonic time it was
    written. Raises StorageError."""
    entries = [("recovery-point", recovery_point), ("log-start-offset", start_offset)]
    if high_watermark is not None:
        entries.append(("high-watermark", high_watermark))
    write_checkpoint(os.path.join(path, STATE_FILE), entries)
    return time.monotonic()


def load(local: LocalLog) -> Loaded:
    """Open the directory's segments into `local` (see the module docstring); sets ``local.recovery``.
    Raises StorageError (an unreadable directory; a read-only open of a directory without segments)."""
    path, readonly = local.path, local.readonly
    if readonly:
        local.bases = listed_bases(path)     # the writer may be rolling: one listing can miss a segment
    else:
        with storage_errors("cannot list log directory", path):
            names = os.listdir(path)
        unlink_all([os.path.join(path, name) for name in names if name.endswith(_TEMP_SUFFIXES)])
        if complete_interrupted_swaps(path, names):
            with storage_errors("cannot list log directory", path):
                names = os.listdir(path)
        local.bases = segment_bases(names)
        # indexes whose .log is gone (deleted files, damage) would be taken up by a new segment at that base
        logs = {f"{b:020d}" for b in local.bases}
        orphans = [name for name in names if name.endswith((".index", ".timeindex", ".txnindex"))
                   and name.split(".", 1)[0] not in logs]
        if orphans:
            log.warning("%s: deleting %d index files without their .log: %s", path, len(orphans),
                        ", ".join(sorted(orphans)[:5]))
            unlink_all([os.path.join(path, name) for name in orphans])
    state = read_state(path)
    marker = os.path.join(path, CLEAN_SHUTDOWN_FILE)
    clean = os.path.exists(marker)
    report = local.recovery = RecoveryReport(clean_shutdown=clean)
    if state is None:
        state = {}
        report.corrupt_checkpoint = True
        if readonly:
            log.warning("%s: %s does not parse; reading on with the log start offset at the first segment's "
                        "base and the high watermark at the log end", path, STATE_FILE)
        else:
            # the recovery point, log start offset and high watermark are lost: recover as after a crash
            # (every segment rescanned, since the recovery point falls back to 0) and write a new checkpoint
            log.warning("%s: %s does not parse; rescanning every segment, taking the first segment's base as "
                        "the log start offset and the log end as the high watermark, and writing a new "
                        "checkpoint", path, STATE_FILE)
            if clean:
                unlink_all([marker])
                fsync_dir(path)
                clean = False
    recovery_point = state.get("recovery-point", 0)
    start = state.get("log-start-offset", 0)
    hw = state.get("high-watermark")
    report.promised_end_offset = max(recovery_point, hw or 0)
    if readonly:
        if not local.bases:
            raise StorageError("not a seglog/Kafka partition directory: no segment files", path)
        local.active = local.segment(local.bases[-1], check=False)
        local.open_segments.pop(local.active.base_offset, None)
        return Loaded(clean, recovery_point, start, hw, state)   # the Log reads the journal, then scans the tail
    if not clean and local.bases:
        recovery_point = _recover(local, recovery_point)
    if local.bases:
        seg = local.segment(local.bases[-1], check=False)
        local.open_segments.pop(seg.base_offset, None)
        if clean:
            try:
                local.check_or_rebuild(seg, active=True)
            except BaseException:
                seg.close()
                raise
    else:
        local.bases = [max(start, 0)]
        seg = local.new_segment(local.bases[0])
    local.take_active(seg)
    return Loaded(clean, recovery_point, start, hw, state)


def _recover(local: LocalLog, recovery_point: int) -> int:
    """Rescan segments from the one holding the recovery point; cut at the first invalid batch, delete the
    segments after it and an emptied tail segment. Returns the new recovery point (the log's end)."""
    rep = local.recovery
    bases = local.bases
    first = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
    for i in range(first, len(bases)):
        seg = local.segment(bases[i], check=False)
        rep.segments_scanned += 1
        rep.bytes_scanned += seg.size
        truncated, reason = seg.recover()
        if i < len(bases) - 1:
            seg.seal()                            # a sealed segment's indexes are trimmed, as at its roll
        rep.indexes_rebuilt += 1
        rep.bytes_truncated += truncated
        if reason is not None:
            rep.corruption = f"{reason} at position {seg.size} of {seg.log_path}"
            later = bases[i + 1:]
            log.warning("%s: recovery cut %d bytes at %s; deleting %d later segments",
                        local.path, truncated, rep.corruption, len(later))
            local.delete_segments(later, delay=False)
            rep.segments_deleted += len(later)
            break
    # an emptied tail segment that is not the first is dropped, so the log ends on real data
    while len(local.bases) > 1 and local.segment(local.bases[-1]).size == 0:
        local.delete_segments([local.bases[-1]], delay=False)
    return local.segment(local.bases[-1]).next_offset


def complete_interrupted_swaps(path: str, names: list[str]) -> bool:
    """At open: finish swaps a crash cut short (see Log.replace_segments). A ``<base>.log.swap`` is a complete
    cleaned segment: segments whose base offset lies in [base, its last offset + 1) are deleted, then its
    .swap files take their final names (an index without a .swap is deleted, to be rebuilt from the .log:
    it may be the replaced segment's). Index .swap files without a .log.swap are from a swap that never
    committed: deleted. The cleaner's work directory goes too. Returns True if segment files changed."""
    _cleaner.remove_work_dir(path)
    swaps = {}
    for name in names:
        m = _cleaner.SWAP_FILE_RE.match(name)
        if m:
            swaps.setdefault(int(m.group(1)), set()).add(m.group(2))
    if not swaps:
        return False
    bases = segment_bases(names)
    for base, kinds in sorted(swaps.items()):
        stem = os.path.join(path, _engine.segment_name(base))
        if "log" not in kinds:
            unlink_all([stem + "." + kind + ".swap" for kind in kinds])
            continue
        end = max(_cleaner.swap_next_offset(stem + ".log.swap", base), base + 1)
        for b in bases:
            if base <= b < end:
                other = os.path.join(path, _engine.segment_name(b))
                unlink_all([other + ".log", other + ".index", other + ".timeindex", other + ".txnindex"])
        for kind in ("index", "timeindex", "txnindex", "log"):
            if kind in kinds:
                with storage_errors("cannot complete a segment swap", stem + "." + kind + ".swap"):
                    _engine.file_rename(stem + "." + kind + ".swap", stem + "." + kind)
        log.warning("%s: completed an interrupted segment swap: segment %d replaces offsets [%d, %d)",
                    path, base, base, end)
    fsync_dir(path)
    return True
