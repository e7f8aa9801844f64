"""Controller decisions (leader election from the ISR, unclean election, preferred leaders) and a full
reconcile pass against the in-memory metadata store."""

from dataclasses import replace

import pytest

from seglog.cluster.controller import Controller
from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.cluster.metastore import NO_LEADER, BrokerInfo, PartitionState, TopicAssignment
from seglog.config import BrokerConfig
from seglog.errors import (ElectionNotNeededError, EligibleLeadersNotAvailableError, PreferredLeaderNotAvailableError,
                           StaleControllerEpochError, UnknownTopicOrPartitionError)

desired = Controller.desired


def state(leader, epoch, isr):
    return PartitionState(leader, epoch, tuple(isr), version=3)


def test_nothing_to_do_when_all_alive():
    assert desired(state(1, 4, [1, 2, 3]), (1, 2, 3), {1, 2, 3}, False, False) is None


def test_dead_follower_leaves_the_isr_without_a_new_epoch():
    d = desired(state(1, 4, [1, 2, 3]), (1, 2, 3), {1, 2}, False, False)
    assert (d.leader, d.leader_epoch, set(d.isr)) == (1, 4, {1, 2})


def test_dead_leader_is_replaced_by_the_first_live_isr_member_in_assignment_order():
    d = desired(state(2, 4, [3, 2, 1]), (2, 1, 3), {1, 3}, False, False)
    assert (d.leader, d.leader_epoch, set(d.isr)) == (1, 5, {1, 3})


def test_no_live_isr_member_leaves_the_partition_leaderless_keeping_the_isr():
    d = desired(state(2, 4, [2]), (2, 1, 3), {1, 3}, False, False)
    assert (d.leader, d.leader_epoch, d.isr) == (NO_LEADER, 5, (2,))
    assert desired(d, (2, 1, 3), {1, 3}, False, False) is None           # stays so until 2 returns
    back = desired(d, (2, 1, 3), {1, 2, 3}, False, False)
    assert (back.leader, back.leader_epoch, back.isr) == (2, 6, (2,))


def test_unclean_election_takes_any_live_replica():
    d = desired(state(NO_LEADER, 5, [2]), (2, 1, 3), {1, 3}, True, False)
    assert (d.leader, d.leader_epoch, d.isr) == (1, 6, (1,))


def test_preferred_leader_returns_only_when_in_sync_and_asked():
    st = state(2, 7, [1, 2])
    assert desired(st, (1, 2), {1, 2}, False, False) is None
    d = desired(st, (1, 2), {1, 2}, False, True)
    assert (d.leader, d.leader_epoch) == (1, 8)
    assert desired(state(2, 7, [2]), (1, 2), {1, 2}, False, True) is None   # 1 is not in sync yet


def test_a_restarted_leader_loses_leadership_and_a_restarted_follower_its_isr_place():
    d = desired(state(1, 4, [1, 2, 3]), (1, 2, 3), {1, 2, 3}, False, False, {1})
    assert (d.leader, d.leader_epoch, set(d.isr)) == (2, 5, {2, 3})
    d = desired(state(1, 4, [1, 2, 3]), (1, 2, 3), {1, 2, 3}, False, False, {3})
    assert (d.leader, d.leader_epoch, set(d.isr)) == (1, 4, {1, 2})


def test_a_restarted_sole_in_sync_replica_leads_again_in_a_new_epoch():
    d = desired(state(1, 4, [1]), (1, 2, 3), {1, 2, 3}, False, False, {1})
    assert (d.leader, d.leader_epoch, d.isr) == (1, 5, (1,))
    d = desired(state(NO_LEADER, 4, [2]), (1, 2, 3), {1, 2, 3}, False, False, {2})
    assert (d.leader, d.leader_epoch, d.isr) == (2, 5, (2,))


