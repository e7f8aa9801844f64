"""The in-process Producer: Kafka's producer semantics against a local Node, with no network in between.

``send()`` picks the partition (explicit > partitioner(key) > round-robin), encodes the record into that
partition's open batch and returns a RecordFuture (``future.get()`` -> RecordMetadata; it also unpacks as
``(partition, offset)``). A batch goes to the partition when it reaches ``batch_size`` bytes, when
``linger_ms`` has passed since its first record (a background thread watches), on ``flush()``/``close()``,
or as soon as a future of it is asked for its offset. Batches are appended through the same path the
network broker uses for client batches (validation, idempotence), so both doors behave alike. With
``enable_idempotence`` (the default, as in Kafka 3+) each batch carries the producer id, epoch and sequence
numbers, and the partition deduplicates them. The per-record work runs in C (seglog._engine.RecordAccumulator).

Thread-safe: any number of threads may send.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, NamedTuple

from . import _engine
from .errors import InvalidArgumentError
from .partitioner import DefaultPartitioner

__all__ = ["Producer", "RecordFuture", "RecordMetadata"]

RecordFuture = _engine.RecordFuture
_ACKS = {"all": -1, "-1": -1, -1: -1, 0: 0, "0": 0, 1: 1, "1": 1}


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
    """

    def __init__(self, node, *, acks: Any = "all", linger_ms: float = 5, batch_size: int = 16384,
                 compression_type: str | None = None, partitioner: Callable | None = None,
                 enable_idempotence: bool = True, max_request_size: int = 1048576,
                 key_serializer: Callable | None = None, value_serializer: Callable | None = None,
                 client_id: str = "seglog-producer"):
        if acks not in _ACKS:
            raise InvalidArgumentError(f"acks must be 'all', -1, 0 or 1, not {acks!r}")
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
        producer_id = node.init_producer_id() if enable_idempotence else -1
        self._acc = _engine.RecordAccumulator(
            self._partition_count, self._append, RecordMetadata, batch_size=batch_size, linger_s=linger_ms / 1000,
            compression=compression_type, producer_id=producer_id,
            producer_epoch=0 if enable_idempotence else -1, partitioner=partitioner,
            max_request_size=max_request_size, new_producer_id=node.init_producer_id)
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
        """The idempotent producer id in use (-1 without idempotence); a failed append moves to a new one."""
        return self._acc.producer_id

    def _partition_count(self, topic: str) -> tuple[int, int]:
        """(partitions, the topic's max.message.bytes; the producer's max_request_size when unknown)."""
        info = self.node.ensure_topic(topic)
        config = getattr(info, "config", None)
        return info.partitions, config.max_message_bytes if config is not None else self._max_request_size

    def _append(self, topic: str, partition: int, data: bytes) -> int:
        base, _, _ = self.node.partition(topic, partition).append(data, self.acks)
        if self._sender is not None:
            self._wakeup.set()
        return base

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
        """Append everything still open and stop the linger thread. Idempotent."""
        if self._closed:
            return
        self._acc.close()
        self._closed = True
        self._wakeup.set()
        if self._sender is not None:
            self._sender.join()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
