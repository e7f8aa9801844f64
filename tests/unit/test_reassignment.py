"""Partition reassignment (KIP-455, ZooKeeper-era semantics): the replica sets a reassignment goes through, the
controller's checks, start, completion and cancellation against the in-memory metadata store, a leader that
keeps removed replicas out of the ISR, and what a lone broker answers."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from seglog.cluster.controller import Controller, check_reassignment
from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.cluster.metastore import BrokerInfo, PartitionState, ReplicaAssignment, TopicAssignment
from seglog.config import BrokerConfig
from seglog.errors import (InvalidReplicaAssignmentError, NoReassignmentInProgressError, NotLeaderOrFollowerError,
                           UnknownTopicOrPartitionError)
from seglog.protocol import ApiKey
from seglog.replication.leader import LeaderState
from test_broker_versions import broker, call  # noqa: F401  (the lone-broker fixture)

INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION = 39, 85, 3


def test_reassign_to_puts_the_target_first_and_remembers_the_origin():
    ra = ReplicaAssignment((1, 2)).reassign_to([2, 3])
    assert (ra.replicas, ra.adding, ra.removing) == ((2, 3, 1), (3,), (1,))
    assert (ra.origin, ra.target, ra.reassigning) == ((2, 1), (2, 3), True)   # in the full set's order, as Kafka
    again = ra.reassign_to([2, 4])                        # a new target replaces the pending one: 3 drops out
    assert (again.replicas, again.adding, again.removing) == ((2, 4, 1), (4,), (1,))
    back = ra.reassign_to(ra.origin)                      # cancelling
    assert back == ReplicaAssignment((2, 1)) and not back.reassigning
    assert ReplicaAssignment((1, 2)).reassign_to([2, 1]) == ReplicaAssignment((2, 1))


def test_target_replicas_are_checked_as_kafkas_controller_checks_them():
    current = ReplicaAssignment((1, 2))
    for target, message in (([], "Empty replica list"), ([2, 2], "Duplicate replica ids"),
                            ([-1, 2], "Invalid broker id"), ([2, 4], "brokers that are not alive")):
        with pytest.raises(InvalidReplicaAssignmentError, match=message):
            check_reassignment(target, current, {1, 2, 3})
    check_reassignment([2, 3], current, {1, 2, 3})
    check_reassignment([1], current, {1})                 # only the added replicas must be alive


@pytest.fixture
def cluster():
    """Brokers 1, 2, 3 and broker 1's controller; topic t with partitions 0 and 1 on [1, 2], led by 1."""
    mc = MemoryCluster()
    stores = {i: MemoryMetadataStore(mc) for i in (1, 2, 3)}
    for i, s in stores.items():
        s.register_broker(BrokerInfo(i, "127.0.0.1", 9000 + i))
    lease = stores[1].elect_controller(1, lambda change: None)
    stores[1].create_topic(TopicAssignment("t", {0: (1, 2), 1: (1, 2)}), {})
    c = Controller(stores[1], lease, BrokerConfig())
    c.reconcile()
    yield SimpleNamespace(store=stores[1], stores=stores, controller=c, lease=lease)
    for s in stores.values():
        s.close()


def isr_update(store, p, isr):
    """The leader's own ISR write (compare-and-set on the state read)."""
    store.update_isr("t", p, store.get_partition_state("t", p), isr)


def test_a_reassignment_adds_replicas_waits_for_them_in_sync_then_moves_leadership_and_removes(cluster):
    store, c = cluster.store, cluster.controller
    before = store.get_partition_state("t", 0)
    assert c.alter_partition_reassignments({("t", 0): [2, 3]}) == {("t", 0): None}
    ra = store.get_topic("t").replica_assignment(0)
    assert (ra.replicas, ra.adding, ra.removing) == ((2, 3, 1), (3,), (1,))
    started = store.get_partition_state("t", 0)                 # Kafka's phase A: the leader kept, a new epoch
    assert (started.leader, started.leader_epoch, started.isr) == (1, before.leader_epoch + 1, before.isr)
    assert c.list_partition_reassignments(None) == {("t", 0): ra}
    assert c.list_partition_reassignments([("t", 1), ("t", 0), ("x", 0)]) == {("t", 0): ra}
    c.reconcile(rebalance=True)                                 # 3 not in sync; no preferred-leader move to 2
    assert store.get_partition_state("t", 0) == started
    isr_update(store, 0, (1, 2, 3))                             # 3 caught up
    c.reconcile()
    assert store.get_topic("t").replica_assignment(0) == ReplicaAssignment((2, 3))
    st = store.get_partition_state("t", 0)
    assert (st.leader, st.leader_epoch, st.isr) == (2, before.leader_epoch + 3, (2, 3))
    assert c.list_partition_reassignments(None) == {}
    assert store.get_topic("t").replica_assignment(1) == ReplicaAssignment((1, 2))    # untouched


