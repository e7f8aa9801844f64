"""The in-process Producer: Kafka's producer semantics against a local Node, with no network in between.

``send()`` picks the partition (explicit > partitioner(key) > round-robin), encodes the record into that
partition's open batch and returns a RecordFuture (``future.get()`` -> RecordMetadata; it also unpacks as
``(partition, offset)``). A batch goes to the partition when it reaches ``batch_size`` bytes, when
``linger_ms`` has passed since its first record (a background thread watches), on ``flush()``/``close()``,
or as soon as a future of it is asked for its offset. Batches are appended through the same path the
network broker uses for client batches (validation, idempotence), so both doors behave alike. With
``enable_idempotence`` (the default, as in Kafka 3+) each batch carries the producer id, epoch and sequence
numbers, and the partition deduplicates them. The per-record work runs in C (seglog._engine.RecordAccumulator).

Transactions (KIP-98), with ``transactional_id``: ``init_transactions()`` gets the producer id and epoch from
the transaction coordinator (fencing any older producer of the same id, and aborting its open transaction);
``begin_transaction()``, then sends (allowed only inside a transaction), ``send_offsets_to_transaction()``
(a consumer's offsets, committed with the transaction), and ``commit_transaction()`` or
``abort_transaction()``. Each partition joins the transaction when its first batch goes out (AddPartitionsToTxn
before the batch, as Kafka's sender does); commit appends every open batch first. States are Kafka's
TransactionManager's: a failed batch makes the transaction abortable (commit raises its error; abort, which also
bumps the epoch so sequences restart, makes the producer ready again); ProducerFencedError, InvalidTxnStateError,
InvalidProducerIdMappingError and TransactionalIdAuthorizationFailedError are fatal (every later call raises
it). CONCURRENT_TRANSACTIONS (the previous transaction still completes) and coordinator moves are retried for up
to ``max_block_ms``. The same calls work over ``seglog.open`` and ``seglog.connect``.

Thread-safe: any number of threads may send.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping, NamedTuple

from . import _engine
from .consumer import ConsumerGroupMetadata
from .errors import (ConcurrentTransactionsError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError,
                     IllegalStateError, InvalidArgumentError, InvalidProducerIdMappingError, InvalidTxnStateError,
                     NetworkError, NotCoordinatorError, ProducerFencedError, RequestTimedOutError, SeglogError,
                     TransactionalIdAuthorizationFailedError)
from .offsets_format import OffsetAndMetadata
from .partitioner import DefaultPartitioner

__all__ = ["Producer", "RecordFuture", "RecordMetadata"]

RecordFuture = _engine.RecordFuture
_ACKS = {"all": -1, "-1": -1, -1: -1, 0: 0, "0": 0, 1: 1, "1": 1}
# Kafka's TransactionManager states
_UNINITIALIZED, _READY, _IN_TRANSACTION, _ABORTABLE, _FATAL = "UNINITIALIZED", "READY", "IN_TRANSACTION", \
    "ABORTABLE_ERROR", "FATAL_ERROR"
_FATAL_ERRORS = (ProducerFencedError, InvalidTxnStateError, InvalidProducerIdMappingError,
                 TransactionalIdAuthorizationFailedError)
_RETRIED = (ConcurrentTransactionsError, NotCoordinatorError, CoordinatorLoadInProgressError,
            CoordinatorNotAvailableError, NetworkError)
_RETRY_BACKOFF_S = (0.02, 0.1)         # first and longest wait between retries of a coordinator call


class RecordMetadata(NamedTuple):
    """Where a record went: topic, partition, offset, and its (create) timestamp."""
    topic: str
    partition: int
    offset: int
    timestamp: int


class Producer:
    """Send records to a Node's topics (see the module docstring).

    batch_size: bytes per batch; 0 disables batching, as in Kafka (every record is a batch of its own).
    acks: "all"/-1, 1 or 0 (with a single replica all are satisfied once appended; with replication "all"
    waits for the in-sync replicas). compression_type: None/"none", "gzip", "snappy", "lz4", "zstd".
    partitioner: any ``(topic, key, num_partitions) -> int`` callable (see seglog.partitioner); the default is
    Kafka's (murmur2 of the key, round-robin without one). key_serializer/value_serializer turn keys/values
    into bytes. Unknown topics are created on first use if the node allows it (auto.create.topics.enable).
    transactional_id makes a transactional producer (see the module docstring; it needs idempotence and
    acks "all"), transaction_timeout_ms its transactions' timeout (the coordinator aborts older ones),
    max_block_ms how long a transaction call retries a busy or moving coordinator.
    """

    def __init__(self, node, *, acks: Any = "all", linger_ms: float = 5, batch_size: int = 16384,
                 compression_type: str | None = None, partitioner: Callable | None = None,
                 enable_idempotence: bool = True, max_request_size: int = 1048576,
                 key_serializer: Callable | None = None, value_serializer: Callable | None = None,
                 client_id: str = "seglog-producer", transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60000, max_block_ms: int = 60000):
        if acks not in _ACKS:
            raise InvalidArgumentError(f"acks must be 'all', -1, 0 or 1, not {acks!r}")
        if transactional_id is not None:
            if not isinstance(transactional_id, str) or not transactional_id:
                raise InvalidArgumentError("transactional_id must be a non-empty string")
            if not enable_idempotence or _ACKS[acks] != -1:
                raise InvalidArgumentError("a transactional producer needs enable_idempotence=True and acks='all' "
                                           "(as Kafka's: transactional.id implies idempotence)")
            if transaction_timeout_ms < 1 or max_block_ms < 0:
                raise InvalidArgumentError("transaction_timeout_ms must be positive and max_block_ms >= 0")
        if batch_size < 0 or max_request_size < 1 or linger_ms < 0:
            raise InvalidArgumentError("batch_size must be >= 0 (0: no batching), max_request_size positive and "
                                       "linger_ms >= 0")
        if isinstance(partitioner, DefaultPartitioner) and not partitioner.sticky:
            partitioner = None                      # the accumulator does exactly this in C
        self.node = node
        self.acks = _ACKS[acks]
        self.linger_ms = linger_ms
        self.batch_size = batch_size
        self.compression_type = _engine.codec_name(compression_type)
        self._max_request_size = max_request_size
        self.client_id = client_id
        self._key_ser = key_serializer
        self._value_ser = value_serializer
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.max_block_ms = max_block_ms
        self._txn_state = _UNINITIALIZED
        self._txn_fatal: SeglogError | None = None
        self._txn_error: BaseException | None = None     # the first failed batch of the transaction
        self._txn_partitions: set[tuple[str, int]] = set()
        self._txn_started = False                        # partitions or offsets were added: EndTxn is due
        self._txn_lock = threading.RLock()             # one transaction call at a time
        self._txn_error_lock = threading.Lock()         # the state a failed call changes (see _txn_failed)
        transactional = transactional_id is not None
        producer_id = node.init_producer_id() if enable_idempotence and not transactional else -1
        self._acc = _engine.RecordAccumulator(
            self._partition_count, self._append, RecordMetadata, batch_size=batch_size, linger_s=linger_ms / 1000,
            compression=compression_type, producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1, partitioner=partitioner,
            max_request_size=max_request_size, new_producer_id=None if transactional else node.init_producer_id,
            transactional=transactional)
        if key_serializer is None and value_serializer is None:
            self.send = self._acc.send              # no Python frame per record
        self._closed = False
        self._wakeup = threading.Event()
        self._sender = None
        if linger_ms > 0:
            self._sender = threading.Thread(target=self._linger_loop, name=f"{client_id}-linger", daemon=True)
            self._sender.start()

    def send(self, topic: str, value=None, key=None, partition: int | None = None, headers=None,
             timestamp: int | None = None) -> RecordFuture:
        """Queue one record and return its RecordFuture. Raises at once (nothing queued) for an unknown topic
        (auto-creation off), a bad partition, a value/key that is not bytes, or a record over
        max_request_size; any exception the append raises (a full disk, a lost connection ...) arrives
        through the future."""
        if self._key_ser is not None and key is not None:
            key = self._key_ser(key)
        if self._value_ser is not None and value is not None:
            value = self._value_ser(value)
        return self._acc.send(topic, value, key, partition, headers, timestamp)

    @property
    def producer_id(self) -> int:
        """The idempotent producer id in use (-1 without idempotence, or before init_transactions); a failed
        append of a non-transactional producer moves to a new one."""
        return self._acc.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._acc.producer_epoch

    def _partition_count(self, topic: str) -> tuple[int, int]:
        """(partitions, the topic's max.message.bytes; the producer's max_request_size when unknown)."""
        info = self.node.ensure_topic(topic)
        config = getattr(info, "config", None)
        return info.partitions, config.max_message_bytes if config is not None else self._max_request_size

    def _append(self, topic: str, partition: int, data: bytes) -> int:
        if self.transactional_id is None:
            base, _, _ = self.node.partition(topic, partition).append(data, self.acks)
        else:
            try:
                if (topic, partition) not in self._txn_partitions:
                    self._coordinator_call(self.node.txn_coordinator.add_partitions, self.transactional_id,
                                           self.producer_id, self.producer_epoch, [(topic, partition)])
                    self._txn_partitions.add((topic, partition))
                    self._txn_started = True
                base, _, _ = self.node.partition(topic, partition).append(data, self.acks, self.transactional_id)
            except BaseException as e:
                self._txn_failed(e)
                raise
        if self._sender is not None:
            self._wakeup.set()
        return base

    # -- transactions ---------------------------------------------------------------------------------------------

    def _coordinator_call(self, fn, *args, timeout: float | None = None, **kwargs):
        """Call the transaction (or group) coordinator, retrying CONCURRENT_TRANSACTIONS and coordinator moves
        for `timeout` seconds (default max_block_ms), as Kafka's producer does; RequestTimedOutError after
        that."""
        deadline = time.monotonic() + (self.max_block_ms / 1000 if timeout is None else timeout)
        wait = _RETRY_BACKOFF_S[0]
        while True:
            try:
                return fn(*args, **kwargs)
            except _RETRIED as e:
                if time.monotonic() + wait > deadline:
                    raise RequestTimedOutError(f"transactional id {self.transactional_id!r}: gave up retrying "
                                               f"({e})") from e
                time.sleep(wait)
                wait = min(wait * 2, _RETRY_BACKOFF_S[1])

    def _txn_failed(self, e: BaseException) -> None:
        """A call of the transaction failed: fatal errors end the producer, others make the transaction
        abortable. Called from _append too, with the accumulator's lock held: it never takes _txn_lock (whose
        holder may be waiting for the accumulator in flush), only _txn_error_lock."""
        with self._txn_error_lock:
            if isinstance(e, _FATAL_ERRORS):
                self._txn_state, self._txn_fatal = _FATAL, e
            elif self._txn_state == _IN_TRANSACTION:
                self._txn_state = _ABORTABLE
            if self._txn_error is None:
                self._txn_error = e

    def _require(self, *states: str, what: str) -> None:
        if self.transactional_id is None:
            raise IllegalStateError(f"{what}: this producer has no transactional_id")
        if self._txn_state == _FATAL:
            raise self._txn_fatal
        if self._txn_state not in states:
            if self._txn_state == _ABORTABLE:               # as Kafka's: the error, until abort_transaction()
                raise self._txn_error
            raise IllegalStateError(f"{what} is not allowed in state {self._txn_state}")

    # Every transaction call takes `timeout` (seconds; default max_block_ms): how long it retries a busy or
    # moving coordinator before RequestTimedOutError.

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id and epoch of the transactional id (fencing older producers of it; an open
        transaction of theirs is aborted first). Must come before the first transaction."""
        with self._txn_lock:
            self._require(_UNINITIALIZED, what="init_transactions")
            self._init_producer_id(-1, -1, timeout)
            self._txn_state = _READY

    def _init_producer_id(self, producer_id: int, epoch: int, timeout: float | None) -> None:
        try:
            pid, epoch = self._coordinator_call(self.node.txn_coordinator.init_producer_id, self.transactional_id,
                                                self.transaction_timeout_ms, producer_id, epoch, timeout=timeout)
        except BaseException as e:
            self._txn_failed(e)
            raise
        self._acc.set_producer(pid, epoch)

    def begin_transaction(self) -> None:
        """Start a transaction: sends are accepted until it is committed or aborted."""
        with self._txn_lock:
            self._require(_READY, what="begin_transaction")
            self._txn_partitions = set()
            self._txn_started = False
            self._txn_error = None
            self._txn_state = _IN_TRANSACTION
            self._acc.txn_open = True

    def send_offsets_to_transaction(self, offsets: Mapping, group_metadata: ConsumerGroupMetadata | str,
                                    timeout: float | None = None) -> None:
        """Commit a consumer's ``offsets`` ({(topic, partition): next offset to read, or OffsetAndMetadata})
        with the transaction: the group sees them only if it commits. ``group_metadata`` is
        ``consumer.group_metadata()`` (a member fenced out of its group cannot commit), or a group id."""
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        with self._txn_lock:
            self._require(_IN_TRANSACTION, what="send_offsets_to_transaction")
            try:
                self._coordinator_call(self.node.txn_coordinator.add_offsets, self.transactional_id,
                                       self.producer_id, self.producer_epoch, group_metadata.group_id,
                                       timeout=timeout)
                self._txn_started = True
                committed = {tp: om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om))
                             for tp, om in offsets.items()}
                errs = self._coordinator_call(
                    self.node.group_coordinator.txn_commit_offsets, group_metadata.group_id, self.transactional_id,
                    self.producer_id, self.producer_epoch, committed, group_metadata.generation_id,
                    group_metadata.member_id, group_instance_id=group_metadata.group_instance_id, timeout=timeout)
                failed = [e for e in errs.values() if e is not None]
                if failed:
                    raise failed[0]
            except BaseException as e:
                self._txn_failed(e)
                raise

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Append every open batch, then commit: raises the error of a batch that failed (the transaction
        is then abortable: call abort_transaction())."""
        with self._txn_lock:
            self._require(_IN_TRANSACTION, what="commit_transaction")
            self._acc.flush()
            if self._txn_error is not None:             # _txn_failed made the transaction abortable (or fatal)
                raise self._txn_error
            self._end(True, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: records not yet appended fail with IllegalStateError, the appended ones are aborted by the
        markers (read_committed consumers never see them). After a failed batch the epoch is bumped too
        (InitProducerId with the current id and epoch, KIP-360), so sequence numbers restart."""
        with self._txn_lock:
            self._require(_IN_TRANSACTION, _ABORTABLE, what="abort_transaction")
            self._acc.txn_open = False
            self._acc.discard(IllegalStateError("the transaction was aborted before this record was sent"))
            self._end(False, timeout)
            if self._txn_error is not None:
                self._init_producer_id(self.producer_id, self.producer_epoch, timeout)

    def _end(self, commit: bool, timeout: float | None) -> None:
        self._acc.txn_open = False
        if self._txn_started:
            try:
                self._coordinator_call(self.node.txn_coordinator.end_txn, self.transactional_id, self.producer_id,
                                       self.producer_epoch, commit, timeout=timeout)
            except BaseException as e:
                self._txn_failed(e)
                raise
        self._txn_state = _READY

    def _linger_loop(self) -> None:
        while not self._closed:
            wait = self._acc.send_due()
            self._wakeup.wait(self.linger_ms / 1000 if wait is None else wait)
            self._wakeup.clear()

    def flush(self, timeout: float | None = None) -> None:
        """Append every open batch now (appends are synchronous in-process: nothing is left in flight)."""
        self._acc.flush()

    def partitions_for(self, topic: str) -> list[int]:
        """The partition numbers of a topic, re-read from the node (picks up added partitions)."""
        self._acc.refresh(topic)
        return list(range(self._partition_count(topic)[0]))

    def close(self, timeout: float | None = None) -> None:
        """Append everything still open and stop the linger thread (a transactional producer aborts its open
        transaction first, as Kafka's does). Idempotent."""
        if self._closed:
            return
        if self.transactional_id is not None and self._txn_state in (_IN_TRANSACTION, _ABORTABLE):
            try:
                self.abort_transaction()
            except SeglogError:
                pass                             # the coordinator aborts it when it times out
        self._acc.close()
        self._closed = True
        self._wakeup.set()
        if self._sender is not None:
            self._sender.join()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
