"""KIP-848 consumer groups in the group coordinator: the server-side assignors, the heartbeat state machine
(join, reconcile, revoke before assign, leave, static members, fencing, session and rebalance timeouts),
cross-protocol rules and the offset checks of consumer-group members."""

import dataclasses
import random
import uuid

import pytest

from seglog.errors import (FencedInstanceIdError, FencedMemberEpochError, GroupIdNotFoundError,
                           IllegalGenerationError, InconsistentGroupProtocolError, InvalidRegularExpressionError,
                           InvalidRequestError, NonEmptyGroupError, StaleMemberEpochError, UnknownMemberIdError,
                           UnreleasedInstanceIdError, UnsupportedAssignorError, UnsupportedVersionError)
from seglog.group import GroupConfig, GroupCoordinator
from seglog.group_assignors import MemberSubscription, RangeAssignor, UniformAssignor, server_assignor
from seglog.group_consumer_state import ConsumerGroupState


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def env():
    topics = {"a": 6, "b": 3}
    clock = Clock()
    config = GroupConfig(consumer_session_timeout_ms=10_000, consumer_min_session_timeout_ms=1000,
                         initial_rebalance_delay_ms=0)
    coord = GroupCoordinator(config=config, clock=clock, timer=False, topics=lambda: dict(topics),
                             topic_ids=lambda: {t: uuid.uuid5(uuid.NAMESPACE_DNS, t) for t in topics})
    yield coord, clock, topics
    coord.close()


def parts(assignment):
    return {(t, p) for t, ps in (assignment or {}).items() for p in ps}


def join(coord, mid, topics=("a",), **kw):
    kw.setdefault("rebalance_timeout_ms", 30_000)
    return coord.consumer_group_heartbeat("g", mid, 0, subscribed_topic_names=list(topics), **kw)


def beat(coord, r, owned, **kw):
    return coord.consumer_group_heartbeat("g", r.member_id, r.member_epoch, owned=owned, **kw)


def converge(coord, members, rounds=10):
    """Heartbeat every member (reporting what it holds) until nothing changes; returns {member: partitions}."""
    held = {mid: r.assignment or {} for mid, r in members.items()}
    for _ in range(rounds):
        for mid in list(members):
            r = beat(coord, members[mid], held[mid])
            members[mid] = r
            if r.assignment is not None:
                held[mid] = r.assignment
    return {mid: parts(a) for mid, a in held.items()}


# --- assignors ------------------------------------------------------------------------------------------------

def test_uniform_homogeneous_is_balanced_and_complete():
    members = {f"m{i}": MemberSubscription(frozenset({"a", "b"})) for i in range(4)}
    out = UniformAssignor().assign(members, {"a": 6, "b": 3}, {})
    sizes = sorted(len(parts(a)) for a in out.values())
    assert sizes == [2, 2, 2, 3]
    every = [tp for a in out.values() for tp in parts(a)]
    assert sorted(every) == sorted({("a", p) for p in range(6)} | {("b", p) for p in range(3)})


def test_uniform_is_sticky_when_a_member_joins():
    subs = {f"m{i}": MemberSubscription(frozenset({"a"})) for i in range(2)}
    first = UniformAssignor().assign(subs, {"a": 6}, {})
    subs["m2"] = MemberSubscription(frozenset({"a"}))
    second = UniformAssignor().assign(subs, {"a": 6}, first)
    assert all(len(parts(a)) == 2 for a in second.values())
    for m in ("m0", "m1"):
        assert parts(second[m]) <= parts(first[m])          # only moved partitions change hands


def test_uniform_heterogeneous_respects_subscriptions():
    subs = {"x": MemberSubscription(frozenset({"a"})), "y": MemberSubscription(frozenset({"a", "b"})),
            "z": MemberSubscription(frozenset({"c"}))}
    out = UniformAssignor().assign(subs, {"a": 4, "b": 4}, {})
    assert out["z"] == {}
    assert {t for t, _ in parts(out["x"])} <= {"a"}
    assert len(parts(out["x"]) | parts(out["y"])) == 8 and not parts(out["x"]) & parts(out["y"])
    assert abs(len(parts(out["x"])) - len(parts(out["y"]))) <= 1


