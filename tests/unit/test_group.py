"""Group coordinator: Kafka's classic rebalance protocol driven through the same calls the broker and the
in-process consumer make. Deadlines use an injected clock and explicit tick() unless a test is about the
timer thread itself."""

import threading
import time
from concurrent.futures import CancelledError

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from seglog.assignors import Assignment, RangeAssignor, Subscription
from seglog.errors import (CoordinatorNotAvailableError, FencedInstanceIdError, GroupIdNotFoundError,
                           GroupSubscribedToTopicError,
                           IllegalGenerationError, InconsistentGroupProtocolError, InvalidConfigError,
                           InvalidGroupIdError, InvalidSessionTimeoutError, MemberIdRequiredError,
                           NonEmptyGroupError, NotCoordinatorError, OffsetMetadataTooLargeError,
                           RebalanceInProgressError, SeglogError, StorageError, UnknownMemberIdError,
                           UnknownTopicOrPartitionError, code_of)
from seglog.group import (GroupConfig, GroupCoordinator, GroupState, InMemoryOffsetStore, OffsetAndMetadata,
                          TopicPartition)
from seglog.offsets_format import decode_group_value, encode_group_value

SUB = Subscription(["t"]).encode()
PROTOCOLS = [("range", SUB)]
SESSION = 10_000


class FakeClock:
    """Monotonic milliseconds that only move when a test says so."""

    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now

    def advance(self, ms):
        self.now += ms


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def make(clock):
    """make(delay_ms=100, store=None, **config) -> a coordinator on the fake clock, without timer thread."""
    made = []

    def build(delay_ms=100, store=None, **config):
        config.setdefault("min_session_timeout_ms", 10)
        coord = GroupCoordinator(store, GroupConfig(initial_rebalance_delay_ms=delay_ms, **config),
                                 clock=clock, timer=False)
        made.append(coord)
        return coord

    yield build
    for coord in made:
        coord.close()


def join(coord, member_id="", group="g", protocols=PROTOCOLS, session=SESSION, **kw):
    return coord.join_group(group, member_id, "consumer", protocols, session, **kw)


def settle(coord, clock, futures, step=100, limit=100):
    """Advance the clock until every future is done; their results."""
    for _ in range(limit):
        if all(f.done() for f in futures):
            return [f.result(0) for f in futures]
        clock.advance(step)
        coord.tick()
    raise AssertionError("join never completed")


def assign_and_sync(coord, joined, partitions=6, group="g"):
    """The leader assigns with range, everybody syncs; {member_id: [partitions]}."""
    leader = next(r for r in joined if r.is_leader)
    subs = {m.member_id: Subscription.decode(m.metadata, m.group_instance_id) for m in leader.members}
    plan = {m: a.encode() for m, a in RangeAssignor().assign({"t": partitions}, subs).items()}
    followers = [coord.sync_group(group, r.generation_id, r.member_id) for r in joined if not r.is_leader]
    assert not any(f.done() for f in followers), "followers must wait for the leader's SyncGroup"
    mine = coord.sync_group(group, leader.generation_id, leader.member_id, plan)
    results = [mine.result(1)] + [f.result(1) for f in followers]
    members = [leader.member_id] + [r.member_id for r in joined if not r.is_leader]
    return {m: [tp.partition for tp in Assignment.decode(s.assignment).partitions] for m, s in zip(members, results)}


def form(coord, clock, n, group="g", **kw):
    joined = settle(coord, clock, [join(coord, group=group, client_id=f"c{i}", **kw) for i in range(n)])
    return joined, assign_and_sync(coord, joined, group=group)


def state(coord, group="g"):
    return coord.describe_groups([group])[0].state


# --- forming a group -----------------------------------------------------------------------------------------

def test_three_members_join_one_generation(make, clock):
    coord = make(delay_ms=3000)
    futures = [join(coord, client_id=f"c{i}") for i in range(3)]
    clock.advance(3000)
    coord.tick()
    assert not any(f.done() for f in futures), "members joined during the delay: it is extended once more"
    clock.advance(3000)
    coord.tick()
    joined = [f.result(0) for f in futures]
    assert {r.generation_id for r in joined} == {1}
    assert len({r.member_id for r in joined}) == 3 and all(r.member_id.startswith(f"c{i}-") for i, r in enumerate(joined))
    leaders = [r for r in joined if r.is_leader]
    assert len(leaders) == 1 and len(leaders[0].members) == 3
    assert all(r.members == () for r in joined if not r.is_leader)
    assert {r.protocol_name for r in joined} == {"range"} and {r.protocol_type for r in joined} == {"consumer"}
    assert state(coord) is GroupState.COMPLETING_REBALANCE
    assignment = assign_and_sync(coord, joined)
    assert sorted(p for parts in assignment.values() for p in parts) == list(range(6))
    assert sorted(len(parts) for parts in assignment.values()) == [2, 2, 2]
    assert state(coord) is GroupState.STABLE


def test_initial_delay_zero_completes_at_once(make):
    coord = make(delay_ms=0)
    result = join(coord).result(0)
    assert result.generation_id == 1 and result.is_leader


def test_follower_rejoin_in_stable_group_does_not_rebalance(make, clock):
    coord = make()
    joined, _ = form(coord, clock, 2)
    follower = next(r for r in joined if not r.is_leader)
    again = join(coord, follower.member_id).result(0)
    assert again.generation_id == 1 and state(coord) is GroupState.STABLE
    leader = next(r for r in joined if r.is_leader)
    pending = join(coord, leader.member_id)                     # a leader rejoin means "assign again"
    assert not pending.done() and state(coord) is GroupState.PREPARING_REBALANCE
    with pytest.raises(RebalanceInProgressError):
        coord.heartbeat("g", 1, follower.member_id)
    join(coord, follower.member_id)
    assert pending.result(0).generation_id == 2


def test_duplicate_join_during_completing_rebalance_gets_same_generation(make, clock):
    coord = make()
    joined = settle(coord, clock, [join(coord), join(coord)])
    leader = next(r for r in joined if r.is_leader)
    retry = join(coord, leader.member_id).result(0)
    assert retry.generation_id == 1 and len(retry.members) == 2


# --- leaving, expiring, rebalance timeout --------------------------------------------------------------------

def test_member_leaves_rebalance_next_generation(make, clock):
    coord = make()
    joined, _ = form(coord, clock, 3)
    gone, a, b = joined[2], joined[0], joined[1]
    assert coord.leave_group("g", [(gone.member_id, None)]) == [None]
    assert state(coord) is GroupState.PREPARING_REBALANCE
    for member in (a, b):
        with pytest.raises(RebalanceInProgressError) as err:
            coord.heartbeat("g", 1, member.member_id)
        assert err.value.code == 27
    with pytest.raises(UnknownMemberIdError) as err:
        coord.heartbeat("g", 1, gone.member_id)
    assert code_of(err.value) == 25
    fa = join(coord, a.member_id)
    assert not fa.done()
    fb = join(coord, b.member_id)
    rejoined = [fa.result(0), fb.result(0)]
    assert {r.generation_id for r in rejoined} == {2}
    assignment = assign_and_sync(coord, rejoined)
    assert sorted(len(p) for p in assignment.values()) == [3, 3]
    with pytest.raises(IllegalGenerationError) as err:
        coord.heartbeat("g", 1, a.member_id)
    assert err.value.code == 22
    coord.heartbeat("g", 2, a.member_id)


