"""The group coordinator's offset stores: the OffsetStore interface, InMemoryOffsetStore (the cache), and
LogOffsetStore, the group coordinator's offsets and group metadata kept in the compacted topic
``__consumer_offsets`` in Kafka's record format (see offsets_format), so they survive restarts and crashes.

A group's records all go to partition ``abs(javaHashCode(group)) % offsets.topic.num.partitions``, as Kafka
places them. The latest value per key wins; a null value (tombstone) deletes the key. The in-memory view is
rebuilt by replaying every partition when the store opens. Writes append one batch per call (all the
offsets of a commit, all the records of a group conversion, land together or not at all). Thread-safe: one lock guards the cache and the appends.

Transactional offset commits (TxnOffsetCommit, KIP-98) are written as a transactional batch of the producer
and kept pending: invisible to fetches until a COMMIT marker of that producer lands in the group's partition
(``complete_txn``), dropped by an ABORT marker. Replaying a partition does the same from its batches and
control batches, so a coordinator that takes a partition over sees exactly the committed transactions.

In a cluster a write counts once the ISR has it (acks=all): it is appended under the lock, but waited for
outside it (``start_*`` returns the waiter), so a commit waiting for its acks (up to the replication timeout)
holds up neither reads, nor other writes, nor the leadership changes that load and unload partitions (which
may be what the commit waits for). The cache takes a write once it is acknowledged, and the writes of a
group in the order they were appended: a later commit never goes under an earlier one, and a waiter returns
only once its write is in the cache (other groups' writes do not wait for each other). A write that failed
is not applied; the writes pending on a partition that is unloaded (or loaded again) are never applied: the
log, replayed by whoever leads it, decides.
"""

from __future__ import annotations

import struct
import threading
from abc import ABC, abstractmethod
from collections import deque
from typing import Callable, Iterable, Mapping

from . import _engine
from . import offsets_format as fmt
from .errors import InvalidArgumentError, UnknownTopicOrPartitionError
from .offsets_format import OFFSETS_TOPIC, GroupMetadata, OffsetAndMetadata, TopicPartition


# --- offset store --------------------------------------------------------------------------------------------

def _no_wait() -> None:
    """The waiter of a write that was complete when it started (nothing to wait for: it is stored)."""


