"""Online migration of a live group between the classic and the consumer protocols (group_consumer_classic): the
upgrade when a consumer-protocol member joins a classic group, classic members inside a consumer group
(JoinGroup / SyncGroup / Heartbeat / LeaveGroup / OffsetCommit, revoking before getting partitions), the
downgrade when the last consumer-protocol member leaves, group.consumer.migration.policy, and the converted
groups surviving a coordinator restart."""

import uuid

import pytest

from seglog.assignors import Assignment, Subscription
from seglog.errors import (FencedInstanceIdError, GroupIdNotFoundError, IllegalGenerationError,
                           InconsistentGroupProtocolError, MemberIdRequiredError, RebalanceInProgressError,
                           UnknownMemberIdError)
from seglog.group import GroupConfig, GroupCoordinator, InMemoryOffsetStore, TopicPartition

TOPICS = {"t": 10}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def coordinator(store=None, clock=None, **config):
    config.setdefault("initial_rebalance_delay_ms", 0)
    coord = GroupCoordinator(store, GroupConfig(**config), clock=clock or Clock(), timer=False,
                             topics=lambda: dict(TOPICS),
                             topic_ids=lambda: {t: uuid.uuid5(uuid.NAMESPACE_DNS, t) for t in TOPICS})
    coord.store.partition_exists = lambda topic, p: True
    return coord


@pytest.fixture
def env():
    clock = Clock()
    coord = coordinator(clock=clock)
    yield coord, clock
    coord.close()


def parts(assignment):
    return {(t, p) for t, ps in (assignment or {}).items() for p in ps}


def tps(pairs):
    return [TopicPartition(t, p) for t, p in sorted(pairs)]


def classic_join(coord, mid, owned=(), protocol="roundrobin", instance=None, protocol_type="consumer",
                 require_known=False):
    meta = Subscription(["t"], owned_partitions=tps(owned)).encode()
    return coord.join_group("g", mid, protocol_type, [(protocol, meta)], 10_000, 30_000, group_instance_id=instance,
                            require_known_member_id=require_known).result(5)


def classic_sync(coord, r, assignments=None):
    """The member's partitions from a SyncGroup."""
    got = coord.sync_group("g", r.generation_id, r.member_id, assignments).result(5)
    return {(tp.topic, tp.partition) for tp in Assignment.decode(got.assignment).partitions}


def classic_group(coord):
    """A classic group with one member holding all 10 partitions (it leads and assigns them to itself)."""
    r = classic_join(coord, "")
    held = classic_sync(coord, r, {r.member_id: Assignment(tps(("t", p) for p in range(10))).encode()})
    assert len(held) == 10
    return r