def test_a_reassignment_whose_target_is_in_sync_completes_at_once(cluster):
    store, c = cluster.store, cluster.controller
    before = store.get_partition_state("t", 1)
    assert c.alter_partition_reassignments({("t", 1): [1]}) == {("t", 1): None}
    assert store.get_topic("t").replica_assignment(1) == ReplicaAssignment((1,))
    st = store.get_partition_state("t", 1)
    assert (st.leader, st.leader_epoch, st.isr) == (1, before.leader_epoch + 2, (1,))   # leader kept: new epochs
    assert c.alter_partition_reassignments({("t", 0): [1, 2]}) == {("t", 0): None}     # a no-op is accepted
    assert c.alter_partition_reassignments({("t", 0): [2, 1]}) == {("t", 0): None}     # a new preferred leader
    assert store.get_topic("t").partitions[0] == (2, 1) and store.get_partition_state("t", 0).leader == 1


def test_cancelling_goes_back_to_the_original_replicas_and_drops_the_added_ones_from_the_isr(cluster):
    store, c = cluster.store, cluster.controller
    assert c.alter_partition_reassignments({("t", 0): [3, 2]}) == {("t", 0): None}
    isr_update(store, 0, (1, 2, 3))
    st = store.get_partition_state("t", 0)
    store.update_partition_state("t", 0, replace(st, leader=3, leader_epoch=st.leader_epoch + 1), cluster.lease)
    assert c.alter_partition_reassignments({("t", 0): None}) == {("t", 0): None}
    assert store.get_topic("t").replica_assignment(0) == ReplicaAssignment((2, 1))   # Kafka's order: target first
    after = store.get_partition_state("t", 0)
    assert (after.leader, after.leader_epoch, after.isr) == (2, st.leader_epoch + 3, (1, 2))   # 3 led: it hands over
    result = c.alter_partition_reassignments({("t", 0): None})[("t", 0)]
    assert isinstance(result, NoReassignmentInProgressError)


def test_errors_come_in_kafkas_order(cluster):
    store, c = cluster.store, cluster.controller
    results = c.alter_partition_reassignments({("t", 0): [], ("t", 1): [1, 1], ("t", 9): [1], ("t", 8): [7],
                                               ("nope", 0): None, ("nope", 1): [2]})
    kinds = {tp: type(e) for tp, e in results.items()}
    assert kinds == {("t", 0): InvalidReplicaAssignmentError, ("t", 1): InvalidReplicaAssignmentError,
                     ("t", 9): UnknownTopicOrPartitionError, ("t", 8): InvalidReplicaAssignmentError,
                     ("nope", 0): NoReassignmentInProgressError, ("nope", 1): UnknownTopicOrPartitionError}
    store.mark_topic_for_deletion("t")
    assert isinstance(c.alter_partition_reassignments({("t", 0): [2, 3]})[("t", 0)], UnknownTopicOrPartitionError)
    assert store.get_topic("t").replica_assignment(0) == ReplicaAssignment((1, 2))


def test_a_new_controller_completes_a_reassignment_the_old_one_started(cluster):
    store, c = cluster.store, cluster.controller
    c.alter_partition_reassignments({("t", 0): [2, 3]})
    isr_update(store, 0, (1, 2, 3))
    cluster.stores[1].resign_controller()
    lease = cluster.stores[2].elect_controller(2, lambda change: None)
    Controller(cluster.stores[2], lease, BrokerConfig()).reconcile()
    assert store.get_topic("t").replica_assignment(0) == ReplicaAssignment((2, 3))
    assert store.get_partition_state("t", 0).leader == 2


