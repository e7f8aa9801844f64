"""The transaction coordinator's state: every transactional id it owns, cached by ``__transaction_state``
partition and written to that partition (Kafka's TransactionStateManager).

A partition is owned while this node leads it: ``begin_load`` marks it loading (its ids answer
COORDINATOR_LOAD_IN_PROGRESS), ``finish_load`` replays its log into the cache, ``unload`` forgets it (its ids
answer NOT_COORDINATOR). Ownership carries the coordinator epoch, the partition's leader epoch: a write that
started under one epoch is applied only if the partition is still owned under it, so a coordinator that lost
its partition meanwhile never changes state it no longer owns.

Writes follow the offsets store: appended under the lock (so a leadership change cannot slip between the
ownership check and the append), acknowledged outside it once the in-sync replicas have them (a cluster's
``node.replication_waiter``). Thread-safe: ``lock`` guards the cache, the partitions' ownership and every
TransactionMetadata in it (the coordinator holds it while it checks and prepares changes).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

from ..errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, InvalidRequestError,
                      NotCoordinatorError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                      NotLeaderOrFollowerError, RecordListTooLargeError, RecordTooLargeError, RequestTimedOutError,
                      SeglogError, StorageError, UnknownServerError, UnknownTopicOrPartitionError,
                      UnsupportedVersionError)
from . import log_format as fmt
from .metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionMetadata, TxnState, TxnTransit

__all__ = ["TransactionStateStore", "Owned"]

log = logging.getLogger("seglog.txn")

# Kafka's TransactionStateManager.appendTransactionToLog: what a failed state write tells the client
_UNAVAILABLE = (UnknownTopicOrPartitionError, NotEnoughReplicasError, NotEnoughReplicasAfterAppendError,
                RequestTimedOutError)
_MOVED = (NotLeaderOrFollowerError, StorageError)
_TOO_LARGE = (RecordTooLargeError, RecordListTooLargeError)


@dataclass
class Owned:
    """A __transaction_state partition this node coordinates."""
    coordinator_epoch: int
    loading: bool = True
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionStateStore:
    """See the module docstring. ``partition(p)`` gives the Partition of __transaction_state-p on this node."""

    def __init__(self, num_partitions: int, partition: Callable[[int], object],
                 replication_waiter: Callable[[object, int], None] | None):
        self.num_partitions = num_partitions
        self._partition = partition
        self._wait_replicated = replication_waiter
        self._owned: dict[int, Owned] = {}
        self.lock = threading.RLock()

    def partition_for(self, transactional_id: str) -> int:
        return fmt.partition_for_transactional_id(transactional_id, self.num_partitions)

    # -- lookups (lock held by the caller for anything it changes) ------------------------------------------------

    def owned(self, transactional_id: str) -> Owned:
        """The owned partition of the id: NotCoordinatorError if not owned here, CoordinatorLoadInProgressError
        while it loads."""
        p = self.partition_for(transactional_id)
        with self.lock:
            o = self._owned.get(p)
            if o is None:
                raise NotCoordinatorError(f"this broker is not the transaction coordinator of {transactional_id!r} "
                                          f"({fmt.TRANSACTION_STATE_TOPIC}-{p} is led elsewhere)")
            if o.loading:
                raise CoordinatorLoadInProgressError(f"{fmt.TRANSACTION_STATE_TOPIC}-{p} is loading")
            return o

    def get(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """(coordinator epoch, the id's metadata or None)."""
        o = self.owned(transactional_id)
        return o.coordinator_epoch, o.txns.get(transactional_id)

    def put_if_absent(self, md: TransactionMetadata) -> tuple[int, TransactionMetadata]:
        with self.lock:
            o = self.owned(md.transactional_id)
            return o.coordinator_epoch, o.txns.setdefault(md.transactional_id, md)

    def still_owned(self, transactional_id: str, coordinator_epoch: int) -> TransactionMetadata | None:
        """The id's metadata if its partition is still owned (loaded) under `coordinator_epoch`, else None."""
        o = self._owned.get(self.partition_for(transactional_id))
        if o is None or o.loading or o.coordinator_epoch != coordinator_epoch:
            return None
        return o.txns.get(transactional_id)

    def remove(self, transactional_id: str, coordinator_epoch: int, md: TransactionMetadata) -> None:
        """Drop an expired id from the cache (its tombstone is written), if it is still `md` under the epoch."""
        with self.lock:
            if self.still_owned(transactional_id, coordinator_epoch) is md:
                del self._owned[self.partition_for(transactional_id)].txns[transactional_id]

    def all(self) -> Iterator[tuple[int, TransactionMetadata]]:
        """(coordinator epoch, metadata) of every loaded id (a snapshot; lock held by the caller)."""
        for o in list(self._owned.values()):
            if not o.loading:
                for md in list(o.txns.values()):
                    yield o.coordinator_epoch, md

    def loading_partitions(self) -> list[int]:
        with self.lock:
            return sorted(p for p, o in self._owned.items() if o.loading)

    def owned_partitions(self) -> list[int]:
        with self.lock:
            return sorted(self._owned)

    # -- writes -----------------------------------------------------------------------------------------------------

    def start_write(self, transactional_id: str, coordinator_epoch: int, t: TxnTransit) -> Callable[[], None]:
        """Append the state record of a prepared change; returns the waiter for its replication. Raises (and
        appends nothing) NotCoordinatorError if the partition is no longer owned under `coordinator_epoch`.
        Errors are Kafka's mapping of a failed state write: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or
        UNKNOWN_SERVER_ERROR."""
        key = fmt.encode_key(transactional_id)
        value = None if t.state == TxnState.DEAD else fmt.encode_value(
            fmt.TxnLogValue(t.producer_id, t.producer_epoch, t.timeout_ms, int(t.state), t.partitions,
                            t.last_update_ms, t.start_ms), empty_state=t.state == TxnState.EMPTY)
        p = self.partition_for(transactional_id)
        with self.lock:
            o = self._owned.get(p)
            if o is None or o.coordinator_epoch != coordinator_epoch:
                raise NotCoordinatorError(f"{fmt.TRANSACTION_STATE_TOPIC}-{p} is no longer coordinated here "
                                          f"under coordinator epoch {coordinator_epoch}")
            with _write_errors():
                part = self._partition(p)
                _, last = part.log.append_batch([value], keys=[key])
        wait = self._wait_replicated

        def waiter() -> None:
            if wait is not None:
                with _write_errors():
                    wait(part, last)
        return waiter

    # -- ownership ----------------------------------------------------------------------------------------------------

    def begin_load(self, p: int, coordinator_epoch: int) -> None:
        """This node now leads partition p under `coordinator_epoch`: its ids are loading until finish_load."""
        with self.lock:
            self._owned[p] = Owned(coordinator_epoch)

    def rebump(self, p: int, coordinator_epoch: int) -> bool:
        """Partition p, loaded here, goes on under `coordinator_epoch` if newer; False if it is not loaded here."""
        with self.lock:
            o = self._owned.get(p)
            if o is None or o.loading:
                return False
            o.coordinator_epoch = max(o.coordinator_epoch, coordinator_epoch)
            return True

    def finish_load(self, p: int, coordinator_epoch: int) -> list[TransactionMetadata]:
        """Replay partition p into the cache (if still owned under the epoch); returns the transactions found
        in PrepareCommit / PrepareAbort, whose markers must be written again. Replaying happens without the lock
        (requests for the partition's ids see it loading meanwhile); the result is installed under it."""
        with self.lock:
            o = self._owned.get(p)
            if o is None or o.coordinator_epoch != coordinator_epoch:
                return []
        txns = self._replay(p)
        with self.lock:
            o = self._owned.get(p)
            if o is None or o.coordinator_epoch != coordinator_epoch:
                return []
            o.txns, o.loading = txns, False
            log.info("loaded %d transactional ids of %s-%d (coordinator epoch %d)", len(txns),
                     fmt.TRANSACTION_STATE_TOPIC, p, coordinator_epoch)
            return [md for md in txns.values() if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]

    def _replay(self, p: int) -> dict[str, TransactionMetadata]:
        txns: dict[str, TransactionMetadata] = {}
        for r in self._partition(p).log.records():
            if r.key is None:
                continue
            try:
                tid = fmt.decode_key(r.key)
                if r.value is None:
                    txns.pop(tid, None)
                    continue
                v = fmt.decode_value(r.value)
                state = TxnState(v.status)
            except (UnsupportedVersionError, InvalidRequestError, ValueError) as e:
                log.warning("%s-%d offset %d: record skipped (%s)", fmt.TRANSACTION_STATE_TOPIC, p, r.offset, e)
                continue
            txns[tid] = TransactionMetadata(tid, v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_PRODUCER_EPOCH,
                                            v.timeout_ms, state, set(v.partitions), v.start_ms, v.last_update_ms)
        return txns

    def unload(self, p: int, coordinator_epoch: int | None = None) -> None:
        """This node no longer leads partition p (or, given an epoch, only if it still owns it under it)."""
        with self.lock:
            o = self._owned.get(p)
            if o is not None and (coordinator_epoch is None or o.coordinator_epoch <= coordinator_epoch):
                del self._owned[p]


class _write_errors:
    """Map a failed state write to what Kafka's coordinator answers for it."""

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if exc is None or not isinstance(exc, SeglogError):
            return False
        if isinstance(exc, _UNAVAILABLE):
            raise CoordinatorNotAvailableError(f"transaction state write failed: {exc}") from exc
        if isinstance(exc, _MOVED):
            raise NotCoordinatorError(f"transaction state write failed: {exc}") from exc
        if isinstance(exc, _TOO_LARGE):
            raise UnknownServerError(f"transaction state record too large: {exc}") from exc
        return False
