"""Online migration of a live group between the classic and the consumer (KIP-848) protocols, as Kafka 4.0's
group coordinator (part of group.GroupCoordinator, a base class next to group_consumer.ConsumerGroups).

``group.consumer.migration.policy`` (GroupConfig.consumer_migration_policy) decides what may convert:

* upgrade (``upgrade``, ``bidirectional``): a consumer-protocol member joining a classic group with members
  (protocol type ``consumer``) turns it into a consumer group. Its members become members of the consumer
  group at the classic generation (group epoch and target epoch too), keep their current assignment (as
  their target) and keep their classic metadata (session timeout, protocols). A JoinGroup or SyncGroup
  waiting in the classic group is answered REBALANCE_IN_PROGRESS, so its member rejoins the consumer group.
  Refused (GROUP_ID_NOT_FOUND, "not a consumer group", Kafka's answer) under another policy, for a group of
  another protocol type, one with more members than group.consumer.max.size, or metadata that does not decode.
* classic members inside a consumer group: JoinGroup updates the member (its subscription and owned partitions
  from its metadata), moves the group's target and reconciles the member, then answers at once with the
  member epoch as generation, no leader, and the first protocol the member named; SyncGroup answers its
  current assignment (a ConsumerProtocolAssignment in its metadata's version); Heartbeat answers
  REBALANCE_IN_PROGRESS while the member must rejoin: its epoch is behind the group's, it has partitions to
  revoke, or partitions waiting for it are all free. A member told to rejoin must do so, and a member that
  joined must sync, within its rebalance timeout, else it is removed. LeaveGroup removes classic members
  only; an OffsetCommit carries the member epoch as generation (ILLEGAL_GENERATION when stale). Any JoinGroup
  to a consumer group with members takes this path, whatever the policy (as Kafka).
* downgrade (``downgrade``, ``bidirectional``): when the last consumer-protocol member leaves (or is removed)
  and classic members remain (at most group.max.size), the group becomes a classic group at the group epoch,
  each member's target assignment as its classic assignment, and then rebalances (its members are told to
  rejoin), as Kafka.

Both conversions are written before what follows them, the new kind's records first (a loaded classic
generation with members wins over consumer group records, group.GroupCoordinator._load): an upgrade stores the
consumer group's records, then tombstones the classic group's metadata (its offsets stay); a downgrade stores
the classic generation with its members, then tombstones the consumer group's records. Lock held in every
method here.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

from .assignors import Assignment as ProtocolAssignment
from .assignors import Subscription
from .errors import (CoordinatorNotAvailableError, FencedInstanceIdError, GroupIdNotFoundError,
                     GroupMaxSizeReachedError, IllegalGenerationError, InconsistentGroupProtocolError,
                     MemberIdRequiredError, RebalanceInProgressError, SeglogError, UnknownMemberIdError,
                     UnreleasedInstanceIdError)
from .group_consumer import new_member_id
from .group_consumer_state import (STATIC_LEAVE_EPOCH, Assignment, ClassicMetadata, ConsumerGroup, ConsumerMember,
                                   MemberState, held_elsewhere, intersect, minus, reconcile)
from .group_state import Group, Member, fail, log_store_failure, ok, wall_ms
from .group_timers import TimerKind
from .group_types import GroupState, JoinResult, SyncResult
from .offsets_format import TopicPartition

__all__ = ["GroupMigration", "PROTOCOL_TYPE"]

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"
"""The classic protocol type whose metadata is the consumer protocol: the only one a migration converts."""

_MAX_PROTOCOL_VERSION = 3


def _protocol_version(metadata: bytes) -> int:
    """The ConsumerProtocol version of a member's subscription bytes (newer than 3 read as 3)."""
    return max(0, min(int.from_bytes(metadata[:2], "big", signed=True), _MAX_PROTOCOL_VERSION)) \
        if len(metadata) >= 2 else 0


def encode_assignment(assignment: Assignment, metadata: bytes) -> bytes:
    """A member's partitions as the ConsumerProtocolAssignment of its subscription's version."""
    return ProtocolAssignment([TopicPartition(t, p) for t, ps in sorted(assignment.items()) for p in sorted(ps)]
                              ).encode(_protocol_version(metadata))


