"""The one interface the `topics`, `produce`, `consume` and `groups` commands work through. Two implementations:
the data dir's (``--data-dir``, seglog.cli.datadir) and the broker's (``--bootstrap-server``,
seglog.broker.admin); seglog.cli.connect picks one for a command's arguments.

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

from ..errors import SeglogError
from ..offsets_format import TopicPartition

__all__ = ["Admin", "PartitionInfo", "TopicDescription", "GroupListing", "MemberInfo", "GroupInfo",
           "ProducerClient", "ConsumerClient", "RecordLike"]

"""Where the --bootstrap-server implementation lives: it must define ``connect(bootstrap_servers, *, client_id)``."""


class PartitionInfo(NamedTuple):
    """One partition as Metadata describes it: broker ids of its leader, replicas and in-sync replicas."""
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


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
        return len(self.partitions[0].replicas) if self.partitions else 0


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

    def position(self, tp: tuple[str, int]) -> int: ...

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list: ...

    def close(self, autocommit: bool = True) -> None: ...


class Admin(ABC):
    """Topic, offset and group administration plus client factories, over a data dir or a broker."""

    live: bool = True
    """True when other clients may append while a command runs (a broker). A data dir is locked by the command
    that opened it: once a consumer reached the end, nothing more can come, so `consume` stops there."""

    # -- topics (Kafka: Metadata, CreateTopics, CreatePartitions, DescribeConfigs, IncrementalAlterConfigs,
    #    DeleteTopics) ----------------------------------------------------------------------------------------

    @abstractmethod
    def list_topics(self, include_internal: bool = True) -> list[str]:
        """Topic names, sorted."""

    @abstractmethod
    def describe_topic(self, name: str) -> TopicDescription:
        """UnknownTopicOrPartitionError if it does not exist."""

    def ensure_topic(self, name: str) -> TopicDescription:
        """The topic as a Kafka client finds it: created with the defaults when the broker auto-creates topics
        (auto.create.topics.enable, Kafka's producer and consumer Metadata requests); otherwise as
        describe_topic. A data dir opened by a command never auto-creates (a typo must not make a topic)."""
        return self.describe_topic(name)

    @abstractmethod
    def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                     config: Mapping[str, str]) -> None:
        """None means the broker default. InvalidTopicError, TopicAlreadyExistsError, InvalidPartitionsError,
        InvalidReplicationFactorError, InvalidConfigError."""

    @abstractmethod
    def create_partitions(self, name: str, total: int) -> None:
        """Grow to ``total`` partitions; InvalidPartitionsError when that is not an increase."""

    @abstractmethod
    def alter_topic_config(self, name: str, set_: Mapping[str, str], delete: Sequence[str]) -> None:
        """Set and remove overrides in one step; InvalidConfigError for unknown names or bad values (nothing
        changed then)."""

    @abstractmethod
    def delete_topic(self, name: str) -> None:
        """TopicDeletionDisabledError, UnknownTopicOrPartitionError, InvalidTopicError (internal topics)."""

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

    # -- groups (ListGroups, DescribeGroups, OffsetFetch, OffsetCommit, DeleteGroups) ----------------------

    @abstractmethod
    def list_groups(self) -> list[GroupListing]:
        """Every group, sorted by id."""

    @abstractmethod
    def describe_group(self, group_id: str) -> GroupInfo:
        """The group; state "Dead" when it does not exist."""

    @abstractmethod
    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every partition the group has a committed offset for (empty for an unknown group)."""

    @abstractmethod
    def alter_committed_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit these offsets for a group without active members (creating it if needed); the group's
        generation is not involved. Raises what the coordinator rejects (e.g. UnknownMemberIdError while the
        group has members)."""

    @abstractmethod
    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, SeglogError | None]:
        """Per group None or its error (GroupIdNotFoundError, NonEmptyGroupError)."""

    # -- clients -------------------------------------------------------------------------------------------

    @abstractmethod
    def producer(self, properties: Mapping[str, str]) -> ProducerClient:
        """A producer configured by Kafka producer property names (acks, compression.type, linger.ms,
        batch.size, enable.idempotence, max.request.size, client.id); InvalidConfigError for others."""

    @abstractmethod
    def consumer(self, properties: Mapping[str, str]) -> ConsumerClient:
        """A consumer configured by Kafka consumer property names (group.id, client.id, auto.offset.reset,
        enable.auto.commit, auto.commit.interval.ms, max.poll.records ...); InvalidConfigError for others."""

    def close(self) -> None:
        """Release the data dir / connections. Idempotent."""

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
