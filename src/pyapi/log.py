"""Log: one partition's log (Kafka's UnifiedLog): offsets, high watermark, leader epochs, producer state,
retention, the compaction swap and its scheduling, over the segments of ``local_log.LocalLog``, opened by
``log_loader.load`` (clean-up, recovery, index rebuild, checkpoints).

This module holds opening, the offsets, durability and the hot paths (append, append_batch, append_raw,
read, read_next, records, get). The rest of the class comes from one base class per concern, each in its
module: ``log_transactions`` (producer state, markers, last stable offset), ``log_retention`` (retention,
DeleteRecords, maintenance scheduling, the compaction swap), ``log_replica`` (leader epochs, follower
appends, truncation), ``log_timestamps`` (lookups by time), ``log_readonly`` (a reader in another process).
The bases hold methods only; every attribute is set by ``Log.__init__`` and its loading.

A partition directory holds segments named by their 20-digit base offset (``.log`` record batches, ``.index``,
``.timeindex``), plus ``log-state-checkpoint`` (recovery point, log start offset, high watermark),
``leader-epoch-checkpoint`` and, while the log is closed cleanly, ``.clean-shutdown``.

Offsets: ``start_offset <= high_watermark <= end_offset`` (end = last offset + 1). ``append`` assigns offsets
at once; records it buffers are written as a batch when the buffer fills, when anything reads, flushes or
closes the log, so readers of the same Log see every appended record immediately.

Durability: an offset returned is an offset kept. Whatever ``append``, ``append_batch``, ``append_raw`` have
returned survives the process being killed (kill -9, a crash): batches are in the segment files' page cache,
and the records ``append`` buffers are mirrored at every call into ``.append-journal`` (engine journal.pxi),
which the next open replays. A power loss or kernel crash keeps only what ``flush()``/``close()`` (or the
flush.messages / flush.ms policy, and every segment roll) fsynced; the recovery point marks how far that is.
On open after a crash (no clean-shutdown marker) every segment from the recovery point on is rescanned: the
.log is cut at the first invalid batch, later segments are deleted, indexes are rebuilt; then the journal's
records that continue the log are written. Reads never return a partial or corrupt batch.

Concurrency: one writer and many readers per Log object, in any threads (one lock, held briefly, guards
the segment list and the buffered batch; a read holds it for the position and the batches' framing, and checks
their CRCs after releasing it). One process owns a directory for writing (an flock on ``.lock``); other
processes may open it with ``readonly=True`` and see a consistent prefix (``refresh()`` to see more), which
includes the records ``append`` has returned but not yet written to a segment (read from the journal).
The Log's lock also guards its LocalLog, which has none of its own. Unless a method says otherwise it holds
the lock for its whole call; property getters of a single value (start_offset, end_offset, high_watermark,
recovery_point, leader_epoch) read it without the lock (an atomic read of one attribute).
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import re
import threading
import time
from typing import Iterator, Sequence

from . import _engine
from . import log_loader
from .checkpoints import fsync_dir, storage_errors
from .config import LogConfig
from .errors import (InvalidArgumentError, CorruptRecordError, LogClosedError, OffsetOutOfRangeError,
                     ReadOnlyLogError, RecordTooLargeError, SeglogError, StorageError)
from .isolation import AbortedFilter
from .leader_epochs import LeaderEpochCache
from .local_log import INT64_MAX as _INT64_MAX, LocalLog, unlink_all
from .log_args import int_arg as _int_arg
from .log_future import LogFuture
from .log_loader import CLEAN_SHUTDOWN_FILE, JOURNAL_FILE, STATE_FILE, RecoveryReport
from .log_readonly import LogReadonly, read_batches as _read_batches
from .log_replica import LogReplica
from .log_retention import LogRetention
from .log_timestamps import LogTimestamps, TimestampOffset
from .log_transactions import LogTransactions
from .producer_state import ProducerStateManager
from .txn_index import AbortedTxn
from .scheduler import Scheduler, default_scheduler

__all__ = ["Log", "Record", "TimestampOffset", "RecoveryReport", "CLEAN_SHUTDOWN_FILE", "STATE_FILE", "AbortedTxn",
           "READ_UNCOMMITTED", "READ_COMMITTED"]

log = logging.getLogger("seglog.log")

Record = _engine.Record
PENDING_BATCH_BYTES = 16 * 1024      # per-record appends are written as batches of about this size
APPEND_BATCH_BYTES = 64 * 1024       # append_batch() cuts its records into batches of about this size
APPEND_CHUNK_BYTES = 4 << 20         # ... and writes them this many bytes at a time from a reused buffer
READ_CHUNK_BYTES = 1 << 20           # records() reads this much per step
CHECKPOINT_INTERVAL_S = 60.0         # flush() rewrites the recovery point at most this often (roll/close always)
_PARTITION_DIR_RE = re.compile(r"^(.+)-(\d+)$")
_INT32_MAX = (1 << 31) - 1
READ_UNCOMMITTED = "read_uncommitted"    # isolation levels, as Kafka's consumer config names them
READ_COMMITTED = "read_committed"


class Log(LogTransactions, LogRetention, LogReplica, LogTimestamps, LogReadonly, LogFuture):
    """One partition log. See the module docstring for the files, offsets, durability and locking rules.

    ``Log(path, config)`` opens or creates the directory. ``readonly=True`` opens another process's log
    without writing anything (no recovery; the valid prefix of the last segment is found by CRC).
    Time-based work (flush.ms, retention checks every ``retention_check_interval_ms``, delayed deletion)
    runs on ``scheduler`` (the process-wide one by default); ``maintain()`` runs it on demand.
    """

    def __init__(self, path: str | os.PathLike, config: LogConfig | None = None, *, readonly: bool = False,
                 create: bool = True, topic: str | None = None, partition: int | None = None,
                 max_open_segments: int = 64, retention_check_interval_ms: int = 300_000,
                 scheduler: Scheduler | None = None):
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._closed = True
        self._writer = None
        self._journal = None               # append()'s journal (writable logs, opened at the first append)
        self._tail = None                  # read-only logs: (base offset, bytes) of the batches read from the journal
        self._batch_writers: dict = {}
        self._points = _engine.BatchCache()   # get()'s recently read batches; cleared when bytes under them change
        self._task = None                  # the periodic maintain() (writable logs), run every _task_interval s
        self._task_interval = None
        self._retention_check_s = retention_check_interval_ms / 1000
        self.readonly = readonly
        # the segments; the config setter below hands it the validated config
        self._local = LocalLog(self.path, config, readonly=readonly, max_open=max_open_segments,
                               scheduler=scheduler)
        self.config = config or LogConfig()
        if max_open_segments < 1:
            raise InvalidArgumentError("max_open_segments must be at least 1")
        m = _PARTITION_DIR_RE.match(os.path.basename(os.path.normpath(self.path)))
        self.topic = topic if topic is not None else (m.group(1) if m else None)
        self.partition = partition if partition is not None else (int(m.group(2)) if m else -1)
        self._hw: int | None = None
        self._unflushed = 0
        self._last_flush = time.monotonic()
        self._last_checkpoint = 0.0
        self._scheduler = scheduler
        self._leader_epoch = 0
        self._marker_kept = False          # the clean-shutdown marker stays until the first change
        self._dirty = False                # something to checkpoint at close
        self._jitter_for = None            # the segment the roll jitter was drawn for (see _roll_ms)
        self._jitter_ms = 0
        self._open(create)
        self._closed = False
        if not readonly:
            self._scheduler = self._local.scheduler = scheduler or default_scheduler()
            self._schedule_maintenance()

    @property
    def config(self) -> LogConfig:
        """The log's settings. Assigning another LogConfig (a topic's config altered) applies it in full from
        the next call on: records append() buffered so far are written first, as a batch under the old
        settings; then every writer the log holds takes the new ones (_configure_writer: max.message.bytes,
        the batch size budget, message.timestamp.type and the timestamp window, flush.messages, the key rule of
        compaction), the flush.ms / cleaner timer is rescheduled, and retention, roll (segment.bytes,
        segment.ms) and flush decisions read the config as they are made. Index settings apply to segments
        created later, as in Kafka. Raises InvalidArgumentError for anything but a LogConfig, StorageError if
        the buffered records cannot be written."""
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        if not isinstance(config, LogConfig):
            raise InvalidArgumentError(f"config must be a LogConfig, not {type(config).__name__}")
        with self._lock:
            if not self._closed:
                self._seal_pending()
            self._config = self._local.config = config
            if self._writer is not None:
                self._configure_writer(self._writer, PENDING_BATCH_BYTES)
            for w in self._batch_writers.values():
                self._configure_writer(w, APPEND_BATCH_BYTES)
        if self._task is not None and not self._closed:
            self._schedule_maintenance()

    # ------------------------------------------------------------------------------------------ opening

    def _open(self, create: bool) -> None:
        if not os.path.isdir(self.path):
            if self.readonly or not create:
                raise StorageError("log directory does not exist", self.path)
            try:
                os.makedirs(self.path, exist_ok=True)
            except OSError as e:
                raise StorageError(f"cannot create log directory: {e.strerror}", self.path, e.errno) from None
        if not self.readonly:
            self._local.take_dir_lock()
        try:
            self._load()
        except BaseException:
            self._close_files()
            self._local.release_dir_lock()
            raise

    def _close_files(self) -> None:
        """Close the append journal and every segment this Log holds open (close(), and _open when loading
        fails)."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        self._local.close()

    def _load(self) -> None:
        """The loader opens the segments (recovery after a crash); then the offsets are reconciled: the
        journal's records are written, start offset, recovery point and high watermark are clamped to the
        segments, the leader epochs cut at the end, producer state rebuilt, and the checkpoint rewritten if the
        shutdown was not clean."""
        loaded = log_loader.load(self._local)
        self.recovery = self._local.recovery
        self._epochs = LeaderEpochCache(self.path, writable=not self.readonly)
        self._producers = ProducerStateManager(self.path)
        self._recovery_point, self._start_offset, self._hw = loaded.recovery_point, loaded.start_offset, \
            loaded.high_watermark
        if self.readonly:
            # the journal first: a batch the writer moves from it to a segment meanwhile is in the segment
            # scanned after, so nothing seen before disappears (see _set_tail)
            journal = _engine.read_journal(os.path.join(self.path, JOURNAL_FILE))
            self._local.active.scan_tail()
            self._set_tail(journal)
            self._start_offset = max(self._start_offset, self._local.bases[0])
            return
        if loaded.clean:
            self._marker_kept = True
        else:
            self._dirty = True               # new or recovered: close() must checkpoint and mark it clean
        end = self._local.active.next_offset
        self._replay_journal()
        if self.recovery.journal_records:
            # a roll during the replay snapshotted a producer state not loaded yet (at the new segment's base,
            # >= end): such snapshots go (a snapshot is an optimization: the load replays from an older one)
            self._producers.delete_snapshots(above=end - 1)
        seg = self._local.active             # the replay may have rolled
        self._start_offset = max(self._start_offset, self._local.bases[0])
        if self._start_offset > seg.next_offset:
            self._start_offset = seg.next_offset
        self._recovery_point = min(max(self._recovery_point, self._start_offset), seg.next_offset)
        if self._hw is not None:
            self._hw = min(max(self._hw, self._start_offset), seg.next_offset)
        if seg.next_offset < self.recovery.promised_end_offset:
            self.recovery.lost_offsets = self.recovery.promised_end_offset - seg.next_offset
            log.warning("%s: the log ends at offset %d but its checkpoint vouched for offsets up to %d (recovery "
                        "point %d, high watermark %s): %d offsets are lost (%d segment files found)", self.path,
                        seg.next_offset, self.recovery.promised_end_offset, loaded.state.get("recovery-point", 0),
                        loaded.state.get("high-watermark"), self.recovery.lost_offsets, len(self._local.bases))
        self._epochs.truncate_from_end(seg.next_offset)
        self._writer = self._new_writer(seg.next_offset)
        self._load_producer_state()
        if not loaded.clean:
            self._write_state()

    def _replay_journal(self) -> None:
        """At open: write the batches of append()'s journal that continue the log (records append() returned
        before a crash), then empty it. Batches already in the segments are skipped; batches after a gap (the
        segments lost data the journal continued) cannot be placed and are dropped with a warning."""
        path = os.path.join(self.path, JOURNAL_FILE)
        if not os.path.exists(path):
            return
        journal = _engine.AppendJournal(path)
        try:
            data = journal.batches()
            end = self._local.active.next_offset
            for b in _engine.batches(data) if data else ():
                if b.base_offset > end:
                    log.warning("%s: the append journal holds offsets %d.. but the log ends at %d: dropping them",
                                self.path, b.base_offset, end)
                    break
                if b.base_offset == end:
                    rest = memoryview(data)[b.position:]
                    records = b.next_offset - b.base_offset
                    for later in _engine.batches(rest)[1:]:
                        records += later.next_offset - later.base_offset
                    self._write(rest, records)
                    self.recovery.journal_records = records
                    log.info("%s: wrote %d records appended before a crash from the append journal", self.path,
                             records)
                    break
            journal.reset()
        except BaseException:
            journal.close()
            raise
        self._journal = journal

    def _write_state(self) -> None:
        """Checkpoint the recovery point, log start offset and high watermark (lock held or not yet shared)."""
        self._last_checkpoint = log_loader.write_state(self.path, self._recovery_point, self._start_offset,
                                                       self._hw)

    # ---------------------------------------------------------------------------------------- segments

    def _roll(self) -> None:
        """Seal the active segment (fsynced: the recovery point moves to its end), snapshot the producer state
        at the new base, start the new segment, checkpoint. Lock held."""
        self._recovery_point = self._local.roll(self._producers.write_snapshot)
        self._unflushed = 0
        self._write_state()

    # ------------------------------------------------------------------------------------------- state

    @property
    def start_offset(self) -> int:
        """The first offset still in the log (raised by retention, delete_records_before, truncation; lowered
        only by truncate_fully_and_start_at). Never above end_offset."""
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """The offset the next record will get (last offset + 1), counting records buffered by append()."""
        if self._writer is not None:
            return self._writer.next_offset
        if self._tail is not None:
            return _engine.batches(self._tail[1])[-1].next_offset
        return self._local.active.next_offset

    @property
    def high_watermark(self) -> int:
        """Offsets below it are committed (replicated). Follows end_offset unless set explicitly."""
        return self.end_offset if self._hw is None else self._hw

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        """Set it (replication does, under the lock): start_offset <= value <= end_offset, else
        OffsetOutOfRangeError. Checkpointed at the next roll, flush checkpoint or close."""
        with self._lock:
            if not self._start_offset <= value <= self.end_offset:
                raise OffsetOutOfRangeError(offset=value, start=self._start_offset, end=self.end_offset,
                                            what="high watermark")
            if value != self._hw:
                self._hw = value
                self._dirty = True

    @property
    def explicit_high_watermark(self) -> int | None:
        """The high watermark if it was set (replication sets it), None while it simply follows the log end."""
        return self._hw

    @property
    def recovery_point(self) -> int:
        """Offsets below it are known to be on disk (fsynced)."""
        return self._recovery_point

    @property
    def segment_count(self) -> int:
        """Number of segments. Like segment_bases and size_bytes it is read under the log's lock, so it never
        shows a state inside a call (an append_batch rolling segments it may still take back)."""
        with self._lock:
            return len(self._local.bases)

    @property
    def segment_bases(self) -> list[int]:
        """Base offsets of the segments, oldest first."""
        with self._lock:
            return list(self._local.bases)

    @property
    def size_bytes(self) -> int:
        """Bytes of all .log files (the trusted size of open segments, the file system's for the others)."""
        with self._lock:
            return self._local.size_bytes()

    @property
    def closed(self) -> bool:
        """True after close() (and while __init__ has not finished)."""
        return self._closed

    def __repr__(self):
        state = "closed" if self._closed else f"{self._start_offset}..{self.end_offset}"
        return f"Log({self.path!r}, {state}, {len(self._local.bases)} segments)"

    # ------------------------------------------------------------------------------------------ writes

    def _check_writable(self) -> None:
        """Every change starts here: refuse it on a closed or read-only log, else drop the clean-shutdown
        marker (the files are about to change) and remember to checkpoint at close."""
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")
        if self.readonly:
            raise ReadOnlyLogError(f"log {self.path} is open read-only")
        if self._marker_kept:
            unlink_all([os.path.join(self.path, CLEAN_SHUTDOWN_FILE)])
            fsync_dir(self.path)
            self._marker_kept = False
        self._dirty = True

    def _new_writer(self, next_offset: int, compression=None, batch_bytes: int = PENDING_BATCH_BYTES):
        w = _engine.BatchWriter(next_offset=next_offset, compression=compression, leader_epoch=self._leader_epoch)
        self._configure_writer(w, batch_bytes)
        return w

    def _configure_writer(self, w, batch_bytes: int) -> None:
        """The one place a writer's settings come from the config (at its creation and at every config change).
        batch_bytes is the writer's own target (PENDING_BATCH_BYTES for append(), APPEND_BATCH_BYTES for
        append_batch())."""
        cfg = self.config
        # a batch stays under max.message.bytes even after compression, and several fit in a segment
        w.batch_bytes = max(1, min(batch_bytes, cfg.max_message_bytes - 61 - 64 - (cfg.max_message_bytes >> 7),
                                   cfg.segment_bytes // 4))
        w.batch_records = min(cfg.flush_messages or _INT32_MAX, _INT32_MAX)   # flush.messages: whole batches
        w.max_record_bytes = cfg.max_message_bytes
        w.log_append_time = cfg.log_append_time
        w.timestamp_before_max_ms = cfg.message_timestamp_before_max_ms
        w.timestamp_after_max_ms = cfg.message_timestamp_after_max_ms
        w.require_keys = cfg.compact

    def append(self, value, key=None, headers=None, timestamp: int | None = None) -> int:
        """Append one record; returns its offset. value/key: bytes-like or None (a compacted log requires a
        key); headers: (str, bytes|None) pairs; timestamp: an int, ms since the epoch, >= 0 (now if None).
        Timestamps follow the topic's rules (_engine.check_timestamps, as append_raw's): with
        message.timestamp.type=CreateTime they must lie within message.timestamp.before.max.ms before and
        message.timestamp.after.max.ms after now; with LogAppendTime the batch carries the time it is written
        and readers see that. Buffered into a batch (see the module docstring).
        The returned offset is kept if the process dies (kill -9) before the batch is written: the record is
        in the append journal when append() returns (see the module docstring); a power loss keeps it only
        after flush(). Readers in other processes (readonly=True) see it after their next refresh().
        Wrong types raise TypeError (value, key, headers; a timestamp that is a float or bool rather than
        being truncated); InvalidTimestampError for a negative timestamp (-1, NO_TIMESTAMP, only exists in
        old formats: None means now) or one outside the window; InvalidRecordError (no key on a compacted
        log), RecordTooLargeError (max.message.bytes), LogClosedError, ReadOnlyLogError, StorageError (the
        record was not taken: disk full for the journal, or buffered records whose earlier write failed
        still cannot be written)."""
        with self._lock:
            w = self._writer
            if w is None or self._closed or self._marker_kept:
                self._check_writable()
            if w.finished:
                self._seal_pending()       # a write that failed before: retried first, so a failure takes nothing
            journal = self._journal
            if journal is None:
                journal = self._journal = _engine.AppendJournal(os.path.join(self.path, JOURNAL_FILE))
            offset = journal.add(w, value, key, headers, timestamp)
            if w.full:
                try:
                    self._seal_pending()
                except StorageError as e:  # the record is kept (journal, buffer): the next call retries the write
                    log.warning("%s: writing appended records failed (%s); they stay buffered and are retried by "
                                "the next call", self.path, e)
            return offset

    def append_batch(self, values: Sequence, keys: Sequence | None = None, headers: Sequence | None = None,
                     timestamps: Sequence[int] | None = None, compression: str | None = None) -> tuple[int, int]:
        """Append records given as parallel sequences (keys, headers, timestamps: None for no keys, no headers,
        now), encoded into batches of ~64 KiB (compressed with `compression`: none, gzip, snappy, lz4 or zstd).
        Returns (first offset, last offset) of the records, which get consecutive offsets. Each record is
        checked as append() checks it (types, timestamps, size, key).

        All or nothing: records are encoded and written ~4 MiB at a time, and if one is rejected (TypeError,
        RecordTooLargeError, InvalidTimestampError) or a write fails (StorageError), the batches already
        written are truncated away before the error is raised. The log's lock is held throughout, so reads
        through this Log object (read(), records(), end_offset, offset_for_timestamp()) never see records of a
        call before it returns. A process reading the directory with readonly=True may see such batches
        before they go (as it sees any data a truncation removes), and a crash during the call may leave a
        prefix of whole batches (unflushed records carry no promise).
        Raises InvalidArgumentError for no values (there is no range to return) or sequences of different
        lengths, InvalidRecordError for a record without a key on a compacted log."""
        if not len(values):
            raise InvalidArgumentError("append_batch needs at least one record")
        with self._lock:
            self._check_writable()
            self._seal_pending()
            first = self.end_offset
            bw = self._batch_writers.get(compression)
            if bw is None:
                bw = self._batch_writers[compression] = self._new_writer(first, compression, APPEND_BATCH_BYTES)
            bw.reset(first)
            bw.leader_epoch = self._leader_epoch
            i, n = 0, len(values)
            try:
                while i < n:
                    chunk_first = bw.next_offset
                    i = bw.add_many(values, keys, headers, timestamps, i, APPEND_CHUNK_BYTES)
                    self._write(bw, bw.next_offset - chunk_first)
                    bw.clear()
            except BaseException:
                bw.reset(first)
                self._take_back(first)                            # earlier chunks are on disk: take them back
                raise
            self._writer.reset(bw.next_offset)
            return first, bw.next_offset - 1

    def append_raw(self, batch, *, validate_records: bool = True, now_ms: int | None = None) -> int:
        """Append one v2 record batch as a Kafka client sends it; returns the base offset it got.

        A batch from an idempotent producer (producer id set) that repeats one of the producer's last five
        batches is not written again: its original base offset is returned. A write that fails (StorageError,
        also from a flush after the segment took the batch) is taken back, so the retry is stored once; until
        it is, the producer's later batches raise that StorageError, not OutOfOrderSequenceError (see
        producer_state). Sequence gaps raise OutOfOrderSequenceError, stale epochs InvalidProducerEpochError (see
        producer_state). `now_ms` is the append time (LogAppendTime topics stamp it; timestamps are checked
        against it).

        Validated as Kafka's broker does (see _engine.validate_client_batch; CreateTime timestamps by
        _engine.check_timestamps: >= 0 or -1 (NO_TIMESTAMP, not checked further), within
        message.timestamp.before/after.max.ms of now; on a compacted log every record needs a key), then stored as
        it came: only base offset and leader epoch are stamped (and, for LogAppendTime topics, the append
        time, with a new CRC). A topic whose
        compression.type names a codec gets the batch recompressed to it. A compressed batch may inflate to
        _engine.inflate_limit(max.message.bytes) (32x it) and is refused with RecordTooLargeError past that,
        without more memory being taken for it. Raises CorruptRecordError,
        InvalidRecordError, RecordTooLargeError, InvalidTimestampError, UnsupportedForMessageFormatError."""
        cfg = self.config
        data = bytearray(memoryview(batch))       # its bytes, taken once: what is validated is what is written
        info, min_ts, max_ts = _engine.validate_client_batch(data, cfg.max_message_bytes, validate_records,
                                                             cfg.compact)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if not cfg.log_append_time:
            _engine.check_timestamps(min_ts, max_ts, now, cfg.message_timestamp_before_max_ms,
                                     cfg.message_timestamp_after_max_ms)
        data = self._convert_codec(data, info)
        idempotent = info.producer_id >= 0
        with self._lock:
            self._check_writable()
            self._seal_pending()
            if idempotent:
                duplicate = self._producers.check(info.producer_id, info.producer_epoch, info.base_sequence,
                                                  info.records_count)
                if duplicate is not None:
                    return duplicate.first_offset
            base = self.end_offset
            _engine.stamp_batch(data, base, self._leader_epoch, now if cfg.log_append_time else -1)
            try:
                self._write(data, info.records_count)
            except BaseException as e:
                self._take_back(base)
                if idempotent and isinstance(e, StorageError):
                    self._producers.write_failed(info.producer_id, info.producer_epoch, info.base_sequence, e)
                raise
            self._writer.reset(base + info.records_count)
            if idempotent:
                self._producers.update(info.producer_id, info.producer_epoch, info.base_sequence,
                                       info.records_count, base, base + info.records_count - 1, max_ts,
                                       info.is_transactional)
            return base

    def refused(self, batch, error: SeglogError) -> None:
        """A client batch refused before it reached the log with a retriable error that stored nothing:
        NOT_ENOUGH_REPLICAS from the leader, or NOT_LEADER_OR_FOLLOWER from a replica that does not lead (yet:
        a new leader's clients may know it leads before it does, and the batch pipelined after the refused one
        then finds it leading). If it is its idempotent producer's next batch, the producer's later batches in
        that epoch are refused with `error` too until one of its batches is written, here or replicated (see
        producer_state): a client then retries them in order with their sequences, where an
        OUT_OF_ORDER_SEQUENCE_NUMBER answer would have librdkafka bump its epoch and store again, under the new
        one, batches it cannot tell were stored (such as one a leader that lost leadership answered
        NOT_LEADER_OR_FOLLOWER after storing it). Anything else (not idempotent, a duplicate, out of order,
        after an earlier refusal, a closed log) is left alone. Takes the lock."""
        found = _engine.batches(memoryview(batch), False)
        if not found or found[0].producer_id < 0:
            return
        b = found[0]
        with self._lock:
            if self._closed:
                return
            try:
                duplicate = self._producers.check(b.producer_id, b.producer_epoch, b.base_sequence,
                                                  b.last_offset_delta + 1)
            except SeglogError:          # out of order, fenced, or after an earlier refusal: nothing to remember
                return
            if duplicate is None:
                self._producers.write_failed(b.producer_id, b.producer_epoch, b.base_sequence, error)

    def _convert_codec(self, batch: bytearray, info) -> bytearray:
        """The batch, recompressed into a new bytearray if the topic's compression.type asks for another codec."""
        target = self.config.compression_type
        if target == "producer" or info.compression == ("none" if target == "uncompressed" else target):
            return batch
        bw = _engine.BatchWriter(next_offset=0, compression=target, batch_bytes=1 << 62,
                                 max_record_bytes=1 << 62, producer_id=info.producer_id,
                                 producer_epoch=info.producer_epoch, next_sequence=info.base_sequence,
                                 accept_no_timestamp=True)
        for r in _engine.decode_records(batch, verify_crc=False,
                                        max_inflated_bytes=_engine.inflate_limit(self.config.max_message_bytes)):
            bw.add(r.value, r.key, r.headers, r.timestamp)
        bw.finish()
        if bw.finished > self.config.max_message_bytes:
            raise RecordTooLargeError(size=bw.finished, limit=self.config.max_message_bytes, what="recompressed batch")
        return bytearray(bw.take())

    def _seal_pending(self) -> None:
        """Write the records append() buffered, then empty the journal. If the write fails (StorageError) the
        records stay buffered and journaled, and whatever part of them reached the segments is taken back, so
        the next call writes them again whole."""
        w = self._writer
        if w is not None and (w.count or w.finished):
            n = w.count
            w.finish()
            first = w.next_offset - sum(b.next_offset - b.base_offset for b in _engine.batches(w))
            try:
                if w.finished:
                    self._write(w, n)
            except BaseException:
                if self._local.active.next_offset > first:
                    self._truncate_locked(first, keep_writer=True)
                raise
            w.clear()
            if self._journal is not None:
                self._journal.reset()

    def _take_back(self, first: int) -> None:
        """After a write from offset `first` raised (lock held): remove whatever part of it reached the segments
        (a flush after the segment took the bytes may be what failed), so a failed append leaves the log, its
        end offset and its producer state as they were, and the client's retry is stored once."""
        if self._local.active.next_offset > first:
            self._truncate_locked(first)

    def _roll_ms(self) -> int:
        """How long after its first batch the active segment rolls: segment.ms less a jitter drawn once per
        segment in [0, min(segment.jitter.ms, segment.ms)), as Kafka's rollJitterMs, so that logs created
        together do not all roll at once."""
        cfg = self.config
        if self._jitter_for is not self._local.active:
            jitter = min(cfg.segment_jitter_ms, cfg.segment_ms)
            self._jitter_ms = random.randrange(jitter) if jitter > 0 else 0
            self._jitter_for = self._local.active
        return cfg.segment_ms - self._jitter_ms

    def _write(self, buf, records: int, replay: bool = False) -> None:
        """Write whole batches (final offsets) to the active segment, rolling as needed; apply flush policy.
        ``replay``: the batches' producer ids and markers go into the producer state as each segment takes
        them, so the snapshot a roll writes describes the log up to the new segment."""
        cfg = self.config
        n = buf.finished if isinstance(buf, _engine.BatchWriter) else len(buf)
        pos = 0
        while pos < n:
            seg = self._local.active
            end = seg.fits(buf, pos, cfg.segment_bytes, self._roll_ms())
            if end == pos:
                self._roll()
                continue
            seg.append(buf, pos, end)
            if replay:
                self._index_aborted(self._producers.replay(buf[pos:end]))
            pos = end
        self._unflushed += records
        if cfg.flush_messages is not None and self._unflushed >= cfg.flush_messages:
            self._sync_locked()
        elif cfg.flush_ms is not None and (time.monotonic() - self._last_flush) * 1000 >= cfg.flush_ms:
            self._sync_locked()

    # ------------------------------------------------------------------------------------------- reads

    def read(self, offset: int, max_bytes: int = 1 << 20, max_offset: int | None = None) -> memoryview:
        """Whole batches starting with the one holding `offset`, zero-copy from the mapped segment: as many as
        fit in max_bytes (>= 0), at least one, none holding an offset >= max_offset (default: no limit). The
        first batch may start before `offset` (batches are never split). Empty at end_offset. Reads stay within
        one segment. Every batch returned passed its checks (framing, CRC, offsets in order and inside the
        segment's range): a damaged one is never returned or skipped, the read ends before it and a read
        starting at it raises CorruptRecordError (path, offset, position). Raises OffsetOutOfRangeError outside
        [start_offset, end_offset], InvalidArgumentError for an offset, max_bytes or max_offset that is not a
        non-negative int."""
        return self.read_next(offset, max_bytes, max_offset)[0]

    def read_next(self, offset: int, max_bytes: int = 1 << 20, max_offset: int | None = None,
                  min_one: bool = True):
        """read(), plus the offset after the last returned batch: (view, next_offset), next_offset -1 when
        the view is empty. Fetchers use it to know where to continue. min_one=False returns nothing rather
        than one batch larger than max_bytes."""
        offset = _int_arg(offset, "read offset")
        max_bytes = _int_arg(max_bytes, "max_bytes")
        if max_offset is not None:
            max_offset = _int_arg(max_offset, "max_offset")
        # the position and the batches' framing under the lock; their CRCs after it (see Segment.verify_read)
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            self._seal_pending()
            end = self.end_offset
            if offset == end:
                return memoryview(b""), -1
            if not self._start_offset <= offset <= end:
                raise OffsetOutOfRangeError(offset=offset, start=self._start_offset, end=end)
            limit = _INT64_MAX if max_offset is None else max_offset
            if self._tail is not None and offset >= self._tail[0]:
                return _read_batches(self._tail[1], offset, max_bytes, limit, min_one)
            found = self._local.find(offset)
            if found is None:
                return memoryview(b""), -1
            seg, pos = found
            try:
                view, _, next_offset = seg.read(pos, max_bytes, limit, min_one, False)
            except CorruptRecordError as e:
                self._report_corrupt(offset, seg, e)
                raise
        try:
            return seg.verify_read(view, pos, next_offset)
        except CorruptRecordError as e:
            self._report_corrupt(offset, seg, e)
            raise

    def _report_corrupt(self, offset: int, seg, e: CorruptRecordError) -> None:
        log.error("%s: corrupt batch met reading offset %d: %s in file %s at position %s", self.path, offset,
                  e.reason, e.path or seg.log_path, e.position)

    def records(self, start: int | None = None, end: int | None = None, *,
                isolation: str = READ_UNCOMMITTED) -> Iterator[Record]:
        """Records with offsets in [start, end): start defaults to start_offset, end to end_offset as of the
        call (an end past it reads up to the log's end). Control records (transaction markers) are never
        yielded; ``isolation="read_committed"`` also stops at the last stable offset and skips the records of
        aborted transactions, as a read_committed Kafka consumer. Batches are decoded in C; the iterator reads
        about 1 MiB at a time (the log may be appended to meanwhile). The arguments are checked at the call, as a
        Kafka fetch checks its offset: OffsetOutOfRangeError for a start outside [start_offset, end_offset]
        (start == end_offset yields nothing), InvalidArgumentError for a start or end that is not a
        non-negative int or an unknown isolation. Iterating raises CorruptRecordError at a damaged batch (see
        read()) and OffsetOutOfRangeError if retention or truncation removes offsets not read yet."""
        offset = self.start_offset if start is None else _int_arg(start, "records start")
        stop = self.end_offset if end is None else _int_arg(end, "records end")
        if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise InvalidArgumentError(f"isolation must be {READ_UNCOMMITTED!r} or {READ_COMMITTED!r}, "
                                       f"not {isolation!r}")
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            if not self._start_offset <= offset <= self.end_offset:
                raise OffsetOutOfRangeError(offset=offset, start=self._start_offset, end=self.end_offset)
        if isolation == READ_COMMITTED:
            stop = min(stop, self.last_stable_offset)
            return self._records(offset, stop, AbortedFilter(self.aborted_transactions(offset, stop)))
        return self._records(offset, stop)

    def _records(self, offset: int, stop: int, aborted: AbortedFilter | None = None) -> Iterator[Record]:
        topic, partition, path = self.topic, self.partition, self.path
        decode = _engine.decode_records
        while offset < stop:
            view, next_offset = self.read_next(offset, READ_CHUNK_BYTES)
            if next_offset < 0:
                break
            if aborted is None:
                yield from decode(view, offset, stop, topic, partition, False, path)
            else:
                for run in aborted.runs(view):
                    yield from decode(run, offset, stop, topic, partition, False, path)
            offset = next_offset

    def get(self, offset: int) -> Record | None:
        """The record at `offset`, or None when the log holds no record there: offset == end_offset (as a fetch
        at the log end returns nothing), an offset compaction removed, or a control record (a transaction
        marker). Unlike records(offset), which goes on with the next record as a Kafka fetch does, get() never
        answers with another offset. Reads up to end_offset, as records() does (not only below the high
        watermark), with its default isolation, read_uncommitted: a record of an open or aborted transaction
        is returned. Only the record's own batch is touched: found through the offset index, CRC-checked (once:
        the log remembers the batches it checked), its records skipped by length up to the one wanted; a
        compressed batch is decompressed once into a small cache of recently read batches (16 batches, 8 MiB
        at most). Takes the lock for the whole read. Raises OffsetOutOfRangeError outside [start_offset,
        end_offset], InvalidArgumentError for an offset that is not a non-negative int, CorruptRecordError for
        a damaged batch holding or preceding it in its index interval (see read()), LogClosedError."""
        offset = _int_arg(offset, "get offset")
        with self._lock:
            return self._get_locked(offset)

    def get_many(self, offsets: Sequence[int]) -> list[Record | None]:
        """get() of each offset, in the order given, under one acquisition of the lock: a list of Records and
        Nones. Every offset is checked before any is read (the same errors as get())."""
        offsets = [_int_arg(o, "get offset") for o in offsets]
        with self._lock:
            if offsets:
                self._get_locked(max(offsets), check_only=True)
                self._get_locked(min(offsets), check_only=True)
            return [self._get_locked(o) for o in offsets]

    def _get_locked(self, offset: int, check_only: bool = False) -> Record | None:
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")
        w = self._writer
        if w is not None and (w.count or w.finished):
            self._seal_pending()
        end = self.end_offset
        if not self._start_offset <= offset <= end:
            raise OffsetOutOfRangeError(offset=offset, start=self._start_offset, end=end)
        if check_only or offset == end:
            return None
        if self._tail is not None and offset >= self._tail[0]:
            for r in _engine.decode_records(_read_batches(self._tail[1], offset, 0, _INT64_MAX, True)[0],
                                            offset, offset + 1, self.topic, self.partition, True, self.path):
                return r
            return None
        local = self._local
        seg = local.active
        if offset < seg.base_offset:
            seg = local.segment(local.bases[bisect.bisect_right(local.bases, offset) - 1])
        try:
            return _engine.point_record(seg, offset, self._points, self.topic, self.partition)
        except CorruptRecordError as e:
            self._report_corrupt(offset, seg, e)
            raise

    # -------------------------------------------------------------------------------- durability, close

    def flush(self) -> None:
        """Write buffered records and fsync the active segment: everything appended so far survives a crash.
        (Rolled segments were fsynced when they rolled.) The recovery point moves to the end; the checkpoint is
        rewritten at most every CHECKPOINT_INTERVAL_S. Raises LogClosedError, ReadOnlyLogError, StorageError."""
        with self._lock:
            self._check_writable()
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._seal_pending()
        self._sync_locked()

    def _sync_locked(self) -> None:
        """fsync what is written (not what is still buffered) and move the recovery point there."""
        self._local.active.flush()
        self._recovery_point = self._local.active.next_offset
        self._unflushed = 0
        self._last_flush = time.monotonic()
        if self._last_flush - self._last_checkpoint >= CHECKPOINT_INTERVAL_S:
            self._write_state()

    def roll(self) -> None:
        """Start a new segment now (no-op when the active one is empty): the active one is sealed and fsynced,
        the producer state snapshotted at the new base, the checkpoint rewritten. Raises LogClosedError,
        ReadOnlyLogError, StorageError."""
        with self._lock:
            self._check_writable()
            self._seal_pending()
            if self._local.active.size:
                self._roll()

    def close(self) -> None:
        """Write buffered records, fsync, trim the active segment's indexes, checkpoint and mark the shutdown
        clean. Idempotent. Views handed out earlier stay valid after close."""
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._closed:
            return
        if self._task is not None:
            self._task.cancel()
        try:
            if not self.readonly and not self._dirty:
                self._local.active.seal(sync=False)        # untouched since open: the old marker still holds
            elif not self.readonly:
                self._seal_pending()
                self._local.active.seal()
                self._recovery_point = self.end_offset
                self._producers.write_snapshot(self.end_offset)
                self._write_state()
                marker = os.path.join(self.path, CLEAN_SHUTDOWN_FILE)
                with storage_errors("cannot write the clean-shutdown marker", marker):
                    fd = _engine.file_open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    try:
                        _engine.file_fsync(fd, marker)
                    finally:
                        os.close(fd)
                fsync_dir(self.path)
        finally:
            self._closed = True
            self._close_files()
            self._local.release_dir_lock()

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
