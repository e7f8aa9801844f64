"""The one Admin the `topics`, `produce`, `consume` and `groups` commands work through, written once over the
Node surface: ``self.node`` is a seglog.node.Node opened in this process (``--data-dir``, seglog.cli.datadir)
or a seglog.remote.RemoteNode (``--bootstrap-server``, seglog.cli.broker_admin); seglog.cli.connect picks one for a
command's arguments. Topic changes, committed offsets, group deletion and the clients go through that surface
here; a subclass holds only what its door answers its own way (topic descriptions, offsets and log dirs,
group listing and description: a data dir reads its logs, a broker asks every broker).

Contract for implementations: methods raise ``seglog.errors.SeglogError`` subclasses (a network client turns
a Kafka error code into one with ``seglog.errors.for_code(code)(message)``); the commands print their message
on one line and exit 1. Topic names are exact names (no patterns). Offsets are Kafka's: a partition's range is
(log start offset, high watermark); committed offsets are the next offset to read.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple, Protocol, Sequence

from ..assignors import Assignment
from ..consumer import Consumer
from ..errors import GroupIdNotFoundError, InvalidConfigError, SeglogError
from ..offsets_format import OffsetAndMetadata, TopicPartition
from ..producer import Producer
from ..txn.coordinator import TransactionDescription, TransactionListing

__all__ = ["Admin", "PartitionInfo", "TopicDescription", "GroupListing", "MemberInfo", "GroupInfo",
           "ProducerClient", "ConsumerClient", "RecordLike", "PRODUCER_PROPERTIES", "CONSUMER_PROPERTIES",
           "client_kwargs", "member_info"]


class PartitionInfo(NamedTuple):
    """One partition as Metadata describes it: broker ids of its leader, replicas and in-sync replicas; while it
    is being reassigned, the replicas being added and removed (ListPartitionReassignments)."""
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def replication_factor(self) -> int:
        """As kafka-topics.sh counts it: a partition being reassigned has its original replicas' count."""
        return len(self.replicas) - len(self.adding)


@dataclass(frozen=True)
class TopicDescription:
    """A topic: ``configs`` are its overrides (what ``--describe`` prints after ``Configs:``),
    ``effective_config`` every topic config in effect (overrides over the broker defaults)."""
    name: str
    topic_id: uuid.UUID | None
    partitions: tuple[PartitionInfo, ...]
    configs: Mapping[str, str] = field(default_factory=dict)
    effective_config: Mapping[str, str] = field(default_factory=dict)
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        return self.partitions[0].replication_factor if self.partitions else 0


class GroupListing(NamedTuple):
    """ListGroups entry: the state is Kafka's name (Empty, Stable, PreparingRebalance, CompletingRebalance)."""
    group_id: str
    state: str
    protocol_type: str


class MemberInfo(NamedTuple):
    """A group member with the partitions its assignment gives it (decoded consumer-protocol assignment)."""
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class GroupInfo:
    """DescribeGroups data. An unknown group is state "Dead" with no members (as Kafka answers).
    ``protocol`` is the assignor of a Stable group ("" otherwise); ``coordinator`` names who answered."""
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[MemberInfo, ...] = ()
    coordinator: str = ""


class RecordLike(Protocol):
    """What consumers return (seglog.Record has these attributes)."""
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int               # 0 CreateTime, 1 LogAppendTime, -1 none
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]


class ProducerClient(Protocol):
    """The part of seglog.Producer the console producer uses. ``send`` may raise at once (bad partition,
    record over max.request.size); append errors come from the returned future's ``get()``."""

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, partition: int | None = None,
             headers: Sequence[tuple[str, bytes | None]] | None = None) -> Any: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class ConsumerClient(Protocol):
    """The part of seglog.Consumer the console consumer uses. ``poll`` returns at most ``max_records``
    RecordLikes and moves the positions just past them; ``close()`` commits positions when the consumer has
    a group and auto-commit on, then leaves the group."""

    def subscribe(self, topics: Iterable[str]) -> None: ...

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None: ...

    def assignment(self) -> set[TopicPartition]: ...

    def seek(self, tp: tuple[str, int], offset: int) -> None: ...

    def seek_to_beginning(self, *tps: tuple[str, int]) -> None: ...

    def seek_to_end(self, *tps: tuple[str, int]) -> None: ...

    def end_offsets(self, tps: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]: ...

    def position(self, tp: tuple[str, int]) -> int: ...

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list: ...

    def close(self, autocommit: bool = True) -> None: ...


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
    "isolation.level": ("isolation_level", str),
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