def test_range_gives_consecutive_ranges_per_topic():
    subs = {m: MemberSubscription(frozenset({"a", "b"})) for m in ("m1", "m2")}
    out = RangeAssignor().assign(subs, {"a": 5, "b": 2}, {})
    assert out["m1"] == {"a": frozenset({0, 1, 2}), "b": frozenset({0})}
    assert out["m2"] == {"a": frozenset({3, 4}), "b": frozenset({1})}
    with pytest.raises(UnsupportedAssignorError):
        server_assignor("sticky")


# --- the heartbeat state machine ------------------------------------------------------------------------------

def test_three_members_split_six_partitions_revoking_before_assigning(env):
    coord, _, _ = env
    members = {m: join(coord, m) for m in ("m1", "m2", "m3")}
    assert parts(members["m1"].assignment) == {("a", p) for p in range(6)}       # alone at first
    assert members["m2"].assignment == {} and members["m3"].assignment == {}     # m1 still holds them all
    final = converge(coord, members)
    assert sorted(len(p) for p in final.values()) == [2, 2, 2]
    assert set().union(*final.values()) == {("a", p) for p in range(6)}
    [d] = coord.describe_consumer_groups(["g"])
    assert d.state is ConsumerGroupState.STABLE and d.assignor == "uniform"
    assert {m.member_epoch for m in d.members} == {d.assignment_epoch} == {d.group_epoch}


def test_no_partition_is_owned_twice_across_a_random_history(env):
    """Members join, leave, change subscriptions, drop heartbeats and topics grow; at every step no partition
    is held (assigned or being revoked) by two members, and what each client holds is what it was told."""
    coord, clock, topics = env
    rng = random.Random(848)
    live: dict[str, object] = {}
    held: dict[str, dict] = {}
    n = 0
    for step in range(400):
        clock.now += 100
        action = rng.random()
        if action < 0.12 or not live:
            n += 1
            mid = f"m{n}"
            live[mid] = join(coord, mid, topics=rng.choice([("a",), ("a", "b"), ("b",)]))
            held[mid] = live[mid].assignment or {}
        elif action < 0.18 and len(live) > 1:
            mid = rng.choice(sorted(live))
            coord.consumer_group_heartbeat("g", mid, -1)
            del live[mid], held[mid]
        elif action < 0.2:
            topics["a"] += 1
        else:
            mid = rng.choice(sorted(live))
            kw = {"subscribed_topic_names": ["a", "b"]} if action > 0.97 else {}
            r = beat(coord, live[mid], held[mid], **kw)
            live[mid] = r
            if r.assignment is not None:
                held[mid] = r.assignment
        group = coord._consumer_groups["g"]
        seen: dict = {}
        for m in group.members.values():
            for tp in parts(m.assigned) | parts(m.revoking):
                assert tp not in seen, f"step {step}: {tp} held by {seen[tp]} and {m.member_id}"
                seen[tp] = m.member_id
        clients: dict = {}
        for mid, a in held.items():
            for tp in parts(a):
                assert tp not in clients, f"step {step}: clients {clients[tp]} and {mid} both consume {tp}"
                clients[tp] = mid
    final = converge(coord, live)
    subscribed = set().union(*(coord._subscribed(m, topics) for m in coord._consumer_groups["g"].members.values()))
    assert set().union(*final.values()) == {(t, p) for t in subscribed for p in range(topics[t])}


