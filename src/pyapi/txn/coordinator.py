"""The transaction coordinator (KIP-98, Kafka's TransactionCoordinator): producer ids and epochs of
transactional ids, the partitions of each transaction, and how a transaction ends.

One core for both doors: the in-process Producer calls it through ``Node.txn_coordinator``, the broker's
handlers translate InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions into the same calls. Every call blocks until its state change is written to
``__transaction_state`` (and, in a cluster, replicated), then answers; errors are raised as Kafka's codes:

- InitProducerId: a new transactional id gets a producer id; a known one gets its epoch bumped, which fences
  every older instance (their requests get PRODUCER_FENCED, their batches INVALID_PRODUCER_EPOCH). An ongoing
  transaction of the id is aborted first, under the bumped epoch, and the caller told CONCURRENT_TRANSACTIONS
  to retry once the abort completes.
- AddPartitionsToTxn / AddOffsetsToTxn: Empty or Complete* -> Ongoing (the transaction starts), Ongoing ->
  Ongoing with more partitions; CONCURRENT_TRANSACTIONS while the previous transaction still completes.
- EndTxn: Ongoing -> PrepareCommit / PrepareAbort, answered once written; the markers are then written to every
  partition of the transaction (the MarkerChannel, retried until each leader accepts) and the transaction
  moves to CompleteCommit / CompleteAbort. A coordinator that takes over a partition of the state log finishes
  the transactions it finds prepared there.
- Transactions older than their timeout are aborted under a bumped epoch (checked every
  transaction.abort.timed.out.transaction.cleanup.interval.ms); ids idle for transactional.id.expiration.ms
  are deleted (checked every transaction.remove.expired.transaction.cleanup.interval.ms).
- ``verify`` answers AddPartitionsToTxn v4 verify_only (KIP-890 part 1): a partition leader asks whether a
  transactional batch's partition was added to its producer's ongoing transaction.

Threads: callers' threads make changes (under the state store's lock, never held while waiting for a write);
one worker thread writes markers, completes transactions, loads state partitions and runs the two timers.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..config import BrokerConfig
from ..errors import (ConcurrentTransactionsError, InvalidProducerIdMappingError, InvalidRequestError,
                      InvalidTransactionTimeoutError, InvalidTxnStateError, LogClosedError, NotCoordinatorError,
                      ProducerFencedError, SeglogError, TransactionalIdNotFoundError, UnknownTopicOrPartitionError)
from .markers import DONE, GIVE_UP, STALE, Marker, MarkerChannel
from .metadata import (COMPLETED, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, PREPARED, TransactionMetadata, TxnState,
                       TxnTransit)
from .state_store import TransactionStateStore

__all__ = ["TransactionCoordinator", "TransactionDescription", "TransactionListing"]

log = logging.getLogger("seglog.txn")

MARKER_RETRY_S = 0.1
"""Backoff before markers (or a completion write) that failed are tried again."""


@dataclass(frozen=True)
class TransactionDescription:
    """DescribeTransactions' answer for one transactional id."""
    transactional_id: str
    state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: tuple          # sorted (topic, partition) pairs still without a marker
    coordinator_id: int = -1


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass
class _Completion:
    """A prepared transaction whose markers are being written (guarded by the store's lock)."""
    transactional_id: str
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    remaining: set = field(default_factory=set)