def _by_topic(partitions, topics: Mapping[str, int]) -> Assignment:
    """Partitions (topic, partition) of existing topics, as an Assignment."""
    out: dict[str, set[int]] = {}
    for t, p in partitions:
        if 0 <= p < topics.get(t, 0):
            out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in sorted(out.items())}


class GroupMigration:
    """Conversions between classic and consumer groups, and classic members inside consumer groups (see the
    module docstring). Works on group.GroupCoordinator's state, as group_consumer.ConsumerGroups."""

    # --- upgrade ---------------------------------------------------------------------------------------------

    def _upgrade(self, classic: Group, done) -> ConsumerGroup:
        """The consumer group a classic group with members becomes (see the module docstring);
        GroupIdNotFoundError when it may not."""
        gid = classic.group_id
        if self.config.consumer_migration_policy not in ("upgrade", "bidirectional"):
            raise GroupIdNotFoundError(f"Cannot upgrade classic group {gid} to consumer group because online "
                                       f"upgrade is disabled.")
        if classic.protocol_type != PROTOCOL_TYPE:
            raise GroupIdNotFoundError(f"Cannot upgrade classic group {gid} to consumer group because the group "
                                       f"does not use the consumer embedded protocol.")
        if len(classic.members) > self.config.consumer_max_size:
            raise GroupIdNotFoundError(f"Cannot upgrade classic group {gid} to consumer group because the group "
                                       f"size exceeds the consumer group maximum size.")
        group = ConsumerGroup(gid, classic.generation, classic.generation)
        topics = self._topics()
        try:
            for m in classic.members.values():
                metadata = m.metadata_for(classic.protocol_name) if classic.protocol_name else m.protocols[0][1]
                sub = Subscription.decode(metadata)
                assigned = _by_topic(ProtocolAssignment.decode(m.assignment).partitions, topics)
                member = ConsumerMember(m.member_id, m.group_instance_id, sub.rack_id, m.client_id, m.client_host,
                                        m.rebalance_timeout_ms, tuple(sorted(set(sub.topics))),
                                        member_epoch=classic.generation, previous_epoch=classic.generation,
                                        assigned=assigned)
                member.classic = ClassicMetadata(m.session_timeout_ms, tuple(m.protocols))
                group.members[m.member_id] = member
                group.target[m.member_id] = dict(assigned)
                if m.group_instance_id is not None:
                    group.static_members[m.group_instance_id] = m.member_id
        except SeglogError as e:
            log.warning("group %s: not upgraded to a consumer group: its consumer protocol metadata does not "
                        "decode (%s)", gid, e)
            raise GroupIdNotFoundError(f"Cannot upgrade the classic group {gid} to consumer group because the "
                                       f"embedded consumer protocol is malformed.") from None
        rejoin = RebalanceInProgressError(f"group {gid!r} is now a consumer group: rejoin")
        for m in classic.members.values():
            for pending in (m.join_future, m.sync_future):
                if pending is not None:
                    fail(done, pending, rejoin)
            m.join_future = m.sync_future = None
        group.assignor = self._preferred_assignor(group)
        del self._groups[gid]
        self._consumer_groups[gid] = group
        now = self._clock()
        for member in group.members.values():
            self._arm_consumer_session(group, member, now)
        self._queue_consumer_changes(group)
        self._writes.queue(lambda: self.store.start_drop_group_metadata(gid), log_store_failure)
        log.info("group %s: upgraded from classic to consumer group at epoch %d with %d members", gid,
                 group.group_epoch, len(group.members))
        return group

    # --- downgrade -------------------------------------------------------------------------------------------

    def _fence_consumer(self, group: ConsumerGroup, member: ConsumerMember, done, now: float) -> None:
        """Remove a member that left or was fenced: the group is downgraded instead when the member is its
        last one using the consumer protocol and classic members remain (and the policy allows it)."""
        if self._may_downgrade(group, member):
            self._downgrade(group, member, done, now)
        else:
            self._remove_consumer(group, member)

    def _may_downgrade(self, group: ConsumerGroup, leaving: ConsumerMember | None) -> bool:
        """Whether the group, without ``leaving`` (a consumer-protocol member; None: a classic member took the
        last one's place), is classic members that may form a classic group."""
        rest = [m for m in group.members.values() if m is not leaving]
        if leaving is not None and leaving.classic is not None or not rest or any(m.classic is None for m in rest):
            return False
        if self.config.consumer_migration_policy not in ("downgrade", "bidirectional"):
            log.info("group %s: not downgraded to a classic group: group.consumer.migration.policy is %s",
                     group.group_id, self.config.consumer_migration_policy)
            return False
        if len(rest) > self.config.max_size:
            log.info("group %s: not downgraded to a classic group: %d members is over group.max.size",
                     group.group_id, len(rest))
            return False
        names = set.intersection(*({n for n, _ in m.classic.protocols} for m in rest))
        return bool(names)

    def _downgrade(self, group: ConsumerGroup, leaving: ConsumerMember | None, done, now: float,
                   joining: tuple | None = None) -> None:
        """The group becomes a classic group of its other (classic) members, which then rebalances. Unless a
        static member took the leaving one's place (``joining``: its JoinGroup's future and member id): the
        group then stays Stable with its assignments, as Kafka, and the JoinGroup is answered once the classic
        generation is stored, for that generation (the leader as it is, no members: it syncs as a follower)."""
        gid = group.group_id
        classic = Group(gid)
        classic.protocol_type, classic.generation = PROTOCOL_TYPE, group.group_epoch
        for m in group.members.values():
            if m is leaving:
                continue
            classic.members[m.member_id] = Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                                                  m.classic.session_timeout_ms, m.rebalance_timeout_ms,
                                                  list(m.classic.protocols))
            if m.instance_id is not None:
                classic.static_members[m.instance_id] = m.member_id
        classic.leader_id = next(iter(classic.members))
        classic.protocol_name = classic.select_protocol()
        for m in classic.members.values():
            m.assignment = encode_assignment(group.target.get(m.member_id, {}), m.metadata_for(classic.protocol_name))
        del self._consumer_groups[gid]
        self._groups[gid] = classic
        classic.state, classic.state_timestamp = GroupState.STABLE, wall_ms()
        for m in classic.members.values():
            self._arm_session(classic, m, now)
        log.info("group %s: downgraded from consumer to classic group at generation %d with %d members", gid,
                 classic.generation, len(classic.members))
        on_stored = None
        if joining is not None:
            fut, member_id = joining
            on_stored = self._answer_when_stored(gid, fut, JoinResult(member_id, classic.generation, PROTOCOL_TYPE,
                                                                      classic.protocol_name, classic.leader_id))
        self._persist_group(classic, {m.member_id: m.assignment for m in classic.members.values()}, on_stored)
        self._queue_consumer_changes(group, dropped=True)
        if joining is None:
            self._prepare_rebalance(classic, done, now)

    # --- classic members inside a consumer group -------------------------------------------------------------

    def _classic_join_consumer(self, fut, done, now, group: ConsumerGroup, member_id: str, protocol_type: str,
                               protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int,
                               instance_id: str | None, client_id: str, client_host: str,
                               require_known: bool) -> None:
        """JoinGroup of a classic member to a consumer group with members (answered once stored)."""
        unknown = not member_id
        if unknown:
            member_id = new_member_id()
        if member_id not in group.members and instance_id not in group.static_members \
                and len(group.members) >= self.config.consumer_max_size:
            raise GroupMaxSizeReachedError(f"The consumer group has reached its maximum capacity of "
                                           f"{self.config.consumer_max_size} members.")
        if not self._supports_classic(group, protocol_type, protocols):
            raise InconsistentGroupProtocolError(f"Member {member_id}'s protocols are not supported.")
        if unknown and require_known and instance_id is None:
            err = MemberIdRequiredError(f"rejoin group {group.group_id!r} with member id {member_id!r}")
            err.member_id = member_id
            raise err
        try:
            sub = Subscription.decode(protocols[0][1])
        except SeglogError as e:
            raise InconsistentGroupProtocolError(f"Member {member_id}'s {protocols[0][0]} metadata is not a "
                                                 f"consumer protocol subscription: {e}") from None
        member, changed, replaced = self._classic_member_joining(group, member_id, unknown, instance_id,
                                                                 rebalance_ms, client_id, client_host)
        names = tuple(sorted(set(sub.topics)))
        if names != member.subscribed_names:
            member.subscribed_names, changed = names, True
        if sub.rack_id is not None:
            member.rack_id = sub.rack_id
        member.rebalance_timeout_ms = rebalance_ms
        member.client_id, member.client_host = client_id, client_host
        member.classic = ClassicMetadata(session_ms, tuple(protocols))
        self._arm_consumer_session(group, member, now)
        self._refresh_target(group, changed, now)
        revoking = member.revoke_deadline
        reconcile(group, member, _by_topic(sub.owned_partitions, self._topics()), now)
        if member.revoke_deadline is not None and member.revoke_deadline != revoking:
            self._deadlines.push(member.revoke_deadline, TimerKind.CONSUMER_REVOKE, group, member)
        member.last_sent = dict(member.assigned)
        if replaced and self._may_downgrade(group, None):
            self._downgrade(group, None, done, now, joining=(fut, member.member_id))
            return
        self._classic_deadline(group, member, now, replace=True)        # it must sync within its rebalance timeout
        answer = JoinResult(member.member_id, member.member_epoch, PROTOCOL_TYPE, member.classic.protocol_name, "")
        start = self._consumer_changes(group)
        if start is None:
            ok(done, fut, answer)
        else:
            self._writes.queue(start, self._answer_when_stored(group.group_id, fut, answer))

    @staticmethod
    def _answer_when_stored(group_id: str, fut, answer):
        """The result callback of a store write that a JoinGroup's answer waits for."""
        def on_stored(exc: BaseException | None):
            if exc is None:
                return [(fut, answer, False)]
            err = CoordinatorNotAvailableError(f"storing group {group_id!r} failed: {exc}")
            err.__cause__ = exc
            return [(fut, err, True)]
        return on_stored

    def _classic_member_joining(self, group: ConsumerGroup, member_id: str, unknown: bool,
                                instance_id: str | None, rebalance_ms: int, client_id: str, client_host: str
                                ) -> tuple[ConsumerMember, bool, bool]:
        """The member a classic JoinGroup names, new or taking over its instance id's (a restarted static
        member); whether the group epoch must move; whether it took over from a consumer-protocol member."""
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is not None and holder != member_id:
                if not unknown:
                    raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was "
                                                f"fenced.")
                prior = group.members[holder]
                if prior.classic is None and prior.member_epoch != STATIC_LEAVE_EPOCH:
                    raise UnreleasedInstanceIdError(f"Static member {holder} with instance id {instance_id} "
                                                    f"cannot be replaced because it has not left the group yet.")
                del group.members[holder]
                prior.member_id = member_id
                prior.classic_deadline = None
                if prior.member_epoch == STATIC_LEAVE_EPOCH:
                    prior.member_epoch = prior.previous_epoch
                group.members[member_id] = prior
                group.static_members[instance_id] = member_id
                if holder in group.target:
                    group.target[member_id] = group.target.pop(holder)
                log.info("group %s: static member %s replaced %s", group.group_id, member_id, holder)
                return prior, False, prior.classic is None
        member = group.members.get(member_id)
        if member is not None:
            return member, False, False
        member = ConsumerMember(member_id, instance_id, None, client_id, client_host, rebalance_ms)
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        log.info("group %s: classic member %s joins", group.group_id, member_id)
        return member, True, False

    @staticmethod
    def _supports_classic(group: ConsumerGroup, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Kafka's supportsClassicProtocols: the consumer protocol type, and a protocol every classic member
        of the group supports (any protocol when there is none)."""
        if protocol_type != PROTOCOL_TYPE or not protocols:
            return False
        names = {n for n, _ in protocols}
        for m in group.members.values():
            if m.classic is not None:
                names &= {n for n, _ in m.classic.protocols}
        return bool(names)

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """The classic member a SyncGroup / Heartbeat names: UnknownMemberIdError (not a member, or one using
        the consumer protocol), FencedInstanceIdError."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            holder = group.static_members.get(instance_id)
            if holder is None:
                raise UnknownMemberIdError(f"Member with instance id {instance_id} is not a member of group "
                                           f"{group.group_id}.")
            if holder != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was "
                                            f"fenced.")
            member = group.members[holder]
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
        if member.classic is None:
            raise UnknownMemberIdError(f"Member {member_id} does not use the classic protocol.")
        return member

    @staticmethod
    def _check_generation(member: ConsumerMember, generation_id: int) -> None:
        if generation_id != member.member_epoch:
            raise IllegalGenerationError(f"The request generation id {generation_id} is not equal to the member "
                                         f"epoch {member.member_epoch} of member {member.member_id}.")

    def _classic_sync_consumer(self, fut, done, now, group: ConsumerGroup, generation_id: int, member_id: str,
                               instance_id: str | None, protocol_type: str | None, protocol_name: str | None) -> None:
        member = self._classic_member(group, member_id, instance_id)
        self._check_generation(member, generation_id)
        if protocol_type is not None and protocol_type != PROTOCOL_TYPE or \
                protocol_name is not None and protocol_name != member.classic.protocol_name:
            raise InconsistentGroupProtocolError(
                f"SyncGroup names protocol {protocol_type!r}/{protocol_name!r}, member {member_id} joined with "
                f"{PROTOCOL_TYPE!r}/{member.classic.protocol_name!r}")
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._classic_deadline(group, member, now)
            raise RebalanceInProgressError(f"A new rebalance is triggered in group {group.group_id} and member "
                                           f"{member_id} should rejoin to catch up.")
        member.classic_deadline = None
        self._arm_consumer_session(group, member, now)
        metadata = member.classic.protocols[0][1]
        ok(done, fut, SyncResult(PROTOCOL_TYPE, member.classic.protocol_name,
                                 encode_assignment(member.assigned, metadata)))

    def _classic_heartbeat_consumer(self, group: ConsumerGroup, generation_id: int, member_id: str,
                                    instance_id: str | None) -> None:
        now = self._clock()
        member = self._classic_member(group, member_id, instance_id)
        self._check_generation(member, generation_id)
        self._arm_consumer_session(group, member, now)
        waiting = intersect(minus(group.target.get(member_id, {}), member.assigned), held_elsewhere(group, member))
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or (
                member.state is MemberState.UNRELEASED_PARTITIONS and not waiting):
            self._classic_deadline(group, member, now)
            raise RebalanceInProgressError(f"group {group.group_id!r} is rebalancing; rejoin")

    def _classic_leave_consumer(self, group: ConsumerGroup, members: Sequence[tuple[str, str | None]]
                                ) -> list[SeglogError | None]:
        results: list[SeglogError | None] = []
        for member_id, instance_id in members:
            try:
                if instance_id is None:
                    member = group.members.get(member_id)
                    if member is None:
                        raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
                else:
                    holder = group.static_members.get(instance_id)
                    if holder is None:
                        raise UnknownMemberIdError(f"Instance id {instance_id} is unknown in group "
                                                   f"{group.group_id}.")
                    if member_id and member_id != holder:
                        raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} "
                                                    f"was fenced.")
                    member = group.members[holder]
                if member.classic is None:
                    raise UnknownMemberIdError(f"Member {member.member_id} does not use the classic protocol.")
                log.info("group %s: classic member %s leaves", group.group_id, member.member_id)
                self._remove_consumer(group, member)
                results.append(None)
            except SeglogError as e:
                results.append(e)
        self._queue_consumer_changes(group)
        return results

    def _classic_deadline(self, group: ConsumerGroup, member: ConsumerMember, now: float,
                          replace: bool = False) -> None:
        """The classic member must join (or, after a join, sync) within its rebalance timeout: a deadline is
        set if none is (``replace``: in any case)."""
        if member.classic_deadline is not None and not replace:
            return
        member.classic_deadline = now + member.rebalance_timeout_ms
        self._deadlines.push(member.classic_deadline, TimerKind.CONSUMER_CLASSIC, group, member)

    def _on_classic_deadline(self, group, member, done, now) -> None:
        if group.members.get(member.member_id) is not member or member.classic_deadline is None \
                or member.classic_deadline > now:
            return
        log.info("group %s: classic member %s did not rejoin or sync within its rebalance timeout",
                 group.group_id, member.member_id)
        self._fence_consumer(group, member, done, now)
        if self._consumer_groups.get(group.group_id) is group:
            self._queue_consumer_changes(group)
