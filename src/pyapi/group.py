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

This module is the state machine, one class because every transition takes the one lock over the same group
records. Around it: group_consumer (KIP-848 consumer groups, a base class sharing the lock and the deadlines;
one group id is either a classic group here or a consumer group there), group_offsets (OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete: a base class of
GroupCoordinator), group_types (the values it returns, its config), group_state (a group's records, the
deferred completions and store writes), group_timers (the deadline heap; kinds map to handlers through a
table) and offsets_store (the OffsetStore interface, the in-memory store and the __consumer_offsets one).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Callable, Iterable, Mapping, Sequence

from .errors import (CoordinatorNotAvailableError, FencedInstanceIdError, GroupIdNotFoundError,
                     GroupMaxSizeReachedError, IllegalGenerationError, InconsistentGroupProtocolError,
                     InvalidSessionTimeoutError, MemberIdRequiredError, NonEmptyGroupError, NotCoordinatorError,
                     RebalanceInProgressError, SeglogError, UnknownMemberIdError)
from .group_consumer import ConsumerGroups
from .group_consumer_classic import ClassicMembers
from .group_offsets import GroupOffsets
from .group_state import Done as _Done, Group as _Group, JoinArgs as _JoinArgs, Member as _Member, StoreWrites
from .group_state import check_group_id, complete as _complete, fail as _fail, log_store_failure, ok as _ok, wall_ms
from .group_timers import Deadlines, TimerKind
from .group_types import (GroupConfig, GroupDescription, GroupListing, GroupState, JoinedMember, JoinResult,
                          MemberDescription, SyncResult)
from .offsets_format import GroupMetadata, MemberMetadata, OffsetAndMetadata, TopicPartition
from .offsets_store import InMemoryOffsetStore, OffsetStore

__all__ = ["GroupState", "GroupConfig", "JoinedMember", "JoinResult", "SyncResult", "MemberDescription",
           "GroupDescription", "GroupListing", "OffsetStore", "InMemoryOffsetStore", "GroupCoordinator",
           "TopicPartition", "OffsetAndMetadata", "GroupMetadata", "MemberMetadata"]

log = logging.getLogger(__name__)

_EMPTY, _PREPARING, _COMPLETING, _STABLE, _DEAD = GroupState


def _default_clock() -> float:
    return time.monotonic() * 1000.0


