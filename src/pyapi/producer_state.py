"""Idempotent producer state of one partition log: deduplication and sequence checks, as Kafka's broker does.

For each producer id the state keeps its epoch and the sequence/offset ranges of its last five batches (a
producer has at most five requests in flight). A batch from a client is checked before it is appended:

- epoch older than the producer's            -> InvalidProducerEpochError
- same epoch, same sequence range as a kept batch -> duplicate: acknowledged with the original offsets, not written
- new epoch: the first sequence must be 0      -> else OutOfOrderSequenceError
- same epoch: first sequence = last + 1 (int32 wrap to 0) -> else OutOfOrderSequenceError (a gap or a reorder)
- unknown producer id: any sequence is accepted (its state may have expired with retention)

A batch that passed these checks but whose write failed (``write_failed``: disk full, I/O error), or that a replica
refused before the log with a retriable error that stored nothing (NOT_ENOUGH_REPLICAS, or NOT_LEADER_OR_FOLLOWER
just before it leads; through ``Log.refused``), is missing, so the producer's batches sent after it would be out of
order only because of it: while it is not retried, a batch of that producer and epoch with a later sequence is
refused with the same error (KAFKA_STORAGE_ERROR, NOT_ENOUGH_REPLICAS or NOT_LEADER_OR_FOLLOWER, retriable: the
client sends it again with the same sequence) instead of OutOfOrderSequenceError, on which an idempotent client
bumps its epoch and sends again under the new one batches it cannot tell were stored. The failed batch's retry is
checked as before; once one of the producer's batches is written (``update``) or the state is rebuilt, the failure
is forgotten. A cluster member refuses every produce after a disk failure instead (its log directory goes offline,
``Node.fail_log_dir``).

Transactions (KIP-98): a transactional batch opens the producer's transaction here at its first offset unless
one is open; the producer's COMMIT / ABORT marker (``complete_txn``) closes it. A marker with an epoch older
than the producer's is refused (InvalidProducerEpochError), one from an older coordinator epoch too
(TransactionCoordinatorFencedError). The first offset of the oldest open transaction, and of completed ones
whose marker is not yet below the high watermark, bounds the last stable offset (``first_unstable_offset``).

State is snapshotted in Kafka's `.snapshot` file format (version 1: int16 version, uint32 CRC-32C of the rest,
int32 count, then per producer: int64 id, int16 epoch, int32 last sequence, int64 last offset, int32 offset
delta, int64 timestamp, int32 coordinator epoch, int64 current transaction first offset, -1 when none), named
by the log offset the state is valid for. After opening, the log replays the batches after the newest snapshot.
Not thread-safe: the owning Log's lock guards it.
"""

from __future__ import annotations

import os
import re
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from . import _engine
from .checkpoints import replace_file, storage_errors
from .errors import (CorruptRecordError, InvalidProducerEpochError, OutOfOrderSequenceError, SeglogError,
                     StorageError, TransactionCoordinatorFencedError)

MAX_BATCHES_PER_PRODUCER = 5
INT32_MAX = (1 << 31) - 1
SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hI")
_ENTRY = struct.Struct(">qhiqiqiq")
_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")


@dataclass
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction a marker ended here: its first offset, the marker's offset, whether it aborted, and the
    last stable offset right after the marker (the oldest other open transaction's first offset, else the
    marker's offset + 1), as Kafka's .txnindex entry records it."""
    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER))
    coordinator_epoch: int = -1
    txn_first_offset: int = -1          # first offset of the producer's open transaction here, -1: none
    last_timestamp: int = -1            # of its last batch or marker

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


@dataclass(frozen=True)
class ActiveProducer:
    """One producer's state as DescribeProducers reports it (Kafka's ProducerState)."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


def _next_seq(seq: int, count: int) -> int:
    return (seq + count) % (INT32_MAX + 1)


def _after(seq: int, than: int) -> bool:
    """`seq` comes after `than` in the int32 sequence space (which wraps to 0): less than half of it ahead."""
    return 0 < (seq - than) % (INT32_MAX + 1) <= INT32_MAX // 2


class FailedWrite(NamedTuple):
    """A producer's batch that passed the sequence checks but was not stored (its write failed, or the leader
    refused it first): its epoch, first sequence and the error."""
    epoch: int
    first_seq: int
    error: SeglogError