def member_info(member_id: str, client_id: str, host: str, protocol_type: str, assignment: bytes) -> MemberInfo:
    """A described member with its assignment decoded (consumer protocol; other protocols: no partitions)."""
    tps: tuple[TopicPartition, ...] = ()
    if protocol_type == "consumer" and assignment:
        tps = tuple(TopicPartition(*tp) for tp in Assignment.decode(assignment).partitions)
    return MemberInfo(member_id, client_id, host, tps)


class Admin(ABC):
    """Topic, offset and group administration plus client factories over ``self.node`` (see the module
    docstring). Not thread-safe: one command's."""

    node: Any

    live: bool = True
    """True when other clients may append while a command runs (a broker). A data dir is locked by the command
    that opened it: once a consumer reached the end, nothing more can come, so `consume` stops there."""

    # -- topics (Kafka: Metadata, CreateTopics, CreatePartitions, DescribeConfigs, IncrementalAlterConfigs,
    #    DeleteTopics) ----------------------------------------------------------------------------------------

    def list_topics(self, include_internal: bool = True) -> list[str]:
        """Topic names, sorted."""
        return self.node.topics(include_internal=include_internal)

    @abstractmethod
    def describe_topic(self, name: str) -> TopicDescription:
        """UnknownTopicOrPartitionError if it does not exist."""

    def ensure_topic(self, name: str) -> TopicDescription:
        """The topic as a Kafka client finds it: created with the defaults when the broker auto-creates topics
        (auto.create.topics.enable, Kafka's producer and consumer Metadata requests); otherwise as
        describe_topic. A data dir opened by a command never auto-creates (a typo must not make a topic)."""
        return self.describe_topic(name)

    def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                     config: Mapping[str, str]) -> None:
        """None means the broker default. InvalidTopicError, TopicAlreadyExistsError, InvalidPartitionsError,
        InvalidReplicationFactorError, InvalidConfigError."""
        self.node.create_topic(name, partitions, dict(config), replication_factor)

    def create_partitions(self, name: str, total: int) -> None:
        """Grow to ``total`` partitions; InvalidPartitionsError when that is not an increase."""
        self.node.create_partitions(name, total)

    def elect_leaders(self, partitions: Sequence[tuple[str, int]] | None, unclean: bool
                      ) -> dict[tuple[str, int], SeglogError | None]:
        """ElectLeaders (preferred, or `unclean`; None: every partition): per partition None (elected) or the
        error (ElectionNotNeededError, PreferredLeaderNotAvailableError, EligibleLeadersNotAvailableError,
        UnknownTopicOrPartitionError)."""
        return self.node.elect_leaders(None if partitions is None else list(partitions), unclean)

    def list_partition_reassignments(self, partitions: Iterable[tuple[str, int]] | None = None) -> dict:
        """ListPartitionReassignments: {(topic, partition): ReplicaAssignment} of the partitions (None: all) being
        reassigned. A data dir is its one broker's only replica of everything: never any."""
        return {}

    def alter_topic_config(self, name: str, set_: Mapping[str, str], delete: Sequence[str]) -> None:
        """Set and remove overrides in one step; UnknownTopicOrPartitionError first, then InvalidConfigError for
        unknown names or bad values (nothing changed then)."""
        self.node.topic(name)
        self.node.alter_topic_config(name, dict(set_), list(delete))

    def delete_topic(self, name: str) -> None:
        """TopicDeletionDisabledError, UnknownTopicOrPartitionError, InvalidTopicError (internal topics)."""
        self.node.delete_topic(name)

    # -- offsets (ListOffsets) -----------------------------------------------------------------------------

    @abstractmethod
    def offset_ranges(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, tuple[int, int] | None]:
        """(log start offset, high watermark) per partition; None for a partition that does not exist."""

    @abstractmethod
    def offsets_for_times(self, partitions: Iterable[tuple[str, int]], timestamp: int
                          ) -> dict[TopicPartition, int | None]:
        """Per partition the first offset (below the high watermark) whose record has a timestamp >= `timestamp`
        (ms), or None when there is none (or no such partition): ListOffsets by timestamp."""

    @abstractmethod
    def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | SeglogError]:
        """DeleteRecords: raise each partition's log start offset to its offset (-1: the high watermark). Per
        partition the new low watermark, or the error (OffsetOutOfRangeError, UnknownTopicOrPartitionError...)."""

    @abstractmethod
    def log_dirs(self, brokers: Sequence[int] | None) -> dict[int, list[dict]]:
        """DescribeLogDirs of each broker (all if None): {broker id: [{"logDir", "error", "partitions": [{"topic",
        "partition", "size", "offsetLag", "isFuture"}]}]}."""

    @abstractmethod
    def alter_replica_log_dirs(self, moves: Mapping[tuple[str, int, int], str]
                               ) -> dict[tuple[str, int, int], SeglogError | None]:
        """AlterReplicaLogDirs: move each replica ((topic, partition, broker id)) to the log directory given, asked
        of its broker. Per replica None (started, or already there) or its error (LogDirNotFoundError,
        ReplicaNotAvailableError while the broker has no such replica yet, UnknownTopicOrPartitionError...)."""

    # -- groups (ListGroups, DescribeGroups, OffsetFetch, OffsetCommit, DeleteGroups) ----------------------

    @abstractmethod
    def list_groups(self) -> list[GroupListing]:
        """Every group, sorted by id."""

    @abstractmethod
    def describe_group(self, group_id: str) -> GroupInfo:
        """The group; state "Dead" when it does not exist."""

    def _coordinator(self):
        """The node's group coordinator (the in-process one, or the remote node's requests to a group's
        coordinator broker); None where no group can exist yet."""
        return self.node.group_coordinator

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every partition the group has a committed offset for (empty for an unknown group)."""
        coord = self._coordinator()
        if coord is None:
            return {}
        return {TopicPartition(*tp): om.offset for tp, om in coord.fetch_offsets(group_id, None).items()
                if om is not None and om.offset >= 0}

    def alter_committed_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit these offsets for a group without active members (creating it if needed); the group's
        generation is not involved. Raises what the coordinator rejects (e.g. UnknownMemberIdError while the
        group has members)."""
        request = {TopicPartition(*tp): OffsetAndMetadata(int(o)) for tp, o in offsets.items()}
        errors = self.node.group_coordinator.commit_offsets(group_id, request)
        failed = [e for e in errors.values() if e is not None]
        if failed:
            raise failed[0]

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, SeglogError | None]:
        """Per group None or its error (GroupIdNotFoundError, NonEmptyGroupError)."""
        coord = self._coordinator()
        if coord is None:
            return {g: GroupIdNotFoundError(f"group {g!r} does not exist") for g in group_ids}
        return coord.delete_groups(group_ids)

    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                       ) -> dict[TopicPartition, SeglogError | None]:
        """The group's committed offsets of ``partitions`` deleted: per partition None or its error
        (GroupSubscribedToTopicError); raises GroupIdNotFoundError, NonEmptyGroupError, InvalidGroupIdError."""
        coord = self._coordinator()
        if coord is None:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        return coord.delete_offsets(group_id, partitions)

    # -- transactions (ListTransactions, DescribeTransactions) --------------------------------------------------

    @abstractmethod
    def list_transactions(self) -> list[tuple[int, TransactionListing]]:
        """(coordinator broker id, listing) of every transactional id, sorted by id."""

    @abstractmethod
    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The id's state (``coordinator_id`` set); TransactionalIdNotFoundError for an unknown one."""

    # -- clients -------------------------------------------------------------------------------------------

    def _client_node(self, client_id: str | None):
        """The node a producer or consumer runs over (the admin's own by default)."""
        return self.node

    def producer(self, properties: Mapping[str, str]) -> ProducerClient:
        """A producer configured by Kafka producer property names (acks, compression.type, linger.ms,
        batch.size, enable.idempotence, max.request.size, client.id); InvalidConfigError for others."""
        kw = client_kwargs(properties, PRODUCER_PROPERTIES, "producer")
        return Producer(self._client_node(kw.get("client_id")), **kw)

    def consumer(self, properties: Mapping[str, str]) -> ConsumerClient:
        """A consumer configured by Kafka consumer property names (group.id, client.id, auto.offset.reset,
        enable.auto.commit, auto.commit.interval.ms, max.poll.records ...); InvalidConfigError for others."""
        kw = client_kwargs(properties, CONSUMER_PROPERTIES, "consumer")
        return Consumer(self._client_node(kw.get("client_id")), **kw)

    def close(self) -> None:
        """Release the data dir / connections. Idempotent."""

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
