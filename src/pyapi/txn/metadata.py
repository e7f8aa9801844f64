"""One transactional id's state, as Kafka's TransactionMetadata keeps it, and the transitions between states.

States (Kafka's TransactionState, ids as stored in ``__transaction_state``)::

    Empty(0) -> Ongoing(1) -> PrepareCommit(2) -> CompleteCommit(4) -> Ongoing / Empty / Dead(6)
                          \\-> PrepareAbort(3)  -> CompleteAbort(5)  -> Ongoing / Empty / Dead
    Ongoing -> PrepareEpochFence(7) -> PrepareAbort   (a new producer instance or a timeout fences the old one)

A change is made in two steps, because it is only true once written to the state log: ``prepare_*`` checks it
and returns the target (a :class:`TxnTransit`) with ``pending_state`` set, so no other change starts meanwhile;
after the write, ``complete(transit)`` applies it (or ``abort_pending()`` forgets it when the write failed).
Not thread-safe: the coordinator's lock guards every TransactionMetadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from ..errors import IllegalStateError

__all__ = ["TxnState", "TxnTransit", "TransactionMetadata", "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH"]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
EPOCH_MAX = 32767


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's DescribeTransactions, ListTransactions and kafka-transactions.sh use."""
        return _NAMES[self]

    @staticmethod
    def from_name(name: str) -> "TxnState | None":
        return _BY_NAME.get(name)


_NAMES = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
          TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
          TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
          TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {v: k for k, v in _NAMES.items()}
COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
_VALID_PREVIOUS = {
    TxnState.EMPTY: COMPLETED,
    TxnState.ONGOING: (TxnState.ONGOING,) + COMPLETED,
    TxnState.PREPARE_COMMIT: (TxnState.ONGOING,),
    TxnState.PREPARE_ABORT: (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE),
    TxnState.COMPLETE_COMMIT: (TxnState.PREPARE_COMMIT,),
    TxnState.COMPLETE_ABORT: (TxnState.PREPARE_ABORT,),
    TxnState.DEAD: COMPLETED,
    TxnState.PREPARE_EPOCH_FENCE: (TxnState.ONGOING,),
}


@dataclass(frozen=True)
class TxnTransit:
    """The state a prepared change leads to (what is written to the state log)."""
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset
    start_ms: int
    last_update_ms: int


@dataclass(eq=False)
class TransactionMetadata:
    """The coordinator's view of one transactional id (see the module docstring)."""
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending_state: TxnState | None = None
    failed_epoch_fence: bool = False     # a fence's write failed: the next fence reuses its bumped epoch

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= EPOCH_MAX - 1

    def _transit(self, state: TxnState, now_ms: int, *, producer_id=None, last_producer_id=None, epoch=None,
                 last_epoch=None, timeout_ms=None, partitions=None, start_ms=None) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalStateError(f"transactional id {self.transactional_id}: {state.kafka_name} prepared while "
                                    f"{self.pending_state.kafka_name} is pending")
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalStateError(f"transactional id {self.transactional_id}: no transition from "
                                    f"{self.state.kafka_name} to {state.kafka_name}")
        self.pending_state = state
        return TxnTransit(
            self.producer_id if producer_id is None else producer_id,
            self.last_producer_id if last_producer_id is None else last_producer_id,
            self.producer_epoch if epoch is None else epoch,
            self.last_producer_epoch if last_epoch is None else last_epoch,
            self.timeout_ms if timeout_ms is None else timeout_ms, state,
            frozenset(self.partitions if partitions is None else partitions),
            self.start_ms if start_ms is None else start_ms, now_ms)

    # -- the changes -----------------------------------------------------------------------------------------------

    def prepare_epoch_bump(self, timeout_ms: int, expected_epoch: int | None, now_ms: int) -> TxnTransit | None:
        """InitProducerId on a completed transaction: the next epoch (fencing older instances), or None if the
        caller's expected epoch is neither the current one nor the one before (PRODUCER_FENCED)."""
        bumped = self.producer_epoch + 1
        if self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch     # a retry of a bump already made
        else:
            return None
        return self._transit(TxnState.EMPTY, now_ms, epoch=epoch, last_epoch=last, timeout_ms=timeout_ms,
                             partitions=(), start_ms=-1)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     recorded: bool) -> TxnTransit:
        """An exhausted epoch moves to a new producer id at epoch 0; ``recorded`` keeps the old id and epoch as
        the last ones (a client retrying with them gets the new id again)."""
        return self._transit(TxnState.EMPTY, now_ms, producer_id=new_producer_id,
                             last_producer_id=self.producer_id if recorded else NO_PRODUCER_ID, epoch=0,
                             last_epoch=self.producer_epoch if recorded else NO_PRODUCER_EPOCH,
                             timeout_ms=timeout_ms, partitions=(), start_ms=-1)

    def fence_and_abort(self, now_ms: int) -> TxnTransit:
        """PrepareAbort of an ongoing transaction under a bumped epoch (a new instance of the producer started,
        or the transaction timed out), so that whatever the old instance sends afterwards is fenced. Kafka
        prepares PrepareEpochFence and turns it into this abort when it ends the transaction; here both happen
        under one hold of the coordinator's lock. A failed write keeps the bumped epoch
        (``abort_pending(epoch_fence=True)``), so the next fence does not bump it again."""
        if self.producer_epoch >= EPOCH_MAX:
            raise IllegalStateError(f"transactional id {self.transactional_id}: producer epoch exhausted")
        self._transit(TxnState.PREPARE_EPOCH_FENCE, now_ms)
        self.pending_state = None
        if not self.failed_epoch_fence:
            self.producer_epoch += 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        return self.prepare_end(False, now_ms)

    def prepare_add_partitions(self, partitions, now_ms: int) -> TxnTransit:
        start = now_ms if self.state in COMPLETED else self.start_ms
        return self._transit(TxnState.ONGOING, now_ms, partitions=set(self.partitions) | set(partitions),
                             start_ms=start)

    def prepare_end(self, commit: bool, now_ms: int) -> TxnTransit:
        """PrepareCommit / PrepareAbort of the ongoing transaction."""
        return self._transit(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """CompleteCommit / CompleteAbort once every marker is written: the transaction holds no partitions."""
        state = TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return self._transit(state, now_ms, partitions=())

    def prepare_dead(self, now_ms: int) -> TxnTransit:
        """The transactional id expired (transactional.id.expiration.ms): its key is deleted."""
        return self._transit(TxnState.DEAD, now_ms, partitions=())

    def complete(self, t: TxnTransit) -> None:
        """Apply a written change; IllegalStateError if it is not the pending one."""
        if self.pending_state != t.state:
            raise IllegalStateError(f"transactional id {self.transactional_id}: completing {t.state.kafka_name} "
                                    f"while {self.pending_state} is pending")
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.timeout_ms, self.state = t.timeout_ms, t.state
        self.partitions = set(t.partitions)
        self.start_ms, self.last_update_ms = t.start_ms, t.last_update_ms
        self.pending_state = None
        self.failed_epoch_fence = False

    def abort_pending(self, epoch_fence: bool = False) -> None:
        """Forget a prepared change whose write failed. ``epoch_fence``: it was the abort of an epoch fence,
        whose bumped epoch stays."""
        if epoch_fence:
            self.failed_epoch_fence = True
        self.pending_state = None