def test_missed_heartbeats_expire_member(make, clock):
    coord = make()
    joined, _ = form(coord, clock, 2)
    alive, silent = joined
    for _ in range(5):                                 # heartbeats keep a session going indefinitely
        clock.advance(SESSION // 2)
        coord.heartbeat("g", 1, alive.member_id)
        coord.heartbeat("g", 1, silent.member_id)
        coord.tick()
    assert state(coord) is GroupState.STABLE
    clock.advance(SESSION // 2)
    coord.heartbeat("g", 1, alive.member_id)
    coord.tick()
    assert state(coord) is GroupState.STABLE
    clock.advance(SESSION // 2 + 1)                    # silent's session ran out, alive's did not
    coord.tick()
    assert state(coord) is GroupState.PREPARING_REBALANCE
    with pytest.raises(UnknownMemberIdError):
        coord.heartbeat("g", 1, silent.member_id)
    with pytest.raises(RebalanceInProgressError):
        coord.heartbeat("g", 1, alive.member_id)
    result = join(coord, alive.member_id).result(0)
    assert result.generation_id == 2 and [m.member_id for m in result.members] == [alive.member_id]


def test_last_member_expiring_empties_the_group(make, clock):
    coord = make()
    form(coord, clock, 1)
    clock.advance(SESSION + 1)
    coord.tick()
    description = coord.describe_groups(["g"])[0]
    assert description.state is GroupState.EMPTY and description.members == ()
    assert coord.commit_offsets("g", {("t", 0): 3}) == {("t", 0): None}      # a simple commit is fine now


def test_rebalance_timeout_drops_members_that_do_not_rejoin(make, clock):
    coord = make()
    joined, _ = form(coord, clock, 2, rebalance_timeout_ms=20_000)
    stays, lags = joined
    newcomer = join(coord, rebalance_timeout_ms=20_000)
    first = join(coord, stays.member_id, rebalance_timeout_ms=20_000)
    for _ in range(3):                                  # lags heartbeats but never rejoins
        clock.advance(6_000)
        with pytest.raises(RebalanceInProgressError):
            coord.heartbeat("g", 1, lags.member_id)
        coord.tick()
    assert not first.done()
    clock.advance(2_001)
    coord.tick()
    results = [first.result(0), newcomer.result(0)]
    assert {r.generation_id for r in results} == {2}
    with pytest.raises(UnknownMemberIdError):
        coord.heartbeat("g", 2, lags.member_id)


def test_waiting_join_keeps_session_alive(make, clock):
    coord = make()
    joined, _ = form(coord, clock, 2, rebalance_timeout_ms=60_000)
    a, b = joined
    waiting = join(coord, a.member_id, rebalance_timeout_ms=60_000)    # leader rejoin: rebalance, b is slow
    clock.advance(3 * SESSION)
    coord.tick()                                                        # b's session expired, a is waiting
    result = waiting.result(0)
    assert result.generation_id == 2 and [m.member_id for m in result.members] == [a.member_id]


# --- SyncGroup -----------------------------------------------------------------------------------------------

def test_leader_that_never_syncs_is_removed_after_the_rebalance_timeout(make, clock):
    coord = make()
    joined = settle(coord, clock, [join(coord, rebalance_timeout_ms=20_000) for _ in range(3)])
    leader = next(r for r in joined if r.is_leader)
    followers = [r for r in joined if not r.is_leader]
    waiting = [coord.sync_group("g", 1, r.member_id) for r in followers]
    for _ in range(3):                                  # everybody heartbeats, the leader never assigns
        clock.advance(5_000)
        for r in joined:
            coord.heartbeat("g", 1, r.member_id)
        coord.tick()
    assert not any(f.done() for f in waiting)
    clock.advance(5_001)
    coord.tick()
    for f in waiting:
        with pytest.raises(RebalanceInProgressError):
            f.result(0)
    with pytest.raises(UnknownMemberIdError):
        coord.heartbeat("g", 1, leader.member_id)
    rejoined = [join(coord, r.member_id) for r in followers]
    assert {f.result(0).generation_id for f in rejoined} == {2}


def test_follower_that_never_syncs_is_removed_even_when_stable(make, clock):
    coord = make()
    joined = settle(coord, clock, [join(coord, rebalance_timeout_ms=20_000) for _ in range(2)])
    leader = next(r for r in joined if r.is_leader)
    follower = next(r for r in joined if not r.is_leader)
    coord.sync_group("g", 1, leader.member_id, {}).result(0)
    clock.advance(15_000)
    coord.heartbeat("g", 1, leader.member_id)
    coord.heartbeat("g", 1, follower.member_id)
    clock.advance(5_001)
    coord.tick()
    assert state(coord) is GroupState.PREPARING_REBALANCE
    with pytest.raises(UnknownMemberIdError):
        coord.heartbeat("g", 1, follower.member_id)

def test_sync_errors(make, clock):
    coord = make()
    joined = settle(coord, clock, [join(coord), join(coord)])
    leader = next(r for r in joined if r.is_leader)
    with pytest.raises(IllegalGenerationError):
        coord.sync_group("g", 7, leader.member_id).result(0)
    with pytest.raises(UnknownMemberIdError):
        coord.sync_group("g", 1, "nobody").result(0)
    with pytest.raises(UnknownMemberIdError):
        coord.sync_group("other", 1, "nobody").result(0)
    with pytest.raises(InconsistentGroupProtocolError):
        coord.sync_group("g", 1, leader.member_id, protocol_name="roundrobin").result(0)
    follower = next(r for r in joined if not r.is_leader)
    waiting = coord.sync_group("g", 1, follower.member_id)
    join(coord)                                         # a new member: rebalance before the leader synced
    with pytest.raises(RebalanceInProgressError):
        waiting.result(0)
    with pytest.raises(RebalanceInProgressError):
        coord.sync_group("g", 1, leader.member_id, {}).result(0)


def test_members_missing_from_the_plan_get_empty_assignment(make, clock):
    coord = make()
    joined = settle(coord, clock, [join(coord), join(coord)])
    leader = next(r for r in joined if r.is_leader)
    follower = next(r for r in joined if not r.is_leader)
    plan = {leader.member_id: Assignment([TopicPartition("t", 0)]).encode()}
    assert Assignment.decode(coord.sync_group("g", 1, leader.member_id, plan).result(0).assignment).partitions == [("t", 0)]
    assert coord.sync_group("g", 1, follower.member_id).result(0).assignment == b""


# --- MEMBER_ID_REQUIRED, session timeout bounds, protocols ---------------------------------------------------

def test_member_id_required_then_join(make, clock):
    coord = make(delay_ms=0)
    with pytest.raises(MemberIdRequiredError) as err:
        join(coord, client_id="app", require_known_member_id=True).result(0)
    assert err.value.code == 79 and err.value.member_id.startswith("app-")
    result = join(coord, err.value.member_id, require_known_member_id=True).result(0)
    assert result.member_id == err.value.member_id and result.generation_id == 1


def test_pending_member_holds_the_join_until_it_expires(make, clock):
    coord = make(delay_ms=0)
    a = join(coord).result(0)
    assign_and_sync(coord, [a])
    with pytest.raises(MemberIdRequiredError):
        join(coord, require_known_member_id=True).result(0)
    newcomer = join(coord)
    rejoin = join(coord, a.member_id)
    assert not rejoin.done(), "the member that got MEMBER_ID_REQUIRED may still come back"
    clock.advance(SESSION + 1)
    coord.tick()
    assert rejoin.result(0).generation_id == newcomer.result(0).generation_id == 2
    assert len(rejoin.result(0).members) == 2


def test_session_timeout_bounds(make):
    coord = make(min_session_timeout_ms=6000, max_session_timeout_ms=30_000)
    for bad in (5999, 30_001):
        with pytest.raises(InvalidSessionTimeoutError) as err:
            join(coord, session=bad).result(0)
        assert err.value.code == 26
    assert coord.list_groups() == []
    join(coord, session=6000)


def test_inconsistent_protocols(make, clock):
    coord = make()
    joined, _ = form(coord, clock, 1)
    with pytest.raises(InconsistentGroupProtocolError) as err:
        coord.join_group("g", "", "connect", PROTOCOLS, SESSION).result(0)
    assert err.value.code == 23
    with pytest.raises(InconsistentGroupProtocolError):
        join(coord, protocols=[("roundrobin", SUB)]).result(0)
    with pytest.raises(InconsistentGroupProtocolError):
        join(coord, group="fresh", protocols=[]).result(0)
    with pytest.raises(InvalidGroupIdError):
        join(coord, group="").result(0)


def test_protocol_selection_by_votes(make, clock):
    coord = make()
    both = [("range", SUB), ("roundrobin", SUB)]
    reverse = [("roundrobin", SUB), ("range", SUB)]
    joined = settle(coord, clock, [join(coord, protocols=p) for p in (both, both, reverse)])
    assert {r.protocol_name for r in joined} == {"range"}
    coord2 = make()
    joined = settle(coord2, clock, [join(coord2, protocols=p) for p in (both, reverse, [("roundrobin", SUB)])])
    assert {r.protocol_name for r in joined} == {"roundrobin"}            # the only common one


# --- static membership, LeaveGroup ---------------------------------------------------------------------------

def test_static_member_rejoin_keeps_generation_and_fences_old_id(make, clock):
    coord = make()
    joined = settle(coord, clock, [join(coord, group_instance_id="i-a"), join(coord)])
    plan = assign_and_sync(coord, joined)
    old = joined[0]
    assert old.member_id.startswith("i-a-")
    again = join(coord, group_instance_id="i-a").result(0)
    assert again.generation_id == 1 and again.member_id != old.member_id
    assert state(coord) is GroupState.STABLE
    with pytest.raises(FencedInstanceIdError) as err:
        coord.heartbeat("g", 1, old.member_id, group_instance_id="i-a")
    assert err.value.code == 82
    with pytest.raises(UnknownMemberIdError):
        coord.heartbeat("g", 1, old.member_id)
    synced = coord.sync_group("g", 1, again.member_id, group_instance_id="i-a").result(0)
    assert [tp.partition for tp in Assignment.decode(synced.assignment).partitions] == plan[old.member_id]
    # the answer names the generation's leader as it was: the new id never assigns to a Stable group
    assert again.leader_id == old.leader_id and not again.is_leader and again.members == ()
    coord.heartbeat("g", 1, joined[1].member_id)
    assert coord.leave_group("g", [("", "i-a")]) == [None]                # static members leave by instance id
    assert state(coord) is GroupState.PREPARING_REBALANCE


def test_static_member_replaced_twice_one_leader_per_generation_and_the_old_ids_fenced(make, clock):
    """A static member joins, rejoins and syncs; a second member with its instance id joins (a restart: it
    takes the old member id's place) and rejoins; and a third. Only one member is told it leads generation 1,
    each replaced member id gets FENCED_INSTANCE_ID (82) on its next request, the latest one keeps the
    assignment, and when it rejoins as the group's leader the next generation has one leader too."""
    coord = make()
    first = join(coord, group_instance_id="i-2")
    (a,) = settle(coord, clock, [first])
    assert a.is_leader and a.generation_id == 1
    again = join(coord, a.member_id, group_instance_id="i-2").result(0)     # CompletingRebalance: same answer
    assert (again.member_id, again.generation_id, again.leader_id) == (a.member_id, 1, a.member_id)
    plan = {a.member_id: Assignment([TopicPartition("t", 0), TopicPartition("t", 1)]).encode()}
    coord.sync_group("g", 1, a.member_id, plan, group_instance_id="i-2").result(0)
    answers = [a, again]
    previous = a.member_id
    for _ in range(2):
        b = join(coord, group_instance_id="i-2").result(0)                 # Stable: no rebalance
        answers.append(b)
        # answered with the leader the group had until then (the id it replaces), so it does not assign
        assert b.generation_id == 1 and b.member_id != previous and b.leader_id == previous and not b.is_leader
        assert state(coord) is GroupState.STABLE
        for call in (lambda: coord.heartbeat("g", 1, previous, group_instance_id="i-2"),
                     lambda: coord.sync_group("g", 1, previous, group_instance_id="i-2").result(0),
                     lambda: coord.commit_offsets("g", {("t", 0): 1}, 1, previous, group_instance_id="i-2"),
                     lambda: join(coord, previous, group_instance_id="i-2").result(0)):
            with pytest.raises(FencedInstanceIdError) as err:
                call()
            assert code_of(err.value) == 82
        [left] = coord.leave_group("g", [(previous, "i-2")])
        assert isinstance(left, FencedInstanceIdError)
        synced = coord.sync_group("g", 1, b.member_id, group_instance_id="i-2").result(0)
        assert synced.assignment == plan[a.member_id]
        previous = b.member_id
    assert [r.member_id for r in answers if r.is_leader] == [a.member_id] * 2     # one leader in generation 1
    d = coord.describe_groups(["g"])[0]
    assert [(m.member_id, m.group_instance_id) for m in d.members] == [(previous, "i-2")]
    assert coord.commit_offsets("g", {("t", 0): 5}, 1, previous, group_instance_id="i-2") == {("t", 0): None}
    rejoined = join(coord, previous, group_instance_id="i-2").result(0)     # the group's leader now: rebalance
    assert rejoined.generation_id == 2 and rejoined.is_leader
    assert [m.member_id for m in rejoined.members] == [previous]


def test_static_member_replacement_is_undone_when_storing_the_group_fails(make, clock):
    store = FailingStore()
    coord = make(store=store)
    (a,) = settle(coord, clock, [join(coord, group_instance_id="i-a")])
    coord.sync_group("g", 1, a.member_id, {a.member_id: b"plan"}, group_instance_id="i-a").result(0)
    store.fail = True
    with pytest.raises(CoordinatorNotAvailableError) as err:
        join(coord, group_instance_id="i-a").result(0)
    assert isinstance(err.value.__cause__, StorageError)
    store.fail = False
    coord.heartbeat("g", 1, a.member_id, group_instance_id="i-a")           # the old id is the member again
    assert coord.sync_group("g", 1, a.member_id, group_instance_id="i-a").result(0).assignment == b"plan"
    assert state(coord) is GroupState.STABLE


def test_leave_group_batch_errors(make, clock):
    coord = make()
    joined = settle(coord, clock, [join(coord, group_instance_id="i-a"), join(coord), join(coord)])
    results = coord.leave_group("g", [(joined[1].member_id, None), ("ghost", None), ("wrong-id", "i-a"),
                                      ("", "i-unknown")])
    assert results[0] is None
    assert isinstance(results[1], UnknownMemberIdError)
    assert isinstance(results[2], FencedInstanceIdError)
    assert isinstance(results[3], UnknownMemberIdError)
    assert [isinstance(e, UnknownMemberIdError) for e in coord.leave_group("nope", [("x", None)])] == [True]


def test_a_static_member_that_does_not_rejoin_stays_a_member_until_its_session_ends(make, clock):
    """Kafka's onCompleteJoin drops only dynamic members that did not rejoin: a static one (restarting, say)
    keeps its place in the next generation, and its session (restarted at the join) or the SyncGroup
    deadline (the rebalance timeout, here the first) removes it if it does not come back. The leader is one of the members that rejoined."""
    coord = make()
    session = 100_000
    (s, d) = settle(coord, clock, [join(coord, group_instance_id="i-s", session=session, rebalance_timeout_ms=60_000),
                                   join(coord)])
    assert s.is_leader
    assign_and_sync(coord, [s, d])
    late = join(coord, d.member_id, rebalance_timeout_ms=1000,             # d rejoins with a new subscription:
                protocols=[("range", Subscription(["t", "u"]).encode())])  # a rebalance; s does not rejoin
    clock.advance(30_000)                                                   # past d's rebalance timeout ...
    coord.tick()
    assert not late.done(), "the rebalance waits the longest rebalance timeout of its members"
    clock.advance(30_000)
    coord.tick()
    r = late.result(0)
    assert r.generation_id == 2 and r.is_leader, "the leader is a member that rejoined"
    assert {m.member_id for m in r.members} == {s.member_id, d.member_id}, "the static member is kept"
    assert coord.sync_group("g", 2, d.member_id, {d.member_id: b"all"}).result(0).assignment == b"all"
    for _ in range(60_000 // 5000 - 1):
        clock.advance(5000)
        coord.heartbeat("g", 2, d.member_id)
        coord.tick()
    assert {m.member_id for m in coord.describe_groups(["g"])[0].members} == {s.member_id, d.member_id}
    clock.advance(5000)
    coord.heartbeat("g", 2, d.member_id)
    coord.tick()                                              # s sent no SyncGroup within the rebalance timeout
    assert [m.member_id for m in coord.describe_groups(["g"])[0].members] == [d.member_id]
    assert state(coord) is GroupState.PREPARING_REBALANCE


def test_a_rebalance_with_only_static_members_that_did_not_rejoin_waits_for_their_sessions(make, clock):
    """Kafka: "could not complete rebalance because no members rejoined": no generation without a leader;
    the join waits another rebalance timeout while their sessions run out, and a newcomer completes it."""
    coord = make()
    s1, s2 = settle(coord, clock, [join(coord, group_instance_id=f"i-{i}", rebalance_timeout_ms=1000) for i in (1, 2)])
    assign_and_sync(coord, [s1, s2])
    gone = join(coord, s1.member_id, group_instance_id="i-1", rebalance_timeout_ms=1000)   # the leader rejoins
    assert state(coord) is GroupState.PREPARING_REBALANCE
    coord.abandon_join("g", gone)                                           # ... and its client goes away
    clock.advance(1000)
    coord.tick()                                                            # nobody rejoined: no generation
    assert state(coord) is GroupState.PREPARING_REBALANCE
    assert len(coord.describe_groups(["g"])[0].members) == 2
    (new,) = settle(coord, clock, [join(coord, group_instance_id="i-3", rebalance_timeout_ms=1000)])  # a newcomer
    d = coord.describe_groups(["g"])[0]
    assert new.is_leader and d.state is GroupState.COMPLETING_REBALANCE and len(d.members) == 3
    coord.sync_group("g", new.generation_id, new.member_id, {new.member_id: b"all"}, group_instance_id="i-3")
    clock.advance(1000)
    coord.tick()                                                  # the two sent no SyncGroup in time: removed
    assert [m.group_instance_id for m in coord.describe_groups(["g"])[0].members] == ["i-3"]


def test_a_dynamic_member_whose_client_went_away_mid_join_is_removed_at_once(make, clock):
    """A consumer killed (or interrupted) while its JoinGroup waits: the broker sees the connection close.
    Without a LeaveGroup the rebalance would wait for it (it counts as joined) and the next generation would
    hold it until its session ends; abandoning the join removes it, so the others go on at once."""
    coord = make()
    joined, _ = form(coord, clock, 2)
    a, b = joined
    killed = join(coord, a.member_id, rebalance_timeout_ms=300_000)         # a rejoins, then its client dies
    assert state(coord) is GroupState.PREPARING_REBALANCE
    coord.abandon_join("g", killed)
    assert [m.member_id for m in coord.describe_groups(["g"])[0].members] == [b.member_id]
    r = join(coord, b.member_id).result(0)                                  # b rejoins: done, no waiting
    assert r.generation_id == 2 and r.is_leader and [m.member_id for m in r.members] == [b.member_id]
    coord.abandon_join("g", killed)                                         # a second report changes nothing
    answered = join(coord, b.member_id)                                     # an answered join is no longer waiting
    coord.abandon_join("g", answered)
    assert answered.result(0).generation_id == 2
    assert [m.member_id for m in coord.describe_groups(["g"])[0].members] == [b.member_id]


def test_the_timer_thread_goes_on_while_a_store_write_waits_for_its_acks():
    """An offsets write of a cluster waits for replication (up to 30 s with a follower gone). The timer
    thread starts such writes (a group emptied by a session expiry) but must not wait for them: another
    group's session still expires on time."""
    release = threading.Event()

    class SlowStore(InMemoryOffsetStore):
        slow = False

        def start_store_group(self, group, metadata):
            self.store_group(group, metadata)
            return release.wait if self.slow else (lambda: None)

    store = SlowStore()
    coord = GroupCoordinator(store, GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10))
    try:
        for group, session in (("first", 300), ("second", 900)):
            r = coord.join_group(group, "", "consumer", PROTOCOLS, session).result(5)
            coord.sync_group(group, r.generation_id, r.member_id, {r.member_id: b"x"}).result(5)
        store.slow = True                # from here on every group write waits (for acks that do not come)
        deadline = time.monotonic() + 5
        while coord.describe_groups(["second"])[0].state is not GroupState.EMPTY and time.monotonic() < deadline:
            time.sleep(0.02)
        assert coord.describe_groups(["first"])[0].state is GroupState.EMPTY
        assert coord.describe_groups(["second"])[0].state is GroupState.EMPTY, \
            "the second group's session expiry waited for the first group's store write"
    finally:
        release.set()
        coord.close()


def test_leaving_member_waiting_in_join_is_answered(make, clock):
    coord = make()
    joined, _ = form(coord, clock, 2)
    waiting = join(coord, joined[0].member_id)
    coord.leave_group("g", [(joined[0].member_id, None)])
    with pytest.raises(UnknownMemberIdError):
        waiting.result(0)


# --- offsets -------------------------------------------------------------------------------------------------

def test_offset_commit_fetch_round_trip(make, clock):
    coord = make()
    joined, _ = form(coord, clock, 1)
    me = joined[0]
    errors = coord.commit_offsets("g", {("t", 0): OffsetAndMetadata(42, 3, "checkpoint"), ("t", 1): 7,
                                        ("t", 2): OffsetAndMetadata(1, metadata="x" * 5000)},
                                  me.generation_id, me.member_id)
    assert errors[("t", 0)] is None and errors[("t", 1)] is None
    assert isinstance(errors[("t", 2)], OffsetMetadataTooLargeError) and errors[("t", 2)].code == 12
    fetched = coord.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2), ("u", 0)])
    assert fetched[TopicPartition("t", 0)].offset == 42
    assert fetched[("t", 0)].leader_epoch == 3 and fetched[("t", 0)].metadata == "checkpoint"
    assert fetched[("t", 0)].commit_timestamp > 1_600_000_000_000
    assert fetched[("t", 1)] == OffsetAndMetadata(7, commit_timestamp=fetched[("t", 1)].commit_timestamp)
    assert fetched[("t", 2)] is None and fetched[("u", 0)] is None
    assert set(coord.fetch_offsets("g")) == {("t", 0), ("t", 1)}
    coord.commit_offsets("g", {("t", 0): 50}, me.generation_id, me.member_id)
    assert coord.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 50
    assert coord.fetch_offsets("unknown-group", [("t", 0)]) == {("t", 0): None}


