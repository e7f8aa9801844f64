"""Classic-protocol members inside a KIP-848 consumer group (Kafka 4.0's online migration, part of
group.GroupCoordinator): JoinGroup, SyncGroup, Heartbeat and LeaveGroup of a consumer group with members are
served by the consumer group, and a classic group with members becomes a consumer group when a
consumer-protocol member joins (``group.consumer.migration.policy`` upgrade or bidirectional).

A classic member is a ConsumerMember with ``classic`` set (its session timeout and JoinGroup protocols; stored in
its member record's tagged ClassicMemberMetadata). Its subscription is the ConsumerProtocol subscription of its
first protocol; the server-side assignor assigns it like any member. As Kafka's GroupMetadataManager:

* JoinGroup (protocol type ``consumer``, a protocol every other classic member supports, else
  INCONSISTENT_GROUP_PROTOCOL; a new dynamic member first gets MEMBER_ID_REQUIRED, and any member id it then
  joins with is taken): the member's subscription and
  the partitions it reports owning move it one reconciliation step (group_consumer_state.reconcile); the answer
  is at once, generation = its member epoch, no leader (the member is a follower).
* SyncGroup: its assigned partitions as a ConsumerProtocol assignment (generation = member epoch, else
  ILLEGAL_GENERATION).
* Heartbeat: REBALANCE_IN_PROGRESS while it must rejoin (the group epoch moved past its epoch, it has partitions
  to revoke, or partitions it waits for were released); it must then rejoin within its rebalance timeout or it is
  removed, as a consumer member that does not revoke.
* LeaveGroup removes it. OffsetCommit checks its generation (ILLEGAL_GENERATION), at any version.

When the last member using the consumer protocol leaves (LeaveGroup, an ended session, a revocation not made in
time) and classic members remain, the group becomes a classic group again (policy downgrade or bidirectional,
at most group.max.size members; Kafka's convertToClassicGroup): Stable at the group epoch, each member's target
assignment as its assignment, and a rebalance prepared at once so that the members rejoin it. A classic static
member taking the instance id of the last consumer-protocol member converts it too, without a rebalance.

Static members (Kafka's getOrMaybeSubscribeStaticConsumerGroupMember): a classic JoinGroup without a member id
takes its instance id over from whichever member holds it, live or gone for a while (epoch -2), classic or not
(UNRELEASED_INSTANCE_ID is only for a consumer-protocol member taking a live consumer-protocol member's); with a
member id, an instance id nobody holds is UNKNOWN_MEMBER_ID and one another member holds FENCED_INSTANCE_ID, as
for SyncGroup, Heartbeat and LeaveGroup.
"""

from __future__ import annotations

import logging

from .assignors import Assignment as ProtocolAssignment, Subscription
from .errors import (CoordinatorNotAvailableError, FencedInstanceIdError, GroupIdNotFoundError,
                     GroupMaxSizeReachedError, IllegalGenerationError, InconsistentGroupProtocolError,
                     MemberIdRequiredError, RebalanceInProgressError, SeglogError, UnknownMemberIdError)
from .group_consumer import _new_member_id
from .group_consumer_state import (STATIC_LEAVE_EPOCH, ClassicProtocols, ConsumerGroup, ConsumerMember, MemberState,
                                   held_elsewhere, minus, reconcile)
from .group_state import Group, Member, fail as _fail, log_store_failure, ok as _ok, wall_ms
from .group_timers import TimerKind
from .group_types import GroupState, JoinResult, SyncResult
from .offsets_format import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["ClassicMembers"]


def _subscription(protocols) -> tuple[Subscription, int]:
    """The ConsumerProtocol subscription of the first protocol, and its version (0-3)."""
    data = protocols[0][1]
    try:
        return Subscription.decode(data), min(int.from_bytes(data[:2], "big", signed=True), 3)
    except SeglogError as e:
        raise InconsistentGroupProtocolError(f"the {protocols[0][0]} metadata is not a consumer protocol "
                                             f"subscription: {e}") from None