def test_epochs_fencing_and_lost_responses(env):
    coord, _, _ = env
    r1 = join(coord, "m1")
    r1 = beat(coord, r1, r1.assignment)
    with pytest.raises(FencedMemberEpochError):
        coord.consumer_group_heartbeat("g", "m1", r1.member_epoch + 1)
    with pytest.raises(UnknownMemberIdError):
        coord.consumer_group_heartbeat("g", "nobody", 1)
    join(coord, "m2")
    r1b = beat(coord, r1, r1.assignment)                    # m1 must revoke: its epoch stays until it does
    assert r1b.member_epoch == r1.member_epoch and len(parts(r1b.assignment)) == 3
    r1c = beat(coord, r1b, r1b.assignment)                  # revoked: the new epoch
    assert r1c.member_epoch > r1.member_epoch
    # the response to r1c was lost: the previous epoch is still accepted while what it owns is all assigned
    again = coord.consumer_group_heartbeat("g", "m1", r1b.member_epoch, owned=r1b.assignment)
    assert again.member_epoch == r1c.member_epoch
    with pytest.raises(FencedMemberEpochError):
        coord.consumer_group_heartbeat("g", "m1", r1b.member_epoch, owned={"a": frozenset(range(6))})


def test_leave_moves_partitions_and_session_expiry_removes_member(env):
    coord, clock, _ = env
    members = {m: join(coord, m) for m in ("m1", "m2", "m3")}
    converge(coord, members)
    out = coord.consumer_group_heartbeat("g", "m1", -1)
    assert out.member_epoch == -1
    del members["m1"]
    assert sorted(len(p) for p in converge(coord, members).values()) == [3, 3]
    clock.now += 5_000
    beat(coord, members["m2"], None)
    clock.now += 6_000                                      # m3 silent for 11 s, m2 for 6 s
    coord.tick()
    assert set(coord._consumer_groups["g"].members) == {"m2"}
    assert len(converge(coord, {"m2": members["m2"]})["m2"]) == 6


def test_a_member_that_does_not_revoke_is_removed_after_its_rebalance_timeout(env):
    coord, clock, _ = env
    r1 = join(coord, "m1", rebalance_timeout_ms=2_000)
    r2 = join(coord, "m2")
    beat(coord, r1, r1.assignment)                          # told to revoke three
    clock.now += 2_001
    coord.tick()
    assert set(coord._consumer_groups["g"].members) == {"m2"}
    assert len(converge(coord, {"m2": r2})["m2"]) == 6


def test_static_members(env):
    coord, _, _ = env
    s1 = join(coord, "s1", instance_id="i1")
    first = s1.assignment
    s1 = beat(coord, s1, first)
    with pytest.raises(UnreleasedInstanceIdError):
        join(coord, "s1-new", instance_id="i1")
    assert coord.consumer_group_heartbeat("g", "s1", -2, instance_id="i1").member_epoch == -2
    other = join(coord, "m2")
    assert other.assignment == {}                            # the departed static member keeps its partitions
    back = join(coord, "s1-new", instance_id="i1")
    # it takes over the epoch and partitions, and must give up the half that now goes to m2
    assert back.member_epoch == s1.member_epoch and len(parts(back.assignment)) == 3
    assert parts(back.assignment) < parts(first)
    with pytest.raises(FencedInstanceIdError):                # Kafka checks the instance id first
        coord.consumer_group_heartbeat("g", "s1", s1.member_epoch, instance_id="i1")
    with pytest.raises(FencedInstanceIdError):
        coord.consumer_group_heartbeat("g", "m2", other.member_epoch, instance_id="i1")
    with pytest.raises(UnknownMemberIdError):                 # an instance id nobody holds
        coord.consumer_group_heartbeat("g", "m2", other.member_epoch, instance_id="i9")
    with pytest.raises(UnknownMemberIdError):
        coord.consumer_group_heartbeat("g", "s1", s1.member_epoch)


def test_request_checks(env):
    coord, _, _ = env
    with pytest.raises(InvalidRequestError):
        coord.consumer_group_heartbeat("", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=["a"])
    with pytest.raises(InvalidRequestError):
        coord.consumer_group_heartbeat("g", "m", 0, subscribed_topic_names=["a"])       # no rebalance timeout
    with pytest.raises(InvalidRequestError):
        coord.consumer_group_heartbeat("g", "m", 0, rebalance_timeout_ms=1)             # no subscription
    with pytest.raises(InvalidRequestError):
        coord.consumer_group_heartbeat("g", "m", -2)                                     # -2 needs an instance id
    with pytest.raises(UnsupportedAssignorError):
        join(coord, "m", server_assignor="sticky")
    with pytest.raises(InvalidRegularExpressionError):
        coord.consumer_group_heartbeat("g", "m", 0, rebalance_timeout_ms=1, subscribed_topic_regex="a[")
    assert join(coord, "m", server_assignor="range").member_id == "m"
    assert coord.describe_consumer_groups(["g"])[0].assignor == "range"
    assert coord.consumer_group_heartbeat("g", "", 0, rebalance_timeout_ms=1,
                                          subscribed_topic_names=["a"]).member_id       # v0: the coordinator names it


