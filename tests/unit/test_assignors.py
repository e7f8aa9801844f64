"""ConsumerProtocol codec (round trips, kafka-python in both directions) and the assignors range,
roundrobin and cooperative-sticky (known examples, hypothesis properties, stickiness, speed)."""

import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KafkaAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KafkaSubscription
from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberAssignment_v0 as KafkaAssignmentV0
from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberMetadata_v0 as KafkaMetadataV0

from seglog.assignors import (ASSIGNORS, Assignment, CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor,
                              Subscription, assignor_for)
from seglog.errors import InvalidArgumentError, InvalidRequestError
from seglog.offsets_format import TopicPartition as TP


def parts(assignment):
    return [(tp.topic, tp.partition) for tp in assignment.partitions]


def counts(result):
    return {m: len(a.partitions) for m, a in result.items()}


# --- ConsumerProtocol ----------------------------------------------------------------------------------------

FULL = Subscription(["orders", "payments"], b"\x01\x02", [TP("orders", 0), TP("orders", 2), TP("payments", 1)], 7, "rack-1")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip(version):
    decoded = Subscription.decode(FULL.encode(version))
    assert decoded.topics == FULL.topics and decoded.user_data == FULL.user_data
    assert decoded.owned_partitions == (FULL.owned_partitions if version >= 1 else [])
    assert decoded.generation_id == (7 if version >= 2 else -1)
    assert decoded.rack_id == ("rack-1" if version >= 3 else None)


def test_subscription_v3_bytes():
    expected = (struct.pack(">hi", 3, 2) + b"\x00\x06orders" + b"\x00\x08payments" + struct.pack(">i", 2) + b"\x01\x02"
                + struct.pack(">i", 2) + b"\x00\x06orders" + struct.pack(">iii", 2, 0, 2)
                + b"\x00\x08payments" + struct.pack(">ii", 1, 1) + struct.pack(">i", 7) + b"\x00\x06rack-1")
    assert FULL.encode() == expected


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_read_by_kafka_python(version):
    theirs = KafkaSubscription.decode(FULL.encode(version))
    assert theirs.topics == FULL.topics and theirs.user_data == FULL.user_data
    if version >= 1:
        assert [(tp.topic, tp.partitions) for tp in theirs.owned_partitions] == [("orders", [0, 2]), ("payments", [1])]
    if version >= 2:
        assert theirs.generation_id == 7
    if version >= 3:
        assert theirs.rack_id == "rack-1"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_written_by_kafka_python(version):
    theirs = KafkaSubscription(version=version, topics=["a", "b"], user_data=None,
                               owned_partitions=[KafkaSubscription.TopicPartition(topic="a", partitions=[3, 1])],
                               generation_id=12, rack_id="r2")
    ours = Subscription.decode(theirs.encode())
    assert ours.topics == ["a", "b"] and ours.user_data is None
    assert ours.owned_partitions == ([TP("a", 3), TP("a", 1)] if version >= 1 else [])
    assert ours.generation_id == (12 if version >= 2 else -1)
    assert ours.rack_id == ("r2" if version >= 3 else None)
    assert ours.encode(version) == theirs.encode()


def test_subscription_v0_struct_of_old_kafka_python():
    old = KafkaMetadataV0(0, ["x", "y"], b"data")
    assert Subscription.decode(old.encode()) == Subscription(["x", "y"], b"data")
    assert KafkaMetadataV0.decode(Subscription(["x"], b"").encode(0)) == KafkaMetadataV0(0, ["x"], b"")


def test_assignment_both_directions():
    ours = Assignment([TP("a", 0), TP("a", 5), TP("b", 2)], b"ud")
    for version in range(4):
        theirs = KafkaAssignment.decode(ours.encode(version))
        assert [(tp.topic, tp.partitions) for tp in theirs.assigned_partitions] == [("a", [0, 5]), ("b", [2])]
        assert theirs.user_data == b"ud"
    theirs = KafkaAssignment(version=1, assigned_partitions=[("t", [2, 0]), ("u", [])], user_data=None)
    assert Assignment.decode(theirs.encode()) == Assignment([TP("t", 2), TP("t", 0)], None)
    old = KafkaAssignmentV0(0, [("t", [1])], b"")
    assert Assignment.decode(old.encode()) == Assignment([TP("t", 1)], b"")
    assert KafkaAssignmentV0.decode(Assignment([TP("t", 1)]).encode(0)).assigned_partitions == [("t", [1])]


