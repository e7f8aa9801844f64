"""KIP-848 consumer groups in the group coordinator (part of group.GroupCoordinator): ConsumerGroupHeartbeat,
ConsumerGroupDescribe, and the member checks of offset commits and fetches.

``ConsumerGroups`` is a base class of ``group.GroupCoordinator`` and works on its state: ``_lock``,
``_consumer_groups`` (group_consumer_state.ConsumerGroup records), ``_groups`` (classic groups: one id is
either kind), ``_deadlines``, ``_clock``, ``config`` and ``_topics`` (partition count of each topic members may
subscribe to). Every call takes the one lock; a heartbeat then waits (lock released) for the store write
of the changes it made. Members using the classic protocol inside a consumer group, and the conversion of a
classic group with members, are group_consumer_classic's.

Rules (Kafka's GroupMetadataManager): a member joins with epoch 0 (with the member id it generated, or ""
for one from the coordinator), leaves with -1, and a static member (instance id) leaves for a while with -2,
keeping its partitions until its session ends or a new member with its instance id takes them over. Other
epochs must be the member's current one (or its previous one when the partitions it reports are all still
assigned: a retry after a lost response), else FencedMemberEpochError. The group epoch is bumped when a
member joins or leaves, a subscription or assignor changes, or the subscribed topics' metadata changes (seen
on any heartbeat); the target assignment is then recomputed at once. Members are removed when their session
(``group.consumer.session.timeout.ms`` since their last heartbeat) ends, and when they hold on to partitions
being revoked longer than their rebalance timeout.

Every change of a group is written to the store as its records (group_consumer_records: the group's epochs
and target, each member's epoch, subscription and assignment; a tombstone for a member that left) before the
heartbeat that made it is answered, so what a member was told is stored. A coordinator that loads the group's
offsets partition (a restart, a failover) rebuilds the group from them (``_load_consumer_group``): members
keep their epochs and assignments, and their sessions start at the load. Only a group with no records there
(a store that does not keep them) is re-formed from scratch: after a takeover (load_groups with
``taken_over``) such a group assigns nothing for one session timeout, so that a member still consuming under
the old coordinator never shares a partition with a new one.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Mapping

from .errors import (FencedInstanceIdError, SeglogError, FencedMemberEpochError, GroupIdNotFoundError,
                     GroupMaxSizeReachedError, IllegalGenerationError, InvalidRegularExpressionError,
                     InvalidRequestError, StaleMemberEpochError, UnknownMemberIdError, UnreleasedInstanceIdError,
                     UnsupportedAssignorError, UnsupportedVersionError)
from .group_assignors import MemberSubscription, server_assignor
from .group_consumer_records import changes, group_records, restore_group
from .group_consumer_state import (LEAVE_EPOCH, STATIC_LEAVE_EPOCH, Assignment, ConsumerGroup, ConsumerGroupState,
                                   ConsumerMember, MemberState, reconcile)
from .group_state import log_store_failure
from .group_timers import TimerKind
from .offsets_format import LEGACY_CONSUMER_GROUP_KEY_VERSION
from .group_types import GroupState

log = logging.getLogger(__name__)

__all__ = ["ConsumerGroups", "HeartbeatResult", "ConsumerMemberDescription", "ConsumerGroupDescription"]


@dataclass(frozen=True)
class HeartbeatResult:
    """A ConsumerGroupHeartbeat answer: ``assignment`` None when the client's is unchanged."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None


@dataclass(frozen=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment
    classic: bool = False                          # the member uses the classic protocol (group_consumer_classic)


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    state: ConsumerGroupState
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMemberDescription, ...] = ()