def test_reconcile_moves_leadership_off_a_broker_that_restarted():
    """A broker restarting takes over its registration (a new broker epoch): the controller moves its leadership
    with a new leader epoch and drops it from the ISR, even though it never left the live brokers."""
    cluster = MemoryCluster()
    stores = {i: MemoryMetadataStore(cluster) for i in (1, 2, 3)}
    for i, s in stores.items():
        s.register_broker(BrokerInfo(i, "127.0.0.1", 9000 + i))
    lease = stores[1].elect_controller(1, lambda change: None)
    stores[1].create_topic(TopicAssignment("t", {0: (2, 3, 1)}), {})
    c = Controller(stores[1], lease, BrokerConfig())
    c.reconcile()
    assert stores[1].get_partition_states("t")[0].leader == 2
    restarted = MemoryMetadataStore(cluster)                       # broker 2's next process; the old session lives
    restarted.register_broker(BrokerInfo(2, "127.0.0.1", 9002), take_over=True)
    c.reconcile()
    st = stores[1].get_partition_states("t")[0]
    assert (st.leader, st.leader_epoch, set(st.isr)) == (3, 1, {3, 1})
    c.reconcile()
    assert stores[1].get_partition_states("t")[0] == st             # handled once
    for s in [*stores.values(), restarted]:
        s.close()


def test_a_broker_in_controlled_shutdown_hands_over_leadership_and_leaves_the_isr():
    d = desired(state(1, 4, [1, 2, 3]), (1, 2, 3), {1, 2, 3}, False, False, shutting={1})
    assert (d.leader, d.leader_epoch, set(d.isr)) == (2, 5, {2, 3})
    d = desired(state(1, 4, [1, 2, 3]), (1, 2, 3), {1, 2, 3}, False, False, shutting={2})
    assert (d.leader, d.leader_epoch, set(d.isr)) == (1, 4, {1, 3})
    assert desired(state(1, 4, [1]), (1, 2, 3), {1, 2, 3}, False, False, shutting={1}) is None   # nobody else
    assert desired(state(2, 5, [2, 3]), (1, 2, 3), {1, 2, 3}, False, True, shutting={1}) is None  # not preferred now


def test_reconcile_creates_states_and_fails_over():
    cluster = MemoryCluster()
    stores = {i: MemoryMetadataStore(cluster) for i in (1, 2, 3)}
    for i, s in stores.items():
        s.register_broker(BrokerInfo(i, "127.0.0.1", 9000 + i))
    lease = stores[1].elect_controller(1, lambda change: None)
    stores[1].create_topic(TopicAssignment("t", {0: (2, 3, 1), 1: (3, 1, 2)}), {})
    c = Controller(stores[1], lease, BrokerConfig())
    c.reconcile()
    states = stores[1].get_partition_states("t")
    assert (states[0].leader, states[0].isr, states[1].leader) == (2, (2, 3, 1), 3)
    stores[2].close()                                       # broker 2 dies: its session's ephemerals go
    c.reconcile()
    states = stores[1].get_partition_states("t")
    assert (states[0].leader, states[0].leader_epoch, set(states[0].isr)) == (3, 1, {3, 1})
    assert (states[1].leader, set(states[1].isr)) == (3, {3, 1})
    stores[1].mark_topic_for_deletion("t")
    c.reconcile()
    assert stores[1].list_topics() == []
    for s in stores.values():
        s.close()


def test_a_superseded_controller_cannot_write():
    cluster = MemoryCluster()
    a, b = MemoryMetadataStore(cluster), MemoryMetadataStore(cluster)
    a.register_broker(BrokerInfo(1, "h", 1))
    b.register_broker(BrokerInfo(2, "h", 2))
    lease_a = a.elect_controller(1, lambda change: None)
    a.create_topic(TopicAssignment("t", {0: (1, 2)}), {})
    old = Controller(a, lease_a, BrokerConfig())
    old.reconcile()
    a.resign_controller()
    assert b.elect_controller(2, lambda change: None) is not None          # b wins with a newer epoch
    with pytest.raises(StaleControllerEpochError):
        a.update_partition_state("t", 0, a.get_partition_states("t")[0], lease_a)
    a.close()
    b.close()