class ClassicMembers:
    """Classic members of consumer groups in a group.GroupCoordinator (see the module docstring)."""

    def _serves_classic(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group that answers a classic request for ``group_id`` (lock held): one with members."""
        group = self._consumer_groups.get(group_id)
        return group if group is not None and group.members else None

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """The classic member a SyncGroup, Heartbeat or LeaveGroup names (lock held), in Kafka's order of checks:
        an instance id no member holds is UnknownMemberIdError, one another member holds FencedInstanceIdError;
        a member id unknown, or of a member using the consumer protocol, UnknownMemberIdError."""
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is None:
                raise UnknownMemberIdError(f"Member with instance id {instance_id} is not a member of group "
                                           f"{group.group_id}.")
            if holder != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was fenced "
                                            f"by member {holder}.")
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a classic member of group {group.group_id}.")
        return member

    def _classic_join_consumer(self, fut, done, now, group: ConsumerGroup, member_id, protocol_type, protocols,
                               session_ms, rebalance_ms, instance_id, client_id, client_host, require_known):
        """A classic JoinGroup to a consumer group with members (lock held)."""
        known, unknown = member_id in group.members, not member_id
        if not known and len(group.members) >= self.config.consumer_max_size:
            raise GroupMaxSizeReachedError(f"The consumer group has reached its maximum capacity of "
                                           f"{self.config.consumer_max_size} members.")
        others = [m.classic for m in group.members.values() if m.classic is not None and m.member_id != member_id]
        names = {n for n, _ in protocols}
        if protocol_type != "consumer" or not protocols or others and not any(
                all(n in {p for p, _ in c.protocols} for c in others) for n in names):
            raise InconsistentGroupProtocolError(f"protocol type {protocol_type!r} with protocols {sorted(names)} "
                                                 f"is not supported by consumer group {group.group_id!r}")
        if not member_id:
            member_id = _new_member_id()
            if require_known and instance_id is None:
                err = MemberIdRequiredError(f"rejoin group {group.group_id!r} with member id {member_id!r}")
                err.member_id = member_id
                raise err
        sub, _ = _subscription(protocols)
        member = group.members.get(member_id)
        changed = member is None
        replaced_consumer = False                   # it took the place of a member using the consumer protocol
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if not unknown and holder is None:      # a JoinGroup with a member id names a known instance id
                raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
            if holder is not None and holder != member_id:
                if not unknown:                     # only a JoinGroup without a member id takes an instance id
                    raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was "
                                                f"fenced by member {holder}.")
                replaced_consumer = group.members[holder].classic is None
                member = self._replace_static(group, holder, member_id)
                changed = False
        if member is None:
            member = ConsumerMember(member_id, instance_id, None, client_id, client_host, rebalance_ms)
            group.members[member_id] = member
            if instance_id is not None:
                group.static_members[instance_id] = member_id
            log.info("group %s: classic member %s joins the consumer group", group.group_id, member_id)
        topics = tuple(sorted(set(sub.topics)))
        changed |= (topics, None, None) != (member.subscribed_names, member.subscribed_regex, member.server_assignor)
        member.subscribed_names, member.subscribed_regex, member.server_assignor = topics, None, None
        member.rack_id, member.rebalance_timeout_ms = sub.rack_id, rebalance_ms
        member.client_id, member.client_host = client_id, client_host
        member.classic = ClassicProtocols(session_ms, tuple(protocols))
        if member.member_epoch == STATIC_LEAVE_EPOCH:
            member.member_epoch = member.previous_epoch
        self._arm_consumer_session(group, member, now)
        self._refresh_target(group, changed, now)
        owned: dict[str, frozenset[int]] = {}
        for tp in sub.owned_partitions:
            owned[tp.topic] = owned.get(tp.topic, frozenset()) | {tp.partition}
        member.revoke_deadline = None
        reconcile(group, member, owned, now)
        if member.revoke_deadline is not None:
            self._deadlines.push(member.revoke_deadline, TimerKind.CONSUMER_REVOKE, group, member)
        if replaced_consumer:
            self._maybe_downgrade(group, done, joining=(fut, member_id))
            if self._consumer_groups.get(group.group_id) is not group:
                return                              # a classic group now: the JoinGroup is answered once stored
        self._queue_consumer_changes(group)
        _ok(done, fut, JoinResult(member_id, member.member_epoch, "consumer", protocols[0][0], ""))

    @staticmethod
    def _replace_static(group: ConsumerGroup, holder: str, member_id: str) -> ConsumerMember:
        """A static member rejoining with a new member id takes over its instance's epoch and partitions."""
        prior = group.members.pop(holder)
        member = ConsumerMember(member_id, prior.instance_id, prior.rack_id, prior.client_id, prior.client_host,
                                prior.rebalance_timeout_ms, prior.subscribed_names, prior.subscribed_regex,
                                prior.server_assignor, prior.member_epoch, prior.previous_epoch, prior.state,
                                prior.assigned, prior.revoking)
        group.members[member_id] = member
        group.static_members[prior.instance_id] = member_id
        if holder in group.target:
            group.target[member_id] = group.target.pop(holder)
        log.info("group %s: static member %s replaced %s", group.group_id, member_id, holder)
        return member

    def _classic_sync_consumer(self, fut, done, group: ConsumerGroup, generation_id, member_id, instance_id,
                               protocol_type, protocol_name):
        """A classic SyncGroup to a consumer group (lock held): the member's assigned partitions."""
        member = self._classic_member(group, member_id, instance_id)
        if generation_id != member.member_epoch:
            raise IllegalGenerationError(f"The received generation id {generation_id} does not match the expected "
                                         f"member epoch {member.member_epoch}.")
        name = member.classic.protocols[0][0]
        if protocol_type is not None and protocol_type != "consumer" or protocol_name not in (None, name):
            raise InconsistentGroupProtocolError(f"SyncGroup names protocol {protocol_type!r}/{protocol_name!r}, "
                                                 f"the member joined with consumer/{name!r}")
        _, version = _subscription(member.classic.protocols)
        partitions = [TopicPartition(t, p) for t, ps in sorted(member.assigned.items()) for p in sorted(ps)]
        member.last_sent = dict(member.assigned)
        _ok(done, fut, SyncResult("consumer", name, ProtocolAssignment(partitions).encode(max(version, 0))))

    def _classic_heartbeat_consumer(self, group: ConsumerGroup, generation_id, member_id, instance_id) -> None:
        """A classic Heartbeat to a consumer group (lock held); RebalanceInProgressError when it must rejoin."""
        member = self._classic_member(group, member_id, instance_id)
        if generation_id != member.member_epoch:
            raise IllegalGenerationError(f"The received generation id {generation_id} does not match the expected "
                                         f"member epoch {member.member_epoch}.")
        now = self._clock()
        self._arm_consumer_session(group, member, now)
        waiting = minus(group.target.get(member_id, {}), member.assigned)
        if (member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or member.state is MemberState.UNRELEASED_PARTITIONS
                and minus(waiting, held_elsewhere(group, member))):
            if member.revoke_deadline is None:                  # it must rejoin within its rebalance timeout
                member.revoke_deadline = now + member.rebalance_timeout_ms
                self._deadlines.push(member.revoke_deadline, TimerKind.CONSUMER_REVOKE, group, member)
            raise RebalanceInProgressError(f"group {group.group_id!r} is rebalancing; rejoin")

    def _classic_leave_consumer(self, group: ConsumerGroup, member_id: str, instance_id: str | None, done
                                ) -> SeglogError | None:
        """A classic LeaveGroup member of a consumer group (lock held): it is removed; its error, or None."""
        if instance_id is not None and not member_id:
            member_id = group.static_members.get(instance_id, "")
        try:
            member = self._classic_member(group, member_id, instance_id)
        except SeglogError as e:
            return e
        log.info("group %s: classic member %s leaves", group.group_id, member_id)
        self._remove_consumer(group, member, done)
        self._queue_consumer_changes(group)
        return None

    def _upgrade_classic_group(self, classic, now: float, done) -> ConsumerGroup:
        """Kafka's convertToConsumerGroup (lock held): the classic group with members becomes a consumer group at
        its generation, each member a classic member keeping its last assignment; waiting JoinGroup and SyncGroup
        requests get REBALANCE_IN_PROGRESS (through ``done``); the classic group's metadata is tombstoned in the
        batch of the consumer group's first records (Kafka's one atomic append: a crash or a failed write
        leaves the classic group with its members, never an empty group).
        GroupIdNotFoundError (Kafka's refusal) when a member's subscription or assignment does not decode."""
        gid = classic.group_id
        group = ConsumerGroup(gid, classic.generation, classic.generation)
        for m in classic.members.values():
            try:
                sub = Subscription.decode(m.metadata_for(classic.protocol_name))
                given = ProtocolAssignment.decode(m.assignment).partitions
            except SeglogError:
                raise GroupIdNotFoundError(f"Cannot upgrade classic group {gid} to consumer group because the "
                                           f"embedded consumer protocol is malformed.") from None
            assigned: dict[str, frozenset[int]] = {}
            for tp in given:
                assigned[tp.topic] = assigned.get(tp.topic, frozenset()) | {tp.partition}
            member = ConsumerMember(m.member_id, m.group_instance_id, sub.rack_id, m.client_id, m.client_host,
                                    m.rebalance_timeout_ms, tuple(sorted(set(sub.topics))),
                                    member_epoch=classic.generation, previous_epoch=classic.generation,
                                    assigned=assigned)
            member.classic = ClassicProtocols(m.session_timeout_ms, tuple(m.protocols))
            group.members[m.member_id] = member
            group.target[m.member_id] = dict(assigned)
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        for m in classic.members.values():
            for f in (m.join_future, m.sync_future):
                if f is not None:
                    _fail(done, f, RebalanceInProgressError(f"group {gid!r} became a consumer group; rejoin"))
            m.join_future = m.sync_future = None
        classic.members.clear()
        classic.state = GroupState.DEAD
        del self._groups[gid]
        self._consumer_groups[gid] = group
        group.drop_classic = True                   # with the group's first records, in one batch
        for member in group.members.values():
            self._arm_consumer_session(group, member, now)
        log.info("group %s: the classic group with %d members becomes a consumer group", gid, len(group.members))
        return group

    def _maybe_downgrade(self, group: ConsumerGroup, done, joining: tuple | None = None) -> None:
        """Kafka's convertToClassicGroup after the last consumer-protocol member left (lock held), if the policy
        allows it and only classic members remain (see the module docstring). ``joining`` (the JoinGroup future
        and member id of a classic static member that took the last consumer-protocol member's instance id, as
        Kafka's validateOnlineDowngradeWithReplacedMemberId): no rebalance, the group stays Stable with its
        assignments, and the JoinGroup is answered once the classic generation is stored, for that generation
        with the leader as it is and no members (it syncs as a follower and gets its assignment). The consumer
        group's tombstones and the classic generation go in one batch, as Kafka's atomic append: stored whole or
        not at all."""
        members = list(group.members.values())
        if (not members or any(m.classic is None for m in members)
                or self.config.consumer_migration_policy not in ("downgrade", "bidirectional")
                or len(members) > self.config.max_size
                or self._consumer_groups.get(group.group_id) is not group
                or not set.intersection(*({n for n, _ in m.classic.protocols} for m in members))):
            return                                  # (the last: no protocol for a classic group to select)
        gid, now = group.group_id, self._clock()
        classic = Group(gid)
        classic.generation, classic.protocol_type = group.group_epoch, "consumer"
        for m in members:
            classic.members[m.member_id] = Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                                                  m.classic.session_timeout_ms, m.rebalance_timeout_ms,
                                                  list(m.classic.protocols))
            if m.instance_id is not None:
                classic.static_members[m.instance_id] = m.member_id
        classic.protocol_name = classic.select_protocol()
        assignments = {}
        for m in members:
            version = max(min(int.from_bytes(classic.members[m.member_id].metadata_for(classic.protocol_name)[:2],
                                             "big", signed=True), 3), 0)
            target = group.target.get(m.member_id, {})
            assignments[m.member_id] = ProtocolAssignment(
                [TopicPartition(t, p) for t, ps in sorted(target.items()) for p in sorted(ps)]).encode(version)
            classic.members[m.member_id].assignment = assignments[m.member_id]
        del self._consumer_groups[gid]
        self._groups[gid] = classic
        self._set_state(classic, GroupState.STABLE)
        on_stored = None
        if joining is not None:
            classic.leader_id = next(iter(classic.members))
            fut, member_id = joining
            answer = JoinResult(member_id, classic.generation, "consumer", classic.protocol_name, classic.leader_id)

            def on_stored(exc: BaseException | None):
                if exc is None:
                    return [(fut, answer, False)]
                err = CoordinatorNotAvailableError(f"storing group {gid!r} failed: {exc}")
                err.__cause__ = exc
                return [(fut, err, True)]
        stored = classic.metadata(assignments, wall_ms())
        self._writes.queue(self._consumer_changes(group, dropped=True, classic=stored), on_stored or log_store_failure)
        for member in classic.members.values():
            self._arm_session(classic, member, now)
        log.info("group %s: the consumer group with %d classic members becomes a classic group", gid, len(members))
        if joining is None:
            self._prepare_rebalance(classic, done, now)
