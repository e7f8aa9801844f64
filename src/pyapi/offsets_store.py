"""LogOffsetStore: the group coordinator's offsets and group metadata, kept in the compacted topic
``__consumer_offsets`` in Kafka's record format (see offsets_format), so they survive restarts and crashes.

A group's records all go to partition ``abs(javaHashCode(group)) % offsets.topic.num.partitions``, as Kafka
places them. The latest value per key wins; a null value (tombstone) deletes the key. The in-memory view is
rebuilt by replaying every partition when the store opens. Writes append one batch per call (all the
offsets of a commit land together or not at all). Thread-safe: one lock guards the cache.
"""

from __future__ import annotations

import struct
import threading
from typing import Iterable, Mapping

from . import offsets_format as fmt
from .group import OffsetStore
from .node import OFFSETS_TOPIC
from .offsets_format import GroupMetadata, OffsetAndMetadata, TopicPartition


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


class LogOffsetStore(OffsetStore):
    """OffsetStore over a Node's __consumer_offsets partitions."""

    def __init__(self, node, partitions: Iterable[int] | None = None):
        """Replays the node's __consumer_offsets partitions, or only those in `partitions` (a cluster member
        reads the ones it leads; ``load_partition`` / ``unload_partition`` follow leadership moves)."""
        self._node = node
        info = node.topic(OFFSETS_TOPIC) if node.cluster_managed else node.ensure_topic(OFFSETS_TOPIC)
        self._partitions = info.partitions
        self._lock = threading.Lock()
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
            self._forget(self._groups_in(p))
            self._replay(part)
            names = self._groups_in(p)
            return {g: self._groups[g] for g in names if g in self._groups}, names

    def unload_partition(self, p: int) -> set[str]:
        """Forget the groups of offsets partition `p` (its leadership moved away); returns their names."""
        with self._lock:
            names = self._groups_in(p)
            self._forget(names)
            return names

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

    def _append(self, group: str, records: list[tuple[bytes, bytes | None]]) -> None:
        part = self._node.partition(OFFSETS_TOPIC, partition_for_group(group, self._partitions))
        _, last = part.log.append_batch([v for _, v in records], keys=[k for k, _ in records])
        if self._node.replication_waiter is not None:     # a cluster: acknowledged once the ISR has it
            self._node.replication_waiter(part, last)

    def commit(self, group, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        records = [(fmt.encode_offset_key(group, tp[0], tp[1]), fmt.encode_offset_value(om))
                   for tp, om in offsets.items()]
        if not records:
            return
        with self._lock:
            self._append(group, records)
            for key, value in records:
                self._apply(key, value)

    def fetch(self, group, partitions: Iterable[TopicPartition] | None = None):
        with self._lock:
            stored = self._offsets.get(group, {})
            if partitions is None:
                return dict(stored)
            return {TopicPartition(*tp): stored[tp] for tp in partitions if tp in stored}

    def groups(self):
        with self._lock:
            return set(self._offsets) | set(self._groups)

    def store_group(self, group, metadata: GroupMetadata) -> None:
        record = (fmt.encode_group_key(group), fmt.encode_group_value(metadata))
        with self._lock:
            self._append(group, [record])
            self._apply(*record)

    def load_groups(self):
        with self._lock:
            return dict(self._groups)

    def delete_group(self, group) -> None:
        with self._lock:
            keys = [fmt.encode_offset_key(group, tp.topic, tp.partition) for tp in self._offsets.get(group, {})]
            if group in self._groups:
                keys.append(fmt.encode_group_key(group))
            if keys:
                self._append(group, [(k, None) for k in keys])
                for k in keys:
                    self._apply(k, None)