def test_offset_commit_validation(make, clock):
    coord = make()
    joined = settle(coord, clock, [join(coord), join(coord)])
    a, b = joined
    with pytest.raises(RebalanceInProgressError):                  # CompletingRebalance: sync first
        coord.commit_offsets("g", {("t", 0): 1}, 1, a.member_id)
    assign_and_sync(coord, joined)
    with pytest.raises(IllegalGenerationError):
        coord.commit_offsets("g", {("t", 0): 1}, 0, a.member_id)
    with pytest.raises(UnknownMemberIdError):
        coord.commit_offsets("g", {("t", 0): 1}, 1, "stranger")
    with pytest.raises(UnknownMemberIdError):                      # no simple commits while the group has members
        coord.commit_offsets("g", {("t", 0): 1})
    with pytest.raises(IllegalGenerationError):
        coord.commit_offsets("never-seen", {("t", 0): 1}, 3, "m")
    assert coord.fetch_offsets("g", [("t", 0)]) == {("t", 0): None}
    coord.leave_group("g", [(b.member_id, None)])
    assert state(coord) is GroupState.PREPARING_REBALANCE         # still the current generation: accepted
    assert coord.commit_offsets("g", {("t", 0): 9}, 1, a.member_id) == {("t", 0): None}
    assert coord.commit_offsets("standalone", {("t", 0): 5}) == {("t", 0): None}
    assert coord.describe_groups(["standalone"])[0].state is GroupState.EMPTY


