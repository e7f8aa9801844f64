"""The cluster metadata store: what the controller and brokers share, and the rules for changing it.

Implementations: ``seglog.cluster.zk.ZooKeeperMetadataStore`` (kazoo; Kafka's pre-KRaft ZooKeeper layout)
and ``seglog.cluster.memory.MemoryMetadataStore`` (in-process, for tests and single-process clusters). Both
pass the same test suite.

Invariants every implementation keeps:

- A store object is one client *session*. Broker registrations and the ``/controller`` claim are ephemeral:
  they vanish when the session closes or expires. Session listeners hear SUSPENDED / RECONNECTED (same
  session, ephemerals intact) and EXPIRED then NEW_SESSION (ephemerals gone). Nothing is re-created
  automatically: after EXPIRED a broker stops acting as controller and leader, and on NEW_SESSION it calls
  ``register_broker`` and ``elect_controller`` again.
- Controller fencing: every election win increments the persistent controller epoch and returns a
  :class:`ControllerEpoch` token holding the epoch record's store version. Controller writes
  (``create_partition_states``, ``update_partition_state``, ``delete_topic``) are committed only while
  that record is unchanged, atomically with the write, else StaleControllerEpochError. So a controller that
  was paused or partitioned while another one won can never write again. Resigning or expiring does not
  bump the epoch; the next winner does.
- Conditional updates: a :class:`PartitionState` carries the store version it was read at; writing it
  back succeeds only if the stored version is still that one, else InvalidUpdateVersionError (re-read, decide
  again). Leaders update their ISR this way (``update_isr``), Kafka style.
- Callbacks (watches, ``on_change``, session listeners) run on the store's own event thread, one at a
  time, in order, never on the caller's thread; they may call the store's blocking methods. A watch is first
  called with the current value soon after it is set, then whenever the value changes. Consecutive equal
  values are not repeated, and quick successive changes may be seen only as their end state.
- Every method blocks until the store answered. Methods are thread-safe. Errors: NetworkError (retriable)
  when the store is unreachable right now, LogClosedError after ``close()``.
"""

from __future__ import annotations

import base64
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Callable, Mapping, Sequence

from ..errors import (InvalidArgumentError, InvalidPartitionsError, InvalidReplicaAssignmentError,
                      SeglogError, StaleControllerEpochError, UnknownTopicOrPartitionError)
from .events import Subscription

__all__ = ["BrokerInfo", "TopicAssignment", "ReplicaAssignment", "validate_replica_assignment", "PartitionState",
           "ControllerEpoch", "ControllerChange", "SessionEvent", "MetadataStore", "InvalidUpdateVersionError",
           "Subscription", "MalformedTopicError", "NO_LEADER", "validate_new_partitions", "validate_partition_state", "validate_isr_update", "AclKey",
           "topic_config", "new_cluster_id", "restarted_members"]

AclKey = tuple[str, str, str]
"""An ACL resource pattern as the store keys it: (resource type, pattern type, name), e.g. ("Topic", "Literal",
"orders")."""

NO_LEADER = -1
"""``PartitionState.leader`` when the partition has no leader (all ISR members offline)."""



class InvalidUpdateVersionError(SeglogError):
    """A conditional write carried a version the store no longer holds: re-read and decide again."""

    code = 95
    kafka_name = "INVALID_UPDATE_VERSION"


