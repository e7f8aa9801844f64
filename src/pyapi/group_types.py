"""The group coordinator's data: states, settings and the results its calls return (Kafka's classic group
protocol; see group.GroupCoordinator). Immutable values, shared by both doors and the remote client."""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any, Mapping

from .errors import InvalidConfigError

__all__ = ["GroupState", "GroupConfig", "MIGRATION_POLICIES", "migration_policy", "check_consumer_group_bounds",
           "JoinedMember", "JoinResult", "SyncResult", "MemberDescription",
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


MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
"""group.consumer.migration.policy: which non-empty groups change protocol when a member of the other one
joins (upgrade: classic to consumer, downgrade: consumer to classic). Empty groups always change."""


def migration_policy(value: str) -> str:
    """The policy named (case-insensitive, as Kafka), lower-cased; InvalidConfigError for another name."""
    policy = str(value).strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise InvalidConfigError(f"Invalid value {value} for configuration group.consumer.migration.policy: "
                                 f"String must be one of (case insensitive): {', '.join(MIGRATION_POLICIES)}")
    return policy


def check_consumer_group_bounds(session: int, min_session: int, max_session: int, interval: int,
                                min_interval: int, max_interval: int) -> None:
    """Kafka's checks of the group.consumer.* session timeout and heartbeat interval against their bounds
    (InvalidConfigError with Kafka's message for the first that fails)."""
    hb, st = "group.consumer.heartbeat.interval.ms", "group.consumer.session.timeout.ms"
    min_hb, max_hb = "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"
    checks = ((max_interval >= min_interval, f"{max_hb} must be greater than or equal to {min_hb}"),
              (interval >= min_interval, f"{hb} must be greater than or equal to {min_hb}"),
              (interval <= max_interval, f"{hb} must be less than or equal to {max_hb}"),
              (max_session >= min_session, "group.consumer.max.session.timeout.ms must be greater than or equal to "
               "group.consumer.min.session.timeout.ms"),
              (session >= min_session, f"{st} must be greater than or equal to group.consumer.min.session.timeout.ms"),
              (session <= max_session, f"{st} must be less than or equal to group.consumer.max.session.timeout.ms"),
              (interval < session, f"{hb} must be less than {st}"))
    for ok, message in checks:
        if not ok:
            raise InvalidConfigError(message)


@dataclass(frozen=True)
class GroupConfig:
    """Coordinator settings, Kafka's broker configs (``from_kafka`` takes the dotted names)."""

    min_session_timeout_ms: int = 6000             # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000          # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000         # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1                      # group.max.size
    offset_metadata_max_bytes: int = 4096          # offset.metadata.max.bytes
    consumer_session_timeout_ms: int = 45000       # group.consumer.session.timeout.ms (KIP-848 groups)
    consumer_min_session_timeout_ms: int = 45000   # group.consumer.min.session.timeout.ms
    consumer_max_session_timeout_ms: int = 60000   # group.consumer.max.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5000     # group.consumer.heartbeat.interval.ms
    consumer_min_heartbeat_interval_ms: int = 5000     # group.consumer.min.heartbeat.interval.ms
    consumer_max_heartbeat_interval_ms: int = 15000    # group.consumer.max.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1             # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = ("uniform", "range")   # group.consumer.assignors; the first is the default
    consumer_migration_policy: str = "bidirectional"    # group.consumer.migration.policy (MIGRATION_POLICIES)

    _KAFKA = {"group.min.session.timeout.ms": "min_session_timeout_ms",
              "group.max.session.timeout.ms": "max_session_timeout_ms",
              "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
              "group.max.size": "max_size", "offset.metadata.max.bytes": "offset_metadata_max_bytes",
              "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
              "group.consumer.min.session.timeout.ms": "consumer_min_session_timeout_ms",
              "group.consumer.max.session.timeout.ms": "consumer_max_session_timeout_ms",
              "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
              "group.consumer.min.heartbeat.interval.ms": "consumer_min_heartbeat_interval_ms",
              "group.consumer.max.heartbeat.interval.ms": "consumer_max_heartbeat_interval_ms",
              "group.consumer.max.size": "consumer_max_size",
              "group.consumer.assignors": "consumer_assignors",
              "group.consumer.migration.policy": "consumer_migration_policy"}

    def __post_init__(self):
        from .group_assignors import configured_assignors
        object.__setattr__(self, "consumer_assignors", configured_assignors(self.consumer_assignors))
        object.__setattr__(self, "consumer_migration_policy", migration_policy(self.consumer_migration_policy))
        for f in fields(self):
            if f.name in ("consumer_assignors", "consumer_migration_policy"):
                continue
            value = getattr(self, f.name)
            low = 1 if f.name.startswith("consumer_") or f.name == "max_size" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidConfigError(f"Invalid value {value!r} for {f.name}: an int of at least {low} is required")
        check_consumer_group_bounds(self.consumer_session_timeout_ms, self.consumer_min_session_timeout_ms,
                                    self.consumer_max_session_timeout_ms, self.consumer_heartbeat_interval_ms,
                                    self.consumer_min_heartbeat_interval_ms, self.consumer_max_heartbeat_interval_ms)
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise InvalidConfigError("group.min.session.timeout.ms is larger than group.max.session.timeout.ms")

    @classmethod
    def from_kafka(cls, props: Mapping[str, Any]) -> "GroupConfig":
        """Build from Kafka names (values may be strings). InvalidConfigError for unknown names or bad values."""
        kw = {}
        for name, raw in props.items():
            if name not in cls._KAFKA:
                raise InvalidConfigError(f"Unknown group coordinator configuration {name!r}")
            if name == "group.consumer.migration.policy":
                kw["consumer_migration_policy"] = str(raw)
                continue
            if name == "group.consumer.assignors":
                kw["consumer_assignors"] = tuple(a for a in (raw.split(",") if isinstance(raw, str) else raw) if a.strip())
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
    """DescribeGroups data. A group that is not a classic group is described as Dead with no members, and
    ``not_found`` says why (Kafka's message, which DescribeGroups v6+ answers with GROUP_ID_NOT_FOUND; older
    versions get the Dead description with no error)."""

    group_id: str
    state: GroupState
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()
    not_found: str | None = None


@dataclass(frozen=True)
class GroupListing:
    """ListGroups entry: ``group_type`` "classic" (JoinGroup/SyncGroup) or "consumer" (KIP-848), whose state is
    a group_consumer_state.ConsumerGroupState."""

    group_id: str
    protocol_type: str
    state: Any
    group_type: str = "classic"
