"""A cluster member's group coordinator follows the leadership of the __consumer_offsets partitions one by
one, as Kafka's GroupMetadataManager does (onElection / onResignation): gaining a partition loads its groups
from the log, losing it forgets them, and the groups of every other partition are not touched - a group in
the middle of a rebalance on another partition goes on with its generation.

The node is driven as the replica manager drives it (``Node._leadership_changed``), without a network."""

from __future__ import annotations

import uuid

import pytest

from seglog.errors import NotCoordinatorError
from seglog.group import GroupState
from seglog.node import OFFSETS_TOPIC, Node
from seglog.offsets_store import partition_for_group

PROTOCOLS = [("range", b"")]
SESSION = 30_000


def group_on(p: int, prefix: str, partitions: int = 3) -> str:
    """A group id Kafka places on offsets partition `p`."""
    return next(g for g in (f"{prefix}-{i}" for i in range(1000)) if partition_for_group(g, partitions) == p)


def form(coord, group: str, n: int = 1):
    """n members join and sync: (member ids, generation)."""
    joins = [coord.join_group(group, "", "consumer", PROTOCOLS, SESSION) for _ in range(n)]
    results = [f.result(5) for f in joins]
    leader = next(r for r in results if r.is_leader)
    syncs = [coord.sync_group(group, r.generation_id, r.member_id, {m: b"a" for m in (x.member_id for x in results)}
                              if r.is_leader else None) for r in results]
    for s in syncs:
        s.result(5)
    return [r.member_id for r in results], leader.generation_id


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path / "d", {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 10})
    n.cluster_managed = True
    n.apply_topic(OFFSETS_TOPIC, uuid.uuid4(), 3, {}, {0, 1, 2})
    n.apply_topic("t", uuid.uuid4(), 1, {}, {0})        # OffsetCommit refuses partitions the cluster lacks
    yield n
    n.close()


def lead(node: Node, p: int, leader: bool) -> None:
    node._leadership_changed(node.partition(OFFSETS_TOPIC, p), leader)


def test_moving_one_offsets_partition_leaves_the_groups_of_the_others_alone(node):
    for p in range(3):
        lead(node, p, True)
    moving, stable, busy = group_on(0, "moving"), group_on(1, "stable"), group_on(2, "busy")
    coord = node.group_coordinator
    (m,), gen_moving = form(coord, moving)
    assert coord.commit_offsets(moving, {("t", 0): 5}, gen_moving, m) == {("t", 0): None}
    (s,), gen_stable = form(coord, stable)
    (b1,), gen_busy = form(coord, busy)
    pending = coord.join_group(busy, "", "consumer", PROTOCOLS, SESSION)    # waits for b1 to rejoin
    assert not pending.done()

    lead(node, 0, False)                          # partition 0's leadership moves to another broker

    coord = node.group_coordinator
    assert coord.describe_groups([moving])[0].state is GroupState.DEAD, "a group this broker no longer leads"
    assert coord.fetch_offsets(moving, [("t", 0)]) == {("t", 0): None}
    coord.heartbeat(stable, gen_stable, s)        # same generation, same member: no rebalance
    assert coord.describe_groups([stable])[0].state is GroupState.STABLE
    assert not pending.done(), "a JoinGroup waiting on another partition's group must not be failed"
    rejoin = coord.join_group(busy, b1, "consumer", PROTOCOLS, SESSION)
    assert {rejoin.result(5).generation_id, pending.result(5).generation_id} == {gen_busy + 1}

    lead(node, 0, True)                           # ... and back: its groups are read from the log again
    coord = node.group_coordinator
    assert coord.describe_groups([moving])[0].state is GroupState.STABLE
    coord.heartbeat(moving, gen_moving, m)
    assert coord.fetch_offsets(moving, [("t", 0)])[("t", 0)].offset == 5
    coord.heartbeat(stable, gen_stable, s)


def test_a_waiting_join_of_a_group_that_moves_away_gets_not_coordinator(node):
    lead(node, 1, True)
    group = group_on(1, "leaving")
    coord = node.group_coordinator
    (a,), _ = form(coord, group)
    waiting = coord.join_group(group, "", "consumer", PROTOCOLS, SESSION)
    lead(node, 1, False)
    with pytest.raises(NotCoordinatorError):
        waiting.result(5)


def test_after_a_restart_only_the_groups_of_led_partitions_are_loaded(node, tmp_path):
    lead(node, 0, True)
    lead(node, 1, True)
    here, elsewhere = group_on(0, "here"), group_on(1, "elsewhere")
    form(node.group_coordinator, here)
    form(node.group_coordinator, elsewhere)
    topic_id = node.topic(OFFSETS_TOPIC).topic_id
    node.close()

    again = Node(tmp_path / "d", {"group.initial.rebalance.delay.ms": 0})
    try:
        again.cluster_managed = True
        again.apply_topic(OFFSETS_TOPIC, topic_id, 3, {}, {0, 1, 2})
        lead(again, 0, True)                      # partition 1 is only followed now
        coord = again.group_coordinator
        # a group of a followed partition must not be held here: its members heartbeat the real coordinator, so
        # their sessions would expire here and this broker would write to its follower replica
        assert coord.describe_groups([here])[0].state is GroupState.STABLE
        assert coord.describe_groups([elsewhere])[0].state is GroupState.DEAD
        assert [g.group_id for g in coord.list_groups()] == [here]
        lead(again, 1, True)
        assert coord.describe_groups([elsewhere])[0].state is GroupState.STABLE
    finally:
        again.close()