def test_regex_subscription_picks_up_new_topics_and_partitions(env):
    coord, _, topics = env
    r = coord.consumer_group_heartbeat("g", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=[],
                                       subscribed_topic_regex="b|c.*")
    assert parts(r.assignment) == {("b", p) for p in range(3)}
    topics["cx"] = 2
    topics["b"] = 4
    r2 = beat(coord, r, r.assignment)
    assert r2.member_epoch > r.member_epoch
    assert parts(r2.assignment) == {("b", p) for p in range(4)} | {("cx", 0), ("cx", 1)}


def test_classic_and_consumer_groups_of_one_id(env):
    coord, _, _ = env
    join(coord, "m1")
    fut = coord.join_group("g", "", "consumer", [("range", b"")], 10_000)
    with pytest.raises(InconsistentGroupProtocolError):
        fut.result(1)
    assert [(g.group_id, g.protocol_type, g.state.value, g.group_type) for g in coord.list_groups()] == [
        ("g", "consumer", "Stable", "consumer")]
    assert coord.describe_groups(["g"])[0].state.value == "Dead"
    assert coord.delete_groups(["g"])["g"].__class__ is NonEmptyGroupError
    coord.join_group("classic", "", "consumer", [("range", b"")], 10_000).result(5)
    with pytest.raises(GroupIdNotFoundError):
        coord.consumer_group_heartbeat("classic", "x", 0, rebalance_timeout_ms=1, subscribed_topic_names=["a"])
    [desc] = coord.describe_consumer_groups(["classic"])
    assert isinstance(desc, GroupIdNotFoundError)


def test_an_empty_group_of_either_kind_is_taken_over_with_its_offsets(env):
    """Kafka 4.0, whatever group.consumer.migration.policy: an empty classic group becomes a consumer group when
    a member heartbeats (its metadata tombstoned, its offsets kept), an empty consumer group a classic one when
    a member joins (its records tombstoned, its offsets kept)."""
    from seglog.offsets_format import OffsetAndMetadata
    coord, _, _ = env
    coord.config = dataclasses.replace(coord.config, consumer_migration_policy="disabled")
    r = coord.join_group("g", "", "consumer", [("range", b"")], 10_000).result(5)
    coord.sync_group("g", r.generation_id, r.member_id, {r.member_id: b""}).result(5)
    coord.commit_offsets("g", {("a", 0): OffsetAndMetadata(7)}, generation_id=r.generation_id, member_id=r.member_id)
    coord.leave_group("g", [(r.member_id, None)])
    assert "g" in coord.store.load_groups()                        # the empty generation is stored
    m = join(coord, "m1")
    assert coord.store.load_groups() == {} and coord.fetch_offsets("g", [("a", 0)])[("a", 0)].offset == 7
    assert [(g.group_type, g.state.value) for g in coord.list_groups()] == [("consumer", "Stable")]
    coord.commit_offsets("g", {("a", 0): OffsetAndMetadata(9)}, generation_id=m.member_epoch, member_id="m1",
                         epoch_version=True)
    coord.consumer_group_heartbeat("g", "m1", -1)
    assert coord.store.consumer_records("g")
    r = coord.join_group("g", "", "consumer", [("range", b"")], 10_000).result(5)
    assert coord.store.consumer_records("g") == {} and coord.fetch_offsets("g", [("a", 0)])[("a", 0)].offset == 9
    assert [(g.group_type, g.state.value) for g in coord.list_groups()] == [("classic", "CompletingRebalance")]