def _new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): url-safe base64 of 16 random bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerGroups:
    """KIP-848 consumer groups of a group.GroupCoordinator (see the module docstring)."""

    def consumer_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int, *,
                                 instance_id: str | None = None, rack_id: str | None = None,
                                 rebalance_timeout_ms: int = -1, subscribed_topic_names=None,
                                 subscribed_topic_regex: str | None = None, server_assignor: str | None = None,
                                 owned: Mapping[str, frozenset[int]] | None = None, client_id: str = "",
                                 client_host: str = "") -> HeartbeatResult:
        """One heartbeat (join, keep alive, report owned partitions, leave). Raises InvalidRequestError,
        UnsupportedAssignorError, InvalidRegularExpressionError, GroupIdNotFoundError (the id is a classic
        group with members), UnknownMemberIdError, FencedMemberEpochError, FencedInstanceIdError,
        UnreleasedInstanceIdError, GroupMaxSizeReachedError, CoordinatorNotAvailableError."""
        self._check_heartbeat(group_id, member_id, member_epoch, instance_id, rebalance_timeout_ms,
                              subscribed_topic_names, subscribed_topic_regex, server_assignor)
        owned = None if owned is None else {t: frozenset(ps) for t, ps in owned.items() if ps}
        interval = self.config.consumer_heartbeat_interval_ms
        done: list = []
        with self._lock:
            self._check_open()
            if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                result = self._consumer_leave(group_id, member_id, member_epoch, instance_id, interval, done)
            else:
                result = self._consumer_beat(group_id, member_id, member_epoch, instance_id, rack_id,
                                             rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex,
                                             server_assignor, owned, client_id, client_host, interval, done)
            group = self._consumer_groups.get(group_id)
            written = self._queue_write(None if group is None else self._consumer_changes(group))
        self._finish(done)
        written.result()
        return result

    def _consumer_beat(self, group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                       subscribed_topic_names, subscribed_topic_regex, server_assignor, owned, client_id,
                       client_host, interval, done) -> HeartbeatResult:
        """A heartbeat with epoch >= 0 (lock held); ``done`` takes completions of requests it ends."""
        now = self._clock()
        group = self._consumer_group(group_id, create=member_epoch == 0, done=done, joining=member_id)
        changed = False
        if member_epoch == 0:
            member, changed = self._consumer_join(group, member_id or _new_member_id(), instance_id, rack_id,
                                                  rebalance_timeout_ms, client_id, client_host)
        else:
            member = self._current_consumer(group, member_id, instance_id)
            if member_epoch != member.member_epoch and not (
                    member_epoch == member.previous_epoch and owned is not None
                    and all(ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())):
                raise FencedMemberEpochError(f"member {member_id!r} of group {group_id!r} sent epoch "
                                             f"{member_epoch}, its epoch is {member.member_epoch}")
        changed |= self._update_subscription(member, subscribed_topic_names, subscribed_topic_regex,
                                             server_assignor, rebalance_timeout_ms)
        self._arm_consumer_session(group, member, now)
        self._refresh_target(group, changed, now)
        revoking = member.revoke_deadline
        reconcile(group, member, owned, now)
        if member.revoke_deadline is not None and member.revoke_deadline != revoking:
            self._deadlines.push(member.revoke_deadline, TimerKind.CONSUMER_REVOKE, group, member)
        send = member.assigned if (member_epoch == 0 or member.last_sent != member.assigned
                                   or owned is not None and owned != member.assigned) else None
        member.last_sent = dict(member.assigned)
        return HeartbeatResult(member.member_id, member.member_epoch, interval, send)

    def _check_heartbeat(self, group_id, member_id, epoch, instance_id, rebalance_ms, names, regex, assignor):
        """Kafka's request checks, before the group is looked at."""
        if not group_id:
            raise InvalidRequestError("GroupId can't be empty.")
        if epoch > 0 or epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if not member_id:
                raise InvalidRequestError("MemberId can't be empty.")
        elif epoch == 0:
            if rebalance_ms == -1:
                raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
            if names is None and regex is None:
                raise InvalidRequestError("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        else:
            raise InvalidRequestError(f"MemberEpoch is invalid: {epoch}")
        if epoch == STATIC_LEAVE_EPOCH and instance_id is None:
            raise InvalidRequestError("InstanceId can't be null when MemberEpoch is -2.")
        if assignor is not None and assignor not in self.config.consumer_assignors:
            raise UnsupportedAssignorError(f"ServerAssignor {assignor} is not supported. Supported assignors: "
                                           f"{', '.join(self.config.consumer_assignors)}.")
        if regex:                                           # "" (as librdkafka sends with names): no regex
            try:
                re.compile(regex)
            except re.error as e:
                raise InvalidRegularExpressionError(f"SubscribedTopicRegex {regex!r} is not a valid regular "
                                                    f"expression: {e}") from None

    def _consumer_group(self, group_id: str, create: bool, done: list, joining: str = "") -> ConsumerGroup:
        """The consumer group (lock held). An empty classic group of that id (offsets only) becomes a consumer
        group, its offsets kept and its metadata tombstoned (Kafka's maybeDeleteEmptyClassicGroup); a classic
        group with members too when ``create`` and the migration policy allows it (group_consumer_classic:
        its members become classic members of the consumer group), else it is GroupIdNotFoundError with
        Kafka's reason (see _not_upgraded). A classic group that would leave no room for the member
        ``joining`` stays as it is (GroupMaxSizeReachedError: Kafka converts it, finds it full and rolls the
        conversion back)."""
        group = self._consumer_groups.get(group_id)
        if group is not None:
            return group
        classic = self._groups.get(group_id)
        if classic is not None and classic.state not in (GroupState.EMPTY, GroupState.DEAD):
            why = self._not_upgraded(classic) if create else f"Group {group_id} is not a consumer group."
            if why is not None:
                raise GroupIdNotFoundError(why)
            if joining not in classic.members and len(classic.members) >= self.config.consumer_max_size:
                raise GroupMaxSizeReachedError(f"The consumer group has reached its maximum capacity of "
                                               f"{self.config.consumer_max_size} members.")
            return self._upgrade_classic_group(classic, self._clock(), done)
        if not create:
            raise UnknownMemberIdError(f"Group {group_id} does not exist: its members must rejoin.")
        if classic is not None:
            del self._groups[group_id]
            log.info("group %s: the empty classic group becomes a consumer group", group_id)
        group = self._consumer_groups[group_id] = ConsumerGroup(group_id, drop_classic=classic is not None)
        now = self._clock()
        self._consumer_holds = [(ours, until) for ours, until in self._consumer_holds if until > now]
        group.hold_until = max((until for ours, until in self._consumer_holds if ours(group_id)), default=None)
        return group

    def _not_upgraded(self, classic) -> str | None:
        """Why a classic group with members does not become a consumer group when a member joins with
        ConsumerGroupHeartbeat (Kafka's reasons: group.consumer.migration.policy without upgrade, a group not
        of the consumer protocol type, too many members); None when it does."""
        gid, policy = classic.group_id, self.config.consumer_migration_policy
        if policy not in ("upgrade", "bidirectional"):
            return f"Cannot upgrade classic group {gid} to consumer group because online upgrade is disabled."
        if classic.protocol_type != "consumer":
            return (f"Cannot upgrade classic group {gid} to consumer group because the group does not use the "
                    f"consumer embedded protocol.")
        if len(classic.members) > self.config.consumer_max_size:
            return (f"Cannot upgrade classic group {gid} to consumer group because the group size exceeds the "
                    f"consumer group maximum size.")
        return None

    def _hold_consumer_groups(self, ours, now: float) -> None:
        """This coordinator took over the offsets partition of the group ids ``ours`` accepts (lock held). Their
        consumer groups lived at the previous coordinator, in memory: members that have not found this one
        yet may still consume their partitions. So a consumer group of theirs created here within a session
        timeout assigns nothing until that session has passed: by then every old member either rejoined here
        (giving its partitions up) or would have been expired by the old coordinator, as Kafka's would expire
        members that do not heartbeat the new coordinator."""
        self._consumer_holds.append((ours, now + self.config.consumer_session_timeout_ms))

    def _consumer_join(self, group, member_id, instance_id, rack_id, rebalance_ms, client_id, client_host
                       ) -> tuple[ConsumerMember, bool]:
        """A member joining with epoch 0: a new member, a static member replacing its instance id's holder
        (taking over its epoch and partitions; as Kafka, UnreleasedInstanceIdError unless that holder left
        with epoch -2 or uses the classic protocol), or a known member rejoining after it was fenced (it gave
        its partitions up: they are released). Returns (member, whether the group epoch must move)."""
        old = group.members.get(member_id)
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is not None and holder != member_id:
                prior = group.members[holder]
                if prior.classic is None and prior.member_epoch != STATIC_LEAVE_EPOCH:
                    raise UnreleasedInstanceIdError(f"Static member {member_id} with instance id {instance_id} "
                                                    f"cannot join the group because the instance id is owned by "
                                                    f"{holder} member.")
                del group.members[holder]
                epoch = prior.previous_epoch if prior.member_epoch == STATIC_LEAVE_EPOCH else prior.member_epoch
                member = ConsumerMember(member_id, instance_id, rack_id, client_id, client_host, rebalance_ms,
                                        prior.subscribed_names, prior.subscribed_regex, prior.server_assignor,
                                        epoch, -1, MemberState.STABLE, prior.assigned, prior.revoking)
                member.state = prior.state if prior.revoking else MemberState.STABLE
                group.members[member_id] = member
                group.static_members[instance_id] = member_id
                if holder in group.target:
                    group.target[member_id] = group.target.pop(holder)
                log.info("group %s: static member %s replaced %s", group.group_id, member_id, holder)
                return member, False
        if old is None and len(group.members) >= self.config.consumer_max_size:
            raise GroupMaxSizeReachedError(f"The consumer group has reached its maximum capacity of "
                                           f"{self.config.consumer_max_size} members.")
        member = ConsumerMember(member_id, instance_id, rack_id, client_id, client_host, rebalance_ms)
        if old is not None:
            member.subscribed_names, member.subscribed_regex = old.subscribed_names, old.subscribed_regex
            member.server_assignor = old.server_assignor
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        log.info("group %s: member %s joins", group.group_id, member_id)
        return member, True

    def _current_consumer(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """The member a heartbeat names (lock held), in Kafka's order: with an instance id, UnknownMemberIdError
        when no member holds it and FencedInstanceIdError when another member does; then UnknownMemberIdError
        for an unknown member id."""
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is None:
                raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
            if holder != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was fenced "
                                            f"by member {holder}.")
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
        return member

    @staticmethod
    def _update_subscription(member, names, regex, assignor, rebalance_ms) -> bool:
        """Apply the fields a heartbeat carries (None: unchanged); whether the subscription changed."""
        changed = False
        if names is not None and tuple(sorted(set(names))) != member.subscribed_names:
            member.subscribed_names, changed = tuple(sorted(set(names))), True
        if regex is not None and (regex or None) != member.subscribed_regex:
            member.subscribed_regex, changed = regex or None, True
        if assignor is not None and assignor != member.server_assignor:
            member.server_assignor, changed = assignor, True
        if rebalance_ms != -1:
            member.rebalance_timeout_ms = rebalance_ms
        return changed

    def _consumer_leave(self, group_id, member_id, epoch, instance_id, interval, done) -> HeartbeatResult:
        """Epoch -1: the member leaves, its partitions go to the others. Epoch -2 (static): it keeps its
        partitions until its session ends or its instance id rejoins."""
        group = self._consumer_groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is None:
                raise UnknownMemberIdError(f"Instance id {instance_id} is unknown in group {group_id}.")
            if holder != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was fenced.")
        member = self._current_consumer(group, member_id, instance_id)
        if epoch == STATIC_LEAVE_EPOCH:
            log.info("group %s: static member %s leaves for a while", group_id, member_id)
            if member.member_epoch != STATIC_LEAVE_EPOCH:
                member.previous_epoch, member.member_epoch = member.member_epoch, STATIC_LEAVE_EPOCH
        else:
            log.info("group %s: member %s leaves", group_id, member_id)
            self._remove_consumer(group, member, done)
        return HeartbeatResult(member_id, epoch, interval)

    def _remove_consumer(self, group: ConsumerGroup, member: ConsumerMember, done: list) -> None:
        """Drop a member (lock held): its partitions are released, the group epoch moves. When it was the
        last member using the consumer protocol and classic members remain, the group may become a classic
        group again instead, at the group epoch the classic members have (as Kafka: they are then asked to
        rejoin, not refused as of a stale generation; group_consumer_classic._maybe_downgrade; ``done`` takes
        completions)."""
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        if member.classic is None:
            self._maybe_downgrade(group, done)
            if self._consumer_groups.get(group.group_id) is not group:
                return
        self._refresh_target(group, True, self._clock())

    def _refresh_target(self, group: ConsumerGroup, changed: bool, now: float) -> None:
        """Bump the group epoch if ``changed`` or the subscribed topics' metadata moved, and recompute the
        target assignment for a bumped epoch (lock held). A group on hold gets an empty target until its
        hold ends (then the epoch moves)."""
        if group.hold_until is not None and now >= group.hold_until:
            group.hold_until, changed = None, True
        topics = self._topics()
        subscribed = {t: topics[t] for t in sorted(set().union(*(self._subscribed(m, topics)
                                                                  for m in group.members.values())))}
        if changed or subscribed != group.subscribed_metadata:
            group.group_epoch += 1
            group.subscribed_metadata = subscribed
        if group.group_epoch == group.target_epoch:
            return
        chosen = self._preferred_assignor(group)
        specs = {m.member_id: MemberSubscription(frozenset(self._subscribed(m, topics)), m.instance_id)
                 for m in group.members.values()}
        group.target = (server_assignor(chosen).assign(specs, subscribed, group.target) if group.hold_until is None
                        else {m: {} for m in specs})
        group.assignor = chosen
        group.target_epoch = group.group_epoch

    def _preferred_assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members name (ties: the first by name), else group.consumer.assignors' first."""
        names = [m.server_assignor for m in group.members.values() if m.server_assignor]
        return max(sorted(set(names)), key=names.count) if names else self.config.consumer_assignors[0]

    @staticmethod
    def _subscribed(member: ConsumerMember, topics: Mapping[str, int]) -> set[str]:
        """The existing topics a member subscribes to, by name or by regex (matching a whole name)."""
        out = {t for t in member.subscribed_names if t in topics}
        if member.subscribed_regex:
            pattern = re.compile(member.subscribed_regex)
            out.update(t for t in topics if pattern.fullmatch(t))
        return out

    # --- timers (lock held; called from the coordinator's deadline table) ------------------------------------

    def _arm_consumer_session(self, group: ConsumerGroup, member: ConsumerMember, now: float) -> None:
        member.session_deadline = now + (self.config.consumer_session_timeout_ms if member.classic is None
                                         else member.classic.session_timeout_ms)
        if not member.timer_armed:
            member.timer_armed = True
            self._deadlines.push(member.session_deadline, TimerKind.CONSUMER_SESSION, group, member)

    def _on_consumer_session(self, group, member, done, now) -> None:
        member.timer_armed = False
        if group.members.get(member.member_id) is not member:
            return
        if member.session_deadline > now:
            member.timer_armed = True
            self._deadlines.push(member.session_deadline, TimerKind.CONSUMER_SESSION, group, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_consumer(group, member, done)
        self._queue_consumer_changes(group)

    def _on_consumer_revoke(self, group, member, done, now) -> None:
        if group.members.get(member.member_id) is not member or member.revoke_deadline is None \
                or member.revoke_deadline > now:
            return
        log.info("group %s: member %s did not revoke its partitions within its rebalance timeout",
                 group.group_id, member.member_id)
        self._remove_consumer(group, member, done)
        self._queue_consumer_changes(group)

    # --- describe, offsets -----------------------------------------------------------------------------------

    def describe_consumer_groups(self, group_ids) -> list[ConsumerGroupDescription | Exception]:
        """ConsumerGroupDescribe: per id a description, or GroupIdNotFoundError (no such group, or a classic
        one)."""
        out: list[ConsumerGroupDescription | Exception] = []
        with self._lock:
            self._check_open()
            for gid in group_ids:
                group = self._consumer_groups.get(gid)
                if group is None:
                    out.append(GroupIdNotFoundError(f"Group {gid} is not a consumer group." if gid in self._groups
                                                    else f"Group {gid} not found."))
                    continue
                out.append(ConsumerGroupDescription(gid, group.state, group.group_epoch, group.target_epoch,
                                                    group.assignor, tuple(
                    ConsumerMemberDescription(m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id,
                                              m.client_host, m.subscribed_names, m.subscribed_regex,
                                              dict(m.assigned), dict(group.target.get(m.member_id, {})),
                                              m.classic is not None)
                    for m in group.members.values())))
        return out

    def _check_consumer_commit(self, group: ConsumerGroup, member_epoch: int, member_id: str,
                               epoch_version: bool) -> None:
        """OffsetCommit to a consumer group (lock held): without a member (epoch < 0) only while the group has
        no members; else the member must exist and the epoch be its current one. ``epoch_version``: the
        request carries a member epoch (OffsetCommit v9+), as a consumer group member's must."""
        if member_epoch < 0 and not member_id:
            if group.members:
                raise UnknownMemberIdError(f"Group {group.group_id} has members: a commit must name one.")
            return
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
        if member.classic is not None:
            if member_epoch != member.member_epoch:
                raise IllegalGenerationError(f"The received generation id {member_epoch} does not match the "
                                             f"expected member epoch {member.member_epoch}.")
            return
        if not epoch_version:
            raise UnsupportedVersionError("OffsetCommit version 9 or above must be used by members using the "
                                          "consumer group protocol")
        if member_epoch != member.member_epoch:
            raise StaleMemberEpochError(f"The member epoch {member_epoch} of {member_id} is stale "
                                        f"(current {member.member_epoch}).")

    @staticmethod
    def _check_consumer_txn_commit(group: ConsumerGroup, member_epoch: int, member_id: str) -> None:
        """TxnOffsetCommit to a consumer group (lock held): a named member must exist, and a given epoch
        (v3+) be its current one (IllegalGenerationError, as Kafka answers transactional commits)."""
        if not member_id:
            return
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
        if member_epoch >= 0 and member_epoch != member.member_epoch:
            raise IllegalGenerationError(f"The member epoch {member_epoch} of {member_id} is not its current "
                                         f"epoch {member.member_epoch}.")

    def check_offset_fetch_member(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+ naming a member of a consumer group: UnknownMemberIdError, StaleMemberEpochError.
        No member named (null id), or a classic group: nothing to check."""
        if member_id is None:
            return
        with self._lock:
            self._check_open()
            group = self._consumer_groups.get(group_id)
            if group is None:
                if group_id in self._groups or member_epoch < 0:
                    return
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch != member.member_epoch:
                raise StaleMemberEpochError(f"The member epoch {member_epoch} of {member_id} is stale "
                                            f"(current {member.member_epoch}).")

    def _classic_may_take(self, group_id: str) -> None:
        """A classic JoinGroup for ``group_id`` that no consumer group with members serves (lock held): an empty
        consumer group of that id is dropped (its records tombstoned, its offsets kept: Kafka's
        maybeDeleteEmptyConsumerGroup)."""
        group = self._consumer_groups.get(group_id)
        if group is None:
            return
        del self._consumer_groups[group_id]
        self._queue_consumer_changes(group, dropped=True)

    # --- the group's records in the store ----------------------------------------------------------------------

    def _consumer_changes(self, group: ConsumerGroup, dropped: bool = False, classic=None):
        """The store write of what changed in the group since its records were last written (lock held):
        changed records, tombstones for members gone (for every record when ``dropped``); None when nothing
        changed. A conversion is written in the same batch: the tombstone of the classic group it was
        (``group.drop_classic``), or ``classic``, the GroupMetadata of the classic group it became (with
        ``dropped``). The group's ``stored`` records are updated at once (writes start in the order queued); a
        write that fails marks every record it had as unwritten (and the classic tombstone as due), so the next
        change writes them all again."""
        if not dropped and self._consumer_groups.get(group.group_id) is not group:
            return None                                 # no longer this id's consumer group: nothing to write
        records = {} if dropped else group_records(group, self._topic_ids())
        todo = changes(group.stored, records)
        drop_classic = group.drop_classic and not dropped
        if not todo and not drop_classic and classic is None:
            return None
        group.stored, group.drop_classic = records, False
        gid = group.group_id

        def unwritten() -> None:
            with self._lock:
                group.stored = dict.fromkeys(set(group.stored) | {k for k, _ in todo}, b"")
                group.drop_classic |= drop_classic

        def start():
            try:
                wait = self.store.start_consumer_records(gid, todo, drop_classic=drop_classic, classic=classic)
            except BaseException:
                unwritten()
                raise

            def waited() -> None:
                try:
                    wait()
                except BaseException:
                    unwritten()
                    raise
            return waited
        return start

    def _queue_consumer_changes(self, group: ConsumerGroup, dropped: bool = False) -> None:
        """Queue the group's changes (lock held) where nobody waits for them (timers, a classic takeover)."""
        start = self._consumer_changes(group, dropped)
        if start is not None:
            self._writes.queue(start, log_store_failure)

    def _load_consumer_group(self, group_id: str, now: float) -> bool:
        """Rebuild the group from its stored records (lock held), if it has some: every member's session and
        pending revocation start now. Whether it was rebuilt."""
        records = self.store.consumer_records(group_id)
        try:
            names = {i: name for name, i in self._topic_ids().items()}
            group = restore_group(group_id, records, names) if records else None
        except SeglogError as e:
            log.error("group %s: consumer group records do not load (%s); its members rejoin", group_id, e)
            return False
        if group is None:
            return False
        group.stored = records
        group.assignor = self._preferred_assignor(group)
        self._consumer_groups[group_id] = group
        if any(int.from_bytes(k[:2], "big") >= LEGACY_CONSUMER_GROUP_KEY_VERSION for k in records):
            log.info("group %s: records of seglog's earlier format are written again in Kafka's", group_id)
            self._queue_consumer_changes(group)
        for member in group.members.values():
            self._arm_consumer_session(group, member, now)
            if member.revoking:
                member.revoke_deadline = now + member.rebalance_timeout_ms
                self._deadlines.push(member.revoke_deadline, TimerKind.CONSUMER_REVOKE, group, member)
        log.info("group %s: loaded at epoch %d with %d members", group_id, group.group_epoch, len(group.members))
        return True