class MalformedTopicError(UnknownTopicOrPartitionError):
    """A topic's stored assignment cannot be read (not what Kafka writes there): the topic is left out, as one
    that does not exist, until its node is repaired; every other topic keeps working."""


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker as registered: ``epoch`` is assigned by the store at registration (-1 before) and grows
    with every registration of any broker, so a restarted broker is told apart from its previous life.
    ``host``/``port``: its inter-broker listener's advertised address; ``endpoints``: (listener name, security
    protocol, host, port) of every listener (empty: one listener, at host/port)."""

    id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1
    endpoints: tuple[tuple[str, str, str, int], ...] = ()

    def address(self, listener: str | None) -> tuple[str, int] | None:
        """Where a client of `listener` reaches this broker (its inter-broker address for None); None if the
        broker has no such listener (Kafka leaves it out of that listener's Metadata)."""
        if listener is None or not self.endpoints:
            return self.host, self.port
        for name, _, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


@dataclass(frozen=True)
class ReplicaAssignment:
    """One partition's replicas while a reassignment may be under way (Kafka's ReplicaAssignment, KIP-455):
    ``replicas`` is the full set (target replicas first, then the original ones not in the target),
    ``adding`` the target replicas not in the original set, ``removing`` the original replicas not in the
    target. Without a reassignment both are empty and ``replicas`` is the assignment."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def __post_init__(self):
        for name in ("replicas", "adding", "removing"):
            object.__setattr__(self, name, tuple(int(r) for r in getattr(self, name)))

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        """The replicas before the reassignment (what cancelling it goes back to), in this set's order: the
        store keeps no other (Kafka's ``originReplicas``)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> "ReplicaAssignment":
        """The assignment moving from this one's origin to ``target`` (a cancelled or superseded reassignment's
        adding replicas drop out): replicas = target + origin, distinct, in that order."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment: partition -> replica broker ids, the first being the preferred leader.
    Partitions are numbered 0..n-1. ``topic_id`` is fixed at creation. The topic's config is stored apart.
    ``adding`` / ``removing``: partition -> replicas, for the partitions being reassigned (see
    ReplicaAssignment; their ``partitions`` entry is the full replica set)."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self):
        def norm(m, keep_empty=False):
            return {int(p): tuple(int(r) for r in rs) for p, rs in sorted(m.items()) if rs or keep_empty}
        object.__setattr__(self, "partitions", norm(self.partitions, keep_empty=True))
        object.__setattr__(self, "adding", norm(self.adding))
        object.__setattr__(self, "removing", norm(self.removing))

    def replica_assignment(self, partition: int) -> ReplicaAssignment:
        """UnknownTopicOrPartitionError for a partition the topic does not have."""
        if partition not in self.partitions:
            raise UnknownTopicOrPartitionError(f"Topic '{self.topic}' has no partition {partition}")
        return ReplicaAssignment(self.partitions[partition], self.adding.get(partition, ()),
                                 self.removing.get(partition, ()))

    def reassigning(self) -> list[int]:
        """The partitions with a reassignment under way."""
        return sorted(set(self.adding) | set(self.removing))

    def with_replicas(self, changes: Mapping[int, ReplicaAssignment]) -> "TopicAssignment":
        """This assignment with ``changes`` replacing those partitions' entries (all must exist:
        UnknownTopicOrPartitionError; each valid: InvalidReplicaAssignmentError)."""
        partitions, adding, removing = dict(self.partitions), dict(self.adding), dict(self.removing)
        for p, ra in changes.items():
            if p not in partitions:
                raise UnknownTopicOrPartitionError(f"Topic '{self.topic}' has no partition {p}")
            validate_replica_assignment(p, ra)
            partitions[p], adding[p], removing[p] = ra.replicas, ra.adding, ra.removing
        return replace(self, partitions=partitions, adding=adding, removing=removing)


@dataclass(frozen=True)
class PartitionState:
    """Leader and ISR of one partition. ``controller_epoch`` is the epoch of the controller that last
    elected the leader; ``version`` the store's version of this record (-1 when not read from the store);
    ``written`` the store's transaction id of the write that stored it (ZooKeeper's mzxid; -1 when unknown),
    comparable with ``BrokerInfo.epoch``: an ISR member registered after the record was written is a later
    incarnation of that broker than the one the record speaks of (see ``restarted_members``)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    version: int = -1
    written: int = field(default=-1, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "isr", tuple(int(r) for r in self.isr))


@dataclass(frozen=True)
class ControllerEpoch:
    """The fencing token of an elected controller: its ``epoch`` and the store ``version`` of the epoch record
    written when it won. Pass it to every controller write."""

    broker_id: int
    epoch: int
    version: int


@dataclass(frozen=True)
class ControllerChange:
    """What a candidate's ``on_change`` hears: the current controller (None: none or unknown) and, when it
    is this store, the token it won."""

    controller_id: int | None
    lease: ControllerEpoch | None = None


