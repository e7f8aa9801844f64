"""A group's mutable state and the coordinator's deferred work (see group.GroupCoordinator).

Member and Group are plain records guarded by the coordinator's lock. The coordinator never completes a
Future nor writes its OffsetStore with that lock held: it collects completions in a ``Done`` list and queues
store writes in ``StoreWrites``, and runs both after releasing the lock (``StoreWrites.finish``), so a
done-callback may call back into the coordinator.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from .errors import FencedInstanceIdError, InvalidGroupIdError, UnknownMemberIdError
from .group_types import GroupDescription, GroupState, MemberDescription
from .offsets_format import GroupMetadata, MemberMetadata

__all__ = ["Member", "Group", "JoinArgs", "Done", "ok", "fail", "complete", "StoreWrites", "log_store_failure",
           "check_group_id", "wall_ms"]

log = logging.getLogger("seglog.group")


@dataclass(eq=False)
class Member:
    """A member's state; every field is guarded by the coordinator lock."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]            # [(name, metadata)] in the member's preference order
    assignment: bytes = b""
    join_future: Future | None = None             # set while its JoinGroup waits
    sync_future: Future | None = None             # set while its SyncGroup waits
    session_deadline: float = 0.0
    timer_armed: bool = False                     # a "session" heap entry exists for this member

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")


class Group:
    """A group's state; every field is guarded by the coordinator lock. ``members`` keeps join order."""

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type = ""
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
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

    def current_member(self, member_id: str, instance_id: str | None) -> Member:
        """The member, after the static fencing check. FencedInstanceIdError / UnknownMemberIdError."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is not None and current != member_id:
                raise FencedInstanceIdError(f"group.instance.id {instance_id!r} belongs to member {current!r}, "
                                            f"not {member_id!r}")
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {self.group_id!r}")
        return member

    def describe(self) -> GroupDescription:
        """DescribeGroups data: member metadata, assignments and the protocol only while Stable."""
        stable = self.state is GroupState.STABLE
        members = tuple(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                          m.metadata_for(self.protocol_name) if stable else b"",
                                          m.assignment if stable else b"")
                        for m in self.members.values())
        return GroupDescription(self.group_id, self.state, self.protocol_type,
                                self.protocol_name if stable else "", members)

    def metadata(self, assignments: Mapping[str, bytes], now_ms: int) -> GroupMetadata:
        """The generation as the offset store keeps it, with ``assignments`` (member id -> bytes)."""
        return GroupMetadata(
            self.protocol_type, self.generation, self.protocol_name, self.leader_id, now_ms,
            tuple(MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata_for(self.protocol_name),
                                 assignments.get(m.member_id, b"")) for m in self.members.values()))

    @classmethod
    def from_metadata(cls, group_id: str, meta: GroupMetadata | None) -> Group:
        """The group as stored (Empty, sessions not armed: the coordinator does that), or a new empty one."""
        group = cls(group_id)
        if meta is not None:
            group.protocol_type, group.generation = meta.protocol_type, meta.generation
            group.protocol_name, group.leader_id = meta.protocol, meta.leader
            for mm in meta.members:
                member = Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                                mm.session_timeout_ms, mm.rebalance_timeout_ms,
                                [(meta.protocol, mm.subscription)] if meta.protocol else [])
                member.assignment = mm.assignment
                group.members[mm.member_id] = member
                if mm.group_instance_id is not None:
                    group.static_members[mm.group_instance_id] = mm.member_id
        return group


class JoinArgs(NamedTuple):
    """What a JoinGroup says about the member."""

    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_ms: int
    rebalance_ms: int
    client_id: str
    client_host: str


# A completion to run after the lock is released: (future, value or exception, is_exception).
Done = list[tuple[Future, Any, bool]]


def ok(done: Done, fut: Future, value: Any) -> None:
    done.append((fut, value, False))


def fail(done: Done, fut: Future, exc: BaseException) -> None:
    done.append((fut, exc, True))


def complete(done: Done) -> None:
    for fut, value, failed in done:
        try:
            if failed:
                fut.set_exception(value)
            else:
                fut.set_result(value)
        except InvalidStateError:     # the waiter cancelled it (e.g. the client's connection closed)
            pass


def log_store_failure(exc: BaseException | None) -> Done:
    """The result callback of a write nobody waits for: a failure is logged."""
    if exc is not None:
        log.error("group coordinator: writing to the offset store failed: %r", exc)
    return []


class StoreWrites:
    """Store writes queued in order under the coordinator's lock (``queue``), started one at a time and waited
    for with no lock held (``finish``). ``_lock`` only keeps the starts in queue order."""

    def __init__(self) -> None:
        self._queue: deque[tuple[Callable[[], Callable[[], None]], Callable[[BaseException | None], Done]]] = \
            deque()
        self._lock = threading.Lock()

    def queue(self, start: Callable[[], Callable[[], None]],
              on_result: Callable[[BaseException | None], Done] = log_store_failure) -> None:
        """Queue a write (coordinator lock held): ``start()`` begins it and returns its waiter;
        ``on_result(exception or None)`` returns the completions that depend on it."""
        self._queue.append((start, on_result))

    def finish(self, done: Done, wait: bool = True) -> None:
        """Start queued store writes in order, wait for each (outside the lock: a write waiting for
        replication holds up no other), then complete futures (coordinator lock NOT held). ``wait=False`` (the
        timer thread, which must go on firing deadlines while a write waits for its acks): the waiting and the
        completions run on a thread of their own when a write was started."""
        started = []
        with self._lock:
            while self._queue:
                start, on_result = self._queue.popleft()
                try:
                    started.append((start(), None, on_result))
                except Exception as e:
                    started.append((None, e, on_result))
        if started and not wait:
            threading.Thread(target=self._settle, args=(started, done), name="seglog-group-write",
                             daemon=True).start()
        else:
            self._settle(started, done)

    @staticmethod
    def _settle(started, done: Done) -> None:
        """Wait for started writes, hand each result to its callback, complete the futures."""
        for waiter, exc, on_result in started:
            if waiter is not None:
                try:
                    waiter()
                except Exception as e:
                    exc = e
            done.extend(on_result(exc))
        complete(done)


def wall_ms() -> int:
    """Wall-clock milliseconds: the timestamps groups and offset commits are stored with."""
    return int(time.time() * 1000)


def check_group_id(group_id: str, allow_empty: bool) -> None:
    """Kafka allows the empty group id only for offset and describe/delete APIs (old consumers used it)."""
    if not isinstance(group_id, str) or (not group_id and not allow_empty):
        raise InvalidGroupIdError(f"invalid group id {group_id!r}")
