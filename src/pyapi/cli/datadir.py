"""DataDirAdmin: the commands' Admin over a data directory opened in this process (``--data-dir``).

The command holds the directory's lock while it runs, so a running broker on the same directory makes it
fail at once (StorageError: use --bootstrap-server). The node is opened with ``auto.create.topics.enable``
off (a typo in --topic is an error, not a new topic) and ``group.initial.rebalance.delay.ms`` 0 (no other
member can join while the command holds the lock, so waiting for one would only slow `consume --group`),
as the broker.id its meta.properties holds. Group queries do not create ``__consumer_offsets`` when it does not exist yet.
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping, Sequence

from ..assignors import Assignment
from ..consumer import Consumer
from ..errors import (GroupIdNotFoundError, InvalidConfigError, SeglogError, StorageError,
                      UnknownTopicOrPartitionError)
from ..node import Node, read_meta_properties
from ..offsets_format import OFFSETS_TOPIC, OffsetAndMetadata, TopicPartition
from ..producer import Producer
from .admin import Admin, GroupInfo, GroupListing, MemberInfo, PartitionInfo, TopicDescription

NODE_CONFIG = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"}


def _int(v: str) -> int:
    return int(v)


def _bool(v: str) -> bool:
    low = v.strip().lower()
    if low not in ("true", "false"):
        raise ValueError(v)
    return low == "true"


def _strs(v: str) -> list[str]:
    return [s.strip() for s in v.split(",") if s.strip()]


# Kafka client property -> (keyword of seglog.Producer / seglog.Consumer, parser)
PRODUCER_PROPERTIES = {
    "acks": ("acks", str), "compression.type": ("compression_type", str), "linger.ms": ("linger_ms", float),
    "batch.size": ("batch_size", _int), "enable.idempotence": ("enable_idempotence", _bool),
    "max.request.size": ("max_request_size", _int), "client.id": ("client_id", str),
}
CONSUMER_PROPERTIES = {
    "group.id": ("group_id", str), "client.id": ("client_id", str), "auto.offset.reset": ("auto_offset_reset", str),
    "enable.auto.commit": ("enable_auto_commit", _bool), "auto.commit.interval.ms": ("auto_commit_interval_ms", _int),
    "max.poll.records": ("max_poll_records", _int), "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _int),
    "session.timeout.ms": ("session_timeout_ms", _int), "heartbeat.interval.ms": ("heartbeat_interval_ms", _int),
    "max.poll.interval.ms": ("max_poll_interval_ms", _int), "group.instance.id": ("group_instance_id", str),
    "partition.assignment.strategy": ("partition_assignment_strategy", _strs),
}


def client_kwargs(properties: Mapping[str, str], table: dict, what: str) -> dict:
    """Kafka-named client properties -> keyword arguments; InvalidConfigError for unknown names or bad values."""
    kw = {}
    for name, raw in properties.items():
        entry = table.get(name)
        if entry is None:
            raise InvalidConfigError(f"Unknown {what} config name: {name} (known here: {', '.join(sorted(table))})")
        attr, parse = entry
        try:
            kw[attr] = parse(raw)
        except ValueError:
            raise InvalidConfigError(f"Invalid value {raw!r} for {what} configuration {name}") from None
    return kw


class DataDirAdmin(Admin):
    """Admin over ``seglog.open(path)`` in this process (see the module docstring)."""

    live = False

    def __init__(self, path: str, *, create: bool = False):
        if not create and not os.path.isdir(path):
            raise StorageError("no such data directory", path)
        # a cluster member's directory is inspected as that broker (a node refuses another broker.id)
        stored_id = read_meta_properties(path).get("broker.id", "") if os.path.isdir(path) else ""
        self.node = Node(path, {**NODE_CONFIG, "broker.id": stored_id} if stored_id.isdecimal() else NODE_CONFIG)

    def close(self) -> None:
        self.node.close()

    # -- topics ---------------------------------------------------------------------------------------------

    def list_topics(self, include_internal: bool = True) -> list[str]:
        return self.node.topics(include_internal=include_internal)

    def describe_topic(self, name: str) -> TopicDescription:
        info = self.node.topic(name)
        me = self.node.config.broker_id
        parts = tuple(PartitionInfo(p, me, (me,), (me,)) for p in range(info.partitions))
        return TopicDescription(info.name, info.topic_id, parts, dict(info.overrides), info.config.to_kafka(),
                                info.internal)

    def create_topic(self, name, partitions, replication_factor, config) -> None:
        self.node.create_topic(name, partitions, dict(config), replication_factor)

    def create_partitions(self, name: str, total: int) -> None:
        self.node.create_partitions(name, total)

    def alter_topic_config(self, name: str, set_: Mapping[str, str], delete: Sequence[str]) -> None:
        self.node.topic(name)
        self.node.alter_topic_config(name, dict(set_), list(delete))

    def delete_topic(self, name: str) -> None:
        self.node.delete_topic(name)

    # -- offsets --------------------------------------------------------------------------------------------

    def _partitions(self, partitions: Iterable[tuple[str, int]]):
        """(TopicPartition, its Partition or None when unknown) for each of `partitions`."""
        for tp in partitions:
            tp = TopicPartition(*tp)
            try:
                part = self.node.partition(*tp)
            except UnknownTopicOrPartitionError:
                part = None
            yield tp, part

    def offset_ranges(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, tuple[int, int] | None]:
        return {tp: None if part is None else (part.log_start_offset, part.high_watermark)
                for tp, part in self._partitions(partitions)}

    def offsets_for_times(self, partitions: Iterable[tuple[str, int]], timestamp: int
                          ) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for tp, part in self._partitions(partitions):
            found = None if part is None else part.log.offset_for_timestamp(timestamp)
            out[tp] = found.offset if found is not None and found.offset < part.high_watermark else None
        return out

    def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | SeglogError]:
        out: dict[TopicPartition, int | SeglogError] = {}
        for tp, offset in offsets.items():
            try:
                out[tp] = self.node.partition(*tp).log.delete_records_before(offset)
            except SeglogError as e:
                out[tp] = e
        return out

    def log_dirs(self, brokers: Sequence[int] | None) -> dict[int, list[dict]]:
        me = self.node.config.broker_id
        if brokers is not None and me not in brokers:
            return {}
        parts = [{"topic": t, "partition": p.index, "size": p.log.size_bytes,
                  "offsetLag": max(p.high_watermark - p.log_end_offset, 0), "isFuture": False}
                 for t in self.node.topics(include_internal=True) for p in self.node.partitions(t)]
        return {me: [{"logDir": self.node.path, "error": None, "partitions": parts}]}

    # -- groups ---------------------------------------------------------------------------------------------

    def _coordinator(self):
        """The node's group coordinator, or None while no group ever existed here (no __consumer_offsets)."""
        if OFFSETS_TOPIC not in self.node.topics(include_internal=True):
            return None
        return self.node.group_coordinator

    def list_groups(self) -> list[GroupListing]:
        coord = self._coordinator()
        if coord is None:
            return []
        return [GroupListing(g.group_id, str(g.state), g.protocol_type) for g in coord.list_groups()]

    def describe_group(self, group_id: str) -> GroupInfo:
        coord = self._coordinator()
        where = f"{self.node.path} ({self.node.config.broker_id})"
        if coord is None:
            return GroupInfo(group_id, "Dead", coordinator=where)
        [d] = coord.describe_groups([group_id])
        members = []
        for m in d.members:
            tps: tuple[TopicPartition, ...] = ()
            if d.protocol_type == "consumer" and m.assignment:
                tps = tuple(TopicPartition(*tp) for tp in Assignment.decode(m.assignment).partitions)
            members.append(MemberInfo(m.member_id, m.client_id, m.client_host, tps))
        return GroupInfo(d.group_id, str(d.state), d.protocol_type, d.protocol, tuple(members), where)

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        coord = self._coordinator()
        if coord is None:
            return {}
        return {TopicPartition(*tp): om.offset for tp, om in coord.fetch_offsets(group_id).items()
                if om is not None and om.offset >= 0}

    def alter_committed_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        request = {TopicPartition(*tp): OffsetAndMetadata(int(o)) for tp, o in offsets.items()}
        errors = self.node.group_coordinator.commit_offsets(group_id, request)
        failed = [e for e in errors.values() if e is not None]
        if failed:
            raise failed[0]

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, SeglogError | None]:
        coord = self._coordinator()
        if coord is None:
            return {g: GroupIdNotFoundError(f"group {g!r} does not exist") for g in group_ids}
        return coord.delete_groups(group_ids)

    # -- clients --------------------------------------------------------------------------------------------

    def producer(self, properties: Mapping[str, str]) -> Producer:
        return Producer(self.node, **client_kwargs(properties, PRODUCER_PROPERTIES, "producer"))

    def consumer(self, properties: Mapping[str, str]) -> Consumer:
        return Consumer(self.node, **client_kwargs(properties, CONSUMER_PROPERTIES, "consumer"))