class SessionEvent(Enum):
    SUSPENDED = "suspended"        # connection lost; the session (and its ephemerals) may still be alive
    RECONNECTED = "reconnected"    # back on the same session; ephemerals intact
    EXPIRED = "expired"            # session gone: its ephemerals were deleted, the candidacy ended
    NEW_SESSION = "new_session"    # connected on a fresh session: register and elect again


def validate_new_partitions(first: int, partitions: Mapping[int, Sequence[int]]) -> None:
    """New partitions must be numbered ``first``, ``first+1``, ... (InvalidPartitionsError) and each have
    a non-empty list of distinct broker ids >= 0 (InvalidReplicaAssignmentError)."""
    if not partitions or sorted(partitions) != list(range(first, first + len(partitions))):
        raise InvalidPartitionsError(f"New partitions must be numbered from {first} without gaps, "
                                     f"got {sorted(partitions)}")
    for p, replicas in partitions.items():
        if not replicas or len(set(replicas)) != len(replicas) or min(replicas) < 0:
            raise InvalidReplicaAssignmentError(f"Partition {p} has an empty, duplicated or negative replica "
                                                f"list {list(replicas)}")


def validate_replica_assignment(partition: int, ra: ReplicaAssignment) -> None:
    """Distinct non-negative replicas, none empty; adding and removing are disjoint parts of them, and the
    target keeps at least one. Raises InvalidReplicaAssignmentError."""
    rs = ra.replicas
    if (not rs or len(set(rs)) != len(rs) or min(rs) < 0 or not set(ra.adding) <= set(rs)
            or not set(ra.removing) <= set(rs) or set(ra.adding) & set(ra.removing) or not ra.target):
        raise InvalidReplicaAssignmentError(f"Partition {partition}: invalid replica assignment {ra}")


def validate_partition_state(state: PartitionState, *, conditional: bool = False) -> None:
    """ISR without duplicates; a leader (unless NO_LEADER) must be in it; a ``conditional`` write needs the
    version the state was read at. Raises InvalidArgumentError."""
    if conditional and state.version < 0:
        raise InvalidArgumentError("A conditional update needs the state's version as read from the store")
    if len(set(state.isr)) != len(state.isr):
        raise InvalidArgumentError(f"ISR {list(state.isr)} has duplicates")
    if state.leader != NO_LEADER and state.leader not in state.isr:
        raise InvalidArgumentError(f"Leader {state.leader} is not in the ISR {list(state.isr)}")


def new_cluster_id() -> str:
    """A fresh cluster id as Kafka makes one: a random UUID in URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def topic_config(config: Mapping[str, object] | None) -> dict[str, str]:
    """A topic config as stored: names and values as strings (Kafka keeps them as strings too)."""
    return {str(name): str(value) for name, value in (config or {}).items()}


def restarted_members(state: PartitionState, brokers: Mapping[int, BrokerInfo]) -> set[int]:
    """The live ISR members of ``state`` that registered after it was written: brokers restarted (a bounce)
    since they were put in the ISR or elected, whose previous life's leadership or ISR membership is stale."""
    if state.written < 0:
        return set()
    return {r for r in state.isr if r in brokers and brokers[r].epoch > state.written}


def validate_isr_update(base: PartitionState, isr: Sequence[int]) -> PartitionState:
    """The state a leader writes: ``base`` with ``isr``, which must keep the leader. Raises InvalidArgumentError."""
    if base.leader == NO_LEADER:
        raise InvalidArgumentError("A partition without a leader has no one to update its ISR")
    new = replace(base, isr=tuple(isr))
    validate_partition_state(new, conditional=True)
    return new


