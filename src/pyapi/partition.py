"""Partition: one topic partition of a node.Node, the produce and fetch entry points both doors call
(``Partition.append`` -> ``Log.append_raw``, ``Partition.fetch`` -> ``Log.read_next``), and FetchResult, what a
fetch answers.

A Partition holds its Log and the Node that owns it (for the wake-up of waiting fetchers, the config and the
transaction coordinator that verifies a transaction's first batch, KIP-890). Thread-safe: the Log serializes;
the verified-transaction map is only a cache (a lost entry means one more verification).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from . import _engine
from .errors import (ConcurrentTransactionsError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError,
                     InvalidProducerEpochError, InvalidRequiredAcksError, NetworkError, NotCoordinatorError,
                     NotEnoughReplicasError, OffsetOutOfRangeError, ProducerFencedError, StorageError,
                     TransactionalIdAuthorizationFailedError)
from .log import Log

__all__ = ["Partition", "FetchResult"]


@dataclass
class FetchResult:
    """What a fetch returns for one partition: whole batches (a zero-copy view) and the offsets around them."""
    records: memoryview
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    next_offset: int = -1          # last returned offset + 1 (-1 when nothing was returned)
    crc_checked: bool = True       # the local log verified the batches; data from the network was not
    last_stable_offset: int = -1   # the partition's LSO (read_committed fetches stop there)
    aborted_transactions: list | None = None   # read_committed: the aborted transactions the records overlap


class Partition:
    """One topic partition on this node: its Log, the high watermark consumers read up to, and the produce
    and fetch entry points both doors use. Thread-safe (the Log serializes)."""

    def __init__(self, node, topic: str, index: int, log_: Log):
        self.node = node
        self.topic = topic
        self.index = index
        self.log = log_
        self._verified: dict[int, int] = {}     # producer id -> epoch whose transaction was verified here

    def __repr__(self):
        return f"Partition({self.topic!r}, {self.index})"

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    def append(self, batch, acks: int = -1, transactional_id: str | None = None) -> tuple[int, int, int]:
        """Produce path: validate and append one client record batch (idempotent producers deduplicated).
        Returns (base offset, last offset, log append time in ms or -1 for CreateTime topics). acks must be -1
        (all), 0 or 1; waiting for replicas (acks=all) is the caller's business (a lone replica has them all).

        A transactional batch needs the producer's ``transactional_id`` (else
        TransactionalIdAuthorizationFailedError, as Kafka answers) and, with
        transaction.partition.verification.enable (KIP-890), the first batch of a transaction here is checked
        with the transaction coordinator: a partition not added to the producer's ongoing transaction is
        refused with InvalidTxnStateError, a fenced producer with InvalidProducerEpochError; an unreachable
        or busy coordinator gives the retriable NotEnoughReplicasError. Once the node's data directory failed
        (``Node.fail_log_dir``) every batch is refused with StorageError (KAFKA_STORAGE_ERROR) untouched."""
        if acks not in (-1, 0, 1):
            raise InvalidRequiredAcksError(f"acks must be -1 (all), 0 or 1, not {acks}")
        failed = self.node.log_dir_failure
        if failed is not None:
            raise StorageError(f"{self.topic}-{self.index}: the log directory is offline after a failed write "
                               f"({failed})", errno=failed.errno)
        now = int(time.time() * 1000)
        view = memoryview(batch)
        found = _engine.batches(view, False)
        if found and found[0].is_transactional:
            self._verify_transaction(transactional_id, found[0].producer_id, found[0].producer_epoch)
        base = self.log.append_raw(view, now_ms=now)
        self.node._data_arrived(self)
        info = found[0] if found else _engine.batches(view, False)[0]   # validated by append_raw: one whole batch
        last = base + info.last_offset - info.base_offset
        return base, last, (now if self.log.config.log_append_time else -1)

    def _verify_transaction(self, transactional_id: str | None, producer_id: int, epoch: int) -> None:
        if transactional_id is None:
            raise TransactionalIdAuthorizationFailedError(
                f"{self.topic}-{self.index}: transactional record batches need the producer's transactional id")
        if not self.node.config.transaction_partition_verification_enable or self._verified.get(producer_id) == epoch:
            return
        try:
            err = self.node.verify_transaction(transactional_id, producer_id, epoch,
                                               [(self.topic, self.index)])[(self.topic, self.index)]
        except (NotCoordinatorError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NetworkError) as e:
            err = e
        if err is None:
            self._verified[producer_id] = epoch
            return
        if isinstance(err, ProducerFencedError):
            raise InvalidProducerEpochError(str(err))
        if isinstance(err, (ConcurrentTransactionsError, NotCoordinatorError, CoordinatorLoadInProgressError,
                            CoordinatorNotAvailableError, NetworkError)):
            raise NotEnoughReplicasError(f"{self.topic}-{self.index}: the transaction of {transactional_id!r} could "
                                         f"not be verified yet ({err}); retry")
        raise err

    def transaction_ended(self, producer_id: int) -> None:
        """A marker ended the producer's transaction here: its next transaction is verified again."""
        self._verified.pop(producer_id, None)

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def fetch(self, offset: int, max_bytes: int, *, committed_only: bool = True,
              min_one: bool = True, isolation_level: int = 0) -> FetchResult:
        """Whole batches from `offset` (the batch holding it first), at most `max_bytes` (but at least one
        batch when min_one); for consumers (committed_only) none at or above the high watermark, for replicas
        up to the log end; with isolation_level 1 (read_committed) none at or above the last stable offset, and
        the aborted transactions overlapping what is returned (Kafka's FetchResponse). As in Kafka, an offset
        between that limit and the log end reads nothing, and one outside [log start, log end] raises
        OffsetOutOfRangeError."""
        lg = self.log
        hw, end, start = lg.high_watermark, lg.end_offset, lg.start_offset
        lso = lg.last_stable_offset
        if not start <= offset <= end:
            raise OffsetOutOfRangeError(offset=offset, start=start, end=end)
        limit = end if not committed_only else lso if isolation_level == 1 else hw
        aborted = [] if isolation_level == 1 else None
        if offset >= limit:
            return FetchResult(memoryview(b""), hw, start, end, last_stable_offset=lso, aborted_transactions=aborted)
        view, next_offset = lg.read_next(offset, max_bytes, limit if committed_only else None, min_one)
        if isolation_level == 1 and next_offset > offset:
            aborted = lg.aborted_transactions(offset, next_offset)
        return FetchResult(view, hw, start, end, next_offset, last_stable_offset=lso, aborted_transactions=aborted)
