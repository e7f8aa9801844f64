"""Choosing the partition of a produced record, as Kafka's Java producer does.

The rule (:class:`DefaultPartitioner`): a record's explicit partition wins; else a record with a key goes to
``(murmur2(key) & 0x7fffffff) % num_partitions`` with Java's murmur2 (``Utils.murmur2``), so a key lands
on the partition a Java or kafka-python producer (or librdkafka with ``partitioner=murmur2_random``) would
pick; else (key None) round-robin per topic, or sticky: one partition per topic until the producer starts
a new batch there.

Partitioner contract (what the producer does with any partitioner, custom ones included):

* A partitioner is any callable ``partitioner(topic, key, num_partitions) -> int``. ``key`` is the
  serialized key (bytes-like) or None, ``num_partitions`` the topic's current count (>= 1). It must return a
  partition in ``[0, num_partitions)`` and be thread-safe: producer threads call it concurrently.
* It is called only for records without an explicit partition (see :func:`partition_for`).
* If it also has ``partition_many(topic, keys, num_partitions) -> list[int]``, the producer calls that once
  for a list of keys instead of once per record (the fast path: hashing runs in C).
* If it has ``on_new_batch(topic, prev_partition, num_partitions)``, the producer calls it after a batch of
  ``topic`` to ``prev_partition`` filled up and a new batch was started (the sticky switch point).

The hash functions live in the compiled engine (``seglog._engine``, from ``src/engine/hash.pxi``); they are
imported when a partitioner is created, not when this module is imported.
"""

from __future__ import annotations

import random
import threading
from typing import Callable, Sequence

from .errors import InvalidArgumentError

__all__ = ["Partitioner", "DefaultPartitioner", "RoundRobinPartitioner", "murmur2", "partition_for",
           "partitions_for"]

Partitioner = Callable[[str, "bytes | None", int], int]
"""Type of a partitioner: ``(topic, key, num_partitions) -> partition`` (see the module docstring)."""


def _engine_hash():
    """(murmur2, partitions_for_keys) from the compiled engine."""
    from ._engine import murmur2 as mm2, partitions_for_keys
    return mm2, partitions_for_keys


def murmur2(key) -> int:
    """Java's ``Utils.murmur2(key)``: a signed 32-bit int. ``key`` is bytes-like; TypeError for str or None."""
    return _engine_hash()[0](key)


def _check_count(num_partitions: int) -> None:
    if num_partitions < 1:
        raise InvalidArgumentError(f"num_partitions must be at least 1, got {num_partitions}")


class _TopicCounters:
    """Per-topic round-robin counters; ``take(topic, n)`` reserves n consecutive values atomically."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, topic: str, n: int) -> int:
        with self._lock:
            first = self._next.get(topic, 0)
            self._next[topic] = (first + n) & 0x7fffffff     # Java's counter wraps; toPositive keeps it >= 0
            return first


class DefaultPartitioner:
    """Key hash for keyed records; round-robin (``sticky=False``, default) or sticky for null keys.

    Sticky: every null-key record of a topic goes to one partition, chosen at random, until the producer
    calls :meth:`on_new_batch` for that partition; then another partition is chosen at random (a different
    one when there are two or more). Thread-safe.
    """

    def __init__(self, sticky: bool = False) -> None:
        self._murmur2, self._partitions_for_keys = _engine_hash()
        self.sticky = sticky
        self._counters = _TopicCounters()
        self._sticky: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, topic: str, key, num_partitions: int) -> int:
        """The partition of one record. InvalidArgumentError if ``num_partitions`` < 1, TypeError for a str key."""
        _check_count(num_partitions)
        if key is not None:
            return (self._murmur2(key) & 0x7fffffff) % num_partitions
        if self.sticky:
            return self._sticky_partition(topic, num_partitions)
        return self._counters.take(topic, 1) % num_partitions

    def partition_many(self, topic: str, keys: Sequence, num_partitions: int) -> list[int]:
        """The partitions of a list of records' keys (None = no key), in one C pass. Errors as ``__call__``."""
        _check_count(num_partitions)
        nulls = keys.count(None)
        if not nulls:
            return self._partitions_for_keys(keys, num_partitions)
        if self.sticky:
            return self._partitions_for_keys(keys, num_partitions, self._sticky_partition(topic, num_partitions), 0)
        return self._partitions_for_keys(keys, num_partitions, self._counters.take(topic, nulls), 1)

    def on_new_batch(self, topic: str, prev_partition: int, num_partitions: int) -> None:
        """A batch of ``topic`` to ``prev_partition`` is full: stick to another partition from now on.

        A no-op unless sticky, or when ``prev_partition`` is no longer the sticky one (another thread switched).
        """
        if not self.sticky:
            return
        with self._lock:
            if self._sticky.get(topic) == prev_partition:
                self._sticky[topic] = self._pick_other(prev_partition, num_partitions)

    def _sticky_partition(self, topic: str, num_partitions: int) -> int:
        with self._lock:
            part = self._sticky.get(topic)
            if part is None or part >= num_partitions:
                part = self._sticky[topic] = random.randrange(num_partitions)
            return part

    @staticmethod
    def _pick_other(prev: int, num_partitions: int) -> int:
        if num_partitions < 2:
            return 0
        part = random.randrange(num_partitions - 1)
        return part + 1 if part >= prev else part


class RoundRobinPartitioner:
    """Every record, keyed or not, to the next partition of its topic in turn (Kafka's RoundRobinPartitioner).

    Thread-safe; counters are per topic, so two topics do not disturb each other's cycle.
    """

    def __init__(self) -> None:
        self._counters = _TopicCounters()

    def __call__(self, topic: str, key, num_partitions: int) -> int:
        """The next partition of ``topic``. InvalidArgumentError if ``num_partitions`` < 1."""
        _check_count(num_partitions)
        return self._counters.take(topic, 1) % num_partitions

    def partition_many(self, topic: str, keys: Sequence, num_partitions: int) -> list[int]:
        """The next ``len(keys)`` partitions of ``topic`` in turn."""
        _check_count(num_partitions)
        first = self._counters.take(topic, len(keys))
        return [(first + i) % num_partitions for i in range(len(keys))]


def partition_for(partitioner: Partitioner, topic: str, key, num_partitions: int,
                  partition: int | None = None) -> int:
    """The partition of one record: ``partition`` if given, else ``partitioner(topic, key, num_partitions)``.

    Raises InvalidArgumentError when the explicit partition or the partitioner's answer is outside
    ``[0, num_partitions)`` (the producer rejects the record before appending anything).
    """
    _check_count(num_partitions)
    if partition is None:
        partition = partitioner(topic, key, num_partitions)
        what = f"partitioner {partitioner!r} returned"
    else:
        what = "record has"
    if not isinstance(partition, int) or not 0 <= partition < num_partitions:
        raise InvalidArgumentError(f"Invalid partition: {what} {partition!r}, topic {topic!r} has partitions "
                                   f"0..{num_partitions - 1}")
    return partition


def partitions_for(partitioner: Partitioner, topic: str, keys: Sequence, num_partitions: int) -> list[int]:
    """The partitions of many records without explicit partitions: one ``partition_many`` call if the
    partitioner has one (its answer is trusted, as for seglog's own partitioners), else one checked call per key.
    """
    many = getattr(partitioner, "partition_many", None)
    if many is not None:
        return many(topic, keys, num_partitions)
    return [partition_for(partitioner, topic, key, num_partitions) for key in keys]