class MetadataStore(ABC):
    """Brokers, controller election, topics, configs and partition states; see the module docstring for the
    session, fencing, versioning and callback rules every method follows."""

    # --- session -----------------------------------------------------------------------------------------
    # Implementations set ``_session_id`` (replaced after EXPIRED) and ``_session_listeners`` (a list) in
    # __init__, and call ``_notify_session`` on every session state change.

    _session_id: int
    _session_listeners: list[Subscription]

    @property
    def session_id(self) -> int:
        """The current session's id (changes after EXPIRED)."""
        return self._session_id

    def add_session_listener(self, callback: Callable[[SessionEvent], None]) -> Subscription:
        """Call ``callback(event)`` on every session state change."""
        subscription = Subscription(callback)
        self._session_listeners = [s for s in self._session_listeners if not s.cancelled] + [subscription]
        return subscription

    def _notify_session(self, event: SessionEvent) -> None:
        for listener in list(self._session_listeners):
            listener.notify(event)

    @abstractmethod
    def close(self) -> None:
        """End the session: its ephemerals are deleted, callbacks stop. Idempotent; later calls raise
        LogClosedError."""

    # --- cluster id ---------------------------------------------------------------------------------------

    @abstractmethod
    def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id: the stored one, else ``proposed``, stored now (the first broker of a cluster creates
        it; Kafka's ``/cluster/id``). Create-if-absent is atomic: concurrent callers all get the same id, and it
        never changes afterwards."""

    # --- brokers -------------------------------------------------------------------------------------------

    @abstractmethod
    def register_broker(self, info: BrokerInfo, *, take_over: bool = False) -> BrokerInfo:
        """Register ``info`` ephemerally for this session; returns it with its new ``epoch``. Registering again
        in the same session replaces it (new epoch). InvalidArgumentError if another session holds the id
        (e.g. this broker's previous process, until that session times out), unless ``take_over`` and that
        registration names the same host and port: a restarting broker that holds its listener and its data
        directory knows that session's process is dead, so it replaces the registration (a new epoch: the
        controller sees a bounce) and deletes that session's controller claim, instead of waiting for the
        session to expire."""

    @abstractmethod
    def update_broker(self, info: BrokerInfo) -> None:
        """Replace the addresses of this session's registration of ``info.id`` with ``info``'s, keeping its epoch
        (Kafka's updateBrokerInfo for a dynamic advertised.listeners: no bounce); ``watch_brokers`` hears of it.
        InvalidArgumentError if this session does not hold the registration."""

    @abstractmethod
    def list_brokers(self) -> dict[int, BrokerInfo]:
        """Live brokers by id."""

    @abstractmethod
    def watch_brokers(self, callback: Callable[[dict[int, BrokerInfo]], None]) -> Subscription:
        """Call ``callback(brokers_by_id)`` with the live brokers and on every change."""

    @abstractmethod
    def request_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> None:
        """Ask the controller (ephemerally, for this session) to move leadership and ISR membership away from
        ``broker_id`` in its registration ``broker_epoch``, before it stops (Kafka's ControlledShutdown)."""

    @abstractmethod
    def brokers_shutting_down(self) -> dict[int, int]:
        """Broker id -> the broker epoch of each pending controlled-shutdown request."""

    @abstractmethod
    def watch_brokers_shutting_down(self, callback: Callable[[dict[int, int]], None]) -> Subscription:
        """Call ``callback(brokers_shutting_down())`` now and on every change."""

    # --- controller ---------------------------------------------------------------------------------------

    @abstractmethod
    def elect_controller(self, broker_id: int,
                         on_change: Callable[[ControllerChange], None]) -> ControllerEpoch | None:
        """Enter this session's election as ``broker_id``: claim the controller now if vacant (returning the
        token) else return None. While a candidate, a vacancy is claimed again automatically and
        ``on_change`` hears every change of controller or token. The candidacy ends with ``resign_controller``
        or session expiry (on_change then hears ``ControllerChange(None)``). InvalidArgumentError if this
        session is already a candidate."""

    @abstractmethod
    def resign_controller(self) -> None:
        """End the candidacy and release the controller claim if this session holds it. No-op otherwise;
        on_change is not called."""

    @abstractmethod
    def get_controller(self) -> int | None:
        """The current controller's broker id, None when vacant."""

    # --- topics -------------------------------------------------------------------------------------------

    @abstractmethod
    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str] | None = None) -> None:
        """Create the assignment and config atomically. TopicAlreadyExistsError if the topic exists (also
        while marked for deletion); InvalidTopicError, InvalidPartitionsError, InvalidReplicaAssignmentError
        for a bad name or assignment. Partition states are the controller's to create."""

    @abstractmethod
    def list_topics(self) -> list[str]:
        """Topic names, sorted (including topics marked for deletion)."""

    @abstractmethod
    def get_topic(self, topic: str) -> TopicAssignment:
        """The assignment. UnknownTopicOrPartitionError if missing; MalformedTopicError (one of those) if what is
        stored cannot be read."""

    @abstractmethod
    def add_partitions(self, topic: str, partitions: Mapping[int, Sequence[int]]) -> TopicAssignment:
        """Append partitions numbered from the current count; returns the new assignment. Safe against
        concurrent adders. UnknownTopicOrPartitionError, InvalidTopicError (marked for deletion),
        InvalidPartitionsError, InvalidReplicaAssignmentError."""

    @abstractmethod
    def update_replica_assignments(self, topic: str, changes: Mapping[int, ReplicaAssignment],
                                   controller: ControllerEpoch) -> TopicAssignment:
        """Controller write (partition reassignment): replace those partitions' replicas and their reassignment
        (adding / removing replicas) in the topic's assignment, atomically with the lease check and safe
        against concurrent adders of partitions; returns the new assignment. StaleControllerEpochError,
        UnknownTopicOrPartitionError, InvalidReplicaAssignmentError."""

    @abstractmethod
    def get_topic_config(self, topic: str) -> dict[str, str]:
        """The topic's config overrides. UnknownTopicOrPartitionError if the topic is missing."""

    @abstractmethod
    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace the topic's config overrides (stored as strings). UnknownTopicOrPartitionError if the topic
        is missing."""

    @abstractmethod
    def mark_topic_for_deletion(self, topic: str) -> None:
        """Queue the topic for the controller to delete. Idempotent. UnknownTopicOrPartitionError if missing."""

    @abstractmethod
    def topics_marked_for_deletion(self) -> list[str]:
        """Topics queued for deletion, sorted."""

    @abstractmethod
    def delete_topic(self, topic: str, controller: ControllerEpoch) -> None:
        """Controller write: remove the assignment, config, partition states and deletion mark atomically.
        StaleControllerEpochError, UnknownTopicOrPartitionError, InvalidUpdateVersionError if the topic
        changed meanwhile."""

    @abstractmethod
    def watch_topics(self, callback: Callable[[list[str]], None]) -> Subscription:
        """Call ``callback(sorted_topic_names)`` now and when topics are created or deleted."""

    @abstractmethod
    def watch_topic(self, topic: str, callback: Callable[[TopicAssignment | None], None]) -> Subscription:
        """Call ``callback(assignment or None)`` now and when the topic is created, extended or deleted; None also
        while its stored assignment cannot be read (see get_topic)."""

    @abstractmethod
    def watch_topic_config(self, topic: str,
                           callback: Callable[[dict[str, str] | None], None]) -> Subscription:
        """Call ``callback(config or None)`` now and on every change of the topic's config."""

    @abstractmethod
    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> Subscription:
        """Call ``callback(sorted_marked_topics)`` now and whenever the deletion queue changes."""

    # --- producer ids -------------------------------------------------------------------------------------

    @abstractmethod
    def allocate_producer_ids(self, broker_id: int, count: int) -> int:
        """Reserve `count` producer ids for `broker_id` and return the first; blocks never overlap across the
        cluster, even with concurrent allocators (Kafka's /latest_producer_id_block, compare-and-set)."""

    # --- partition state -------------------------------------------------------------------------------

    @abstractmethod
    def create_partition_states(self, topic: str, states: Mapping[int, PartitionState],
                                controller: ControllerEpoch) -> dict[int, PartitionState]:
        """Controller write: create the states of new partitions atomically (their controller_epoch set to
        the token's); returns them with their versions. StaleControllerEpochError; UnknownTopicOrPartitionError
        for a partition not in the assignment; InvalidUpdateVersionError if one exists already;
        InvalidArgumentError for an invalid state."""

    @abstractmethod
    def get_partition_state(self, topic: str, partition: int) -> PartitionState:
        """The state with its version. UnknownTopicOrPartitionError if there is none."""

    @abstractmethod
    def get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        """All existing states of the topic's partitions (empty if none or no topic)."""

    @abstractmethod
    def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                               controller: ControllerEpoch) -> PartitionState:
        """Controller write, conditional on ``state.version`` (its controller_epoch is set to the token's);
        returns the stored state. StaleControllerEpochError (checked first), InvalidUpdateVersionError,
        UnknownTopicOrPartitionError, InvalidArgumentError."""

    def update_partition_states(self, updates: Sequence[tuple[str, int, PartitionState]],
                                controller: ControllerEpoch) -> list[PartitionState | SeglogError]:
        """Several ``update_partition_state`` writes, each conditional on its own version: per update, in
        order, the stored state or the SeglogError it failed with (InvalidUpdateVersionError,
        UnknownTopicOrPartitionError). StaleControllerEpochError is raised. A store may pipeline them (a
        controller moving the leadership of hundreds of partitions must not pay one round trip each)."""
        return [self._update_or_error(topic, partition, state, controller) for topic, partition, state in updates]

    def _update_or_error(self, topic: str, partition: int, state: PartitionState,
                         controller: ControllerEpoch) -> PartitionState | SeglogError:
        """``update_partition_state``'s stored state, or the SeglogError it failed with (stale epochs raise)."""
        try:
            return self.update_partition_state(topic, partition, state, controller)
        except StaleControllerEpochError:
            raise
        except SeglogError as e:
            return e

    @abstractmethod
    def update_isr(self, topic: str, partition: int, base: PartitionState, isr: Sequence[int]) -> PartitionState:
        """Leader write: store ``base`` with ``isr`` if the stored version is still ``base.version``.
        A new leader or any other write since ``base`` was read gives InvalidUpdateVersionError (re-read;
        drop the change if no longer leader). InvalidArgumentError if ``isr`` drops the leader."""

    @abstractmethod
    def watch_partition_state(self, topic: str, partition: int,
                              callback: Callable[[PartitionState | None], None]) -> Subscription:
        """Call ``callback(state or None)`` now and on every change of the partition's state."""

    # --- ACLs (Kafka's /kafka-acl layout) ------------------------------------------------------------------

    @abstractmethod
    def get_acls(self) -> dict[AclKey, list[dict]]:
        """Every resource pattern's ACL entries: (resource type, pattern type, name) as Kafka spells them
        ("Topic", "Literal" | "Prefixed", "orders") -> entries as Kafka's JSON ({"principal", "permissionType",
        "operation", "host"}). Patterns without entries are left out."""

    @abstractmethod
    def update_acls(self, key: AclKey, change: Callable[[list[dict]], list[dict]]) -> None:
        """Replace one pattern's entries with ``change(current entries)``, atomically: a concurrent writer makes
        it re-read and apply ``change`` again. An empty result removes the pattern. Every store's
        ``watch_acls`` hears of it."""

    @abstractmethod
    def watch_acls(self, callback: Callable[[dict[AclKey, list[dict]]], None]) -> Subscription:
        """``callback(get_acls())`` now and after every change of any pattern's entries."""

    # --- entity configs: client quotas and SCRAM credentials (Kafka's /config/users and /config/clients) ----

    @abstractmethod
    def get_entity_configs(self) -> dict[str, dict[str, str]]:
        """Every user's, client id's and broker's configs by entity path ("users/alice", "users/alice/clients/c1",
        "clients/<default>", "brokers/1", "brokers/<default>": names sanitized as Kafka's), values as Kafka's
        strings: quotas, a user's SCRAM credentials ("SCRAM-SHA-512": "salt=..."), dynamic broker configs.
        Entities without configs are left out."""

    @abstractmethod
    def update_entity_configs(self, entity_path: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Replace one entity's configs with ``change(current configs)``, atomically: a concurrent writer makes
        it re-read and apply ``change`` again. Every store's ``watch_entity_configs`` hears of it."""

    @abstractmethod
    def watch_entity_configs(self, callback: Callable[[dict[str, dict[str, str]]], None]) -> Subscription:
        """``callback(get_entity_configs())`` now and after every change of any entity's configs."""

    def __enter__(self) -> "MetadataStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
