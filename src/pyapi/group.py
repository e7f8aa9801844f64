"""The group coordinator: Kafka's classic consumer-group protocol, one implementation for both doors.

The in-process consumer and the network broker call the same :class:`GroupCoordinator`; the broker only
translates requests and maps exceptions to codes with :func:`seglog.errors.code_of`.

States (Kafka's): ``Empty`` (no members; may hold offsets) -> ``PreparingRebalance`` (members (re)join;
completes when every member has rejoined, or at the rebalance timeout, dropping the dynamic members that did
not; a member whose client went away mid-join, see :meth:`GroupCoordinator.abandon_join`, has not) ->
``CompletingRebalance`` (generation bumped, leader chosen, waiting for the leader's SyncGroup) -> ``Stable``.
Any join of a new member, a leader rejoin, changed metadata, a leave or a session expiry sends a Stable or
CompletingRebalance group back to PreparingRebalance. ``Dead`` groups were deleted.

Concurrency: one lock guards all groups. JoinGroup and SyncGroup are delayed operations: they return a
:class:`concurrent.futures.Future` that completes later (``asyncio.wrap_future`` on the broker's loop,
``.result()`` in a consumer thread); every other call answers at once. Futures are completed, and the
:class:`OffsetStore` is written, only after the lock is released, so a done-callback may call back into
the coordinator. Deadlines (session expiry, the rebalance timeout for JoinGroup and again for SyncGroup,
``group.initial.rebalance.delay.ms``, members that got MEMBER_ID_REQUIRED and never came back) sit in one
heap and fire from :meth:`GroupCoordinator.tick`, which the internal timer thread calls (it starts the store
writes this causes but does not wait for their replication); tests pass
``timer=False`` and a fake ``clock`` and call ``tick()``.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import deque
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from .errors import (CoordinatorNotAvailableError, FencedInstanceIdError, GroupIdNotFoundError,
                     GroupMaxSizeReachedError, IllegalGenerationError, InconsistentGroupProtocolError,
                     InvalidConfigError, InvalidGroupIdError, InvalidSessionTimeoutError, MemberIdRequiredError,
                     NonEmptyGroupError, NotCoordinatorError, OffsetMetadataTooLargeError, RebalanceInProgressError,
                     SeglogError, UnknownMemberIdError, UnknownTopicOrPartitionError)
from .offsets_format import GroupMetadata, MemberMetadata, OffsetAndMetadata, TopicPartition

__all__ = ["GroupState", "GroupConfig", "JoinedMember", "JoinResult", "SyncResult", "MemberDescription",
           "GroupDescription", "GroupListing", "OffsetStore", "InMemoryOffsetStore", "GroupCoordinator",
           "TopicPartition", "OffsetAndMetadata", "GroupMetadata", "MemberMetadata"]

log = logging.getLogger(__name__)


class GroupState(str, enum.Enum):
    """A group's state; the value is Kafka's name (DescribeGroups / ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_EMPTY, _PREPARING, _COMPLETING, _STABLE, _DEAD = GroupState


@dataclass(frozen=True)
class GroupConfig:
    """Coordinator settings, Kafka's broker configs (``from_kafka`` takes the dotted names)."""

    min_session_timeout_ms: int = 6000             # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000          # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000         # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1                      # group.max.size
    offset_metadata_max_bytes: int = 4096          # offset.metadata.max.bytes

    _KAFKA = {"group.min.session.timeout.ms": "min_session_timeout_ms",
              "group.max.session.timeout.ms": "max_session_timeout_ms",
              "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
              "group.max.size": "max_size", "offset.metadata.max.bytes": "offset_metadata_max_bytes"}

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if f.name == "max_size" else 0):
                raise InvalidConfigError(f"Invalid value {value!r} for {f.name}: a non-negative int is required")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise InvalidConfigError("group.min.session.timeout.ms is larger than group.max.session.timeout.ms")

    @classmethod
    def from_kafka(cls, props: Mapping[str, Any]) -> "GroupConfig":
        """Build from Kafka names (values may be strings). InvalidConfigError for unknown names or bad values."""
        kw = {}
        for name, raw in props.items():
            if name not in cls._KAFKA:
                raise InvalidConfigError(f"Unknown group coordinator configuration {name!r}")
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
    """ListGroups entry."""

    group_id: str
    protocol_type: str
    state: GroupState


# --- offset store --------------------------------------------------------------------------------------------

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

    # Two-phase writes: the coordinator starts writes one at a time, in order (the start appends), and waits
    # for each (replication) afterwards, with no lock of its own held, so a write waiting for acks does not
    # hold up the writes of other groups, nor the coordinator's timers. A store whose writes are done when
    # the start returns keeps these defaults. A started write must be waited for (its waiter called once),
    # and a store that applies started writes must apply them in the order they were started.

    def start_commit(self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Callable[[], None]:
        """Start :meth:`commit`; the returned callable blocks until it is stored (raises if it failed)."""
        self.commit(group, offsets)
        return _stored

    def start_store_group(self, group: str, metadata: GroupMetadata) -> Callable[[], None]:
        """Start :meth:`store_group` (see :meth:`start_commit`)."""
        self.store_group(group, metadata)
        return _stored

    def start_delete_group(self, group: str) -> Callable[[], None]:
        """Start :meth:`delete_group` (see :meth:`start_commit`)."""
        self.delete_group(group)
        return _stored

    def partition_exists(self, topic: str, partition: int) -> bool:
        """Whether the topic partition exists (OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for one that
        does not, as Kafka checks its metadata cache). A store that knows no topics says True."""
        return True


def _stored() -> None:
    """The waiter of a write that was complete when it started."""


class InMemoryOffsetStore(OffsetStore):
    """A dict-backed OffsetStore (tests, throwaway in-process use). Thread-safe."""

    def __init__(self) -> None:
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._groups: dict[str, GroupMetadata] = {}
        self._lock = threading.Lock()

    def commit(self, group, offsets):
        with self._lock:
            self._offsets.setdefault(group, {}).update({TopicPartition(*tp): om for tp, om in offsets.items()})

    def fetch(self, group, partitions=None):
        with self._lock:
            stored = self._offsets.get(group, {})
            if partitions is None:
                return dict(stored)
            return {TopicPartition(*tp): stored[tp] for tp in partitions if tp in stored}

    def groups(self):
        with self._lock:
            return set(self._offsets) | set(self._groups)

    def store_group(self, group, metadata):
        with self._lock:
            self._groups[group] = metadata

    def load_groups(self):
        with self._lock:
            return dict(self._groups)

    def delete_group(self, group):
        with self._lock:
            self._offsets.pop(group, None)
            self._groups.pop(group, None)


# --- group state ---------------------------------------------------------------------------------------------

class _Member:
    """A member's state; every field is guarded by the coordinator lock."""

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 session_timeout_ms: int, rebalance_timeout_ms: int, protocols: list[tuple[str, bytes]]):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.protocols = protocols                    # [(name, metadata)] in the member's preference order
        self.assignment = b""
        self.join_future: Future | None = None        # set while its JoinGroup waits
        self.sync_future: Future | None = None        # set while its SyncGroup waits
        self.session_deadline = 0.0
        self.timer_armed = False                      # a "session" heap entry exists for this member

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")