class TransactionCoordinator:
    """See the module docstring. ``new_producer_id()`` hands out producer ids (the node's or the cluster's);
    ``offsets_partition(group_id)`` is the group's __consumer_offsets partition; ``partition_exists(topic, p)``
    what AddPartitionsToTxn checks partitions against (the node's metadata)."""

    def __init__(self, config: BrokerConfig, store: TransactionStateStore, markers: MarkerChannel, *,
                 new_producer_id: Callable[[], int], offsets_partition: Callable[[str], int],
                 partition_exists: Callable[[str, int], bool], clock: Callable[[], float] = time.time):
        self.config = config
        self.store = store
        self.markers = markers
        self._new_producer_id = new_producer_id
        self._offsets_partition = offsets_partition
        self._partition_exists = partition_exists
        self._clock = clock
        self._lock = store.lock
        self._completions: dict[str, _Completion] = {}
        self._loads: list[tuple[int, int]] = []
        self._wake = threading.Event()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="seglog-txn-coordinator", daemon=True)
        self._worker.start()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- InitProducerId -------------------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str | None, timeout_ms: int, producer_id: int = NO_PRODUCER_ID,
                         producer_epoch: int = NO_PRODUCER_EPOCH) -> tuple[int, int]:
        """(producer id, epoch) for the transactional id (None: an idempotent producer's new id, epoch 0).
        ``producer_id``/``producer_epoch`` (InitProducerId v3+, KIP-360) are the caller's current ones, or -1.
        Raises InvalidRequestError (empty id), InvalidTransactionTimeoutError, ProducerFencedError,
        ConcurrentTransactionsError (retry), NotCoordinatorError, CoordinatorLoadInProgressError."""
        if transactional_id is None:
            return self._new_producer_id(), 0
        _check_id(transactional_id)
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"transaction.timeout.ms {timeout_ms} is not in 1..transaction.max.timeout.ms "
                f"({self.config.transaction_max_timeout_ms})")
        expected = None if producer_id == NO_PRODUCER_ID and producer_epoch == NO_PRODUCER_EPOCH \
            else (producer_id, producer_epoch)
        now = self._now_ms()
        fenced = False
        with self._lock:
            cepoch, md = self.store.get(transactional_id)
            if md is None:
                md = TransactionMetadata(transactional_id, self._new_producer_id(), NO_PRODUCER_ID,
                                         NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY,
                                         set(), -1, now)
                cepoch, md = self.store.put_if_absent(md)
            if md.pending_state is not None:
                raise ConcurrentTransactionsError(f"transactional id {transactional_id!r} is changing state; retry")
            if expected is not None and not _valid_producer_id(md, *expected):
                raise ProducerFencedError(f"producer {expected[0]} epoch {expected[1]} of {transactional_id!r} was "
                                          f"fenced by producer {md.producer_id} epoch {md.producer_epoch}")
            if md.state in PREPARED or md.state == TxnState.DEAD:
                raise ConcurrentTransactionsError(f"the previous transaction of {transactional_id!r} is "
                                                  f"completing; retry")
            if md.state == TxnState.ONGOING:
                t = md.fence_and_abort(now)
                fenced = True
            elif md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                t = md.prepare_producer_id_rotation(self._new_producer_id(), timeout_ms, now, expected is not None)
            else:
                t = md.prepare_epoch_bump(timeout_ms, None if expected is None else expected[1], now)
                if t is None:
                    raise ProducerFencedError(f"producer epoch {expected[1]} of {transactional_id!r} is neither "
                                              f"the current epoch {md.producer_epoch} nor the previous one")
        self._write(md, cepoch, t, epoch_fence=fenced)
        if fenced:
            self._start_completion(md, cepoch, t)
            raise ConcurrentTransactionsError(f"the ongoing transaction of {transactional_id!r} is being aborted "
                                              f"(a new producer instance fenced the old one); retry")
        return t.producer_id, t.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]]) -> None:
        """Add partitions to the producer's transaction (starting it if none is ongoing). Raises
        UnknownTopicOrPartitionError (``.partitions``: the unknown ones; nothing is added),
        InvalidProducerIdMappingError, ProducerFencedError, ConcurrentTransactionsError (retry),
        NotCoordinatorError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError."""
        _check_id(transactional_id)
        wanted = {(str(t), int(p)) for t, p in partitions}
        unknown = sorted(tp for tp in wanted if not self._partition_exists(*tp))
        if unknown:
            e = UnknownTopicOrPartitionError(f"unknown partitions {', '.join(f'{t}-{p}' for t, p in unknown)}")
            e.partitions = unknown
            raise e
        self._add(transactional_id, producer_id, producer_epoch, wanted)

    def _add(self, transactional_id: str, producer_id: int, producer_epoch: int, wanted: set) -> None:
        now = self._now_ms()
        with self._lock:
            cepoch, md = self._producer_txn(transactional_id, producer_id, producer_epoch)
            if md.pending_state is not None or md.state in PREPARED:
                raise ConcurrentTransactionsError(f"the previous transaction of {transactional_id!r} is "
                                                  f"completing; retry")
            if md.state == TxnState.ONGOING and wanted <= md.partitions:
                return
            if md.state not in COMPLETED and md.state != TxnState.ONGOING:
                raise ConcurrentTransactionsError(f"transactional id {transactional_id!r} is "
                                                  f"{md.state.kafka_name}; retry")
            t = md.prepare_add_partitions(wanted, now)
        self._write(md, cepoch, t)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction (its offset commits
        then become visible only when the transaction commits). As Kafka's, it does not need the partition
        to exist yet: the group's coordinator creates __consumer_offsets when TxnOffsetCommit finds it."""
        _check_id(transactional_id)
        self._add(transactional_id, producer_id, producer_epoch,
                  {("__consumer_offsets", self._offsets_partition(group_id))})

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], SeglogError | None]:
        """KIP-890 verification: per partition, None if it is in the producer's ongoing transaction, else
        InvalidTxnStateError; every partition gets InvalidProducerIdMappingError / ProducerFencedError /
        ConcurrentTransactionsError (the transaction is completing) for a producer that does not match.
        NotCoordinatorError and CoordinatorLoadInProgressError are raised."""
        _check_id(transactional_id)
        wanted = [(str(t), int(p)) for t, p in partitions]
        with self._lock:
            try:
                _, md = self._producer_txn(transactional_id, producer_id, producer_epoch)
                if md.state in PREPARED:
                    raise ConcurrentTransactionsError(f"the transaction of {transactional_id!r} is completing")
            except (InvalidProducerIdMappingError, ProducerFencedError, ConcurrentTransactionsError) as e:
                return {tp: e for tp in wanted}
            return {tp: None if md.state == TxnState.ONGOING and tp in md.partitions else InvalidTxnStateError(
                f"{tp[0]}-{tp[1]} was not added to the transaction of {transactional_id!r} (producer "
                f"{producer_id} epoch {producer_epoch})") for tp in wanted}

    def _producer_txn(self, transactional_id: str, producer_id: int, producer_epoch: int
                      ) -> tuple[int, TransactionMetadata]:
        cepoch, md = self.store.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"producer id {producer_id} is not the one of transactional id {transactional_id!r}"
                + ("" if md is None else f" ({md.producer_id})"))
        if md.producer_epoch != producer_epoch:
            raise ProducerFencedError(f"producer {producer_id} epoch {producer_epoch} of {transactional_id!r} was "
                                      f"fenced by epoch {md.producer_epoch}")
        return cepoch, md

    # -- EndTxn ---------------------------------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """Commit or abort the producer's ongoing transaction; returns once PrepareCommit / PrepareAbort is
        written (the markers follow). Ending one that already ended the same way answers at once; raises
        InvalidTxnStateError (nothing ongoing, or it ended the other way), ConcurrentTransactionsError (it
        is still completing: retry), InvalidProducerIdMappingError, ProducerFencedError, NotCoordinatorError."""
        _check_id(transactional_id)
        now = self._now_ms()
        what = "commit" if commit else "abort"
        with self._lock:
            cepoch, md = self.store.get(transactional_id)
            if md is None or md.producer_id != producer_id:
                raise InvalidProducerIdMappingError(f"producer id {producer_id} is not the one of transactional "
                                                    f"id {transactional_id!r}")
            if producer_epoch != md.producer_epoch:
                raise ProducerFencedError(f"producer {producer_id} epoch {producer_epoch} of {transactional_id!r} "
                                          f"was fenced by epoch {md.producer_epoch}")
            if md.pending_state is not None:
                raise ConcurrentTransactionsError(f"transactional id {transactional_id!r} is changing state; retry")
            state = md.state
            if state == TxnState.ONGOING:
                t = md.prepare_end(commit, now)
            elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and \
                    (state == TxnState.COMPLETE_COMMIT) == commit:
                return                                   # a retry of an end that completed
            elif state in PREPARED and (state == TxnState.PREPARE_COMMIT) == commit:
                raise ConcurrentTransactionsError(f"the transaction of {transactional_id!r} is completing; retry")
            else:
                raise InvalidTxnStateError(f"cannot {what} the transaction of {transactional_id!r}: it is "
                                           f"{state.kafka_name}")
        self._write(md, cepoch, t)
        self._start_completion(md, cepoch, t)

    # -- writes and completion ------------------------------------------------------------------------------------

    def _write(self, md: TransactionMetadata, cepoch: int, t: TxnTransit, epoch_fence: bool = False) -> None:
        """Write a prepared change and apply it; a failure forgets it and raises (NotCoordinatorError if the
        state partition moved meanwhile)."""
        try:
            self.store.start_write(md.transactional_id, cepoch, t)()
        except BaseException:
            with self._lock:
                md.abort_pending(epoch_fence)
            raise
        with self._lock:
            if self.store.still_owned(md.transactional_id, cepoch) is not md:
                md.abort_pending(epoch_fence)
                raise NotCoordinatorError(f"the state partition of {md.transactional_id!r} moved while it was "
                                          f"written")
            md.complete(t)

    def _start_completion(self, md: TransactionMetadata, cepoch: int, t: TxnTransit) -> None:
        with self._lock:
            self._completions[md.transactional_id] = _Completion(
                md.transactional_id, cepoch, t.producer_id, t.producer_epoch, t.state == TxnState.PREPARE_COMMIT,
                set(t.partitions))
        self._wake.set()

    def _markers_round(self) -> bool:
        """Write the markers of every completing transaction once; complete the transactions whose markers are
        all written. Returns whether something is left to retry."""
        with self._lock:
            work = [(c, tp) for c in self._completions.values() for tp in sorted(c.remaining)]
        if work:
            codes = self.markers.write([Marker(tp[0], tp[1], c.producer_id, c.producer_epoch, c.commit,
                                               c.coordinator_epoch) for c, tp in work])
            with self._lock:
                for (c, tp), code in zip(work, codes):
                    if code in DONE or code in GIVE_UP:
                        if code in GIVE_UP:
                            log.error("marker of %s at %s-%d cannot be written (error %d): skipped",
                                      c.transactional_id, tp[0], tp[1], code)
                        c.remaining.discard(tp)
                        md = self.store.still_owned(c.transactional_id, c.coordinator_epoch)
                        if md is not None and md.producer_id == c.producer_id:
                            md.partitions.discard(tp)        # DescribeTransactions: only partitions without one
                    elif code in STALE:
                        log.info("markers of %s stopped: partition %s-%d has heard from a newer coordinator or "
                                 "producer epoch (error %d)", c.transactional_id, tp[0], tp[1], code)
                        self._completions.pop(c.transactional_id, None)
        with self._lock:
            done = [c for c in self._completions.values() if not c.remaining]
        for c in done:
            self._complete(c)
        with self._lock:
            return bool(self._completions)

    def _complete(self, c: _Completion) -> None:
        """Write CompleteCommit / CompleteAbort; a failure other than a lost partition is retried later."""
        now = self._now_ms()
        with self._lock:
            md = self.store.still_owned(c.transactional_id, c.coordinator_epoch)
            if md is None or md.producer_id != c.producer_id or md.state not in PREPARED:
                self._completions.pop(c.transactional_id, None)
                return
            if md.pending_state is not None:
                return
            t = md.prepare_complete(now)
        try:
            self._write(md, c.coordinator_epoch, t)
        except NotCoordinatorError:
            with self._lock:
                self._completions.pop(c.transactional_id, None)
            return
        except SeglogError as e:
            log.info("completing the transaction of %s failed (%s): retried", c.transactional_id, e)
            return
        with self._lock:
            if self._completions.get(c.transactional_id) is c:
                del self._completions[c.transactional_id]

    # -- timers ---------------------------------------------------------------------------------------------------

    def abort_timed_out(self) -> int:
        """Abort every ongoing transaction older than its timeout, under a bumped epoch; returns how many."""
        now = self._now_ms()
        aborted = 0
        with self._lock:
            expired = [(cepoch, md) for cepoch, md in self.store.all()
                       if md.state == TxnState.ONGOING and md.pending_state is None
                       and md.start_ms + md.timeout_ms < now]
        for cepoch, md in expired:
            with self._lock:
                if self.store.still_owned(md.transactional_id, cepoch) is not md or md.state != TxnState.ONGOING \
                        or md.pending_state is not None:
                    continue
                log.info("aborting the transaction of %s (producer %d): older than its timeout of %d ms",
                         md.transactional_id, md.producer_id, md.timeout_ms)
                t = md.fence_and_abort(now)
            try:
                self._write(md, cepoch, t, epoch_fence=True)
            except SeglogError as e:
                log.info("timed-out transaction of %s not aborted yet: %s", md.transactional_id, e)
                continue
            self._start_completion(md, cepoch, t)
            aborted += 1
        return aborted

    def expire_transactional_ids(self) -> int:
        """Delete the ids whose last transaction completed longer than transactional.id.expiration.ms ago."""
        now = self._now_ms()
        horizon = now - self.config.transactional_id_expiration_ms
        removed = 0
        with self._lock:
            idle = [(cepoch, md) for cepoch, md in self.store.all()
                    if md.state in COMPLETED and md.pending_state is None and md.last_update_ms <= horizon]
        for cepoch, md in idle:
            with self._lock:
                if self.store.still_owned(md.transactional_id, cepoch) is not md or md.pending_state is not None \
                        or md.state not in COMPLETED:
                    continue
                t = md.prepare_dead(now)
            try:
                self._write(md, cepoch, t)
            except SeglogError as e:
                log.info("expired transactional id %s not removed yet: %s", md.transactional_id, e)
                continue
            self.store.remove(md.transactional_id, cepoch, md)
            removed += 1
        return removed

    # -- state partitions -----------------------------------------------------------------------------------------

    def elected(self, p: int, coordinator_epoch: int) -> None:
        """This node now leads __transaction_state partition p: load it (on the worker thread; its ids answer
        COORDINATOR_LOAD_IN_PROGRESS until then) and finish the transactions it holds prepared."""
        self.store.begin_load(p, coordinator_epoch)
        with self._lock:
            self._loads.append((p, coordinator_epoch))
        self._wake.set()

    def reelected(self, p: int, coordinator_epoch: int) -> None:
        """This node goes on leading partition p under a newer epoch: its loaded ids and the markers being
        written take that coordinator epoch; a partition still loading (or not owned) loads again under it."""
        with self._lock:
            if self.store.rebump(p, coordinator_epoch):
                for c in self._completions.values():
                    if self.store.partition_for(c.transactional_id) == p:
                        c.coordinator_epoch = max(c.coordinator_epoch, coordinator_epoch)
                return
        self.elected(p, coordinator_epoch)

    def resigned(self, p: int) -> None:
        """This node no longer leads partition p: forget its ids and stop their markers."""
        with self._lock:
            self.store.unload(p)
            for tid in [t for t in self._completions if self.store.partition_for(t) == p]:
                del self._completions[tid]

    def _load_pending(self) -> None:
        with self._lock:
            loads, self._loads = self._loads, []
        for p, cepoch in loads:
            try:
                prepared = self.store.finish_load(p, cepoch)
            except LogClosedError:
                return
            except Exception:
                log.exception("loading __transaction_state-%d failed", p)
                self.store.unload(p, cepoch)
                continue
            for md in prepared:
                with self._lock:
                    self._completions[md.transactional_id] = _Completion(
                        md.transactional_id, cepoch, md.producer_id, md.producer_epoch,
                        md.state == TxnState.PREPARE_COMMIT, set(md.partitions))

    # -- admin ----------------------------------------------------------------------------------------------------

    def describe(self, transactional_ids: Iterable[str]) -> list[TransactionDescription | SeglogError]:
        """DescribeTransactions: each id's state, or its error (TransactionalIdNotFoundError, NotCoordinatorError,
        CoordinatorLoadInProgressError)."""
        out: list[TransactionDescription | SeglogError] = []
        for tid in transactional_ids:
            try:
                with self._lock:
                    _, md = self.store.get(tid)
                    if md is None or md.state == TxnState.DEAD:
                        raise TransactionalIdNotFoundError(f"transactional id {tid!r} is not known")
                    out.append(TransactionDescription(tid, md.state.kafka_name, md.timeout_ms, md.start_ms,
                                                      md.producer_id, md.producer_epoch,
                                                      tuple(sorted(md.partitions))))
            except SeglogError as e:
                out.append(e)
        return out

    def list(self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
             ) -> tuple[list[str], list[TransactionListing]]:
        """ListTransactions: (state filters that are no state's name, the ids matching the filters)."""
        states = list(states)
        unknown = [s for s in states if TxnState.from_name(s) is None]
        wanted = {TxnState.from_name(s) for s in states} - {None}
        pids = set(producer_ids)
        with self._lock:
            found = [TransactionListing(md.transactional_id, md.producer_id, md.state.kafka_name)
                     for _, md in self.store.all() if md.state != TxnState.DEAD
                     and (not states or md.state in wanted) and (not pids or md.producer_id in pids)]
        return unknown, sorted(found, key=lambda t: t.transactional_id)

    # -- the worker -----------------------------------------------------------------------------------------------

    def _run(self) -> None:
        abort_every = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        expire_every = self.config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000
        next_abort = time.monotonic() + abort_every
        next_expire = time.monotonic() + expire_every
        while not self._closed:
            try:
                self._load_pending()
                retry = self._markers_round()
                now = time.monotonic()
                if now >= next_abort:
                    next_abort = now + abort_every
                    self.abort_timed_out()
                if now >= next_expire:
                    next_expire = now + expire_every
                    self.expire_transactional_ids()
            except LogClosedError:
                return
            except Exception:
                log.exception("transaction coordinator round failed")
                retry = True
            timeout = min(next_abort, next_expire) - time.monotonic()
            if retry:
                timeout = min(timeout, MARKER_RETRY_S)
            self._wake.wait(max(timeout, 0))
            self._wake.clear()

    def close(self) -> None:
        """Stop the worker (markers not yet written are written by whoever coordinates next, from the log)."""
        self._closed = True
        self._wake.set()
        if threading.current_thread() is not self._worker:
            self._worker.join(5)
        self.markers.close()


def _check_id(transactional_id: str) -> None:
    if not isinstance(transactional_id, str) or not transactional_id:
        raise InvalidRequestError("transactional.id must be a non-empty string")


def _valid_producer_id(md: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """Kafka's isValidProducerId: the metadata was just created, the id is the current one, or the previous
    one with an exhausted epoch (a retry after a rotation whose answer was lost)."""
    return (md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id
            or (producer_id == md.last_producer_id and producer_epoch >= 32766))
