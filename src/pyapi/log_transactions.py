"""The partition log's producer state and transactions (part of log.Log): idempotent producers, transaction
markers, the last stable offset and the aborted-transaction indexes.

``LogTransactions`` is a base class of ``log.Log`` and works on its state: ``_producers`` (the
producer_state.ProducerStateManager), ``_local`` (the segments), ``_lock``, ``_start_offset``. Invariant: the
producer state describes the log up to its end offset (rebuilt by ``_load_producer_state`` at open and after a
truncation; extended by every append that carries a producer id or a marker), and every aborted transaction
whose marker is in a segment is in that segment's .txnindex. Locking as stated per method; ``_locked`` methods
and those without a public name run with the Log's lock held.
"""

from __future__ import annotations

import logging
import time

from . import _engine
from .errors import CorruptRecordError, LogClosedError, StorageError
from .producer_state import ActiveProducer, CompletedTxn, ProducerStateManager
from .txn_index import AbortedTxn

__all__ = ["LogTransactions", "PRODUCER_ID_EXPIRATION_MS"]

log = logging.getLogger("seglog.log")

PRODUCER_ID_EXPIRATION_MS = 86_400_000   # Kafka's producer.id.expiration.ms: idle producers are forgotten


class LogTransactions:
    """Producer state, transaction markers and the last stable offset of a log.Log (see the module docstring)."""

    def active_producers(self) -> list[ActiveProducer]:
        """The idempotent producers this log keeps state for (Kafka's DescribeProducers), by producer id;
        producers expired after producer.id.expiration.ms of silence are gone. Takes the lock."""
        with self._lock:
            return self._producers.active()

    def append_control(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                       now_ms: int | None = None) -> int:
        """Append the COMMIT (commit true) or ABORT marker of a producer's transaction (Kafka's
        appendAsLeader with origin Coordinator); returns its offset. The producer's open transaction here
        ends; an aborted one goes into the .txnindex of the active segment. A write that fails is taken back.
        Raises InvalidProducerEpochError for an epoch older than the producer's, TransactionCoordinatorFencedError
        for an older coordinator epoch, InvalidArgumentError for a missing producer id or epoch, LogClosedError,
        ReadOnlyLogError, StorageError."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            self._check_writable()
            self._seal_pending()
            self._producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
            offset = self.end_offset
            try:
                self._write(_engine.control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now,
                                                  offset, self._leader_epoch), 1)
            except BaseException:
                self._take_back(offset)
                raise
            self._writer.reset(offset + 1)
            done = self._producers.complete_txn(producer_id, producer_epoch, commit, coordinator_epoch, offset,
                                                now)
            if done is not None:
                self._index_aborted([done])
            return offset

    @property
    def last_stable_offset(self) -> int:
        """Offsets below it hold no record of an undecided transaction (Kafka's LSO): the first offset of the
        oldest transaction still open (or whose marker is not yet below the high watermark), at most the high
        watermark. Read-committed readers stop there. Takes the lock. A read-only log rebuilds the producer
        state for it at each call (the newest snapshot, then the batches after it)."""
        with self._lock:
            return self._last_stable_offset_locked()

    def _last_stable_offset_locked(self) -> int:
        """last_stable_offset with the lock held."""
        hw = self.high_watermark
        producers = self._readonly_producers() if self.readonly else self._producers
        first = producers.first_unstable_offset(hw)
        return hw if first is None or first > hw else max(first, self._start_offset)

    def _readonly_producers(self) -> ProducerStateManager:
        """The writer's producer state as its files show it, changing nothing on disk (lock held)."""
        pm = ProducerStateManager(self.path)
        end = self._local.active.next_offset
        start = self._start_offset
        for off in reversed(pm.snapshot_offsets()):
            if off <= end:
                try:
                    pm.load_snapshot(off)
                    start = max(off, self._local.bases[0])
                    break
                except (CorruptRecordError, StorageError):      # being replaced: an older one will do
                    continue
        for view in self._local.views(start, end):
            pm.replay(view)
        return pm

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping offsets [start, end), from the segments' .txnindex files (what
        a read_committed Fetch answers with its records). Takes the lock."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            return self._local.collect_aborted(start, end)

    def _load_producer_state(self) -> None:
        """Producer state as of the end offset: the newest usable snapshot, then the batches after it."""
        end = self._local.active.next_offset
        pm = self._producers
        pm.delete_snapshots(above=end)
        pm.clear()
        start = self._start_offset
        for off in reversed(pm.snapshot_offsets()):
            try:
                pm.load_snapshot(off)
                start = off
                break
            except CorruptRecordError:
                log.warning("%s: producer snapshot at %d is corrupt; using an older one", self.path, off)
                pm.delete_snapshots(above=off - 1)
        for view in self._local.views(start, end):
            self._index_aborted(pm.replay(view))

    def _index_aborted(self, completed: list[CompletedTxn]) -> None:
        """Put the aborted transactions among `completed` in the .txnindex of their markers' segments (a
        replay offers again those already there: skipped). Read-only logs keep the files as found."""
        aborted = [AbortedTxn(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
                   for t in completed if t.aborted]
        if aborted and not self.readonly:
            self._local.add_aborted(aborted)
