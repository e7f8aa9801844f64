"""The group coordinator's data: states, settings and the results its calls return (Kafka's classic group
protocol; see group.GroupCoordinator). Immutable values, shared by both doors and the remote client."""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any, Mapping

from .errors import InvalidConfigError

__all__ = ["GroupState", "GroupConfig", "JoinedMember", "JoinResult", "SyncResult", "MemberDescription",
           "GroupDescription", "GroupListing"]


class GroupState(str, enum.Enum):
    """A group's state; the value is Kafka's name (DescribeGroups / ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class GroupConfig:
    """Coordinator settings, Kafka's broker configs (``from_kafka`` takes the dotted names)."""

    min_session_timeout_ms: int = 6000             # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000          # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000         # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1                      # group.max.size
    offset_metadata_max_bytes: int = 4096          # offset.metadata.max.bytes
    consumer_session_timeout_ms: int = 45000       # group.consumer.session.timeout.ms (KIP-848 groups)
    consumer_heartbeat_interval_ms: int = 5000     # group.consumer.heartbeat.interval.ms
    consumer_assignors: tuple[str, ...] = ("uniform", "range")   # group.consumer.assignors; the first is the default

    _KAFKA = {"group.min.session.timeout.ms": "min_session_timeout_ms",
              "group.max.session.timeout.ms": "max_session_timeout_ms",
              "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
              "group.max.size": "max_size", "offset.metadata.max.bytes": "offset_metadata_max_bytes",
              "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
              "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
              "group.consumer.assignors": "consumer_assignors"}

    def __post_init__(self):
        from .group_assignors import SERVER_ASSIGNORS
        if not self.consumer_assignors or any(a not in SERVER_ASSIGNORS for a in self.consumer_assignors):
            raise InvalidConfigError(f"Invalid value {self.consumer_assignors!r} for group.consumer.assignors: "
                                     f"a non-empty list of {sorted(SERVER_ASSIGNORS)}")
        for f in fields(self):
            if f.name == "consumer_assignors":
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if f.name == "max_size" else 0):
                raise InvalidConfigError(f"Invalid value {value!r} for {f.name}: a non-negative int is required")
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise InvalidConfigError("group.consumer.heartbeat.interval.ms must be less than "
                                     "group.consumer.session.timeout.ms")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise InvalidConfigError("group.min.session.timeout.ms is larger than group.max.session.timeout.ms")

    @classmethod
    def from_kafka(cls, props: Mapping[str, Any]) -> "GroupConfig":
        """Build from Kafka names (values may be strings). InvalidConfigError for unknown names or bad values."""
        kw = {}
        for name, raw in props.items():
            if name not in cls._KAFKA:
                raise InvalidConfigError(f"Unknown group coordinator configuration {name!r}")
            if name == "group.consumer.assignors":
                kw["consumer_assignors"] = tuple(a.strip() for a in (raw.split(",") if isinstance(raw, str) else raw))
                continue
            try:
                kw[cls._KAFKA[name]] = int(raw)
            except (TypeError, ValueError):
                raise InvalidConfigError(f"Invalid value {raw!r} for configuration {name}: not an int") from None
        return cls(**kw)


@dataclass(frozen=True)
class JoinedMember:
    """A member as the leader sees it in its JoinGroup result: metadata of the selected protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    """A completed JoinGroup. ``members`` is filled for the leader only (it computes the assignment)."""

    member_id: str
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader_id: str
    members: tuple[JoinedMember, ...] = ()

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id


@dataclass(frozen=True)
class SyncResult:
    """A completed SyncGroup: this member's assignment bytes (empty if the leader gave it none)."""

    protocol_type: str
    protocol_name: str
    assignment: bytes


@dataclass(frozen=True)
class MemberDescription:
    """DescribeGroups member; metadata and assignment are empty unless the group is Stable."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    """DescribeGroups data; an unknown group is described as Dead with no members (no error, like Kafka)."""

    group_id: str
    state: GroupState
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()


@dataclass(frozen=True)
class GroupListing:
    """ListGroups entry: ``group_type`` "classic" (JoinGroup/SyncGroup) or "consumer" (KIP-848), whose state is
    a group_consumer_state.ConsumerGroupState."""

    group_id: str
    protocol_type: str
    state: Any
    group_type: str = "classic"