def test_newer_versions_are_read_as_v3_and_trailing_bytes_ignored():
    data = bytearray(FULL.encode(3))
    data[0:2] = struct.pack(">h", 9)
    assert Subscription.decode(bytes(data) + b"future-field") == FULL
    assert Assignment.decode(struct.pack(">hi", 4, 0) + struct.pack(">i", -1) + b"more") == Assignment()


def test_empty_assignment_bytes_mean_no_partitions():
    assert Assignment.decode(b"") == Assignment()


@pytest.mark.parametrize("data", [b"\x00", struct.pack(">hi", 0, 1), struct.pack(">hi", 0, 1) + b"\x00\x09ab",
                                  struct.pack(">h", -3), struct.pack(">hi", 0, 2**30)])
def test_malformed_subscriptions_are_rejected(data):
    with pytest.raises(InvalidRequestError):
        Subscription.decode(data)


def test_bad_versions_are_refused():
    with pytest.raises(InvalidArgumentError):
        FULL.encode(4)
    with pytest.raises(InvalidArgumentError):
        Assignment().encode(-1)


topic_names = st.text(min_size=1, max_size=8)
tps = st.lists(st.tuples(topic_names, st.integers(0, 2**31 - 1)).map(lambda t: TP(*t)), max_size=10)


@given(st.lists(topic_names, max_size=5), st.none() | st.binary(max_size=10), tps,
       st.integers(-1, 2**31 - 1), st.none() | topic_names)
def test_subscription_round_trip_property(topics, user_data, owned, generation, rack):
    owned = sorted(owned)        # grouped by topic, as on the wire
    sub = Subscription(topics, user_data, owned, generation, rack)
    assert Subscription.decode(sub.encode()) == sub


@given(tps, st.none() | st.binary(max_size=10))
def test_assignment_round_trip_property(assigned, user_data):
    assignment = Assignment(sorted(assigned), user_data)
    assert Assignment.decode(assignment.encode()) == assignment
    assert Assignment.decode(assignment.encode(0)) == assignment


# --- range / roundrobin --------------------------------------------------------------------------------------

def test_range_six_partitions_four_members():
    subs = {m: Subscription(["t"]) for m in ["c3", "c1", "c2", "c0"]}
    result = RangeAssignor().assign({"t": 6}, subs)
    assert {m: parts(a) for m, a in result.items()} == {
        "c0": [("t", 0), ("t", 1)], "c1": [("t", 2), ("t", 3)], "c2": [("t", 4)], "c3": [("t", 5)]}


def test_range_per_topic_and_only_subscribed_topics():
    subs = {"a": Subscription(["t1", "t2"]), "b": Subscription(["t1"]), "c": Subscription(["t2", "missing"])}
    result = RangeAssignor().assign({"t1": 3, "t2": 3, "other": 4}, subs)
    assert parts(result["a"]) == [("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)]
    assert parts(result["b"]) == [("t1", 2)]
    assert parts(result["c"]) == [("t2", 2)]


def test_range_extra_members_stay_idle():
    subs = {f"m{i}": Subscription(["t"]) for i in range(5)}
    assert counts(RangeAssignor().assign({"t": 3}, subs)) == {"m0": 1, "m1": 1, "m2": 1, "m3": 0, "m4": 0}


def test_range_orders_static_members_first():
    subs = {"a-dynamic": Subscription(["t"]), "z-static": Subscription(["t"], group_instance_id="i0")}
    result = RangeAssignor().assign({"t": 3}, subs)
    assert parts(result["z-static"]) == [("t", 0), ("t", 1)]


def test_roundrobin_known_examples():
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    result = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert parts(result["C0"]) == [("t0", 0), ("t0", 2), ("t1", 1)]
    assert parts(result["C1"]) == [("t0", 1), ("t1", 0), ("t1", 2)]
    subs = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]), "C2": Subscription(["t0", "t1", "t2"])}
    result = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert parts(result["C0"]) == [("t0", 0)]
    assert parts(result["C1"]) == [("t1", 0)]
    assert parts(result["C2"]) == [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]


