"""Records of KIP-848 consumer groups (``group.protocol=consumer``) and their reconciliation step.

A :class:`ConsumerGroup` has a *group epoch*, bumped whenever what the assignment depends on changes (a member
joins or leaves, a subscription changes, a subscribed topic appears or grows), and a *target assignment*
computed by the server-side assignor at that epoch (``target_epoch``). Each :class:`ConsumerMember` has its
own *member epoch* and moves towards its target by :func:`reconcile`, Kafka's CurrentAssignmentBuilder:

* partitions it holds but its target does not are revoked first: the member keeps only the others and stays
  at its epoch in ``unrevoked_partitions`` until it reports (owned partitions in a heartbeat) that it let them go
  (at once when the owned partitions it reports already leave them out, as Kafka's ownsRevokedPartitions);
* then it moves to the target epoch and gets the partitions of its target that no other member still holds
  (assigned or pending revocation); those still held elsewhere wait (``unreleased_partitions``) and are
  granted on a later heartbeat once released.

Invariant (what tests check across epoch histories): a partition is in at most one member's ``assigned`` or
``revoking`` at any time, so no two consumers ever own it at once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

__all__ = ["Assignment", "MemberState", "ConsumerGroupState", "ClassicProtocols", "ConsumerMember", "ConsumerGroup",
           "reconcile", "held_elsewhere", "minus", "union", "intersect", "LEAVE_EPOCH", "STATIC_LEAVE_EPOCH"]

Assignment = dict[str, frozenset[int]]
"""Partitions per topic name; topics without partitions are left out."""

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(str, enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(str, enum.Enum):
    """Kafka's consumer group states (ListGroups / ConsumerGroupDescribe names)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


def _clean(a: Mapping[str, frozenset[int] | set[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in sorted(a.items()) if ps}


def minus(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Assignment:
    return _clean({t: ps - b.get(t, frozenset()) for t, ps in a.items()})


def intersect(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Assignment:
    return _clean({t: ps & b.get(t, frozenset()) for t, ps in a.items()})


def union(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Assignment:
    return _clean({t: a.get(t, frozenset()) | b.get(t, frozenset()) for t in set(a) | set(b)})


@dataclass(frozen=True)
class ClassicProtocols:
    """What a member using the classic protocol (JoinGroup/SyncGroup) inside a consumer group joined with."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]          # (name, ConsumerProtocol subscription), its preference order


@dataclass(eq=False)
class ConsumerMember:
    """One member. ``assigned`` is what it may consume now, ``revoking`` what it must give up before its
    epoch may advance; ``previous_epoch`` lets a heartbeat whose response was lost be retried."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    revoking: Assignment = field(default_factory=dict)
    session_deadline: float = 0.0
    revoke_deadline: float | None = None
    timer_armed: bool = False
    last_sent: Assignment | None = None          # the assignment last sent to the client (None: none yet)
    classic: ClassicProtocols | None = None      # set for a member using the classic protocol


@dataclass(eq=False)
class ConsumerGroup:
    """A consumer group: members by id, static members by instance id, the target assignment of
    ``target_epoch`` (== ``group_epoch`` once computed) and the topic metadata it was computed from."""

    group_id: str
    group_epoch: int = 0
    target_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    subscribed_metadata: dict[str, int] = field(default_factory=dict)
    assignor: str = ""
    hold_until: float | None = None              # the target stays empty until then (a coordinator takeover)
    stored: dict[bytes, bytes] = field(default_factory=dict)     # its records as last written to the store
    drop_classic: bool = False                   # its next write tombstones the classic group it was (same batch)
    protocol_type = "consumer"

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.target_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.target_epoch or m.state is not MemberState.STABLE
               for m in self.members.values() if m.member_epoch != STATIC_LEAVE_EPOCH):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE


def held_elsewhere(group: ConsumerGroup, member: ConsumerMember) -> Assignment:
    """The partitions other members hold (assigned or pending revocation)."""
    out: Assignment = {}
    for m in group.members.values():
        if m is not member:
            out = union(out, union(m.assigned, m.revoking))
    return out


def reconcile(group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None, now: float) -> None:
    """Move ``member`` one step towards its target (see the module docstring). ``owned`` is what the client
    reported holding (None: not reported in this heartbeat)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or intersect(owned, member.revoking):
            return                                          # still revoking
        member.revoking = {}
        member.revoke_deadline = None
    elif member.state is MemberState.STABLE and member.member_epoch == group.target_epoch:
        return
    target = group.target.get(member.member_id, {})
    to_revoke = minus(member.assigned, target)
    member.assigned = intersect(member.assigned, target)
    if to_revoke and (owned is None or intersect(owned, to_revoke)):
        member.revoking = to_revoke
        member.state = MemberState.UNREVOKED_PARTITIONS
        member.revoke_deadline = now + member.rebalance_timeout_ms
        return
    wanted = minus(target, member.assigned)
    granted = minus(wanted, held_elsewhere(group, member))
    member.assigned = union(member.assigned, granted)
    if member.member_epoch != group.target_epoch:
        member.previous_epoch, member.member_epoch = member.member_epoch, group.target_epoch
    member.state = MemberState.UNRELEASED_PARTITIONS if minus(wanted, granted) else MemberState.STABLE