@pytest.mark.parametrize("policy, protocol_type, reason", [
    ("disabled", "consumer", "because online upgrade is disabled"),
    ("downgrade", "consumer", "because online upgrade is disabled"),
    ("bidirectional", "connect", "because the group does not use the consumer embedded protocol"),
    ("upgrade", "consumer", "because the embedded consumer protocol is malformed")])
def test_a_classic_group_with_members_that_cannot_become_a_consumer_group(env, policy, protocol_type, reason):
    """A heartbeat to a classic group with members it cannot convert: GROUP_ID_NOT_FOUND with Kafka's reason;
    a heartbeat of a member it does not know (epoch > 0): "not a consumer group"."""
    coord, _, _ = env
    coord.config = dataclasses.replace(coord.config, consumer_migration_policy=policy)
    coord.join_group("classic", "", protocol_type, [("range", b"")], 10_000).result(5)
    with pytest.raises(GroupIdNotFoundError, match=reason):
        coord.consumer_group_heartbeat("classic", "x", 0, rebalance_timeout_ms=1, subscribed_topic_names=["a"])
    with pytest.raises(GroupIdNotFoundError, match="Group classic is not a consumer group"):
        coord.consumer_group_heartbeat("classic", "x", 3)
    assert coord.list_groups()[0].group_type == "classic"


def subscription(*topics, owned=()):
    from seglog.assignors import Subscription
    from seglog.offsets_format import TopicPartition
    return Subscription(list(topics), owned_partitions=[TopicPartition(t, p) for t, p in owned]).encode(1)


def assigned(sync_result):
    from seglog.assignors import Assignment
    return {(tp.topic, tp.partition) for tp in Assignment.decode(sync_result.assignment).partitions}


def classic_join(coord, member_id="", owned=(), protocols=None):
    """A classic member's JoinGroup (v4+, so a new member first gets its id) and SyncGroup: (result, parts)."""
    from seglog.errors import MemberIdRequiredError
    protocols = protocols or [("range", subscription("a", owned=owned))]
    try:
        j = coord.join_group("g", member_id, "consumer", protocols, 10_000, 30_000,
                             require_known_member_id=True).result(5)
    except MemberIdRequiredError as e:
        j = coord.join_group("g", e.member_id, "consumer", protocols, 10_000, 30_000,
                             require_known_member_id=True).result(5)
    assert j.leader_id == "" and not j.members and j.protocol_name == protocols[0][0]
    return j, assigned(coord.sync_group("g", j.generation_id, j.member_id, {}).result(5))