class ProducerStateManager:
    """Producer id -> ProducerEntry for one log, plus snapshot files in the log directory."""

    def __init__(self, directory: str):
        self.directory = directory
        self.entries: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}               # producer id -> first offset of its open transaction
        self.unreplicated: list[CompletedTxn] = []      # completed, marker not yet below the high watermark
        self.failed: dict[int, FailedWrite] = {}        # producer id -> its batch whose write failed last

    def clear(self) -> None:
        """Forget every producer (before a snapshot is loaded and the log replayed)."""
        self.entries, self.ongoing, self.unreplicated, self.failed = {}, {}, [], {}

    def check(self, producer_id: int, epoch: int, first_seq: int, count: int) -> BatchMeta | None:
        """Validate a client batch; returns the kept batch it duplicates (do not append it) or None. Raises
        the StorageError of the producer's failed write for a batch sent after the failed one (see the module
        docstring)."""
        failed = self.failed.get(producer_id)
        if failed is not None and failed.epoch == epoch and _after(first_seq, failed.first_seq):
            why = (f"producer {producer_id} epoch {epoch}: sequence {first_seq} follows sequence "
                   f"{failed.first_seq}, which was not stored and is not retried yet ({failed.error})")
            if isinstance(failed.error, StorageError):
                raise StorageError(why, errno=failed.error.errno)
            raise type(failed.error)(why)
        entry = self.entries.get(producer_id)
        if entry is None:
            return None
        last_seq = _next_seq(first_seq, count - 1)
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(f"producer {producer_id} epoch {epoch} is older than its current "
                                            f"epoch {entry.epoch}")
        if epoch == entry.epoch:
            for b in entry.batches:
                if b.first_seq == first_seq and b.last_seq == last_seq:
                    return b
            expected = _next_seq(entry.last_seq, 1) if entry.batches else first_seq
            if first_seq != expected:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} epoch {epoch}: sequence {first_seq} where {expected} was expected")
        elif first_seq != 0:
            raise OutOfOrderSequenceError(f"producer {producer_id}: a new epoch {epoch} must start at "
                                          f"sequence 0, not {first_seq}")
        return None

    def write_failed(self, producer_id: int, epoch: int, first_seq: int, error: SeglogError) -> None:
        """A batch that passed ``check`` was not stored (its write failed, or the leader refused it with a
        retriable error): until one of the producer's batches is written, its later batches in `epoch` are
        refused with `error`."""
        self.failed[producer_id] = FailedWrite(epoch, first_seq, error)

    def _entry(self, producer_id: int, epoch: int) -> ProducerEntry:
        """The producer's entry for `epoch`: a newer epoch restarts its sequences (its open transaction and
        coordinator epoch stay: the coordinator ends a transaction before bumping the epoch)."""
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(producer_id, epoch)
        elif epoch > entry.epoch:
            entry = self.entries[producer_id] = ProducerEntry(
                producer_id, epoch, coordinator_epoch=entry.coordinator_epoch, txn_first_offset=entry.txn_first_offset)
        return entry

    def update(self, producer_id: int, epoch: int, first_seq: int, count: int, first_offset: int,
               last_offset: int, timestamp: int, transactional: bool = False) -> None:
        """Record an appended batch (from a client or a leader); a transactional one opens the producer's
        transaction at first_offset unless one is open."""
        self.failed.pop(producer_id, None)
        entry = self._entry(producer_id, epoch)
        entry.batches.append(BatchMeta(first_seq, _next_seq(first_seq, count - 1), first_offset, last_offset,
                                       timestamp))
        entry.last_timestamp = timestamp
        if transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = self.ongoing[producer_id] = first_offset

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker from a fenced producer epoch (InvalidProducerEpochError) or an older coordinator
        (TransactionCoordinatorFencedError), as Kafka's ProducerAppendInfo.appendEndTxnMarker."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(f"transaction marker of producer {producer_id} has epoch {epoch}, "
                                            f"older than its current epoch {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"transaction marker of producer {producer_id} comes from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}")

    def complete_txn(self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int, offset: int,
                     timestamp: int) -> CompletedTxn | None:
        """Record the producer's marker at `offset`: its open transaction here (if any) ends. Returns that
        transaction, None when it had none here (a marker for a partition the transaction wrote nothing to)."""
        entry = self._entry(producer_id, epoch)
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = timestamp
        first, entry.txn_first_offset = entry.txn_first_offset, -1
        if first < 0:
            return None
        del self.ongoing[producer_id]
        done = CompletedTxn(producer_id, first, offset, not commit, min(self.ongoing.values(), default=offset + 1))
        self.unreplicated.append(done)
        return done

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction a read_committed reader may not pass yet: open, or
        completed with its marker at or above the high watermark; None when there is none."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]
        return min([*self.ongoing.values(), *(t.first_offset for t in self.unreplicated)], default=None)

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction here."""
        return dict(self.ongoing)

    def active(self) -> list[ActiveProducer]:
        """Every producer with state here, by producer id: its epoch, last sequence, the timestamp of its
        last batch, its coordinator epoch and the first offset of its open transaction."""
        return [ActiveProducer(e.producer_id, e.epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                               e.txn_first_offset)
                for _, e in sorted(self.entries.items())]

    def replay(self, data) -> list[CompletedTxn]:
        """Update from the batch headers of whole batches (log replay after a snapshot, follower appends);
        returns the transactions their markers completed, in order."""
        done = []
        for b in _engine.batches(data, False):
            if b.producer_id < 0:
                continue
            if b.is_control:
                commit, coordinator_epoch = _engine.control_marker(data, b.position)
                if commit is not None:
                    txn = self.complete_txn(b.producer_id, b.producer_epoch, commit, coordinator_epoch,
                                            b.base_offset, b.max_timestamp)
                    if txn is not None:
                        done.append(txn)
            elif b.base_sequence >= 0 or b.is_transactional:
                # sequences span lastOffsetDelta + 1 (compaction may have removed records, never the deltas)
                self.update(b.producer_id, b.producer_epoch, b.base_sequence, b.last_offset_delta + 1,
                            b.base_offset, b.last_offset, b.max_timestamp, b.is_transactional)
        return done

    def truncate_to(self, end_offset: int) -> None:
        """Forget batches at or after end_offset (the log was truncated); producers left empty are dropped."""
        for pid in list(self.entries):
            entry = self.entries[pid]
            kept = [b for b in entry.batches if b.last_offset < end_offset]
            if not kept:
                del self.entries[pid]
                self.ongoing.pop(pid, None)
            elif len(kept) != len(entry.batches):
                entry.batches = deque(kept, maxlen=MAX_BATCHES_PER_PRODUCER)

    def expire(self, now_ms: int, max_age_ms: int) -> int:
        """Drop producers whose last batch is older than max_age_ms (producer.id.expiration.ms), never one with
        an open transaction."""
        old = [pid for pid, e in self.entries.items()
               if e.txn_first_offset < 0 and 0 <= e.last_timestamp < now_ms - max_age_ms]
        for pid in old:
            del self.entries[pid]
        return len(old)

    # -- snapshots ----------------------------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files in the directory, ascending."""
        with storage_errors("cannot list producer snapshots", self.directory):
            names = os.listdir(self.directory)
        return sorted(int(m.group(1)) for m in map(_SNAPSHOT_RE.match, names) if m)

    def _path(self, offset: int) -> str:
        return os.path.join(self.directory, "%020d.snapshot" % offset)

    def write_snapshot(self, offset: int) -> None:
        """Write the state as of log offset `offset` atomically (tmp + fsync + rename)."""
        body = bytearray(struct.pack(">i", len(self.entries)))
        for e in self.entries.values():
            last = e.batches[-1] if e.batches else BatchMeta(-1, -1, -1, -1, -1)
            body += _ENTRY.pack(e.producer_id, e.epoch, last.last_seq, last.last_offset,
                                last.last_offset - last.first_offset, e.last_timestamp, e.coordinator_epoch,
                                e.txn_first_offset)
        data = _HEADER.pack(SNAPSHOT_VERSION, _engine.crc32c(body)) + body
        replace_file(self._path(offset), data, "cannot write producer snapshot")

    def load_snapshot(self, offset: int) -> None:
        """Replace the state with the snapshot at `offset`. Raises CorruptRecordError if it does not parse."""
        path = self._path(offset)
        with storage_errors("cannot read producer snapshot", path), open(path, "rb") as f:
            data = f.read()
        try:
            version, crc = _HEADER.unpack_from(data)
            body = memoryview(data)[_HEADER.size:]
            if version != SNAPSHOT_VERSION or _engine.crc32c(body) != crc:
                raise ValueError("version or CRC")
            (count,) = struct.unpack_from(">i", body)
            if len(body) != 4 + count * _ENTRY.size:
                raise ValueError("length")
            entries = {}
            for i in range(count):
                pid, epoch, last_seq, last_off, delta, ts, coordinator_epoch, txn_first = \
                    _ENTRY.unpack_from(body, 4 + i * _ENTRY.size)
                entry = ProducerEntry(pid, epoch, coordinator_epoch=coordinator_epoch, txn_first_offset=txn_first,
                                      last_timestamp=ts)
                if last_off >= 0:
                    count_in_batch = delta + 1
                    entry.batches.append(BatchMeta(_next_seq(last_seq, -(count_in_batch - 1)), last_seq,
                                                   last_off - delta, last_off, ts))
                entries[pid] = entry
        except (struct.error, ValueError) as e:
            raise CorruptRecordError(f"producer snapshot does not parse ({e})", path=path) from None
        self.entries, self.failed = entries, {}
        self.ongoing = {pid: e.txn_first_offset for pid, e in entries.items() if e.txn_first_offset >= 0}
        self.unreplicated = []

    def delete_snapshots(self, below: int | None = None, above: int | None = None) -> None:
        """Delete snapshot files with offset < below or > above."""
        for off in self.snapshot_offsets():
            if (below is not None and off < below) or (above is not None and off > above):
                with storage_errors("cannot delete producer snapshot", self._path(off), missing_ok=True):
                    _engine.file_unlink(self._path(off))