class _Group:
    """A group's state; every field is guarded by the coordinator lock. ``members`` keeps join order."""

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.state = _EMPTY
        self.generation = 0
        self.protocol_type = ""
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, _Member] = {}
        self.static_members: dict[str, str] = {}      # group.instance.id -> member id
        self.pending: dict[str, float] = {}           # MEMBER_ID_REQUIRED ids -> deadline to rejoin by
        self.awaiting_sync: set[str] = set()          # members of this generation that sent no SyncGroup yet
        self.rebalance_epoch = 0                      # tells a stale rebalance deadline from the current one
        self.initial_delay_until: float | None = None
        self.initial_remaining_ms = 0
        self.new_member_added = False
        self.state_timestamp = -1                     # wall-clock ms of the last state change

    def candidate_protocols(self) -> set[str]:
        names = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*names) if names else set()

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool({n for n, _ in protocols} & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The protocol most members prefer among those all support; ties go to the earliest joiner's order."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values())).protocols
        rank = {name: i for i, (name, _) in enumerate(first)}
        return max(votes, key=lambda name: (votes[name], -rank[name]))

    def all_joined(self) -> bool:
        return not self.pending and all(m.join_future is not None for m in self.members.values())


class _JoinArgs(NamedTuple):
    """What a JoinGroup says about the member."""

    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_ms: int
    rebalance_ms: int
    client_id: str
    client_host: str


# A completion to run after the lock is released: (future, value or exception, is_exception).
_Done = list[tuple[Future, Any, bool]]


def _ok(done: _Done, fut: Future, value: Any) -> None:
    done.append((fut, value, False))


def _fail(done: _Done, fut: Future, exc: BaseException) -> None:
    done.append((fut, exc, True))


def _complete(done: _Done) -> None:
    for fut, value, failed in done:
        try:
            if failed:
                fut.set_exception(value)
            else:
                fut.set_result(value)
        except InvalidStateError:     # the waiter cancelled it (e.g. the client's connection closed)
            pass


def _default_clock() -> float:
    return time.monotonic() * 1000.0


def _wall_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    """Kafka's classic group coordinator (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
    OffsetFetch, DescribeGroups, ListGroups, DeleteGroups) over an :class:`OffsetStore`.

    ``clock`` returns monotonic milliseconds (inject a fake one in tests); ``timer=False`` starts no timer
    thread: deadlines then fire only from :meth:`tick`. Groups and offsets in ``store`` are loaded at start
    (groups with members come back Stable and must heartbeat within their session timeout). After
    :meth:`close` every call fails with CoordinatorNotAvailableError.
    """

    #: join_group / sync_group return at once (their Futures complete later): a caller needs no thread of its
    #: own to wait for a rebalance with a timeout.
    delayed_operations = True

    def __init__(self, store: OffsetStore | None = None, config: GroupConfig | None = None, *,
                 clock: Callable[[], float] = _default_clock, timer: bool = True) -> None:
        self.store = store if store is not None else InMemoryOffsetStore()
        self.config = config if config is not None else GroupConfig()
        self._clock = clock
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, str, _Group, Any]] = []
        self._seq = itertools.count()
        self._groups: dict[str, _Group] = {}
        self._outbox: deque[tuple[Callable[[], Callable[[], None]], Callable[[BaseException | None], _Done]]] = deque()
        self._store_lock = threading.Lock()
        self._closed = False
        self._load(self.store.load_groups(), self.store.groups())
        self._timer: threading.Thread | None = None
        if timer:
            self._timer = threading.Thread(target=self._run_timer, name="seglog-group-timer", daemon=True)
            self._timer.start()

    # --- JoinGroup -------------------------------------------------------------------------------------------

    def join_group(self, group_id: str, member_id: str, protocol_type: str,
                   protocols: Sequence[tuple[str, bytes]], session_timeout_ms: int,
                   rebalance_timeout_ms: int | None = None, *, group_instance_id: str | None = None,
                   client_id: str = "", client_host: str = "", require_known_member_id: bool = False
                   ) -> "Future[JoinResult]":
        """Join (``member_id`` "") or rejoin the group; the Future gives the :class:`JoinResult`.

        ``protocols`` are (name, metadata) in preference order; ``rebalance_timeout_ms`` None (JoinGroup v0)
        means the session timeout. ``require_known_member_id`` (JoinGroup v4+): a new dynamic member first
        gets MemberIdRequiredError whose ``member_id`` it must rejoin with. Errors arrive through the Future:
        InvalidGroupIdError, InvalidSessionTimeoutError, InconsistentGroupProtocolError, UnknownMemberIdError,
        FencedInstanceIdError (a newer member took this group.instance.id), GroupMaxSizeReachedError,
        RebalanceInProgressError (a newer JoinGroup of the same member replaced this one),
        CoordinatorNotAvailableError (closed).
        """
        fut: Future = Future()
        done: _Done = []
        rebalance_ms = session_timeout_ms if rebalance_timeout_ms is None else rebalance_timeout_ms
        with self._lock:
            try:
                self._join(fut, done, self._clock(), group_id, member_id, protocol_type,
                           [(str(name), bytes(meta)) for name, meta in protocols],
                           session_timeout_ms, rebalance_ms, group_instance_id, client_id, client_host,
                           require_known_member_id)
            except SeglogError as e:
                _fail(done, fut, e)
        self._finish(done)
        return fut

    def _join(self, fut, done, now, group_id, member_id, protocol_type, protocols, session_ms, rebalance_ms,
              instance_id, client_id, client_host, require_known):
        self._check_open()
        _check_group_id(group_id, allow_empty=False)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_ms <= cfg.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session timeout {session_ms} ms is outside group.min.session.timeout.ms "
                f"{cfg.min_session_timeout_ms} .. group.max.session.timeout.ms {cfg.max_session_timeout_ms}")
        group = self._groups.get(group_id)
        if group is None and member_id:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {group_id!r} (no such group)")
        group = group or _Group(group_id)
        if not group.supports(protocol_type, protocols):
            raise InconsistentGroupProtocolError(
                f"protocol type {protocol_type!r} with protocols {[n for n, _ in protocols]} does not match group "
                f"{group_id!r} (type {group.protocol_type!r}, common protocols {sorted(group.candidate_protocols())})")
        member_args = _JoinArgs(protocol_type, protocols, session_ms, rebalance_ms, client_id, client_host)

        if not member_id:
            if len(group.members) + len(group.pending) >= cfg.max_size:
                raise GroupMaxSizeReachedError(f"group {group_id!r} already has group.max.size={cfg.max_size} members")
            self._groups.setdefault(group_id, group)
            if instance_id is not None:
                new_id = f"{instance_id}-{uuid.uuid4()}"
                old_id = group.static_members.get(instance_id)
                if old_id is not None:
                    self._replace_static_member(group, group.members[old_id], new_id, fut, done, now, member_args)
                else:
                    self._add_member(group, new_id, instance_id, fut, done, now, member_args)
                return
            new_id = f"{client_id}-{uuid.uuid4()}"
            if require_known:
                group.pending[new_id] = now + session_ms
                self._push(now + session_ms, "pending", group, new_id)
                err = MemberIdRequiredError(f"rejoin group {group_id!r} with member id {new_id!r}")
                err.member_id = new_id
                raise err
            self._add_member(group, new_id, None, fut, done, now, member_args)
            return

        if member_id in group.pending and instance_id is None:
            del group.pending[member_id]
            self._add_member(group, member_id, None, fut, done, now, member_args)
            return
        member = self._current_member(group, member_id, instance_id)
        if group.state is _PREPARING:
            self._update_member(member, fut, done, member_args)
            self._maybe_complete_join(group, done, now)
        elif group.state is _COMPLETING and member.protocols == protocols:
            _ok(done, fut, self._join_result(group, member))      # a retry after a lost JoinGroup response
        elif group.state is _STABLE and member.protocols == protocols and member_id != group.leader_id:
            _ok(done, fut, self._join_result(group, member))      # a follower rejoining with nothing new
        else:                                                       # Stable or CompletingRebalance: rebalance
            self._update_member(member, fut, done, member_args)
            self._prepare_rebalance(group, done, now)

    def _add_member(self, group, member_id, instance_id, fut, done, now, args: "_JoinArgs"):
        member = _Member(member_id, instance_id, args.client_id, args.client_host, args.session_ms,
                         args.rebalance_ms, args.protocols)
        if not group.members:
            group.protocol_type = args.protocol_type
        member.join_future = fut
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        group.new_member_added = True
        if group.state is _PREPARING:
            self._maybe_complete_join(group, done, now)
        else:
            self._prepare_rebalance(group, done, now)

    def _update_member(self, member, fut, done, args: "_JoinArgs"):
        member.client_id, member.client_host = args.client_id, args.client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = args.session_ms, args.rebalance_ms
        member.protocols = args.protocols
        if member.join_future is not None:
            _fail(done, member.join_future, RebalanceInProgressError("replaced by a newer JoinGroup of this member"))
        member.join_future = fut

    def _replace_static_member(self, group, member, new_id, fut, done, now, member_args):
        """A known group.instance.id joined without a member id (a restarted static member; Kafka's
        updateStaticMemberAndRebalance). The new member id replaces the old one, which is fenced: its waiting
        JoinGroup / SyncGroup and every later request naming the instance id get FencedInstanceIdError. The
        member keeps its assignment. A Stable group whose protocol choice is unchanged does not rebalance: the
        group is stored with the new id, then the JoinGroup is answered for the current generation with the
        leader as it was (the old id when the member led: the new id must not think it leads and assign to a
        Stable group, which would not hand that assignment out) and no members, so the member syncs as a
        follower and gets its assignment back. If storing fails the replacement is undone and the JoinGroup
        fails. In CompletingRebalance the leader may have assigned to the old id: rebalance. In
        PreparingRebalance the member simply counts as joined."""
        old_id, old_leader, old_protocols = member.member_id, group.leader_id, member.protocols
        fenced = FencedInstanceIdError(f"group.instance.id {member.group_instance_id!r} rejoined as {new_id!r}")
        for pending in (member.join_future, member.sync_future):
            if pending is not None:
                _fail(done, pending, fenced)
        member.join_future = member.sync_future = None
        self._rename_member(group, member, new_id)
        self._update_member(member, fut, done, member_args)
        self._arm_session(group, member, now)
        if group.state is _STABLE and group.select_protocol() == group.protocol_name:
            answer = JoinResult(new_id, group.generation, group.protocol_type, group.protocol_name, old_leader)
            self._persist_group(group, {m.member_id: m.assignment for m in group.members.values()},
                                on_stored=self._on_static_member_stored(group, member, fut, old_id, old_protocols,
                                                                        answer))
        elif group.state is _PREPARING:
            self._maybe_complete_join(group, done, now)
        else:
            self._prepare_rebalance(group, done, now)

    @staticmethod
    def _rename_member(group: _Group, member: _Member, new_id: str) -> None:
        old_id = member.member_id
        del group.members[old_id]
        member.member_id = new_id
        group.members[new_id] = member
        group.static_members[member.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.awaiting_sync:
            group.awaiting_sync.remove(old_id)
            group.awaiting_sync.add(new_id)

    def _on_static_member_stored(self, group: _Group, member: _Member, fut: Future, old_id: str,
                                 old_protocols: list, answer: JoinResult):
        """Answers a static member's replacement in a Stable group once the group is stored (or undoes it).
        Nothing to do if a rebalance took the member's JoinGroup along meanwhile (it answers it)."""
        def on_stored(exc: BaseException | None) -> _Done:
            done: _Done = []
            with self._lock:
                if self._groups.get(group.group_id) is not group or member.join_future is not fut \
                        or group.members.get(member.member_id) is not member or group.state is not _STABLE:
                    return done
                member.join_future = None
                now = self._clock()
                if exc is None:
                    _ok(done, fut, answer)
                    self._arm_session(group, member, now)
                    return done
                self._rename_member(group, member, old_id)
                member.protocols = old_protocols
                self._arm_session(group, member, now)
                err = CoordinatorNotAvailableError(f"storing group {group.group_id!r} failed: {exc}")
                err.__cause__ = exc
                _fail(done, fut, err)
            return done
        return on_stored

    def _join_result(self, group: _Group, member: _Member) -> JoinResult:
        members = ()
        if member.member_id == group.leader_id:
            members = tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                            for m in group.members.values())
        return JoinResult(member.member_id, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id, members)

    # --- rebalance transitions (lock held) -------------------------------------------------------------------

    def _prepare_rebalance(self, group: _Group, done: _Done, now: float) -> None:
        """Stable / CompletingRebalance / Empty -> PreparingRebalance; waiting SyncGroups fail with
        RebalanceInProgressError. From Empty the join first waits group.initial.rebalance.delay.ms."""
        if group.state is _COMPLETING:
            for m in group.members.values():
                m.assignment = b""
                if m.sync_future is not None:
                    _fail(done, m.sync_future, RebalanceInProgressError(f"group {group.group_id!r} is rebalancing"))
                    m.sync_future = None
                    self._arm_session(group, m, now)
        was_empty = group.state is _EMPTY
        group.awaiting_sync.clear()
        self._set_state(group, _PREPARING)
        group.rebalance_epoch += 1
        rebalance_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay = self.config.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            group.initial_delay_until = now + delay
            group.initial_remaining_ms = max(rebalance_ms - delay, 0)
            group.new_member_added = False
            self._push(group.initial_delay_until, "initial", group, group.rebalance_epoch)
        else:
            group.initial_delay_until = None
            self._push(now + rebalance_ms, "join", group, group.rebalance_epoch)
            self._maybe_complete_join(group, done, now)

    def _maybe_complete_join(self, group: _Group, done: _Done, now: float) -> None:
        if group.state is _PREPARING and group.initial_delay_until is None and group.all_joined():
            self._complete_join(group, done, now)

    def _complete_join(self, group: _Group, done: _Done, now: float) -> None:
        """PreparingRebalance -> CompletingRebalance (next generation, every joined member answered), or ->
        Empty when nobody is left. Dynamic members that did not rejoin are dropped; static ones stay members
        (their session, or the SyncGroup deadline, decides), as in Kafka. If only static members that did not
        rejoin are left, the join waits another rebalance timeout (Kafka: "no members rejoined") while their
        sessions run out. The leader is a member that rejoined."""
        for m in [m for m in group.members.values() if m.join_future is None and m.group_instance_id is None]:
            self._remove_member(group, m, done)
        joined = [m.member_id for m in group.members.values() if m.join_future is not None]
        if group.members and not joined:
            log.warning("group %s could not complete rebalance because no members rejoined", group.group_id)
            group.initial_delay_until = None
            rebalance_ms = max(m.rebalance_timeout_ms for m in group.members.values())
            self._push(now + rebalance_ms, "join", group, group.rebalance_epoch)
            return
        if group.leader_id not in joined:
            group.leader_id = joined[0] if joined else None
        group.generation += 1
        group.initial_delay_until = None
        if not group.members:
            group.protocol_name = None
            self._set_state(group, _EMPTY)
            self._persist_group(group, {})
            return
        group.protocol_name = group.select_protocol()
        self._set_state(group, _COMPLETING)
        group.awaiting_sync = set(group.members)
        rebalance_ms = max(m.rebalance_timeout_ms for m in group.members.values())
        self._push(now + rebalance_ms, "sync", group, group.generation)
        for m in group.members.values():
            if m.join_future is not None:
                _ok(done, m.join_future, self._join_result(group, m))
                m.join_future = None
            self._arm_session(group, m, now)

    def _remove_member(self, group: _Group, member: _Member, done: _Done) -> None:
        """Drop a member (its waiting JoinGroup / SyncGroup fail with UnknownMemberIdError). The caller then
        runs :meth:`_after_member_left` unless it is completing a join."""
        del group.members[member.member_id]
        group.awaiting_sync.discard(member.member_id)
        if member.group_instance_id is not None and group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        gone = UnknownMemberIdError(f"member {member.member_id!r} was removed from group {group.group_id!r}")
        for pending in (member.join_future, member.sync_future):
            if pending is not None:
                _fail(done, pending, gone)
        member.join_future = member.sync_future = None
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _after_member_left(self, group: _Group, done: _Done, now: float) -> None:
        if group.state in (_STABLE, _COMPLETING):
            self._prepare_rebalance(group, done, now)
        else:
            self._maybe_complete_join(group, done, now)

    def _set_state(self, group: _Group, state: GroupState) -> None:
        group.state = state
        group.state_timestamp = _wall_ms()

    # --- SyncGroup -------------------------------------------------------------------------------------------

    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   assignments: Mapping[str, bytes] | None = None, *, group_instance_id: str | None = None,
                   protocol_type: str | None = None, protocol_name: str | None = None) -> "Future[SyncResult]":
        """Fetch this member's assignment for ``generation_id``; the leader supplies ``assignments``
        ({member_id: bytes}; members left out get empty bytes). Followers wait until the leader's SyncGroup
        completes the generation (group metadata is stored first). Errors through the Future:
        UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError (a rebalance started first),
        InconsistentGroupProtocolError (``protocol_type``/``protocol_name`` given, SyncGroup v5, and not the
        group's), FencedInstanceIdError, CoordinatorNotAvailableError (closed, or storing the group failed).
        """
        fut: Future = Future()
        done: _Done = []
        with self._lock:
            try:
                self._sync(fut, done, self._clock(), group_id, generation_id, member_id, assignments or {},
                           group_instance_id, protocol_type, protocol_name)
            except SeglogError as e:
                _fail(done, fut, e)
        self._finish(done)
        return fut

    def _sync(self, fut, done, now, group_id, generation_id, member_id, assignments, instance_id,
              protocol_type, protocol_name):
        self._check_open()
        _check_group_id(group_id, allow_empty=False)
        group = self._group_or_unknown_member(group_id, member_id)
        member = self._current_member(group, member_id, instance_id)
        if generation_id != group.generation:
            raise IllegalGenerationError(f"generation {generation_id} is not group {group_id!r}'s current "
                                         f"generation {group.generation}")
        if (protocol_type is not None and protocol_type != group.protocol_type
                or protocol_name is not None and protocol_name != group.protocol_name):
            raise InconsistentGroupProtocolError(
                f"SyncGroup names protocol {protocol_type!r}/{protocol_name!r}, group {group_id!r} uses "
                f"{group.protocol_type!r}/{group.protocol_name!r}")
        if group.state is _PREPARING:
            raise RebalanceInProgressError(f"group {group_id!r} is rebalancing; rejoin")
        group.awaiting_sync.discard(member_id)
        if group.state is _STABLE:
            self._arm_session(group, member, now)
            _ok(done, fut, SyncResult(group.protocol_type, group.protocol_name, member.assignment))
            return
        if member.sync_future is not None:
            _fail(done, member.sync_future, RebalanceInProgressError("replaced by a newer SyncGroup of this member"))
        member.sync_future = fut
        if member_id == group.leader_id:
            chosen = {m: bytes(assignments.get(m, b"")) for m in group.members}
            self._persist_group(group, chosen, on_stored=self._on_generation_stored(group, group.generation, chosen))

    def _on_generation_stored(self, group: _Group, generation: int, chosen: dict[str, bytes]):
        """Completion of the leader's SyncGroup once the group metadata write finished (``exc`` None) or failed."""
        def on_stored(exc: BaseException | None) -> _Done:
            done: _Done = []
            with self._lock:
                if self._groups.get(group.group_id) is not group or group.state is not _COMPLETING \
                        or group.generation != generation:
                    return done                                  # a rebalance already answered the waiters
                now = self._clock()
                if exc is None:
                    self._set_state(group, _STABLE)
                    for m in group.members.values():
                        m.assignment = chosen.get(m.member_id, b"")
                        if m.sync_future is not None:
                            _ok(done, m.sync_future, SyncResult(group.protocol_type, group.protocol_name, m.assignment))
                            m.sync_future = None
                            self._arm_session(group, m, now)
                    return done
                err = CoordinatorNotAvailableError(f"storing group {group.group_id!r} failed: {exc}")
                err.__cause__ = exc
                for m in group.members.values():
                    if m.sync_future is not None:
                        _fail(done, m.sync_future, err)
                        m.sync_future = None
                        self._arm_session(group, m, now)
                self._prepare_rebalance(group, done, now)
            return done
        return on_stored

    # --- Heartbeat / LeaveGroup ------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, *,
                  group_instance_id: str | None = None) -> None:
        """Keep the member's session alive. Raises RebalanceInProgressError while the group rebalances (the
        session is still refreshed: rejoin), IllegalGenerationError, UnknownMemberIdError,
        FencedInstanceIdError, InvalidGroupIdError, CoordinatorNotAvailableError."""
        with self._lock:
            self._check_open()
            _check_group_id(group_id, allow_empty=False)
            group = self._group_or_unknown_member(group_id, member_id)
            member = self._current_member(group, member_id, group_instance_id)
            if generation_id != group.generation:
                raise IllegalGenerationError(f"generation {generation_id} is not group {group_id!r}'s current "
                                             f"generation {group.generation}")
            member.session_deadline = self._clock() + member.session_timeout_ms
            if group.state is _PREPARING:
                raise RebalanceInProgressError(f"group {group_id!r} is rebalancing; rejoin")

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> list[SeglogError | None]:
        """Remove members, given as (member_id, group_instance_id) (LeaveGroup v0-2: one member, v3+: a batch;
        a static member may leave by instance id with member id ""). Returns one error or None per member:
        UnknownMemberIdError, FencedInstanceIdError. Raises InvalidGroupIdError / CoordinatorNotAvailableError
        for the whole request. Members that left trigger one rebalance."""
        done: _Done = []
        with self._lock:
            self._check_open()
            _check_group_id(group_id, allow_empty=False)
            now = self._clock()
            group = self._groups.get(group_id)
            results: list[SeglogError | None] = []
            changed = False
            for member_id, instance_id in members:
                try:
                    if group is None:
                        raise UnknownMemberIdError(f"group {group_id!r} does not exist")
                    if instance_id is None and member_id in group.pending:
                        del group.pending[member_id]
                    else:
                        if instance_id is not None and not member_id:
                            member_id = group.static_members.get(instance_id, "")
                        self._remove_member(group, self._current_member(group, member_id, instance_id), done)
                    changed = True
                    results.append(None)
                except SeglogError as e:
                    results.append(e)
            if changed:
                self._after_member_left(group, done, now)
        self._finish(done)
        return results

    def abandon_join(self, group_id: str, fut: "Future[JoinResult]") -> None:
        """The client of a JoinGroup still waiting (``fut``, from :meth:`join_group`) went away: its connection
        closed, so the answer can never reach it. A dynamic member is removed at once, as if it had sent
        LeaveGroup, so the rebalance does not wait the rebalance timeout for it (nor does the next generation
        hold it until its session ends); joining again makes it a new member. A static member stays, as one
        that has not rejoined yet: the rebalance completes when the others have joined or at the rebalance
        timeout, and the member keeps its place until its session ends (Kafka keeps static members that do
        not rejoin). Nothing happens if ``fut`` is no longer the member's waiting JoinGroup."""
        done: _Done = []
        with self._lock:
            group = self._groups.get(group_id)
            member = next((m for m in group.members.values() if m.join_future is fut), None) if group else None
            if member is None or self._closed:
                return
            now = self._clock()
            log.info("group %s: the client of member %s closed its connection while joining", group_id,
                     member.member_id)
            if member.group_instance_id is None:
                self._remove_member(group, member, done)
                self._after_member_left(group, done, now)
            else:
                member.join_future = None
                self._arm_session(group, member, now)
        self._finish(done)

    # --- OffsetCommit / OffsetFetch --------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata | int],
                       generation_id: int = -1, member_id: str = "", *,
                       group_instance_id: str | None = None) -> dict[TopicPartition, SeglogError | None]:
        """Commit offsets; returns each partition's error or None: UnknownTopicOrPartitionError for a partition
        that does not exist (the store's :meth:`OffsetStore.partition_exists`), OffsetMetadataTooLargeError.
        The other partitions are committed. Offsets are stored as given (Kafka's coordinator takes any
        offset, -1 included; clients refuse negative ones).

        Generation -1 with member id "" is a simple (standalone) commit, accepted while the group has no
        members (and creating the group if needed). Otherwise the member must be current: raises
        UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError (CompletingRebalance),
        FencedInstanceIdError, CoordinatorNotAvailableError, or what the OffsetStore raised; as Kafka, the
        unknown partitions are refused before the group is checked, so such an error carries their errors
        in ``partition_errors`` ({tp: error}; they did not get the group's error), and a commit whose
        partitions are all unknown is answered without looking at the group. A group-managed commit counts
        as a heartbeat. Blocks until the store wrote the offsets.
        """
        written: Future = Future()

        def on_written(exc: BaseException | None) -> _Done:
            return [(written, exc, True)] if exc is not None else [(written, None, False)]

        results: dict[TopicPartition, SeglogError | None] = {}
        known: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            tp = TopicPartition(*tp)
            if not self.store.partition_exists(tp.topic, tp.partition):
                results[tp] = UnknownTopicOrPartitionError(
                    f"This server does not host this topic-partition: {tp.topic}-{tp.partition}")
            else:
                known[tp] = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om)
        with self._lock:
            self._check_open()
            _check_group_id(group_id, allow_empty=True)
            if not known:
                return results
            try:
                self._check_commit(group_id, generation_id, member_id, group_instance_id)
            except SeglogError as e:
                e.partition_errors = dict(results)
                raise
            accepted: dict[TopicPartition, OffsetAndMetadata] = {}
            stamp = _wall_ms()
            for tp, om in known.items():
                if len(om.metadata.encode()) > self.config.offset_metadata_max_bytes:
                    results[tp] = OffsetMetadataTooLargeError(
                        f"metadata of {len(om.metadata.encode())} bytes is over offset.metadata.max.bytes "
                        f"{self.config.offset_metadata_max_bytes}")
                    continue
                if om.commit_timestamp < 0:
                    om = OffsetAndMetadata(om.offset, om.leader_epoch, om.metadata, stamp, om.expire_timestamp)
                accepted[tp] = om
                results[tp] = None
            if accepted:
                self._outbox.append((lambda: self.store.start_commit(group_id, accepted), on_written))
            else:
                written.set_result(None)
        self._finish([])
        written.result()
        return results

    def _check_commit(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> None:
        """OffsetCommit's group checks (lock held); a group-managed commit refreshes the member's session."""
        now = self._clock()
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise IllegalGenerationError(f"group {group_id!r} does not exist: generation {generation_id} "
                                             f"is stale")
            group = self._groups[group_id] = _Group(group_id)
        if generation_id < 0 and group.state is _EMPTY:
            return
        # Kafka's order: member, then generation, and only then the state. A commit of the previous
        # generation that arrives after the join completed is ILLEGAL_GENERATION, not
        # REBALANCE_IN_PROGRESS, which is only for a member that already has the new generation.
        member = self._current_member(group, member_id, instance_id)
        if generation_id != group.generation:
            raise IllegalGenerationError(f"generation {generation_id} is not group {group_id!r}'s "
                                         f"current generation {group.generation}")
        if group.state is _COMPLETING:
            raise RebalanceInProgressError(f"group {group_id!r} is completing a rebalance; commit after "
                                           f"SyncGroup")
        member.session_deadline = now + member.session_timeout_ms

    def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of ``partitions`` (None for a partition without a commit; Kafka answers offset
        -1), or of every committed partition when ``partitions`` is None. Raises CoordinatorNotAvailableError
        when closed, or what the OffsetStore raised. Committed offsets of any group, members or not."""
        with self._lock:
            self._check_open()
            _check_group_id(group_id, allow_empty=True)
        if partitions is None:
            return dict(self.store.fetch(group_id, None))
        wanted = [TopicPartition(*tp) for tp in partitions]
        stored = self.store.fetch(group_id, wanted)
        return {tp: stored.get(tp) for tp in wanted}

    # --- DescribeGroups / ListGroups / DeleteGroups ----------------------------------------------------------

    def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """One description per id; member metadata and assignments only while the group is Stable."""
        with self._lock:
            self._check_open()
            out = []
            for gid in group_ids:
                group = self._groups.get(gid)
                if group is None:
                    out.append(GroupDescription(gid, _DEAD, "", ""))
                    continue
                stable = group.state is _STABLE
                members = tuple(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                                  m.metadata_for(group.protocol_name) if stable else b"",
                                                  m.assignment if stable else b"")
                                for m in group.members.values())
                out.append(GroupDescription(gid, group.state, group.protocol_type,
                                            group.protocol_name if stable else "", members))
            return out

    def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """Every group (sorted by id), or those in ``states`` (Kafka state names, any case)."""
        wanted = None if states is None else {s.lower() for s in states}
        with self._lock:
            self._check_open()
            return [GroupListing(g.group_id, g.protocol_type, g.state) for g in sorted(
                self._groups.values(), key=lambda g: g.group_id) if wanted is None or g.state.value.lower() in wanted]

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, SeglogError | None]:
        """Delete groups without members, with their offsets: per group None, GroupIdNotFoundError or
        NonEmptyGroupError. Raises CoordinatorNotAvailableError when closed."""
        done: _Done = []
        results: dict[str, SeglogError | None] = {}
        with self._lock:
            self._check_open()
            for gid in group_ids:
                group = self._groups.get(gid)
                if group is None:
                    results[gid] = GroupIdNotFoundError(f"group {gid!r} does not exist")
                elif group.state is not _EMPTY:
                    results[gid] = NonEmptyGroupError(f"group {gid!r} has members ({group.state.value})")
                else:
                    self._set_state(group, _DEAD)
                    del self._groups[gid]
                    self._outbox.append((lambda gid=gid: self.store.start_delete_group(gid), self._log_store_failure))
                    results[gid] = None
        self._finish(done)
        return results

    # --- groups moving between coordinators (cluster mode) ----------------------------------------------------

    def load_groups(self, stored: Mapping[str, GroupMetadata], names: Iterable[str]) -> None:
        """Take over groups whose offsets partition is now led here (Kafka's onElection): each is rebuilt from
        ``stored`` as at start-up, replacing any copy held before. Other groups are not touched."""
        names = set(names)
        self.unload_groups(names)
        self._load(dict(stored), names)

    def unload_groups(self, group_ids: Iterable[str]) -> None:
        """Give up groups whose offsets partition moved away (Kafka's onResignation): they are forgotten, and
        their waiting JoinGroup / SyncGroup fail with NotCoordinatorError. Other groups are not touched."""
        done: _Done = []
        with self._lock:
            for gid in group_ids:
                group = self._groups.pop(gid, None)
                for m in group.members.values() if group is not None else ():
                    for pending in (m.join_future, m.sync_future):
                        if pending is not None:
                            _fail(done, pending, NotCoordinatorError(f"group {gid!r} moved to another coordinator"))
                    m.join_future = m.sync_future = None
        _complete(done)                 # not _finish: no store write is due, none is waited for

    # --- timers ----------------------------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> None:
        """Fire every deadline at or before ``now`` (default: the clock): session expiries, rebalance
        timeouts (join and sync), the initial rebalance delay, MEMBER_ID_REQUIRED members that did not rejoin.
        Returns once the store writes this caused are done (the timer thread does not wait for them)."""
        self._finish(self._fire(now))

    def _fire(self, now: float | None) -> _Done:
        """Fire the due deadlines; the completions to run with :meth:`_finish`."""
        done: _Done = []
        with self._lock:
            if self._closed:
                return done
            now = self._clock() if now is None else now
            while self._heap and self._heap[0][0] <= now:
                _, _, kind, group, payload = heapq.heappop(self._heap)
                if self._groups.get(group.group_id) is group:
                    getattr(self, "_on_" + kind)(group, payload, done, now)
        return done

    def _push(self, deadline: float, kind: str, group: _Group, payload: Any) -> None:
        entry = (deadline, next(self._seq), kind, group, payload)
        heapq.heappush(self._heap, entry)
        if self._heap[0] is entry:
            self._wakeup.notify()

    def _arm_session(self, group: _Group, member: _Member, now: float) -> None:
        """Start a new session of the member (one heap entry per member, re-pushed while the deadline moves)."""
        member.session_deadline = now + member.session_timeout_ms
        if not member.timer_armed:
            member.timer_armed = True
            self._push(member.session_deadline, "session", group, member)

    def _on_session(self, group, member, done, now):
        member.timer_armed = False
        if group.members.get(member.member_id) is not member:
            return
        if member.join_future is not None or member.sync_future is not None:
            self._arm_session(group, member, now)       # a waiting request keeps the session alive
            return
        if member.session_deadline > now:
            member.timer_armed = True
            self._push(member.session_deadline, "session", group, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member(group, member, done)
        self._after_member_left(group, done, now)

    def _on_pending(self, group, member_id, done, now):
        deadline = group.pending.get(member_id)
        if deadline is not None and deadline <= now:
            del group.pending[member_id]
            self._maybe_complete_join(group, done, now)

    def _on_join(self, group, epoch, done, now):
        if group.state is _PREPARING and group.rebalance_epoch == epoch and group.initial_delay_until is None:
            self._complete_join(group, done, now)

    def _on_sync(self, group, generation, done, now):
        """The rebalance timeout after a join: members of that generation that never sent SyncGroup (a leader
        that never assigns would otherwise keep its followers waiting while it heartbeats) are removed."""
        if group.generation != generation or group.state not in (_COMPLETING, _STABLE) or not group.awaiting_sync:
            return
        for member_id in sorted(group.awaiting_sync):
            log.info("group %s: member %s sent no SyncGroup within the rebalance timeout", group.group_id, member_id)
            self._remove_member(group, group.members[member_id], done)
        self._after_member_left(group, done, now)

    def _on_initial(self, group, epoch, done, now):
        if group.state is not _PREPARING or group.rebalance_epoch != epoch or group.initial_delay_until is None:
            return
        if group.new_member_added and group.initial_remaining_ms > 0:
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms -= delay
            group.new_member_added = False
            group.initial_delay_until = now + delay
            self._push(group.initial_delay_until, "initial", group, epoch)
        else:
            self._complete_join(group, done, now)

    def _run_timer(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                wait = None if not self._heap else max(0.0, (self._heap[0][0] - self._clock()) / 1000.0)
                self._wakeup.wait(wait)
            try:
                self._finish(self._fire(None), wait=False)
            except Exception:   # a bug here must not stop every future session expiry
                log.exception("group coordinator timer failed")

    def close(self) -> None:
        """Stop the timer thread and fail every waiting JoinGroup/SyncGroup with CoordinatorNotAvailableError.
        Idempotent; later calls fail with CoordinatorNotAvailableError."""
        done: _Done = []
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wakeup.notify_all()
            for group in self._groups.values():
                for m in group.members.values():
                    for pending in (m.join_future, m.sync_future):
                        if pending is not None:
                            _fail(done, pending, CoordinatorNotAvailableError("the group coordinator was closed"))
                    m.join_future = m.sync_future = None
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.join()
        self._finish(done)

    # --- helpers ---------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise CoordinatorNotAvailableError("the group coordinator is closed")

    def _group_or_unknown_member(self, group_id: str, member_id: str) -> _Group:
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {group_id!r} (no such group)")
        return group

    def _current_member(self, group: _Group, member_id: str, instance_id: str | None) -> _Member:
        """The member, after the static fencing check. FencedInstanceIdError / UnknownMemberIdError."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is not None and current != member_id:
                raise FencedInstanceIdError(f"group.instance.id {instance_id!r} belongs to member {current!r}, "
                                            f"not {member_id!r}")
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {group.group_id!r}")
        return member

    def _persist_group(self, group: _Group, assignments: Mapping[str, bytes], on_stored=None) -> None:
        """Queue a write of the group's generation with ``assignments`` (lock held)."""
        snapshot = GroupMetadata(
            group.protocol_type, group.generation, group.protocol_name, group.leader_id, _wall_ms(),
            tuple(MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata_for(group.protocol_name),
                                 assignments.get(m.member_id, b"")) for m in group.members.values()))
        gid = group.group_id
        self._outbox.append((lambda: self.store.start_store_group(gid, snapshot), on_stored or self._log_store_failure))

    @staticmethod
    def _log_store_failure(exc: BaseException | None) -> _Done:
        if exc is not None:
            log.error("group coordinator: writing to the offset store failed: %r", exc)
        return []

    def _finish(self, done: _Done, wait: bool = True) -> None:
        """Start queued store writes in order, wait for each (outside the store lock: a write waiting for
        replication holds up no other), then complete futures (lock NOT held). ``wait=False`` (the timer
        thread, which must go on firing deadlines while a write waits for its acks): the waiting and the
        completions run on a thread of their own when a write was started."""
        started = []
        with self._store_lock:
            while self._outbox:
                write, on_result = self._outbox.popleft()
                try:
                    started.append((write(), None, on_result))
                except Exception as e:
                    started.append((None, e, on_result))
        if started and not wait:
            threading.Thread(target=self._settle, args=(started, done), name="seglog-group-write",
                             daemon=True).start()
        else:
            self._settle(started, done)

    @staticmethod
    def _settle(started, done: _Done) -> None:
        """Wait for started writes, hand each result to its callback, complete the futures."""
        for wait, exc, on_result in started:
            if wait is not None:
                try:
                    wait()
                except Exception as e:
                    exc = e
            done.extend(on_result(exc))
        _complete(done)

    def _load(self, stored: dict[str, GroupMetadata], names: set[str]) -> None:
        """Rebuild groups from the store: groups with members come back Stable with fresh sessions."""
        with self._lock:
            now = self._clock()
            for gid in names | set(stored):
                self._load_group(gid, stored.get(gid), now)

    def _load_group(self, gid: str, meta: GroupMetadata | None, now: float) -> None:
        group = self._groups[gid] = _Group(gid)
        if meta is not None:
            group.protocol_type, group.generation = meta.protocol_type, meta.generation
            group.protocol_name, group.leader_id = meta.protocol, meta.leader
            for mm in meta.members:
                member = _Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                                 mm.session_timeout_ms, mm.rebalance_timeout_ms,
                                 [(meta.protocol, mm.subscription)] if meta.protocol else [])
                member.assignment = mm.assignment
                group.members[mm.member_id] = member
                if mm.group_instance_id is not None:
                    group.static_members[mm.group_instance_id] = mm.member_id
                self._arm_session(group, member, now)
            if group.members:
                self._set_state(group, _STABLE)


def _check_group_id(group_id: str, allow_empty: bool) -> None:
    """Kafka allows the empty group id only for offset and describe/delete APIs (old consumers used it)."""
    if not isinstance(group_id, str) or (not group_id and not allow_empty):
        raise InvalidGroupIdError(f"invalid group id {group_id!r}")