def test_classic_members_inside_a_consumer_group(env):
    """Kafka 4.0's mixed group: a classic member joins a consumer group with members and is assigned by the
    server-side assignor; it is told to rejoin (REBALANCE_IN_PROGRESS) until it got its partitions, which it
    gets only once the consumer member released them; its generation is its member epoch (ILLEGAL_GENERATION
    for another, at heartbeat and at commit); it is stored with its classic metadata; LeaveGroup removes it."""
    from seglog.errors import IllegalGenerationError, RebalanceInProgressError
    from seglog.group_consumer_records import group_records, restore_group
    from seglog.offsets_format import OffsetAndMetadata
    coord, _, topics = env
    r = join(coord, "m1")
    held = r.assignment
    assert parts(held) == {("a", p) for p in range(6)}
    j, got = classic_join(coord)
    assert got == set() and coord.describe_consumer_groups(["g"])[0].state is ConsumerGroupState.RECONCILING
    r = coord.consumer_group_heartbeat("g", "m1", r.member_epoch, owned=held)       # m1 must give 3 up
    held = r.assignment or held
    assert len(parts(held)) == 3
    coord.heartbeat("g", j.generation_id, j.member_id)                          # not released yet: wait
    r = coord.consumer_group_heartbeat("g", "m1", r.member_epoch, owned=held)       # released
    with pytest.raises(RebalanceInProgressError):
        coord.heartbeat("g", j.generation_id, j.member_id)                      # its partitions are free now
    j, got = classic_join(coord, j.member_id)
    assert got == {("a", p) for p in range(6)} - parts(held)
    coord.heartbeat("g", j.generation_id, j.member_id)                          # stable: nothing to do
    [d] = coord.describe_consumer_groups(["g"])
    assert {m.member_id: m.classic for m in d.members} == {"m1": False, j.member_id: True}
    assert d.state is ConsumerGroupState.STABLE
    with pytest.raises(IllegalGenerationError):
        coord.heartbeat("g", j.generation_id - 1, j.member_id)
    assert coord.commit_offsets("g", {("a", 0): OffsetAndMetadata(3)}, generation_id=j.generation_id,
                                member_id=j.member_id, epoch_version=False) == {("a", 0): None}
    with pytest.raises(IllegalGenerationError):
        coord.commit_offsets("g", {("a", 0): OffsetAndMetadata(4)}, generation_id=j.generation_id + 1,
                             member_id=j.member_id, epoch_version=False)
    group = coord._consumer_groups["g"]
    ids = {t: uuid.uuid5(uuid.NAMESPACE_DNS, t) for t in topics}
    back = restore_group("g", group_records(group, ids), {i: t for t, i in ids.items()})
    assert back.members[j.member_id].classic == group.members[j.member_id].classic is not None
    assert back.members["m1"].classic is None
    assert coord.leave_group("g", [(j.member_id, None)]) == [None]
    r = coord.consumer_group_heartbeat("g", "m1", r.member_epoch, owned=held)
    assert parts(r.assignment) == {("a", p) for p in range(6)}
    assert coord.leave_group("g", [("nobody", None)])[0].__class__ is UnknownMemberIdError


@pytest.mark.parametrize("policy", ["bidirectional", "upgrade"])
def test_the_last_consumer_member_leaving_makes_it_a_classic_group_again(env, policy):
    """Kafka's downgrade (policy downgrade or bidirectional): when the last consumer-protocol member leaves and
    classic members remain, the group becomes a classic group at its epoch (its consumer group records
    tombstoned, its classic metadata stored) and a rebalance starts, which the classic member rejoins; under
    upgrade it stays a consumer group."""
    from seglog.errors import IllegalGenerationError, RebalanceInProgressError
    coord, clock, _ = env
    coord.config = dataclasses.replace(coord.config, consumer_migration_policy=policy)
    r = join(coord, "m1")
    j, _ = classic_join(coord)
    coord.consumer_group_heartbeat("g", "m1", -1)
    [g] = coord.list_groups()
    if policy == "upgrade":
        assert g.group_type == "consumer"
        return
    assert (g.group_type, g.state.value) == ("classic", "PreparingRebalance")
    assert coord.store.consumer_records("g") == {} and coord.store.load_groups()["g"].members
    with pytest.raises((IllegalGenerationError, RebalanceInProgressError)):
        coord.heartbeat("g", j.generation_id, j.member_id)
    again = coord.join_group("g", j.member_id, "consumer", [("range", subscription("a"))], 10_000, 30_000)
    clock.now += 100
    coord.tick()
    again = again.result(5)
    assert again.is_leader and again.generation_id > j.generation_id


def test_a_classic_group_with_members_becomes_a_consumer_group(env):
    """group.consumer.migration.policy=bidirectional (Kafka 4.0's default): a consumer-protocol member joining
    a classic group with members converts it, the classic member keeping its partitions at its generation;
    told to rejoin, it gives up what the new target moves, and no partition is owned twice."""
    from seglog.assignors import Assignment
    from seglog.errors import RebalanceInProgressError
    from seglog.offsets_format import TopicPartition
    coord, _, _ = env
    a = coord.join_group("g", "", "consumer", [("range", subscription("a"))], 10_000, 30_000).result(5)
    plan = {a.member_id: Assignment([TopicPartition("a", p) for p in range(6)]).encode()}
    coord.sync_group("g", a.generation_id, a.member_id, plan).result(5)
    r = join(coord, "k1")                                       # the upgrade
    [d] = coord.describe_consumer_groups(["g"])
    assert len(d.members) == 2 and d.group_epoch == a.generation_id + 1 and parts(r.assignment) == set()
    assert {m.member_id: len(parts(m.assignment)) for m in d.members} == {a.member_id: 6, "k1": 0}
    assert coord.store.load_groups() == {} and coord.list_groups()[0].group_type == "consumer"
    with pytest.raises(RebalanceInProgressError):
        coord.heartbeat("g", a.generation_id, a.member_id)
    j, got = classic_join(coord, a.member_id, owned=[])                 # eager: it rejoins holding none
    r = coord.consumer_group_heartbeat("g", "k1", r.member_epoch, owned={})
    assert len(got) == 3 and got.isdisjoint(parts(r.assignment)) and len(parts(r.assignment)) == 3
    coord.heartbeat("g", j.generation_id, a.member_id)