def put(store, lease, topic, p, leader, epoch, isr):
    """Write a partition state over the stored one (compare-and-set on its version)."""
    current = store.get_partition_state(topic, p)
    store.update_partition_state(topic, p, replace(current, leader=leader, leader_epoch=epoch, isr=tuple(isr)), lease)


def test_elect_leaders_preferred_and_unclean_as_kafka():
    """ElectLeaders at the controller: preferred gives leadership back to the first assigned replica when it is
    in the ISR (a new leader epoch), answers ElectionNotNeeded when it leads and PreferredLeaderNotAvailable when
    it is out of the ISR; unclean gives a leaderless partition a live replica even outside the ISR (whatever the
    topic config says), answers ElectionNotNeeded while a leader lives and EligibleLeadersNotAvailable when no
    replica lives; unknown partitions are UnknownTopicOrPartition; None asks for every partition."""
    cluster = MemoryCluster()
    stores = {i: MemoryMetadataStore(cluster) for i in (1, 2, 3)}
    for i, s in stores.items():
        s.register_broker(BrokerInfo(i, "127.0.0.1", 9000 + i))
    lease = stores[1].elect_controller(1, lambda change: None)
    stores[1].create_topic(TopicAssignment("t", {0: (2, 3, 1), 1: (3, 1, 2), 2: (1, 2, 3)}), {})
    c = Controller(stores[1], lease, BrokerConfig())
    c.reconcile()
    st = stores[1].get_partition_state
    put(stores[1], lease, "t", 0, 3, 1, [3, 1, 2])             # 0: the preferred replica 2 does not lead
    put(stores[1], lease, "t", 1, 1, 1, [1, 2])                # 1: the preferred replica 3 is out of the ISR
    results = c.elect_leaders([("t", 0), ("t", 1), ("t", 2), ("t", 9), ("nope", 0)], unclean=False)
    assert results[("t", 0)] is None and (st("t", 0).leader, st("t", 0).leader_epoch) == (2, 2)
    assert isinstance(results[("t", 1)], PreferredLeaderNotAvailableError) and st("t", 1).leader == 1
    assert isinstance(results[("t", 2)], ElectionNotNeededError)
    assert isinstance(results[("t", 9)], UnknownTopicOrPartitionError)
    assert isinstance(results[("nope", 0)], UnknownTopicOrPartitionError)
    assert sorted(c.elect_leaders(None, unclean=False)) == [("t", 0), ("t", 1), ("t", 2)]

    put(stores[1], lease, "t", 2, NO_LEADER, 3, [1])           # 2: its only in-sync replica dies
    stores[1].close()
    stores[1] = MemoryMetadataStore(cluster)                   # broker 1's session is gone: 2 and 3 live
    lease = stores[2].elect_controller(2, lambda change: None)
    c = Controller(stores[2], lease, BrokerConfig())
    assert isinstance(c.elect_leaders([("t", 0)], unclean=True)[("t", 0)], ElectionNotNeededError)
    assert c.elect_leaders([("t", 2)], unclean=True)[("t", 2)] is None
    st = stores[2].get_partition_state("t", 2)
    assert (st.leader, st.leader_epoch, st.isr) == (2, 4, (2,))
    put(stores[2], lease, "t", 2, NO_LEADER, 5, [2])
    stores[3].close()
    stores[2].close()
    watcher = MemoryMetadataStore(cluster)
    c = Controller(watcher, lease, BrokerConfig())
    assert isinstance(c.elect_leaders([("t", 2)], unclean=True)[("t", 2)], EligibleLeadersNotAvailableError)
    for s in (*stores.values(), watcher):
        s.close()
