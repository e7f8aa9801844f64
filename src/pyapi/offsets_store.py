"""LogOffsetStore: the group coordinator's offsets and group metadata, kept in the compacted topic
``__consumer_offsets`` in Kafka's record format (see offsets_format), so they survive restarts and crashes.

A group's records all go to partition ``abs(javaHashCode(group)) % offsets.topic.num.partitions``, as Kafka
places them. The latest value per key wins; a null value (tombstone) deletes the key. The in-memory view is
rebuilt by replaying every partition when the store opens. Writes append one batch per call (all the
offsets of a commit land together or not at all). Thread-safe: one lock guards the cache and the appends.

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
from collections import deque
from typing import Callable, Iterable, Mapping

from . import offsets_format as fmt
from .group import OffsetStore
from .errors import UnknownTopicOrPartitionError
from .offsets_format import OFFSETS_TOPIC, GroupMetadata, OffsetAndMetadata, TopicPartition


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


class _Write:
    """A write appended to an offsets partition and waiting for its acks (guarded by the store's lock)."""

    __slots__ = ("records", "ok", "settled", "finished")

    def __init__(self, records: list[tuple[bytes, bytes | None]]):
        self.records = records
        self.ok = False
        self.settled = False          # its acks came (ok) or its wait failed
        self.finished = False         # applied to the cache (if ok), or dropped: its waiter may return


def _no_wait() -> None:
    """The waiter of a write that needed no acks (a standalone node): it is in the cache already."""


class LogOffsetStore(OffsetStore):
    """OffsetStore over a Node's __consumer_offsets partitions."""

    def __init__(self, node, partitions: Iterable[int] | None = None):
        """Replays the node's __consumer_offsets partitions, or only those in `partitions` (a cluster member
        reads the ones it leads; ``load_partition`` / ``unload_partition`` follow leadership moves)."""
        self._node = node
        info = node.topic(OFFSETS_TOPIC) if node.cluster_managed else node.ensure_topic(OFFSETS_TOPIC)
        self._partitions = info.partitions
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._pending: dict[str, deque[_Write]] = {}     # group -> its writes waiting for acks, in append order
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._groups: dict[str, GroupMetadata] = {}
        wanted = None if partitions is None else set(partitions)
        for part in node.partitions(info.name):
            if wanted is None or part.index in wanted:
                self._replay(part)

    def _replay(self, part) -> None:
        for r in part.log.records():
            self._apply(r.key, r.value)

    def _groups_in(self, p: int) -> set[str]:
        return {g for g in set(self._offsets) | set(self._groups) if partition_for_group(g, self._partitions) == p}

    def _forget(self, groups: set[str]) -> None:
        for g in groups:
            self._offsets.pop(g, None)
            self._groups.pop(g, None)

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

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            k = fmt.decode_key(key)
        except Exception:                        # a record type this version does not know: skip it
            return
        if isinstance(k, fmt.OffsetKey):
            offsets = self._offsets.setdefault(k.group, {})
            tp = TopicPartition(k.topic, k.partition)
            if value is None:
                offsets.pop(tp, None)
                if not offsets:
                    self._offsets.pop(k.group, None)
            else:
                offsets[tp] = fmt.decode_offset_value(value)
        else:
            if value is None:
                self._groups.pop(k.group, None)
            else:
                self._groups[k.group] = fmt.decode_group_value(value)

    def _start(self, group: str, records: list[tuple[bytes, bytes | None]]) -> Callable[[], None]:
        """Append records (lock held); the waiter for their acks, which then applies them in order."""
        p = partition_for_group(group, self._partitions)
        part = self._node.partition(OFFSETS_TOPIC, p)
        _, last = part.log.append_batch([v for _, v in records], keys=[k for k, _ in records])
        wait_replicated = self._node.replication_waiter
        if wait_replicated is None:                     # standalone: nothing to wait for
            for key, value in records:
                self._apply(key, value)
            return _no_wait
        write = _Write(records)
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
                        self._apply(key, value)
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

    def fetch(self, group, partitions: Iterable[TopicPartition] | None = None):
        with self._lock:
            stored = self._offsets.get(group, {})
            if partitions is None:
                return dict(stored)
            return {TopicPartition(*tp): stored[tp] for tp in partitions if tp in stored}

    def groups(self):
        with self._lock:
            return set(self._offsets) | set(self._groups)

    def start_store_group(self, group, metadata: GroupMetadata) -> Callable[[], None]:
        record = (fmt.encode_group_key(group), fmt.encode_group_value(metadata))
        with self._lock:
            return self._start(group, [record])

    def store_group(self, group, metadata: GroupMetadata) -> None:
        self.start_store_group(group, metadata)()

    def load_groups(self):
        with self._lock:
            return dict(self._groups)

    def start_delete_group(self, group) -> Callable[[], None]:
        with self._lock:
            keys = [fmt.encode_offset_key(group, tp.topic, tp.partition) for tp in self._offsets.get(group, {})]
            if group in self._groups:
                keys.append(fmt.encode_group_key(group))
            if not keys:
                return _no_wait
            return self._start(group, [(k, None) for k in keys])

    def delete_group(self, group) -> None:
        self.start_delete_group(group)()

    def partition_exists(self, topic: str, partition: int) -> bool:
        """The node's metadata (a cluster member knows every topic of the cluster, hosted here or not)."""
        try:
            return 0 <= partition < self._node.topic(topic).partitions
        except UnknownTopicOrPartitionError:
            return False