def test_offset_commit_and_fetch_check_member_and_epoch(env):
    coord, _, _ = env
    coord.store.partition_exists = lambda topic, p: True
    r = join(coord, "m1")
    ok = coord.commit_offsets("g", {("a", 0): 5}, r.member_epoch, "m1")
    assert ok == {("a", 0): None} and coord.fetch_offsets("g", [("a", 0)])[("a", 0)].offset == 5
    with pytest.raises(StaleMemberEpochError):
        coord.commit_offsets("g", {("a", 0): 6}, r.member_epoch + 1, "m1")
    with pytest.raises(UnknownMemberIdError):
        coord.commit_offsets("g", {("a", 0): 6}, r.member_epoch, "other")
    with pytest.raises(UnknownMemberIdError):
        coord.commit_offsets("g", {("a", 0): 6})                  # a group with members needs a member
    with pytest.raises(UnsupportedVersionError):
        coord.commit_offsets("g", {("a", 0): 6}, r.member_epoch, "m1", epoch_version=False)
    coord.check_offset_fetch_member("g", "m1", r.member_epoch)
    coord.check_offset_fetch_member("g", None, -1)
    with pytest.raises(StaleMemberEpochError):
        coord.check_offset_fetch_member("g", "m1", r.member_epoch - 1)
    with pytest.raises(UnknownMemberIdError):
        coord.check_offset_fetch_member("g", "other", 1)
    with pytest.raises(IllegalGenerationError):
        coord.txn_commit_offsets("g", "tx", 1, 0, {("a", 0): 7}, r.member_epoch + 3, "m1")
    coord.consumer_group_heartbeat("g", "m1", -1)
    assert coord.commit_offsets("g", {("a", 0): 9}) == {("a", 0): None}   # empty again: simple commits


def test_offset_delete_keeps_the_subscribed_topics_of_a_consumer_group(env):
    coord, _, _ = env
    coord.store.partition_exists = lambda topic, p: True
    r = join(coord, "m1")
    coord.commit_offsets("g", {("a", 0): 5, ("b", 0): 5}, r.member_epoch, "m1")
    out = coord.delete_offsets("g", [("a", 0), ("b", 0)])
    assert out[("a", 0)].__class__.__name__ == "GroupSubscribedToTopicError" and out[("b", 0)] is None
    kept = coord.fetch_offsets("g", [("a", 0), ("b", 0)])
    assert kept[("a", 0)].offset == 5 and kept[("b", 0)] is None