def test_a_state_naming_an_unassigned_replica_is_corrected():
    """A controller that stopped between a completion's two writes leaves a state naming a removed replica:
    the next pass moves leadership off it (a new epoch) and drops it from the ISR."""
    d = Controller.desired(PartitionState(1, 4, (1, 2, 3), version=2), (2, 3), {1, 2, 3}, False, False)
    assert (d.leader, d.leader_epoch, d.isr) == (2, 5, (2, 3))
    d = Controller.desired(PartitionState(2, 4, (2, 3, 1), version=2), (2, 3), {1, 2, 3}, False, False)
    assert (d.leader, d.leader_epoch, d.isr) == (2, 4, (2, 3))


def leader_state(broker_id, replicas, isr, removing=()):
    log = SimpleNamespace(end_offset=10, high_watermark=10, config=SimpleNamespace(min_insync_replicas=1))
    part = SimpleNamespace(log=log, node=SimpleNamespace(_data_arrived=lambda p: None))
    return LeaderState(part, broker_id, 3, replicas, isr, removing)


def test_a_leader_adds_new_replicas_to_the_isr_but_never_removed_ones():
    ls = leader_state(1, (1, 2), (1, 2))
    with pytest.raises(NotLeaderOrFollowerError):
        ls.follower_fetched(3, 10)                            # not a replica yet
    ls.set_replicas((2, 3, 1), (1,))                          # the reassignment reaches the leader mid-epoch
    assert ls.follower_fetched(3, 10) is True                 # caught up: it may join the ISR
    new_leader = leader_state(2, (2, 3, 1), (2, 3), removing=(1,))   # completion: 2 leads, the old leader follows
    assert new_leader.follower_fetched(1, 10) is False        # being removed: never back in the ISR
    new_leader.set_replicas((2, 3))
    assert sorted(new_leader.followers) == [3]
    with pytest.raises(NotLeaderOrFollowerError):
        new_leader.follower_fetched(1, 10)


def test_a_leader_in_a_newer_epoch_keeps_its_waiting_produces_and_followers():
    import concurrent.futures

    ls = leader_state(1, (1, 2), (1, 2))
    ls.follower_fetched(2, 10)
    ls.log.end_offset = 12                                    # an acks=all append waits for broker 2
    waiting = concurrent.futures.Future()
    ls.add_waiter(12, waiting)
    with pytest.raises(ValueError):
        ls.new_epoch(3)                                       # not newer
    ls.new_epoch(4)                                           # re-elected: the replica set changed
    ls.set_replicas((1, 2, 3))
    assert (ls.leader_epoch, ls.epoch_start, ls.followers[2].leo, waiting.done()) == (4, 12, 10, False)
    ls.follower_fetched(2, 12)
    assert waiting.result(timeout=1) is None and ls.log.high_watermark == 12
    assert ls.follower_fetched(3, 10) is False                # below the new epoch's start: not in sync yet


def test_a_lone_broker_answers_as_a_one_broker_cluster(broker):  # noqa: F811
    def alter(partitions):
        r = call(broker, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "replicas": rs}]} for t, p, rs in partitions]})
        assert r["error_code"] == 0
        return [(t["name"], p["partition_index"], p["error_code"]) for t in r["responses"] for p in t["partitions"]]
    assert alter([("t", 0, [0])]) == [("t", 0, 0)]                                # nothing to move
    assert alter([("t", 0, [0, 1])]) == [("t", 0, INVALID_REPLICA_ASSIGNMENT)]     # broker 1 is not alive
    assert alter([("t", 1, None)]) == [("t", 1, NO_REASSIGNMENT_IN_PROGRESS)]
    assert alter([("t", 7, [0])]) == [("t", 7, UNKNOWN_TOPIC_OR_PARTITION)]
    assert alter([("nope", 0, [])]) == [("nope", 0, INVALID_REPLICA_ASSIGNMENT)]
    r = call(broker, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None})
    assert (r["error_code"], r["topics"]) == (0, [])