def consumer_join(coord, mid="m"):
    return coord.consumer_group_heartbeat("g", mid, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"])


def beat(coord, r, owned):
    return coord.consumer_group_heartbeat("g", r.member_id, r.member_epoch,
                                          owned={"t": frozenset(p for _, p in owned)} if owned else {})


def group_type(coord):
    [listing] = coord.list_groups()
    return listing.group_type


def no_partition_twice(coord):
    [d] = coord.describe_consumer_groups(["g"])
    seen = [tp for m in d.members for tp in parts(m.assignment)]
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize("cooperative", [False, True])
def test_a_classic_member_revokes_then_the_consumer_member_gets_the_partitions(env, cooperative):
    coord, _ = env
    c = classic_group(coord)
    m = consumer_join(coord)
    with pytest.raises(RebalanceInProgressError):
        coord.heartbeat("g", c.generation_id, c.member_id)
    held = {("t", p) for p in range(10)}
    r = classic_join(coord, c.member_id, owned=held if cooperative else ())
    if cooperative:                          # still at its epoch: it must give 5 up first
        assert r.generation_id == c.generation_id and r.leader_id == "" and not r.members
        held = classic_sync(coord, r)
        assert len(held) == 5
        with pytest.raises(RebalanceInProgressError):
            coord.heartbeat("g", r.generation_id, c.member_id)
        r = classic_join(coord, c.member_id, owned=held)
    assert r.generation_id == m.member_epoch
    held = classic_sync(coord, r)
    assert len(held) == 5
    coord.heartbeat("g", r.generation_id, c.member_id)
    m = beat(coord, m, ())
    assert parts(m.assignment) == {("t", p) for p in range(10)} - held
    no_partition_twice(coord)
    assert coord.commit_offsets("g", {("t", 0): 3}, r.generation_id, c.member_id, epoch_version=False) == {
        ("t", 0): None}
    with pytest.raises(IllegalGenerationError):
        coord.commit_offsets("g", {("t", 0): 4}, r.generation_id - 1, c.member_id)
    with pytest.raises(IllegalGenerationError):
        coord.sync_group("g", r.generation_id - 1, c.member_id).result(5)
    with pytest.raises(UnknownMemberIdError):                 # a consumer-protocol member cannot use SyncGroup
        coord.sync_group("g", m.member_epoch, "m").result(5)


def test_a_classic_member_joins_a_consumer_group_and_waits_for_released_partitions(env):
    coord, _ = env
    m = consumer_join(coord)
    m = beat(coord, m, ())
    assert len(parts(m.assignment)) == 10
    with pytest.raises(MemberIdRequiredError) as e:
        classic_join(coord, "", require_known=True)
    r = classic_join(coord, e.value.member_id)
    assert r.generation_id == m.member_epoch + 1 and classic_sync(coord, r) == set()
    assert group_type(coord) == "consumer"
    coord.heartbeat("g", r.generation_id, r.member_id)        # its partitions are still the other member's
    m = beat(coord, m, parts(m.assignment))                  # told to revoke 5
    kept = parts(m.assignment)
    assert len(kept) == 5
    beat(coord, m, kept)                                     # they are released
    with pytest.raises(RebalanceInProgressError):             # free now: rejoin to get them
        coord.heartbeat("g", r.generation_id, r.member_id)
    r = classic_join(coord, r.member_id)
    assert classic_sync(coord, r) == {("t", p) for p in range(10)} - kept
    no_partition_twice(coord)
    with pytest.raises(InconsistentGroupProtocolError):       # no protocol in common with the classic member
        classic_join(coord, "", protocol="range")
    with pytest.raises(InconsistentGroupProtocolError):
        classic_join(coord, "", protocol_type="connect")


def test_the_last_consumer_member_leaving_downgrades_the_group_which_rebalances(env):
    coord, _ = env
    c = classic_group(coord)
    m = consumer_join(coord)
    r = classic_join(coord, c.member_id)
    classic_sync(coord, r)
    m = beat(coord, m, ())
    coord.consumer_group_heartbeat("g", "m", -1)
    assert group_type(coord) == "classic"
    assert coord.describe_groups(["g"])[0].state.value == "PreparingRebalance"
    assert isinstance(coord.describe_consumer_groups(["g"])[0], GroupIdNotFoundError)
    with pytest.raises(RebalanceInProgressError):
        coord.heartbeat("g", r.generation_id, c.member_id)
    r2 = classic_join(coord, c.member_id)
    assert r2.is_leader and r2.generation_id == r.generation_id + 1      # the group epoch, then a rebalance
    held = classic_sync(coord, r2, {c.member_id: Assignment(tps(("t", p) for p in range(10))).encode()})
    assert len(held) == 10 and coord.describe_groups(["g"])[0].state.value == "Stable"


def test_a_classic_member_leaving_keeps_the_consumer_group_and_its_session_expiry_downgrades(env):
    coord, clock = env
    c = classic_group(coord)
    m = consumer_join(coord)
    assert coord.leave_group("g", [(c.member_id, None)]) == [None]
    assert group_type(coord) == "consumer"
    m = beat(coord, m, ())
    assert len(parts(m.assignment)) == 10
    [err] = coord.leave_group("g", [("m", None)])                 # a consumer-protocol member: not by LeaveGroup
    assert isinstance(err, UnknownMemberIdError)
    r = classic_join(coord, "")
    classic_sync(coord, r)
    for _ in range(5):                                             # the classic member keeps its session
        clock.now += 9_000
        try:
            coord.heartbeat("g", r.generation_id, r.member_id)
        except RebalanceInProgressError:
            pass
        coord.tick()
    assert group_type(coord) == "classic"                          # the consumer member expired (45 s)
    assert [m.member_id for m in coord.describe_groups(["g"])[0].members] == [r.member_id]


def test_a_classic_member_that_does_not_rejoin_is_removed(env):
    coord, clock = env
    c = classic_group(coord)
    consumer_join(coord)
    with pytest.raises(RebalanceInProgressError):
        coord.heartbeat("g", c.generation_id, c.member_id)
    for _ in range(4):                                             # heartbeats, never rejoins: 30 s rebalance
        clock.now += 9_000
        with pytest.raises((RebalanceInProgressError, UnknownMemberIdError)):
            coord.heartbeat("g", c.generation_id, c.member_id)
        coord.tick()
    [d] = coord.describe_consumer_groups(["g"])
    assert [x.member_id for x in d.members] == ["m"]


def test_static_classic_members(env):
    coord, _ = env
    m = consumer_join(coord)
    beat(coord, m, ())
    r = classic_join(coord, "", instance="i1")
    with pytest.raises(FencedInstanceIdError):
        classic_join(coord, "other", instance="i1")
    r2 = classic_join(coord, "", instance="i1")                   # a restart takes the instance id over
    assert r2.member_id != r.member_id and r2.generation_id == r.generation_id
    with pytest.raises(UnknownMemberIdError):
        coord.heartbeat("g", r.generation_id, r.member_id)
    assert coord.leave_group("g", [("", "i1")]) == [None]


def test_upgrade_only_policy_keeps_a_consumer_group_of_classic_members():
    coord = coordinator(consumer_migration_policy="upgrade")
    c = classic_group(coord)
    consumer_join(coord)
    coord.consumer_group_heartbeat("g", "m", -1)
    assert group_type(coord) == "consumer"
    [d] = coord.describe_consumer_groups(["g"])
    assert [x.member_id for x in d.members] == [c.member_id]
    coord.close()


@pytest.fixture
def node(tmp_path):
    from seglog.node import Node
    with Node(tmp_path / "data", {"offsets.topic.num.partitions": "1"}) as n:
        yield n


@pytest.mark.parametrize("kind", ["memory", "__consumer_offsets"])
def test_converted_groups_survive_a_coordinator_restart(kind, request):
    """Both conversions stored: a restarted coordinator (over __consumer_offsets: one that replays the log)
    loads the group as it was, classic members with their protocols."""
    from seglog.offsets_store import LogOffsetStore
    if kind == "memory":
        memory = InMemoryOffsetStore()
        stores = lambda: memory  # noqa: E731
    else:
        node = request.getfixturevalue("node")
        stores = lambda: LogOffsetStore(node)  # noqa: E731
    clock = Clock()
    coord = coordinator(stores(), clock)
    c = classic_group(coord)
    consumer_join(coord)
    coord.close()
    coord = coordinator(stores(), clock)
    assert group_type(coord) == "consumer"
    [d] = coord.describe_consumer_groups(["g"])
    members = {x.member_id: x for x in d.members}
    assert members[c.member_id].classic and len(parts(members[c.member_id].assignment)) == 10
    r = classic_join(coord, c.member_id)                           # its protocols came back: same answer
    assert r.protocol_name == "roundrobin" and len(classic_sync(coord, r)) == 5
    coord.consumer_group_heartbeat("g", "m", -1)
    coord.close()
    coord = coordinator(stores(), clock)
    assert group_type(coord) == "classic"
    assert [m.member_id for m in coord.describe_groups(["g"])[0].members] == [c.member_id]
    coord.close()


def test_reconcile_skips_the_revocation_a_member_already_made(env):
    coord, _ = env
    m1 = beat(coord, consumer_join(coord, "m1"), ())
    assert len(parts(m1.assignment)) == 10
    m2 = consumer_join(coord, "m2")
    m1 = beat(coord, m1, ())                 # it reports owning nothing: no revocation step, the new epoch at once
    assert m1.member_epoch == m2.member_epoch and len(parts(m1.assignment)) == 5


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_without_rebalance(env):
    coord, _ = env
    m = coord.consumer_group_heartbeat("g", "m", 0, instance_id="i1", rebalance_timeout_ms=30_000,
                                       subscribed_topic_names=["t"])
    m = beat(coord, m, ())
    r = classic_join(coord, "")
    m = beat(coord, m, parts(m.assignment))
    kept = parts(m.assignment)
    beat(coord, m, kept)
    classic_sync(coord, classic_join(coord, r.member_id))
    coord.consumer_group_heartbeat("g", "m", -2, instance_id="i1")          # a static member away for a while
    assert group_type(coord) == "consumer"
    s = classic_join(coord, "", instance="i1")                             # back, with the classic protocol
    assert group_type(coord) == "classic"
    assert coord.describe_groups(["g"])[0].state.value == "Stable" and not s.members
    assert classic_sync(coord, s) == kept                                  # its predecessor's partitions


# --- conversions are stored as one batch ---------------------------------------------------------------------

def offsets_batches(node):
    """The record keys and values of __consumer_offsets partition 0, batch by batch."""
    from seglog import _engine
    log = node.partition("__consumer_offsets", 0).log
    view = log.read(log.start_offset, 1 << 24)
    records = list(_engine.decode_records(view, log.start_offset))
    return [[(r.key, r.value) for r in records if b.base_offset <= r.offset <= b.last_offset]
            for b in _engine.batches(view, False)]


def record_type(key):
    return int.from_bytes(key[:2], "big")


def classic_member_assignment(coord):
    """member id -> its partitions, of the classic group 'g' as loaded."""
    [d] = coord.describe_groups(["g"])
    return {m.member_id: {(tp.topic, tp.partition) for tp in Assignment.decode(m.assignment).partitions}
            for m in d.members}


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


def open_node(data_dir):
    from seglog.node import Node
    return Node(data_dir, {"offsets.topic.num.partitions": "1"})


def reload(data_dir):
    """A coordinator started on the node's __consumer_offsets as a restarted one would be."""
    from seglog.offsets_store import LogOffsetStore
    node = open_node(data_dir)
    return node, coordinator(LogOffsetStore(node), Clock())


def test_the_upgrade_is_one_batch_the_classic_tombstone_first(data_dir):
    """As Kafka's atomic append: the classic group's tombstone (key type 2), then the consumer group's
    records (3-8), in one batch."""
    from seglog.offsets_store import LogOffsetStore
    with open_node(data_dir) as node:
        coord = coordinator(LogOffsetStore(node), Clock())
        classic_group(coord)
        before = len(offsets_batches(node))
        consumer_join(coord)
        [batch] = offsets_batches(node)[before:]
        assert batch[0] == (batch[0][0], None) and record_type(batch[0][0]) == 2
        assert {record_type(k) for k, _ in batch[1:]} == {3, 4, 5, 6, 7, 8}
        coord.close()


def test_the_downgrade_is_one_batch_the_classic_generation_last(data_dir):
    from seglog.offsets_store import LogOffsetStore
    with open_node(data_dir) as node:
        coord = coordinator(LogOffsetStore(node), Clock())
        c = classic_group(coord)
        consumer_join(coord)
        classic_sync(coord, classic_join(coord, c.member_id))
        before = len(offsets_batches(node))
        coord.consumer_group_heartbeat("g", "m", -1)
        assert group_type(coord) == "classic"
        [batch] = offsets_batches(node)[before:]
        assert all(v is None and 3 <= record_type(k) <= 8 for k, v in batch[:-1])
        assert record_type(batch[-1][0]) == 2 and batch[-1][1] is not None
        coord.close()


def test_an_upgrade_whose_append_fails_reloads_as_the_classic_group_with_its_members(data_dir):
    """The conversion's one append fails: a coordinator reloading __consumer_offsets finds the classic group
    with its member and its assignment, not an empty group."""
    from seglog.errors import SeglogError
    from seglog.faults import FaultPlan
    from seglog.offsets_store import LogOffsetStore
    node = open_node(data_dir)
    coord = coordinator(LogOffsetStore(node), Clock())
    c = classic_group(coord)
    plan = FaultPlan().fail("pwrite", path="*__consumer_offsets-0/*.log", times=None)
    plan.fail("write", path="*__consumer_offsets-0/*.log", times=None)
    with plan, pytest.raises(SeglogError):
        consumer_join(coord)
    assert plan.fired
    coord.close()
    node.close()
    node, coord = reload(data_dir)
    try:
        assert group_type(coord) == "classic"
        assert classic_member_assignment(coord) == {c.member_id: {("t", p) for p in range(10)}}
    finally:
        coord.close()
        node.close()


@pytest.mark.parametrize("cut", [1, "half", "all"])
def test_an_upgrade_cut_by_a_crash_reloads_whole_or_not_at_all(data_dir, cut):
    """A crash (no clean shutdown) leaves the conversion's batch torn, cut ``cut`` bytes short: the
    reloaded coordinator has the classic group with its member and assignment."""
    import os
    from seglog.offsets_store import LogOffsetStore
    node = open_node(data_dir)
    coord = coordinator(LogOffsetStore(node), Clock())
    c = classic_group(coord)
    [seg] = [f for f in os.scandir(data_dir / "__consumer_offsets-0") if f.name.endswith(".log")]
    size = os.path.getsize(seg.path)
    consumer_join(coord)
    grown = os.path.getsize(seg.path) - size
    coord.close()
    node.close()
    (data_dir / "__consumer_offsets-0" / ".clean-shutdown").unlink(missing_ok=True)
    os.truncate(seg.path, size + grown - {1: 1, "half": grown // 2, "all": grown - 1}[cut])
    node, coord = reload(data_dir)
    try:
        assert group_type(coord) == "classic"
        assert classic_member_assignment(coord) == {c.member_id: {("t", p) for p in range(10)}}
    finally:
        coord.close()
        node.close()


def test_a_downgrade_whose_append_fails_reloads_as_the_consumer_group(data_dir):
    from seglog.faults import FaultPlan
    from seglog.offsets_store import LogOffsetStore
    node = open_node(data_dir)
    coord = coordinator(LogOffsetStore(node), Clock())
    c = classic_group(coord)
    consumer_join(coord)
    held = classic_sync(coord, classic_join(coord, c.member_id))
    plan = FaultPlan().fail("pwrite", path="*__consumer_offsets-0/*.log", times=None)
    plan.fail("write", path="*__consumer_offsets-0/*.log", times=None)
    with plan:
        coord.consumer_group_heartbeat("g", "m", -1)
    assert plan.fired
    coord.close()
    node.close()
    node, coord = reload(data_dir)
    try:
        assert group_type(coord) == "consumer"
        [d] = coord.describe_consumer_groups(["g"])
        members = {x.member_id: x for x in d.members}
        assert set(members) == {c.member_id, "m"} and parts(members[c.member_id].assignment) == held
    finally:
        coord.close()
        node.close()


# --- static members across the two protocols (Kafka's getOrMaybeSubscribeStaticConsumerGroupMember) ---------

def static_consumer(coord, mid, instance):
    r = coord.consumer_group_heartbeat("g", mid, 0, instance_id=instance, rebalance_timeout_ms=30_000,
                                       subscribed_topic_names=["t"])
    return beat(coord, r, ())


def test_a_classic_static_member_takes_the_instance_id_of_a_live_consumer_member(env):
    """As Kafka: a classic JoinGroup without a member id replaces the holder of its instance id whatever protocol
    the holder uses and whether or not it left (UNRELEASED_INSTANCE_ID is only for two consumer-protocol
    members); the new member has the old one's partitions, the old one is fenced."""
    coord, _ = env
    s = static_consumer(coord, "s", "i1")
    m = static_consumer(coord, "m", "i2")
    s = beat(coord, s, parts(s.assignment))
    held = parts(s.assignment)
    assert held and s.member_epoch >= 0                         # live: it has not left
    r = classic_join(coord, "", instance="i1")
    assert r.member_id != "s" and classic_sync(coord, r) == held
    assert group_type(coord) == "consumer"                      # "m" still uses the consumer protocol
    with pytest.raises(FencedInstanceIdError):
        coord.consumer_group_heartbeat("g", "s", s.member_epoch, instance_id="i1")
    with pytest.raises(UnknownMemberIdError):
        coord.consumer_group_heartbeat("g", "s", s.member_epoch)
    [d] = coord.describe_consumer_groups(["g"])
    assert {x.member_id: x.classic for x in d.members} == {r.member_id: True, "m": False}
    beat(coord, m, parts(m.assignment))
    no_partition_twice(coord)


def test_a_classic_static_member_takes_the_instance_id_of_a_consumer_member_that_left_for_a_while(env):
    coord, _ = env
    s = static_consumer(coord, "s", "i1")
    static_consumer(coord, "m", "i2")
    s = beat(coord, s, parts(s.assignment))                    # it revokes half
    held = parts(s.assignment)
    s = beat(coord, s, held)
    assert len(held) == 5 and s.member_epoch == 2
    coord.consumer_group_heartbeat("g", "s", -2, instance_id="i1")
    r = classic_join(coord, "", instance="i1")
    assert r.generation_id == s.member_epoch and classic_sync(coord, r) == held
    coord.heartbeat("g", r.generation_id, r.member_id, group_instance_id="i1")


def test_a_consumer_static_member_takes_the_instance_id_of_a_classic_member_not_of_a_live_consumer_one(env):
    """ConsumerGroupHeartbeat epoch 0: the holder of the instance id is replaced if it uses the classic
    protocol or left with epoch -2; a live consumer-protocol holder makes it UNRELEASED_INSTANCE_ID."""
    from seglog.errors import UnreleasedInstanceIdError
    coord, _ = env
    static_consumer(coord, "m", "i2")
    r = classic_join(coord, "", instance="i1")
    held = classic_sync(coord, classic_join(coord, r.member_id, instance="i1"))
    s = coord.consumer_group_heartbeat("g", "s", 0, instance_id="i1", rebalance_timeout_ms=30_000,
                                       subscribed_topic_names=["t"])
    assert parts(s.assignment) == held
    with pytest.raises(FencedInstanceIdError):
        coord.heartbeat("g", r.generation_id, r.member_id, group_instance_id="i1")
    with pytest.raises(UnreleasedInstanceIdError):
        coord.consumer_group_heartbeat("g", "s2", 0, instance_id="i1", rebalance_timeout_ms=30_000,
                                       subscribed_topic_names=["t"])
    coord.consumer_group_heartbeat("g", "s", -2, instance_id="i1")
    s2 = coord.consumer_group_heartbeat("g", "s2", 0, instance_id="i1", rebalance_timeout_ms=30_000,
                                        subscribed_topic_names=["t"])
    assert parts(s2.assignment) == held


def test_fenced_and_unknown_instance_ids_of_classic_members(env):
    """Kafka's order of checks: an instance id nobody holds is UNKNOWN_MEMBER_ID, one another member holds
    FENCED_INSTANCE_ID (JoinGroup with a member id, SyncGroup, Heartbeat, LeaveGroup)."""
    coord, _ = env
    static_consumer(coord, "m", "i2")
    r = classic_join(coord, "", instance="i1")
    with pytest.raises(FencedInstanceIdError):
        classic_join(coord, "other", instance="i1")
    with pytest.raises(FencedInstanceIdError):
        classic_join(coord, r.member_id, instance="i2")            # a consumer member's instance id
    with pytest.raises(UnknownMemberIdError):
        classic_join(coord, r.member_id, instance="i9")
    with pytest.raises(FencedInstanceIdError):
        coord.sync_group("g", r.generation_id, "other", group_instance_id="i1").result(5)
    with pytest.raises(UnknownMemberIdError):
        coord.sync_group("g", r.generation_id, r.member_id, group_instance_id="i9").result(5)
    with pytest.raises(FencedInstanceIdError):
        coord.heartbeat("g", r.generation_id, "other", group_instance_id="i1")
    with pytest.raises(UnknownMemberIdError):
        coord.heartbeat("g", r.generation_id, r.member_id, group_instance_id="i9")
    errors = coord.leave_group("g", [("other", "i1"), ("", "i9"), ("", "i2")])
    assert [type(e) for e in errors] == [FencedInstanceIdError, UnknownMemberIdError, UnknownMemberIdError]
    coord.heartbeat("g", r.generation_id, r.member_id, group_instance_id="i1")
    assert coord.leave_group("g", [("", "i1")]) == [None]


def test_a_full_classic_group_is_not_converted():
    """A consumer-protocol member joining a classic group as large as group.consumer.max.size: the heartbeat is
    GROUP_MAX_SIZE_REACHED and the classic group stays as it was (Kafka rolls the conversion back)."""
    from seglog.errors import GroupMaxSizeReachedError
    coord = coordinator(consumer_max_size=1)
    c = classic_group(coord)
    with pytest.raises(GroupMaxSizeReachedError):
        consumer_join(coord)
    assert group_type(coord) == "classic"
    coord.heartbeat("g", c.generation_id, c.member_id)
    assert classic_member_assignment(coord) == {c.member_id: {("t", p) for p in range(10)}}
    coord.close()