class OffsetStore(ABC):
    """Where the coordinator keeps committed offsets and group metadata (Kafka: ``__consumer_offsets``,
    records encoded by ``seglog.offsets_format``).

    Writes (commit, store_group, delete_group) are started one at a time (``start_*``), in the order the
    coordinator made the changes, without the coordinator's lock held, from whichever thread made the change
    (a request thread, the broker's event loop, the timer thread): keep the start short (a local append) and
    leave any waiting (replication) to the waiter it returns. A write that raises (at the start or in its
    waiter) fails the request it belongs to and is assumed not stored. Reads may run concurrently with a
    write. ``load_groups`` and ``groups`` are read once, when a coordinator starts.
    """

    @abstractmethod
    def commit(self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Store ``offsets`` of ``group`` (each replaces the partition's previous commit)."""

    @abstractmethod
    def fetch(self, group: str, partitions: Iterable[TopicPartition] | None = None
              ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of ``group``: of ``partitions`` (those without one are left out), or all (None)."""

    @abstractmethod
    def groups(self) -> set[str]:
        """Every group with committed offsets or stored metadata."""

    @abstractmethod
    def store_group(self, group: str, metadata: GroupMetadata) -> None:
        """Store the group's latest generation (replaces the previous one)."""

    @abstractmethod
    def load_groups(self) -> dict[str, GroupMetadata]:
        """The latest stored metadata of every group that has one."""

    @abstractmethod
    def delete_group(self, group: str) -> None:
        """Forget the group's metadata and all its offsets (Kafka: tombstones for every key of the group)."""

    @abstractmethod
    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        """Forget the group's committed offsets of ``partitions`` (Kafka: a tombstone per offset key); the
        group's metadata and other offsets stay."""

    # Two-phase writes: the coordinator starts writes one at a time, in order (the start appends), and waits
    # for each (replication) afterwards, with no lock of its own held, so a write waiting for acks does not
    # hold up the writes of other groups, nor the coordinator's timers. A store whose writes are done when
    # the start returns keeps these defaults. A started write must be waited for (its waiter called once),
    # and a store that applies started writes must apply them in the order they were started.

    def start_commit(self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Callable[[], None]:
        """Start :meth:`commit`; the returned callable blocks until it is stored (raises if it failed)."""
        self.commit(group, offsets)
        return _no_wait

    def start_store_group(self, group: str, metadata: GroupMetadata) -> Callable[[], None]:
        """Start :meth:`store_group` (see :meth:`start_commit`)."""
        self.store_group(group, metadata)
        return _no_wait

    def start_delete_group(self, group: str) -> Callable[[], None]:
        """Start :meth:`delete_group` (see :meth:`start_commit`)."""
        self.delete_group(group)
        return _no_wait

    def start_delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> Callable[[], None]:
        """Start :meth:`delete_offsets` (see :meth:`start_commit`)."""
        self.delete_offsets(group, partitions)
        return _no_wait

    # KIP-848 consumer groups (group_consumer_records): their records are kept as written, key -> value.

    def consumer_records(self, group: str) -> dict[bytes, bytes]:
        """The stored consumer group records of ``group`` (key -> value), empty when it has none. This default
        is a store that does not keep consumer groups: they then live in the coordinator's memory only."""
        return {}

    def start_consumer_records(self, group: str, records: list[tuple[bytes, bytes | None]], *,
                               drop_classic: bool = False, classic: GroupMetadata | None = None
                               ) -> Callable[[], None]:
        """Start writing consumer group records of ``group`` (None values: tombstones), as one batch (see
        :meth:`start_commit`). A conversion goes in that batch too, so that it is stored whole or not at all
        (Kafka's atomic append): ``drop_classic`` (a classic group became this consumer group) first a
        tombstone of the classic group's metadata, its offsets kept; ``classic`` (the consumer group became
        this classic group) last that metadata. This default keeps no consumer group records: only the
        classic metadata is written."""
        if drop_classic and classic is not None:
            raise InvalidArgumentError("a conversion either drops or stores the classic group's metadata")
        return self.start_store_group(group, classic) if classic is not None else _no_wait

    def partition_exists(self, topic: str, partition: int) -> bool:
        """Whether the topic partition exists (OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for one that
        does not, as Kafka checks its metadata cache). A store that knows no topics says True."""
        return True

    # Transactional offset commits (see the module docstring): pending per producer id until its transaction
    # ends in the group's offsets partition.

    @abstractmethod
    def start_txn_commit(self, group: str, producer_id: int, producer_epoch: int,
                         offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Callable[[], None]:
        """Start storing ``offsets`` of ``group`` as pending in the producer's transaction (see start_commit)."""

    @abstractmethod
    def complete_txn(self, partition: int | None, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended in offsets partition ``partition`` (None: every partition): its
        pending offsets of the groups there become committed (commit) or are dropped (abort)."""

    @abstractmethod
    def pending_txn_partitions(self, group: str) -> set[TopicPartition]:
        """The partitions of ``group`` with a transactional commit still pending (OffsetFetch's
        require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""


class InMemoryOffsetStore(OffsetStore):
    """The offsets and group metadata in dicts, guarded by one lock (thread-safe). On its own a throwaway store
    (tests, in-process use); LogOffsetStore keeps its cache in it, filled from __consumer_offsets. The
    ``_put_*``/``_drop_*`` helpers change the cache with the lock held."""

    def __init__(self) -> None:
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._groups: dict[str, GroupMetadata] = {}
        self._consumer: dict[str, dict[bytes, bytes]] = {}       # group -> its consumer group records
        self._pending_txn: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}  # producer id ->
        self._lock = threading.Lock()

    def _put_offsets(self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self._offsets.setdefault(group, {}).update({TopicPartition(*tp): om for tp, om in offsets.items()})

    def _put_consumer(self, group: str, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        stored = self._consumer.setdefault(group, {})
        for key, value in records:
            if value is None:
                stored.pop(key, None)
            else:
                stored[key] = value
        if not stored:
            del self._consumer[group]

    def consumer_records(self, group):
        with self._lock:
            return dict(self._consumer.get(group, {}))

    def start_consumer_records(self, group, records, *, drop_classic=False, classic=None):
        if drop_classic and classic is not None:
            raise InvalidArgumentError("a conversion either drops or stores the classic group's metadata")
        with self._lock:
            if drop_classic:
                self._groups.pop(group, None)
            self._put_consumer(group, records)
            if classic is not None:
                self._groups[group] = classic
        return _no_wait

    def _drop_offset(self, group: str, tp: TopicPartition) -> None:
        offsets = self._offsets.get(group, {})
        offsets.pop(tp, None)
        if not offsets:
            self._offsets.pop(group, None)

    def _put_pending(self, group: str, producer_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self._pending_txn.setdefault(producer_id, {}).setdefault(group, {}).update(
            {TopicPartition(*tp): om for tp, om in offsets.items()})

    def _in_partition(self, group: str, partition: int | None) -> bool:
        return True

    def _complete_txn(self, partition: int | None, producer_id: int, commit: bool) -> None:
        groups = self._pending_txn.get(producer_id)
        if not groups:
            return
        for group in [g for g in groups if partition is None or self._in_partition(g, partition)]:
            offsets = groups.pop(group)
            if commit:
                self._put_offsets(group, offsets)
        if not groups:
            del self._pending_txn[producer_id]

    def start_txn_commit(self, group, producer_id, producer_epoch, offsets):
        with self._lock:
            self._put_pending(group, producer_id, offsets)
        return _no_wait

    def complete_txn(self, partition, producer_id, commit):
        with self._lock:
            self._complete_txn(partition, producer_id, commit)

    def pending_txn_partitions(self, group):
        with self._lock:
            return {tp for groups in self._pending_txn.values() for tp in groups.get(group, ())}

    def _drop_group(self, group: str) -> None:
        """Forget the group's metadata and offsets."""
        self._offsets.pop(group, None)
        self._groups.pop(group, None)
        self._consumer.pop(group, None)

    def commit(self, group, offsets):
        with self._lock:
            self._put_offsets(group, offsets)

    def fetch(self, group, partitions=None):
        with self._lock:
            stored = self._offsets.get(group, {})
            if partitions is None:
                return dict(stored)
            return {TopicPartition(*tp): stored[tp] for tp in partitions if tp in stored}

    def groups(self):
        with self._lock:
            return set(self._offsets) | set(self._groups) | set(self._consumer)

    def store_group(self, group, metadata):
        with self._lock:
            self._groups[group] = metadata

    def load_groups(self):
        with self._lock:
            return dict(self._groups)

    def delete_group(self, group):
        with self._lock:
            self._drop_group(group)

    def delete_offsets(self, group, partitions):
        with self._lock:
            for tp in partitions:
                self._drop_offset(group, TopicPartition(*tp))


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, wrapping at 32 bits), as a signed int."""
    data = s.encode("utf-16-be")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_group(group: str, partitions: int) -> int:
    """Kafka's placement of a group in __consumer_offsets: Utils.abs(group.hashCode()) % partitions."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _next_sequence(log, producer_id: int, producer_epoch: int) -> int:
    """The sequence the producer's next batch in this log takes (0 for a new producer or epoch)."""
    for p in log.active_producers():
        if p.producer_id == producer_id and p.producer_epoch == producer_epoch:
            return (p.last_sequence + 1) % (1 << 31)
    return 0


class _Write:
    """A write appended to an offsets partition and waiting for its acks (guarded by the store's lock).
    ``producer_id`` >= 0: a transactional commit, applied as pending."""

    __slots__ = ("records", "producer_id", "ok", "settled", "finished")

    def __init__(self, records: list[tuple[bytes, bytes | None]], producer_id: int = -1):
        self.records = records
        self.producer_id = producer_id
        self.ok = False
        self.settled = False          # its acks came (ok) or its wait failed
        self.finished = False         # applied to the cache (if ok), or dropped: its waiter may return


class LogOffsetStore(InMemoryOffsetStore):
    """OffsetStore over a Node's __consumer_offsets partitions; its cache (fetch, groups, load_groups) is the
    InMemoryOffsetStore it extends, changed only by replayed or acknowledged records."""

    def __init__(self, node, partitions: Iterable[int] | None = None):
        """Replays the node's __consumer_offsets partitions, or only those in `partitions` (a cluster member
        reads the ones it leads; ``load_partition`` / ``unload_partition`` follow leadership moves)."""
        self._node = node
        info = node.topic(OFFSETS_TOPIC) if node.cluster_managed else node.ensure_topic(OFFSETS_TOPIC)
        self._partitions = info.partitions
        super().__init__()
        self._settled = threading.Condition(self._lock)
        self._pending: dict[str, deque[_Write]] = {}     # group -> its writes waiting for acks, in append order
        wanted = None if partitions is None else set(partitions)
        for part in node.partitions(info.name):
            if wanted is None or part.index in wanted:
                self._replay(part)

    def _replay(self, part) -> None:
        """Apply every record of the partition, batch by batch (about 1 MiB read and decoded at a time): a
        transactional batch's offsets go pending under its producer, a control batch ends that producer's
        transaction."""
        log = part.log
        offset, end = log.start_offset, log.end_offset
        while offset < end:
            view, next_offset = log.read_next(offset, 1 << 20)
            if next_offset < 0:
                return
            records = iter(_engine.decode_records(view, offset, verify_crc=False))   # control batches skipped
            r = next(records, None)
            for b in _engine.batches(view, False):
                if b.last_offset < offset:
                    continue
                if b.is_control:
                    self._complete_txn(part.index, b.producer_id, _engine.control_marker(view, b.position)[0] is True)
                    continue
                producer_id = b.producer_id if b.is_transactional else -1
                while r is not None and r.offset <= b.last_offset:
                    self._apply(r.key, r.value, producer_id)
                    r = next(records, None)
            offset = next_offset

    def _in_partition(self, group: str, partition: int | None) -> bool:
        return partition_for_group(group, self._partitions) == partition

    def _groups_in(self, p: int) -> set[str]:
        pending = {g for groups in self._pending_txn.values() for g in groups}
        return {g for g in set(self._offsets) | set(self._groups) | set(self._consumer) | pending
                if partition_for_group(g, self._partitions) == p}

    def _forget(self, groups: set[str]) -> None:
        for g in groups:
            self._drop_group(g)
        for pid in list(self._pending_txn):
            for g in groups:
                self._pending_txn[pid].pop(g, None)
            if not self._pending_txn[pid]:
                del self._pending_txn[pid]

    def load_partition(self, p: int) -> tuple[dict[str, GroupMetadata], set[str]]:
        """Read offsets partition `p` again (its leadership moved here; Kafka's onElection): what it holds
        replaces whatever was cached for its groups. Returns (group metadata, group names) of its groups."""
        part = self._node.partition(OFFSETS_TOPIC, p)
        with self._lock:
            self._drop_pending(p)                # the replay below reads them (whatever the log holds)
            self._forget(self._groups_in(p))
            self._replay(part)
            names = self._groups_in(p)
            return {g: self._groups[g] for g in names if g in self._groups}, names

    def unload_partition(self, p: int) -> set[str]:
        """Forget the groups of offsets partition `p` (its leadership moved away); returns their names."""
        with self._lock:
            self._drop_pending(p)
            names = self._groups_in(p)
            self._forget(names)
            return names

    def _drop_pending(self, p: int) -> None:
        for group in [g for g in self._pending if partition_for_group(g, self._partitions) == p]:
            for w in self._pending.pop(group):
                w.finished = True
        self._settled.notify_all()

    def _apply(self, key: bytes | None, value: bytes | None, producer_id: int = -1) -> None:
        if key is None:
            return
        try:
            k = fmt.decode_key(key)
        except Exception:                        # a record type this version does not know: skip it
            return
        if isinstance(k, fmt.OffsetKey):
            tp = TopicPartition(k.topic, k.partition)
            if producer_id >= 0:
                if value is not None:
                    self._put_pending(k.group, producer_id, {tp: fmt.decode_offset_value(value)})
            elif value is None:
                self._drop_offset(k.group, tp)
            else:
                self._put_offsets(k.group, {tp: fmt.decode_offset_value(value)})
        elif isinstance(k, fmt.ConsumerGroupKey):
            self._put_consumer(k.group, [(key, value)])
        else:
            if value is None:
                self._groups.pop(k.group, None)
            else:
                self._groups[k.group] = fmt.decode_group_value(value)

    def _start(self, group: str, records: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> Callable[[], None]:
        """Append records (lock held) as one batch (a crash keeps all of them or none), transactional for a
        ``producer`` (id, epoch); the waiter for their acks, which then applies them in order."""
        p = partition_for_group(group, self._partitions)
        part = self._node.partition(OFFSETS_TOPIC, p)
        if producer is None:
            w = _engine.BatchWriter(batch_bytes=1 << 62, max_record_bytes=1 << 62)
        else:
            w = _engine.BatchWriter(producer_id=producer[0], producer_epoch=producer[1], transactional=True,
                                    next_sequence=_next_sequence(part.log, *producer), batch_bytes=1 << 62,
                                    max_record_bytes=1 << 62)
        for key, value in records:
            w.add(value, key, None, None)
        w.finish()
        last = part.log.append_raw(w.take()) + len(records) - 1
        producer_id = -1 if producer is None else producer[0]
        wait_replicated = self._node.replication_waiter
        if wait_replicated is None:                     # standalone: nothing to wait for
            for key, value in records:
                self._apply(key, value, producer_id)
            return _no_wait
        write = _Write(records, producer_id)
        self._pending.setdefault(group, deque()).append(write)

        def wait() -> None:
            try:
                wait_replicated(part, last)             # a cluster: acknowledged once the ISR has it
                ok = True
            except BaseException:
                ok = False
                raise
            finally:
                self._settle(group, write, ok)
        return wait

    def _settle(self, group: str, write: _Write, ok: bool) -> None:
        """Apply the settled writes at the head of the group's queue, then wait until `write` is done (an
        earlier write of the group may still wait for its acks: it is applied first)."""
        with self._settled:
            write.ok, write.settled = ok, True
            queue = self._pending.get(group)
            while queue and queue[0].settled:
                head = queue.popleft()
                if head.ok:
                    for key, value in head.records:
                        self._apply(key, value, head.producer_id)
                head.finished = True
            if queue is not None and not queue:
                del self._pending[group]
            self._settled.notify_all()
            while not write.finished:
                self._settled.wait()

    def start_commit(self, group, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Callable[[], None]:
        records = [(fmt.encode_offset_key(group, tp[0], tp[1]), fmt.encode_offset_value(om))
                   for tp, om in offsets.items()]
        if not records:
            return _no_wait
        with self._lock:
            return self._start(group, records)

    def commit(self, group, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self.start_commit(group, offsets)()

    def start_txn_commit(self, group, producer_id, producer_epoch, offsets) -> Callable[[], None]:
        records = [(fmt.encode_offset_key(group, tp[0], tp[1]), fmt.encode_offset_value(om))
                   for tp, om in offsets.items()]
        if not records:
            return _no_wait
        with self._lock:
            return self._start(group, records, (producer_id, producer_epoch))

    def start_store_group(self, group, metadata: GroupMetadata) -> Callable[[], None]:
        record = (fmt.encode_group_key(group), fmt.encode_group_value(metadata))
        with self._lock:
            return self._start(group, [record])

    def store_group(self, group, metadata: GroupMetadata) -> None:
        self.start_store_group(group, metadata)()

    def start_consumer_records(self, group, records, *, drop_classic=False, classic=None) -> Callable[[], None]:
        if drop_classic and classic is not None:
            raise InvalidArgumentError("a conversion either drops or stores the classic group's metadata")
        key = fmt.encode_group_key(group)
        batch = ([(key, None)] if drop_classic else []) + list(records) + (
            [] if classic is None else [(key, fmt.encode_group_value(classic))])
        if not batch:
            return _no_wait
        with self._lock:
            return self._start(group, batch)

    def start_delete_group(self, group) -> Callable[[], None]:
        with self._lock:
            keys = [fmt.encode_offset_key(group, tp.topic, tp.partition) for tp in self._offsets.get(group, {})]
            if group in self._groups:
                keys.append(fmt.encode_group_key(group))
            keys.extend(self._consumer.get(group, {}))
            if not keys:
                return _no_wait
            return self._start(group, [(k, None) for k in keys])

    def delete_group(self, group) -> None:
        self.start_delete_group(group)()

    def start_delete_offsets(self, group, partitions) -> Callable[[], None]:
        with self._lock:
            stored = self._offsets.get(group, {})
            keys = [fmt.encode_offset_key(group, tp[0], tp[1]) for tp in partitions if TopicPartition(*tp) in stored]
            if not keys:
                return _no_wait
            return self._start(group, [(k, None) for k in keys])

    def delete_offsets(self, group, partitions) -> None:
        self.start_delete_offsets(group, partitions)()

    def partition_exists(self, topic: str, partition: int) -> bool:
        """The node's metadata (a cluster member knows every topic of the cluster, hosted here or not)."""
        try:
            return 0 <= partition < self._node.topic(topic).partitions
        except UnknownTopicOrPartitionError:
            return False