def test_assignor_registry():
    assert set(ASSIGNORS) == {"range", "roundrobin", "cooperative-sticky"}
    assert isinstance(assignor_for("cooperative-sticky"), CooperativeStickyAssignor)
    assert assignor_for("cooperative-sticky").rebalance_protocol == "cooperative"
    assert assignor_for("range").rebalance_protocol == "eager"
    with pytest.raises(InvalidArgumentError):
        assignor_for("sticky-ish")


# --- properties ----------------------------------------------------------------------------------------------

@st.composite
def groups(draw, identical=False):
    topics = draw(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 12), min_size=1, max_size=4))
    members = draw(st.lists(st.text("mnopq", min_size=1, max_size=3), min_size=1, max_size=8, unique=True))
    names = sorted(topics) + ["unknown-topic"]
    if identical:
        chosen = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        subs = {m: Subscription(list(chosen)) for m in members}
    else:
        subs = {m: Subscription(draw(st.lists(st.sampled_from(names), min_size=1, unique=True))) for m in members}
    return topics, subs


def check_valid(topics, subs, result, exactly_once=True):
    assert set(result) == set(subs)
    seen = {}
    for member, assignment in result.items():
        for topic, partition in assignment.partitions:
            assert topic in subs[member].topics, f"{member} got {topic} it did not subscribe to"
            assert 0 <= partition < topics[topic]
            assert (topic, partition) not in seen, f"{topic}-{partition} assigned twice"
            seen[(topic, partition)] = member
    if exactly_once:
        wanted = {(t, p) for sub in subs.values() for t in sub.topics if t in topics for p in range(topics[t])}
        assert set(seen) == wanted


@settings(max_examples=300, deadline=None)
@given(groups())
def test_every_assignor_gives_each_partition_exactly_once(group):
    topics, subs = group
    for assignor in (RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()):
        check_valid(topics, subs, assignor.assign(topics, subs))


@settings(max_examples=300, deadline=None)
@given(groups(identical=True))
def test_identical_subscriptions_balance_within_one(group):
    topics, subs = group
    for assignor in (RoundRobinAssignor(), CooperativeStickyAssignor()):
        sizes = counts(assignor.assign(topics, subs)).values()
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(groups())
def test_cooperative_sticky_leaves_no_improving_move(group):
    topics, subs = group
    result = CooperativeStickyAssignor().assign(topics, subs)
    size = counts(result)
    for member, assignment in result.items():
        for topic, _ in assignment.partitions:
            for other, sub in subs.items():
                if topic in sub.topics:
                    assert size[member] - size[other] <= 1


def owned_from(result, generation, subs):
    return {m: Subscription(subs[m].topics, owned_partitions=list(result[m].partitions), generation_id=generation)
            for m in result}


@settings(max_examples=200, deadline=None)
@given(groups(identical=True), st.data())
def test_cooperative_sticky_membership_change(group, data):
    """Members come and go: the first rebalance only revokes (no partition changes hands directly), every
    survivor keeps its fair share of what it owned, and the follow-up rebalance completes a balanced,
    stable assignment."""
    topics, subs = group
    assignor = CooperativeStickyAssignor()
    before = assignor.assign(topics, subs)
    leaving = data.draw(st.sets(st.sampled_from(sorted(subs)), max_size=len(subs) - 1))
    joining = data.draw(st.sets(st.text("xyz", min_size=1, max_size=3), max_size=3))
    topic_list = next(iter(subs.values())).topics
    owned = {m: s for m, s in owned_from(before, 1, subs).items() if m not in leaving}
    owned.update({m: Subscription(list(topic_list)) for m in joining})

    first = assignor.assign(topics, owned)
    check_valid(topics, owned, first, exactly_once=False)
    total = sum(topics[t] for t in topic_list if t in topics)
    fair = total // len(owned)
    for member, assignment in first.items():
        kept = set(assignment.partitions) & set(owned[member].owned_partitions)
        for tp in assignment.partitions:        # a partition never goes straight from one owner to another
            assert not any(tp in s.owned_partitions for m, s in owned.items() if m != member)
        assert len(kept) >= min(len(owned[member].owned_partitions), fair)

    second = assignor.assign(topics, owned_from(first, 2, owned))
    check_valid(topics, owned, second)
    sizes = counts(second).values()
    assert max(sizes) - min(sizes) <= 1
    third = assignor.assign(topics, owned_from(second, 3, owned))
    assert {m: parts(a) for m, a in third.items()} == {m: parts(a) for m, a in second.items()}