class TopicsStore(InMemoryOffsetStore):
    """A store that knows the topics, as the log-backed one asks its node: "t" with 3 partitions."""

    def partition_exists(self, topic, partition):
        return topic == "t" and 0 <= partition < 3


def test_offset_commit_of_unknown_partitions_commits_the_rest(make, clock):
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION per partition for partitions that do not exist and commits the
    others; it checks them before the group, so a group error (a stale generation) leaves their error alone,
    and a commit of nothing but unknown partitions never reaches the group. Offsets are stored as given,
    negative ones included (Kafka's coordinator takes -1; it is the clients that refuse them)."""
    coord = make(store=TopicsStore())
    joined, _ = form(coord, clock, 1)
    me = joined[0]
    errors = coord.commit_offsets("g", {("t", 0): 4, ("t", 3): 1, ("nope", 0): 1, ("t", 2): -1},
                                  me.generation_id, me.member_id)
    assert errors[("t", 0)] is None and errors[("t", 2)] is None
    for tp in (("t", 3), ("nope", 0)):
        assert isinstance(errors[tp], UnknownTopicOrPartitionError) and code_of(errors[tp]) == 3
    fetched = coord.fetch_offsets("g")
    assert {tp: om.offset for tp, om in fetched.items()} == {("t", 0): 4, ("t", 2): -1}
    with pytest.raises(IllegalGenerationError) as err:
        coord.commit_offsets("g", {("t", 1): 9, ("nope", 0): 1}, me.generation_id + 1, me.member_id)
    assert list(err.value.partition_errors) == [("nope", 0)]
    assert isinstance(err.value.partition_errors[("nope", 0)], UnknownTopicOrPartitionError)
    only_unknown = coord.commit_offsets("g", {("nope", 1): 1}, me.generation_id + 1, "stranger")
    assert isinstance(only_unknown[("nope", 1)], UnknownTopicOrPartitionError)
    assert coord.commit_offsets("fresh", {("nope", 1): 1})[("nope", 1)].code == 3
    assert coord.describe_groups(["fresh"])[0].state is GroupState.DEAD      # not even created
    assert coord.fetch_offsets("g", [("t", 1)]) == {("t", 1): None}


class _HeldReplication:
    """A node's replication_waiter that holds the acks of chosen offsets until released (or failed)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.held = {}                  # last offset -> None (held), True (released), or an exception to raise
        self.waiting = set()

    def hold(self, offset):
        with self.cond:
            self.held[offset] = None

    def release(self, offset, error=None):
        with self.cond:
            self.held[offset] = error or True
            self.cond.notify_all()

    def wait_waiting(self, offset):
        with self.cond:
            assert self.cond.wait_for(lambda: offset in self.waiting, 10), f"nobody waits for {offset}"

    def __call__(self, part, last):
        with self.cond:
            if last not in self.held:
                return
            self.waiting.add(last)
            self.cond.notify_all()
            assert self.cond.wait_for(lambda: self.held[last] is not None, 30)
            outcome = self.held[last]
        if outcome is not True:
            raise outcome


def _in_thread(fn, *args):
    """Run fn in a thread: (thread, result list: [value] or [exception])."""
    out = []

    def run():
        try:
            out.append(fn(*args))
        except BaseException as e:
            out.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


@pytest.fixture
def held_node(tmp_path):
    from seglog.node import OFFSETS_TOPIC, Node
    from seglog.offsets_store import LogOffsetStore, partition_for_group

    node = Node(tmp_path / "d", {"offsets.topic.num.partitions": 1})
    node.create_topic("t", 1)
    store = LogOffsetStore(node)
    node.replication_waiter = held = _HeldReplication()
    assert partition_for_group("a", 1) == partition_for_group("b", 1) == 0
    part = node.partition(OFFSETS_TOPIC, 0)
    yield node, store, held, part
    node.close()


def test_a_commit_waiting_for_replication_holds_no_lock(held_node):
    """The offsets store appends under its lock and waits for the acks outside it: while a commit waits, the
    store still answers reads, unloads its partition (a leadership change, which may be what the commit
    waits for), and the coordinator takes commits of other groups (the same offsets partition here)."""
    node, store, held, part = held_node
    coord = GroupCoordinator(store, GroupConfig(initial_rebalance_delay_ms=0), timer=False)
    try:
        first = part.log_end_offset
        held.hold(first)
        t, out = _in_thread(coord.commit_offsets, "a", {("t", 0): 1})
        held.wait_waiting(first)
        assert coord.commit_offsets("b", {("t", 0): 2}) == {("t", 0): None}    # appended after, acked at once
        assert coord.fetch_offsets("b", [("t", 0)])[("t", 0)].offset == 2
        assert coord.fetch_offsets("a", [("t", 0)]) == {("t", 0): None}       # not acknowledged yet
        assert t.is_alive()
        held.release(first)
        t.join(10)
        assert out == [{("t", 0): None}]
        assert coord.fetch_offsets("a", [("t", 0)])[("t", 0)].offset == 1

        second = part.log_end_offset                    # one record: its offset is the log end before it
        held.hold(second)
        t, out = _in_thread(coord.commit_offsets, "a", {("t", 0): 3})
        held.wait_waiting(second)
        unloaded = _in_thread(store.unload_partition, 0)
        unloaded[0].join(10)
        assert unloaded[1] == [{"a", "b"}], "unloading waited for the commit's acks"
        assert store.fetch("a") == {}
        held.release(second, NotCoordinatorError("leadership moved"))
        t.join(10)
        assert isinstance(out[0], NotCoordinatorError)
    finally:
        coord.close()


def test_commits_of_a_group_apply_in_append_order(held_node):
    """Acks may be seen out of order; the cache takes each group's commits in the order they were appended,
    and a commit returns only once it is in the cache (a failed one is left out, the next still counts)."""
    node, store, held, part = held_node
    tp = TopicPartition("t", 0)
    started = []
    for n in (1, 2, 3):                             # one record each: its last offset is the log end before it
        held.hold(part.log_end_offset)
        started.append((part.log_end_offset, store.start_commit("a", {tp: OffsetAndMetadata(n)})))
    (o1, w1), (o2, w2), (o3, w3) = started
    t3, out3 = _in_thread(w3)
    held.release(o3)
    t2, out2 = _in_thread(w2)
    held.release(o2)
    held.wait_waiting(o3)
    held.wait_waiting(o2)
    assert store.fetch("a") == {}                   # the first commit is still waiting for its acks
    assert t3.is_alive() and t2.is_alive(), "a later commit returned before an earlier one settled"
    t1, out1 = _in_thread(w1)
    held.wait_waiting(o1)
    held.release(o1, NotCoordinatorError("not replicated"))
    for t in (t1, t2, t3):
        t.join(10)
    assert isinstance(out1[0], NotCoordinatorError) and out2 == [None] and out3 == [None]
    assert store.fetch("a")[tp].offset == 3
    assert [r.offset for r in part.log.records()][-3:] == [o1, o2, o3]


def test_offset_commit_during_completing_rebalance_checks_generation_first(make, clock):
    """Kafka's order: a commit of the previous generation arriving after the join completed (the member has
    not read its JoinGroup answer yet) is ILLEGAL_GENERATION; REBALANCE_IN_PROGRESS is for the new one."""
    coord = make()
    (a, b), _ = form(coord, clock, 2)
    rejoined = settle(coord, clock, [join(coord, a.member_id), join(coord, b.member_id)])
    assert state(coord) is GroupState.COMPLETING_REBALANCE and rejoined[0].generation_id == 2
    with pytest.raises(IllegalGenerationError):
        coord.commit_offsets("g", {("t", 0): 1}, 1, a.member_id)
    with pytest.raises(RebalanceInProgressError):
        coord.commit_offsets("g", {("t", 0): 1}, 2, a.member_id)
    with pytest.raises(UnknownMemberIdError):
        coord.commit_offsets("g", {("t", 0): 1}, 2, "stranger")
    assign_and_sync(coord, rejoined)
    assert coord.commit_offsets("g", {("t", 0): 1}, 2, a.member_id) == {("t", 0): None}


def test_commit_counts_as_heartbeat(make, clock):
    coord = make()
    joined, _ = form(coord, clock, 1)
    me = joined[0]
    for _ in range(4):
        clock.advance(SESSION - 1000)
        coord.commit_offsets("g", {("t", 0): 1}, me.generation_id, me.member_id)
        coord.tick()
    assert state(coord) is GroupState.STABLE


# --- describe, list, delete ----------------------------------------------------------------------------------

def test_describe_and_list_groups(make, clock):
    coord = make()
    joined, plan = form(coord, clock, 2)
    coord.commit_offsets("simple", {("t", 0): 1})
    d = coord.describe_groups(["g"])[0]
    assert d.state is GroupState.STABLE and d.protocol_type == "consumer" and d.protocol == "range"
    assert {m.member_id for m in d.members} == {r.member_id for r in joined}
    assert all(m.metadata == SUB for m in d.members)
    assert {m.member_id: [tp.partition for tp in Assignment.decode(m.assignment).partitions] for m in d.members} == plan
    assert str(d.state) == "Stable"
    coord.leave_group("g", [(joined[1].member_id, None)])
    d = coord.describe_groups(["g"])[0]
    assert d.state is GroupState.PREPARING_REBALANCE and d.protocol == ""
    assert [(m.metadata, m.assignment) for m in d.members] == [(b"", b"")]
    assert coord.describe_groups(["missing"])[0].state is GroupState.DEAD
    listing = {g.group_id: (g.protocol_type, g.state) for g in coord.list_groups()}
    assert listing == {"g": ("consumer", GroupState.PREPARING_REBALANCE), "simple": ("", GroupState.EMPTY)}
    assert [g.group_id for g in coord.list_groups(["empty"])] == ["simple"]
    assert [g.group_id for g in coord.list_groups(["PreparingRebalance", "Stable"])] == ["g"]


def test_delete_groups(make, clock):
    coord = make()
    form(coord, clock, 1)
    coord.commit_offsets("idle", {("t", 0): 4})
    results = coord.delete_groups(["g", "idle", "nope"])
    assert isinstance(results["g"], NonEmptyGroupError) and results["g"].code == 68
    assert results["idle"] is None
    assert isinstance(results["nope"], GroupIdNotFoundError)
    assert coord.fetch_offsets("idle", [("t", 0)]) == {("t", 0): None}
    assert "idle" not in coord.store.groups()
    assert [g.group_id for g in coord.list_groups()] == ["g"]


def test_delete_offsets(make, clock):
    """OffsetDelete as Kafka's coordinator: an empty group loses the offsets named; a consumer group with
    members keeps those of subscribed topics (GROUP_SUBSCRIBED_TO_TOPIC) and loses the others; a group
    that does not exist, or has members of another protocol type, is refused whole."""
    coord = make()
    coord.commit_offsets("idle", {("t", 0): 4, ("t", 1): 5, ("u", 0): 6})
    assert coord.delete_offsets("idle", [("t", 0), ("u", 0), ("u", 7)]) == {("t", 0): None, ("u", 0): None,
                                                                              ("u", 7): None}
    assert {tp: om.offset for tp, om in coord.fetch_offsets("idle", None).items()} == {("t", 1): 5}

    joined, _ = form(coord, clock, 2)                      # members subscribe to "t" (SUB)
    coord.commit_offsets("g", {("t", 0): 1, ("u", 0): 2}, joined[0].generation_id, joined[0].member_id)
    results = coord.delete_offsets("g", [("t", 0), ("u", 0)])
    assert isinstance(results[("t", 0)], GroupSubscribedToTopicError) and results[("t", 0)].code == 86
    assert results[("u", 0)] is None
    assert set(coord.fetch_offsets("g", None)) == {("t", 0)}

    with pytest.raises(GroupIdNotFoundError):
        coord.delete_offsets("nope", [("t", 0)])
    with pytest.raises(InvalidGroupIdError):
        coord.delete_offsets("", [("t", 0)])
    settle(coord, clock, [coord.join_group("conn", "", "connect", [("x", b"")], SESSION)])
    with pytest.raises(NonEmptyGroupError):
        coord.delete_offsets("conn", [("t", 0)])


# --- persistence ---------------------------------------------------------------------------------------------

class FailingStore(InMemoryOffsetStore):
    def __init__(self):
        super().__init__()
        self.fail = False

    def store_group(self, group, metadata):
        if self.fail:
            raise StorageError("disk full")
        super().store_group(group, metadata)

    def commit(self, group, offsets):
        if self.fail:
            raise StorageError("disk full")
        super().commit(group, offsets)


def test_store_failure_fails_the_generation(make, clock):
    store = FailingStore()
    coord = make(store=store)
    joined = settle(coord, clock, [join(coord), join(coord)])
    store.fail = True
    follower = next(r for r in joined if not r.is_leader)
    waiting = coord.sync_group("g", 1, follower.member_id)
    leader = next(r for r in joined if r.is_leader)
    mine = coord.sync_group("g", 1, leader.member_id, {})
    for fut in (mine, waiting):
        with pytest.raises(CoordinatorNotAvailableError) as err:
            fut.result(0)
        assert isinstance(err.value.__cause__, StorageError)
    assert state(coord) is GroupState.PREPARING_REBALANCE
    store.fail = False
    rejoined = [join(coord, r.member_id) for r in joined]
    assert {f.result(0).generation_id for f in rejoined} == {2}
    store.fail = True
    with pytest.raises(StorageError):
        coord.commit_offsets("other", {("t", 0): 1})


def test_groups_and_offsets_survive_a_restart(make, clock):
    store = InMemoryOffsetStore()
    first = make(store=store)
    joined, plan = form(first, clock, 2)
    first.commit_offsets("g", {("t", 3): 33}, 1, joined[0].member_id)
    first.commit_offsets("simple", {("t", 0): 1})
    first.close()
    stored = store.load_groups()["g"]
    assert decode_group_value(encode_group_value(stored)) == stored        # what a log-backed store would write
    assert stored.generation == 1 and stored.protocol == "range" and len(stored.members) == 2

    second = make(store=store)
    d = second.describe_groups(["g"])[0]
    assert d.state is GroupState.STABLE and {m.member_id for m in d.members} == set(plan)
    second.heartbeat("g", 1, joined[0].member_id)
    assert second.fetch_offsets("g", [("t", 3)])[("t", 3)].offset == 33
    assert second.commit_offsets("g", {("t", 3): 34}, 1, joined[1].member_id) == {("t", 3): None}
    synced = second.sync_group("g", 1, joined[1].member_id).result(0)
    assert [tp.partition for tp in Assignment.decode(synced.assignment).partitions] == plan[joined[1].member_id]
    assert second.describe_groups(["simple"])[0].state is GroupState.EMPTY
    clock.advance(SESSION + 1)
    second.tick()
    assert state(second) is not GroupState.STABLE        # restored members must heartbeat like anyone else


# --- lifecycle, threads, callbacks ---------------------------------------------------------------------------

def test_close_fails_waiters_and_later_calls(make, clock):
    coord = make()
    waiting = join(coord)
    coord.close()
    with pytest.raises(CoordinatorNotAvailableError):
        waiting.result(0)
    with pytest.raises(CoordinatorNotAvailableError):
        coord.heartbeat("g", 0, "x")
    with pytest.raises(CoordinatorNotAvailableError):
        join(coord).result(0)
    coord.close()


def test_done_callback_may_call_back_into_the_coordinator(make):
    coord = make(delay_ms=0)
    synced = []

    def on_joined(fut):
        r = fut.result()
        synced.append(coord.sync_group("g", r.generation_id, r.member_id, {r.member_id: b"x"}).result(1))

    join(coord).add_done_callback(on_joined)
    assert [s.assignment for s in synced] == [b"x"]


def test_cancelled_waiter_is_skipped(make, clock):
    coord = make()
    cancelled = join(coord)
    other = join(coord)
    assert cancelled.cancel()
    settle(coord, clock, [other])
    with pytest.raises(CancelledError):
        cancelled.result(0)


def test_concurrent_joins_from_threads():
    coord = GroupCoordinator(config=GroupConfig(initial_rebalance_delay_ms=300))
    barrier = threading.Barrier(8)
    results = [None] * 8

    def member(i):
        barrier.wait()
        joined = coord.join_group("g", "", "consumer", PROTOCOLS, SESSION, client_id=f"t{i}").result(10)
        plan = None
        if joined.is_leader:
            subs = {m.member_id: Subscription.decode(m.metadata) for m in joined.members}
            plan = {m: a.encode() for m, a in RangeAssignor().assign({"t": 16}, subs).items()}
        synced = coord.sync_group("g", joined.generation_id, joined.member_id, plan).result(10)
        results[i] = (joined, Assignment.decode(synced.assignment))

    threads = [threading.Thread(target=member, args=(i,)) for i in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert all(r is not None for r in results)
        assert {j.generation_id for j, _ in results} == {1}
        assert len({j.member_id for j, _ in results}) == 8
        assert sum(j.is_leader for j, _ in results) == 1
        owned = sorted(tp.partition for _, a in results for tp in a.partitions)
        assert owned == list(range(16))
    finally:
        coord.close()


def test_consumer_loops_converge_from_threads():
    """Six consumers with no initial delay join one by one, each running the usual loop (join, sync,
    heartbeat, rejoin on REBALANCE_IN_PROGRESS): they settle on one generation with all six."""
    coord = GroupCoordinator(config=GroupConfig(initial_rebalance_delay_ms=0))
    stop = threading.Event()
    latest = {}

    def consumer(i):
        member_id = ""
        while not stop.is_set():
            joined = coord.join_group("g", member_id, "consumer", PROTOCOLS, SESSION, client_id=f"c{i}").result(10)
            member_id = joined.member_id
            plan = None
            if joined.is_leader:
                subs = {m.member_id: Subscription.decode(m.metadata) for m in joined.members}
                plan = {m: a.encode() for m, a in RangeAssignor().assign({"t": 12}, subs).items()}
            try:
                synced = coord.sync_group("g", joined.generation_id, member_id, plan).result(10)
            except RebalanceInProgressError:
                continue
            latest[i] = (joined.generation_id, member_id, Assignment.decode(synced.assignment))
            while not stop.is_set():
                try:
                    coord.heartbeat("g", joined.generation_id, member_id)
                except (RebalanceInProgressError, IllegalGenerationError):
                    break
                time.sleep(0.005)

    threads = [threading.Thread(target=consumer, args=(i,), daemon=True) for i in range(6)]
    try:
        for t in threads:
            t.start()
            time.sleep(0.01)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            d = coord.describe_groups(["g"])[0]
            generations = {g for g, _, _ in latest.values()}
            if d.state is GroupState.STABLE and len(d.members) == 6 and len(latest) == 6 and len(generations) == 1:
                break
            time.sleep(0.01)
        else:
            pytest.fail(f"no convergence: {coord.describe_groups(['g'])[0]} {latest}")
        owned = sorted(tp.partition for _, _, a in latest.values() for tp in a.partitions)
        assert owned == list(range(12))
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        coord.close()


def test_timer_thread_expires_sessions():
    coord = GroupCoordinator(config=GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10))
    try:
        joined = coord.join_group("g", "", "consumer", PROTOCOLS, 100).result(1)
        coord.sync_group("g", 1, joined.member_id, {}).result(1)
        deadline = time.monotonic() + 5
        while state(coord) is not GroupState.EMPTY and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state(coord) is GroupState.EMPTY
        assert coord.describe_groups(["g"])[0].members == ()
    finally:
        coord.close()


def test_group_config():
    cfg = GroupConfig.from_kafka({"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": 100})
    assert cfg.initial_rebalance_delay_ms == 0 and cfg.min_session_timeout_ms == 100
    assert cfg.max_session_timeout_ms == 1_800_000 and GroupConfig().initial_rebalance_delay_ms == 3000
    with pytest.raises(InvalidConfigError):
        GroupConfig.from_kafka({"group.unknown": 1})
    with pytest.raises(InvalidConfigError):
        GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=5)
    with pytest.raises(InvalidConfigError):
        GroupConfig(initial_rebalance_delay_ms=-1)


# --- random operation sequences ------------------------------------------------------------------------------

class CoordinatorMachine(RuleBasedStateMachine):
    """Random joins, rejoins, syncs, heartbeats, commits, leaves and clock moves against one group, with
    dynamic and static members (a static member joining again without a member id replaces its old id, as a
    restart does). Invariants: the generation never goes back, one leader per generation: one member id is
    told it leads, and every answer of the generation names the same leader (a static leader that restarted
    leads on under its new id), which is among them (a static member replacing itself in a Stable group is
    answered at once with the leader as it was, not told it leads, outside the leader's member list); the
    leader's member list covers everyone answered in the rebalance; one member per instance id; only seglog
    errors; and once time runs long enough with nobody acting every waiter has an answer."""

    def __init__(self):
        super().__init__()
        self.clock = FakeClock()
        self.coord = GroupCoordinator(config=GroupConfig(initial_rebalance_delay_ms=50, min_session_timeout_ms=10),
                                      clock=self.clock, timer=False)
        self.joins = []                 # every JoinGroup future
        self.syncs = []
        self.members = []               # member ids handed out
        self.replacements = set()       # static joins answered at once (Stable group: same generation, new id)
        self.generation = 0

    def _known(self, data):
        return data.draw(st.sampled_from(self.members)) if self.members else ""

    @staticmethod
    def _instance(member_id, data):
        """The instance id a static member's requests carry (member ids start with it), or None; sometimes
        left out, as a client that lost it would."""
        static = CoordinatorMachine._identity(member_id)
        return static if static != member_id and data.draw(st.booleans()) else None

    @staticmethod
    def _identity(member_id):
        return next((i for i in ("i-1", "i-2") if member_id.startswith(i + "-")), member_id)

    @rule(require=st.booleans(), static=st.sampled_from([None, "i-1", "i-2"]))
    def new_member(self, require, static):
        fut = join(self.coord, session=1000, rebalance_timeout_ms=3000, require_known_member_id=require,
                   group_instance_id=static)
        self.joins.append(fut)
        if fut.done() and isinstance(fut.exception(), MemberIdRequiredError):
            self.members.append(fut.exception().member_id)
        elif static and fut.done() and fut.exception() is None:
            self.replacements.add(fut)

    @rule(data=st.data())
    def rejoin(self, data):
        member_id = self._known(data)
        self.joins.append(join(self.coord, member_id, session=1000, rebalance_timeout_ms=3000,
                               group_instance_id=self._instance(member_id, data)))

    def _answered(self, data):
        done = [f.result() for f in self.joins if f.done() and f.exception() is None]
        return data.draw(st.sampled_from(done)) if done else None

    @rule(data=st.data())
    def sync(self, data):
        r = self._answered(data)
        if r is not None:
            plan = {m.member_id: b"a" for m in r.members} if r.is_leader else None
            self.syncs.append(self.coord.sync_group("g", r.generation_id, r.member_id, plan,
                                                    group_instance_id=self._instance(r.member_id, data)))

    @rule(data=st.data())
    def heartbeat(self, data):
        r = self._answered(data)
        if r is not None:
            try:
                self.coord.heartbeat("g", r.generation_id, r.member_id,
                                     group_instance_id=self._instance(r.member_id, data))
            except (RebalanceInProgressError, IllegalGenerationError, UnknownMemberIdError, FencedInstanceIdError):
                pass

    @rule(data=st.data())
    def commit(self, data):
        r = self._answered(data)
        if r is not None:
            try:
                assert self.coord.commit_offsets("g", {("t", 0): 1}, r.generation_id, r.member_id,
                                                 group_instance_id=self._instance(r.member_id, data)) \
                    == {("t", 0): None}
            except (RebalanceInProgressError, IllegalGenerationError, UnknownMemberIdError, FencedInstanceIdError):
                pass

    @rule(data=st.data())
    def leave(self, data):
        member_id = self._known(data)
        self.coord.leave_group("g", [(member_id, self._instance(member_id, data))])

    @rule(ms=st.sampled_from([1, 40, 400, 1200, 5000]))
    def advance(self, ms):
        self.clock.advance(ms)
        self.coord.tick()

    @invariant()
    def consistent(self):
        for f in self.joins:
            if f.done() and f.exception() is None and f.result().member_id not in self.members:
                self.members.append(f.result().member_id)
        for f in self.joins + self.syncs:
            if f.done():
                assert f.exception() is None or isinstance(f.exception(), SeglogError), f.exception()
        d = self.coord.describe_groups(["g"])[0]
        generation = max([f.result().generation_id for f in self.joins if f.done() and not f.exception()], default=0)
        assert generation >= self.generation
        self.generation = generation
        by_generation, told = {}, {}
        for f in self.joins:
            if f.done() and f.exception() is None:
                r = f.result()
                if r.is_leader:
                    told.setdefault(r.generation_id, set()).add(r.member_id)
                if f in self.replacements and not r.members:
                    assert not r.is_leader, "a replacing static member was told it leads"
                else:
                    by_generation.setdefault(r.generation_id, []).append(r)
        assert all(len(ids) == 1 for ids in told.values()), f"several members told they lead: {told}"
        for results in by_generation.values():
            # a static leader replaced by a restart goes on leading under its new id: followers answered
            # after that name the new id, so leaders are told apart by instance id where they have one
            leaders = {self._identity(r.leader_id) for r in results}
            assert len(leaders) == 1, f"two leaders in generation {results[0].generation_id}: {leaders}"
            assert leaders <= {self._identity(r.member_id) for r in results}
            listed = {m.member_id for r in results if r.is_leader for m in r.members}
            assert not listed or {r.member_id for r in results} <= listed
        instances = [m.group_instance_id for m in d.members if m.group_instance_id is not None]
        assert len(instances) == len(set(instances))
        if d.state is GroupState.STABLE:
            assert d.members

    def teardown(self):
        """Members stay alive (heartbeats) but stop acting: timeouts alone must answer every waiter."""
        for _ in range(20):
            for f in self.joins:
                if f.done() and f.exception() is None:
                    try:
                        self.coord.heartbeat("g", f.result().generation_id, f.result().member_id)
                    except SeglogError:
                        pass
            self.clock.advance(500)
            self.coord.tick()
        pending = [f for f in self.joins + self.syncs if not f.done()]
        self.coord.close()
        assert not pending, "a JoinGroup/SyncGroup waited forever"


TestCoordinatorMachine = CoordinatorMachine.TestCase
TestCoordinatorMachine.settings = settings(max_examples=150, stateful_step_count=30, deadline=None,
                                           derandomize=True)     # the same sequences on every run (CI)