def test_group_consumer_configs_take_kafkas_names_defaults_and_checks():
    from seglog.config import BrokerConfig
    from seglog.errors import InvalidConfigError

    c = BrokerConfig()
    assert (c.group_consumer_session_timeout_ms, c.group_consumer_min_session_timeout_ms,
            c.group_consumer_max_session_timeout_ms, c.group_consumer_heartbeat_interval_ms,
            c.group_consumer_min_heartbeat_interval_ms, c.group_consumer_max_heartbeat_interval_ms,
            c.group_consumer_max_size, c.group_consumer_migration_policy) == (
        45000, 45000, 60000, 5000, 5000, 15000, 2**31 - 1, "bidirectional")
    low = dict(group_consumer_min_session_timeout_ms=1000, group_consumer_min_heartbeat_interval_ms=100)
    for bad, message in (
            (dict(group_consumer_session_timeout_ms=30000), "session.timeout.ms must be greater than or equal to "
                                                            "group.consumer.min.session.timeout.ms"),
            (dict(group_consumer_session_timeout_ms=61000), "session.timeout.ms must be less than or equal to "
                                                            "group.consumer.max.session.timeout.ms"),
            (dict(group_consumer_heartbeat_interval_ms=4000), "heartbeat.interval.ms must be greater than or equal"),
            (dict(group_consumer_heartbeat_interval_ms=16000), "heartbeat.interval.ms must be less than or equal"),
            (dict(group_consumer_max_session_timeout_ms=40000), "max.session.timeout.ms must be greater"),
            (dict(low, group_consumer_heartbeat_interval_ms=5000, group_consumer_session_timeout_ms=5000),
             "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
            (dict(group_consumer_max_size=0), "at least 1"),
            (dict(group_consumer_migration_policy="sideways"), "case insensitive")):
        with pytest.raises(InvalidConfigError, match=message):
            BrokerConfig(**bad)
    assert BrokerConfig(group_consumer_migration_policy="DISABLED").group_consumer_migration_policy == "disabled"
    with pytest.raises(InvalidConfigError, match="assignors"):
        GroupConfig(consumer_assignors=("sticky",))
    kafka37 = ("org.apache.kafka.coordinator.group.assignor.UniformAssignor,"
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor")        # Kafka 3.7's default
    assert BrokerConfig(group_consumer_assignors=kafka37).group_consumer_assignors == ("uniform", "range")
    with pytest.raises(InvalidConfigError, match="must not be duplicated"):
        BrokerConfig(group_consumer_assignors="range,org.apache.kafka.coordinator.group.assignor.RangeAssignor")
    with pytest.raises(InvalidConfigError, match="heartbeat.interval.ms must be less than or equal"):
        GroupConfig(consumer_heartbeat_interval_ms=20000)
    g = GroupConfig.from_kafka({"group.consumer.assignors": "range,uniform", "group.consumer.max.size": "3",
                                "group.consumer.migration.policy": "Upgrade"})
    assert (g.consumer_assignors, g.consumer_max_size, g.consumer_migration_policy) == (("range", "uniform"), 3,
                                                                                       "upgrade")


def test_group_consumer_max_size_bounds_consumer_groups_only(env):
    """group.consumer.max.size: a new member past it is GROUP_MAX_SIZE_REACHED; members already in rejoin;
    group.max.size (classic groups) does not apply."""
    from seglog.errors import GroupMaxSizeReachedError

    coord, _, _ = env
    coord.config = GroupConfig(consumer_session_timeout_ms=10_000, consumer_min_session_timeout_ms=1000, max_size=1,
                               consumer_max_size=2, initial_rebalance_delay_ms=0)
    a, b = join(coord, "ma"), join(coord, "mb")
    with pytest.raises(GroupMaxSizeReachedError, match="maximum capacity of 2 members"):
        join(coord, "mc")
    assert join(coord, "ma").member_id == "ma"                 # a member already in may rejoin (epoch 0)
    coord.consumer_group_heartbeat("g", b.member_id, -1)
    assert join(coord, "mc").member_id == "mc"


def test_a_group_reformed_after_a_coordinator_takeover_waits_a_session_before_assigning(env):
    """The old coordinator's members may still consume until they find this one: a group of a taken-over
    offsets partition assigns nothing for one session timeout; other groups are not held."""
    coord, clock, _ = env
    coord.load_groups({}, [], taken_over=lambda gid: gid == "g")
    r = join(coord, "m1")
    assert r.assignment == {}
    other = coord.consumer_group_heartbeat("free", "x", 0, rebalance_timeout_ms=1, subscribed_topic_names=["a"])
    assert len(parts(other.assignment)) == 6
    clock.now += 9_000
    assert beat(coord, r, {}).assignment is None                  # still held
    clock.now += 1_000
    after = beat(coord, r, {})
    assert after.member_epoch > r.member_epoch and len(parts(after.assignment)) == 6