def test_cooperative_sticky_revokes_before_moving():
    assignor = CooperativeStickyAssignor()
    subs = {"a": Subscription(["t"], owned_partitions=[TP("t", p) for p in range(4)], generation_id=1),
            "b": Subscription(["t"])}
    first = assignor.assign({"t": 4}, subs)
    assert len(first["a"].partitions) == 2 and first["b"].partitions == []       # two revoked, none moved yet
    subs["a"] = Subscription(["t"], owned_partitions=first["a"].partitions, generation_id=2)
    second = assignor.assign({"t": 4}, subs)
    assert second["a"].partitions == first["a"].partitions
    assert sorted(second["b"].partitions) == sorted(set(TP("t", p) for p in range(4)) - set(first["a"].partitions))


def test_cooperative_sticky_claims():
    assignor = CooperativeStickyAssignor()
    # the same generation claimed twice: neither keeps it until both revoked
    subs = {"a": Subscription(["t"], owned_partitions=[TP("t", 0)], generation_id=3),
            "b": Subscription(["t"], owned_partitions=[TP("t", 0)], generation_id=3)}
    result = assignor.assign({"t": 2}, subs)
    assert TP("t", 0) not in result["a"].partitions + result["b"].partitions
    # only the newest generation's claims count: b fell out of the group, its claim is ignored
    subs = {"a": Subscription(["t"], owned_partitions=[TP("t", 0), TP("t", 1)], generation_id=4),
            "b": Subscription(["t"], owned_partitions=[TP("t", 0)], generation_id=2),
            "c": Subscription(["t"])}
    result = assignor.assign({"t": 3}, subs)
    assert result["a"].partitions == [TP("t", 0)]               # a keeps one, t1 must be revoked before moving
    assert sorted(result["b"].partitions + result["c"].partitions) == [TP("t", 2)]   # unowned: placed at once
    # a v0/v1 subscription carries its generation in 4 bytes of user data (Kafka's cooperative-sticky)
    subs = {"a": Subscription(["t"], (5).to_bytes(4, "big"), [TP("t", 0)]),
            "b": Subscription(["t"], (4).to_bytes(4, "big"), [TP("t", 0), TP("t", 1)])}
    result = assignor.assign({"t": 2}, subs)
    assert result["a"].partitions == [TP("t", 0)]
    assert result["b"].partitions == [TP("t", 1)]


def test_cooperative_sticky_drops_claims_on_unsubscribed_topics():
    subs = {"a": Subscription(["u"], owned_partitions=[TP("t", 0), TP("u", 0)], generation_id=1),
            "b": Subscription(["t"])}
    result = CooperativeStickyAssignor().assign({"t": 1, "u": 1}, subs)
    assert parts(result["a"]) == [("u", 0)]
    assert parts(result["b"]) == [("t", 0)]


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()],
                         ids=lambda a: a.name)
def test_thousand_partitions_hundred_members_is_fast(assignor):
    topics = {f"topic-{i}": 100 for i in range(10)}
    subs = {f"member-{i:03d}": Subscription(sorted(topics)) for i in range(100)}
    start = time.perf_counter()
    result = assignor.assign(topics, subs)
    owned = {m: Subscription(sorted(topics), owned_partitions=list(a.partitions), generation_id=1)
             for m, a in result.items() if m != "member-000"}
    owned.update({f"new-{i}": Subscription(sorted(topics)) for i in range(7)})
    assignor.assign(topics, owned)
    elapsed = time.perf_counter() - start
    # a guard against a quadratic walk (seconds per call), not a speed goal: ~0.1 s measured on an idle core
    assert elapsed < 3.0, f"{assignor.name}: {elapsed:.3f} s"
    check_valid(topics, subs, result)