class GroupCoordinator(GroupOffsets, ConsumerGroups, ClassicMembers):
    """Kafka's classic group coordinator (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
    OffsetFetch, DescribeGroups, ListGroups, DeleteGroups) over an :class:`OffsetStore`.

    ``clock`` returns monotonic milliseconds (inject a fake one in tests); ``timer=False`` starts no timer
    thread: deadlines then fire only from :meth:`tick`. Groups and offsets in ``store`` are loaded at start
    (groups with members come back Stable and must heartbeat within their session timeout). After
    :meth:`close` every call fails with CoordinatorNotAvailableError. KIP-848 consumer groups (group_consumer)
    share the lock and the deadlines; ``topics`` gives the partition count of each topic they may subscribe to,
    ``topic_ids`` the id of each topic (their records name topics by id: a topic without one is not stored).
    """

    #: join_group / sync_group return at once (their Futures complete later): a caller needs no thread of its
    #: own to wait for a rebalance with a timeout.
    delayed_operations = True

    def __init__(self, store: OffsetStore | None = None, config: GroupConfig | None = None, *,
                 clock: Callable[[], float] = _default_clock, timer: bool = True,
                 topics: Callable[[], Mapping[str, int]] = dict,
                 topic_ids: Callable[[], Mapping[str, uuid.UUID]] = dict) -> None:
        self.store = store if store is not None else InMemoryOffsetStore()
        self.config = config if config is not None else GroupConfig()
        self._clock = clock
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._deadlines = Deadlines(self._wakeup)
        self._on_deadline = {TimerKind.SESSION: self._on_session, TimerKind.PENDING: self._on_pending,
                             TimerKind.JOIN: self._on_join, TimerKind.SYNC: self._on_sync,
                             TimerKind.INITIAL: self._on_initial,
                             TimerKind.CONSUMER_SESSION: self._on_consumer_session,
                             TimerKind.CONSUMER_REVOKE: self._on_consumer_revoke}
        self._groups: dict[str, _Group] = {}
        self._consumer_groups: dict = {}          # group id -> group_consumer_state.ConsumerGroup
        self._consumer_holds: list = []            # (group id predicate, until): see _hold_consumer_groups
        self._topics = topics
        self._topic_ids = topic_ids
        self._writes = StoreWrites()
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
        check_group_id(group_id, allow_empty=False)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_ms <= cfg.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session timeout {session_ms} ms is outside group.min.session.timeout.ms "
                f"{cfg.min_session_timeout_ms} .. group.max.session.timeout.ms {cfg.max_session_timeout_ms}")
        consumer = self._serves_classic(group_id)
        if consumer is not None:
            self._classic_join_consumer(fut, done, now, consumer, member_id, protocol_type, protocols, session_ms,
                                        rebalance_ms, instance_id, client_id, client_host, require_known)
            return
        self._classic_may_take(group_id)
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
                self._deadlines.push(now + session_ms, TimerKind.PENDING, group, new_id)
                err = MemberIdRequiredError(f"rejoin group {group_id!r} with member id {new_id!r}")
                err.member_id = new_id
                raise err
            self._add_member(group, new_id, None, fut, done, now, member_args)
            return

        if member_id in group.pending and instance_id is None:
            del group.pending[member_id]
            self._add_member(group, member_id, None, fut, done, now, member_args)
            return
        member = group.current_member(member_id, instance_id)
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
            self._deadlines.push(group.initial_delay_until, TimerKind.INITIAL, group, group.rebalance_epoch)
        else:
            group.initial_delay_until = None
            self._deadlines.push(now + rebalance_ms, TimerKind.JOIN, group, group.rebalance_epoch)
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
            self._deadlines.push(now + rebalance_ms, TimerKind.JOIN, group, group.rebalance_epoch)
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
        self._deadlines.push(now + rebalance_ms, TimerKind.SYNC, group, group.generation)
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
        group.state_timestamp = wall_ms()

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
        consumer = self._serves_classic(group_id)
        if consumer is not None:
            self._check_open()
            self._classic_sync_consumer(fut, done, consumer, generation_id, member_id, instance_id, protocol_type,
                                        protocol_name)
            return
        group, member = self._generation_member(group_id, generation_id, member_id, instance_id)
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
            consumer = self._serves_classic(group_id)
            if consumer is not None:
                self._check_open()
                return self._classic_heartbeat_consumer(consumer, generation_id, member_id, group_instance_id)
            group, member = self._generation_member(group_id, generation_id, member_id, group_instance_id)
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
            check_group_id(group_id, allow_empty=False)
            now = self._clock()
            consumer = self._serves_classic(group_id)
            if consumer is not None:
                results = [self._classic_leave_consumer(consumer, m, i, done) for m, i in members]
            else:
                results = self._leave(self._groups.get(group_id), group_id, members, done, now)
        self._finish(done)
        return results

    def _leave(self, group, group_id, members, done, now) -> list[SeglogError | None]:
        """LeaveGroup of a classic group's members (lock held)."""
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
                    self._remove_member(group, group.current_member(member_id, instance_id), done)
                changed = True
                results.append(None)
            except SeglogError as e:
                results.append(e)
        if changed:
            self._after_member_left(group, done, now)
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

    # --- DescribeGroups / ListGroups / DeleteGroups ----------------------------------------------------------

    def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """One description per id; member metadata and assignments only while the group is Stable."""
        with self._lock:
            self._check_open()
            out = []
            for gid in group_ids:
                group = self._groups.get(gid)
                if group is None:                 # unknown, or a consumer group (described by ConsumerGroupDescribe)
                    why = (f"Group {gid} is not a classic group." if gid in self._consumer_groups
                           else f"Group {gid} not found.")
                    out.append(GroupDescription(gid, _DEAD, "", "", (), why))
                    continue
                out.append(group.describe())
            return out

    def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """Every group (sorted by id), or those in ``states`` (Kafka state names, any case)."""
        wanted = None if states is None else {s.lower() for s in states}
        with self._lock:
            self._check_open()
            every = [(g, "classic") for g in self._groups.values()] + [(g, "consumer")
                                                                        for g in self._consumer_groups.values()]
            return [GroupListing(g.group_id, g.protocol_type, g.state, kind)
                    for g, kind in sorted(every, key=lambda e: e[0].group_id)
                    if wanted is None or g.state.value.lower() in wanted]

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, SeglogError | None]:
        """Delete groups without members, with their offsets: per group None, GroupIdNotFoundError or
        NonEmptyGroupError. Raises CoordinatorNotAvailableError when closed."""
        done: _Done = []
        results: dict[str, SeglogError | None] = {}
        with self._lock:
            self._check_open()
            for gid in group_ids:
                group = self._groups.get(gid)
                consumer = self._consumer_groups.get(gid)
                if consumer is not None:
                    if consumer.members:
                        results[gid] = NonEmptyGroupError(f"group {gid!r} has members ({consumer.state.value})")
                        continue
                    del self._consumer_groups[gid]
                    self._queue_consumer_changes(consumer, dropped=True)
                    self._writes.queue(lambda gid=gid: self.store.start_delete_group(gid), log_store_failure)
                    results[gid] = None
                elif group is None:
                    results[gid] = GroupIdNotFoundError(f"group {gid!r} does not exist")
                elif group.state is not _EMPTY:
                    results[gid] = NonEmptyGroupError(f"group {gid!r} has members ({group.state.value})")
                else:
                    self._set_state(group, _DEAD)
                    del self._groups[gid]
                    self._writes.queue(lambda gid=gid: self.store.start_delete_group(gid), log_store_failure)
                    results[gid] = None
        self._finish(done)
        return results

    # --- groups moving between coordinators (cluster mode) ----------------------------------------------------

    def load_groups(self, stored: Mapping[str, GroupMetadata], names: Iterable[str],
                    taken_over: Callable[[str], bool] | None = None) -> None:
        """Take over groups whose offsets partition is now led here (Kafka's onElection): each is rebuilt from
        ``stored`` as at start-up, replacing any copy held before. Other groups are not touched. ``taken_over``
        (the partition had a leader before: it moved here) tells the group ids of that partition, whose
        consumer groups come back from their records, and those without any hold their partitions back for a
        session (group_consumer)."""
        names = set(names)
        self.unload_groups(names)
        self._load(dict(stored), names)
        if taken_over is not None:
            with self._lock:
                self._hold_consumer_groups(taken_over, self._clock())

    def unload_groups(self, group_ids: Iterable[str]) -> None:
        """Give up groups whose offsets partition moved away (Kafka's onResignation): they are forgotten, and
        their waiting JoinGroup / SyncGroup fail with NotCoordinatorError. Other groups are not touched."""
        done: _Done = []
        with self._lock:
            for gid in group_ids:
                self._consumer_groups.pop(gid, None)      # the new coordinator loads it from its records
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
            for kind, group, payload in self._deadlines.due(now):
                gid = group.group_id
                if self._groups.get(gid) is group or self._consumer_groups.get(gid) is group:
                    self._on_deadline[kind](group, payload, done, now)
        return done

    def _arm_session(self, group: _Group, member: _Member, now: float) -> None:
        """Start a new session of the member (one heap entry per member, re-pushed while the deadline moves)."""
        member.session_deadline = now + member.session_timeout_ms
        if not member.timer_armed:
            member.timer_armed = True
            self._deadlines.push(member.session_deadline, TimerKind.SESSION, group, member)

    def _on_session(self, group, member, done, now):
        member.timer_armed = False
        if group.members.get(member.member_id) is not member:
            return
        if member.join_future is not None or member.sync_future is not None:
            self._arm_session(group, member, now)       # a waiting request keeps the session alive
            return
        if member.session_deadline > now:
            member.timer_armed = True
            self._deadlines.push(member.session_deadline, TimerKind.SESSION, group, member)
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
            self._deadlines.push(group.initial_delay_until, TimerKind.INITIAL, group, epoch)
        else:
            self._complete_join(group, done, now)

    def _run_timer(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                self._wakeup.wait(self._deadlines.seconds_until_next(self._clock()))
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

    def _generation_member(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
                           ) -> tuple[_Group, _Member]:
        """The group and member a SyncGroup or Heartbeat names, in Kafka's order of checks (lock held):
        CoordinatorNotAvailableError, InvalidGroupIdError, UnknownMemberIdError, FencedInstanceIdError,
        IllegalGenerationError."""
        self._check_open()
        check_group_id(group_id, allow_empty=False)
        group = self._group_or_unknown_member(group_id, member_id)
        member = group.current_member(member_id, instance_id)
        if generation_id != group.generation:
            raise IllegalGenerationError(f"generation {generation_id} is not group {group_id!r}'s current "
                                         f"generation {group.generation}")
        return group, member

    def _group_or_unknown_member(self, group_id: str, member_id: str) -> _Group:
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {group_id!r} (no such group)")
        return group

    def _persist_group(self, group: _Group, assignments: Mapping[str, bytes], on_stored=None) -> None:
        """Queue a write of the group's generation with ``assignments`` (lock held)."""
        snapshot = group.metadata(assignments, wall_ms())
        gid = group.group_id
        self._writes.queue(lambda: self.store.start_store_group(gid, snapshot), on_stored or log_store_failure)

    def _finish(self, done: _Done, wait: bool = True) -> None:
        """Run the queued store writes, then the completions (lock NOT held; see StoreWrites.finish)."""
        self._writes.finish(done, wait)

    def _load(self, stored: dict[str, GroupMetadata], names: set[str]) -> None:
        """Rebuild groups from the store: groups with members come back Stable with fresh sessions. Writes
        the loading queued (a consumer group of seglog's earlier record format, written again) are started,
        not waited for."""
        self._load_locked(stored, names)
        self._finish([], wait=False)

    def _load_locked(self, stored: dict[str, GroupMetadata], names: set[str]) -> None:
        with self._lock:
            now = self._clock()
            for gid in names | set(stored):
                meta = stored.get(gid)
                if self._load_consumer_group(gid, now):
                    if meta is None or not meta.members:
                        continue                # one id is either kind: the consumer group it was
                    del self._consumer_groups[gid]          # a classic generation with members wins
                self._load_group(gid, meta, now)

    def _load_group(self, gid: str, meta: GroupMetadata | None, now: float) -> None:
        """Install a group as stored: its members come back with fresh sessions, a group with members Stable."""
        group = self._groups[gid] = _Group.from_metadata(gid, meta)
        for member in group.members.values():
            self._arm_session(group, member, now)
        if group.members:
            self._set_state(group, _STABLE)

