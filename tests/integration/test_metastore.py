"""One suite, two MetadataStores: the in-memory reference and ZooKeeper (a real server, kazoo client).

Every test gets a fresh namespace (a new MemoryCluster, or a new chroot on the shared ZooKeeper) and opens
as many stores (sessions) on it as it needs. Callbacks arrive on the stores' event threads, so assertions
about them wait (Recorder.wait_*).
"""

import json
import threading
import time
import uuid
from dataclasses import replace

import pytest

from seglog.cluster import (BrokerInfo, ControllerChange, InvalidUpdateVersionError, MemoryCluster,
                            MemoryMetadataStore, PartitionState, ReplicaAssignment, SessionEvent, TopicAssignment)
from seglog.errors import (InvalidArgumentError, InvalidPartitionsError, InvalidReplicaAssignmentError,
                           InvalidTopicError, LogClosedError, NetworkError, StaleControllerEpochError,
                           TopicAlreadyExistsError, UnknownTopicOrPartitionError)

WAIT = 10.0


class Namespace:
    """Opens stores (sessions) on one namespace; closes them all at teardown."""

    def __init__(self, open_store, connect=None):
        self._open_store = open_store
        self.connect = connect
        self.stores = []

    def store(self):
        store = self._open_store()
        self.stores.append(store)
        return store

    def close(self):
        for store in self.stores:
            store.close()


@pytest.fixture(params=["memory", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def namespace(request):
    if request.param == "memory":
        cluster = MemoryCluster()
        ns = Namespace(lambda: MemoryMetadataStore(cluster))
    else:
        from seglog.cluster.zk import ZooKeeperMetadataStore

        server = request.getfixturevalue("zookeeper_server")
        connect = f"{server.connect_string}/test-{uuid.uuid4().hex[:12]}"
        ns = Namespace(lambda: ZooKeeperMetadataStore(connect, session_timeout=6.0), connect)
    yield ns
    ns.close()


class Recorder:
    """A callback recording each value and the thread it ran on."""

    def __init__(self):
        self.values = []
        self.threads = set()
        self._changed = threading.Condition()

    def __call__(self, value):
        with self._changed:
            self.values.append(value)
            self.threads.add(threading.current_thread().name)
            self._changed.notify_all()

    def wait_for(self, predicate, timeout=WAIT):
        """Wait until ``predicate(values)`` holds; returns the values."""
        with self._changed:
            assert self._changed.wait_for(lambda: predicate(self.values), timeout), \
                f"timed out; recorded {self.values}"
            return list(self.values)

    def wait_latest(self, predicate, timeout=WAIT):
        """Wait until the latest value satisfies ``predicate``; returns it."""
        return self.wait_for(lambda values: bool(values) and predicate(values[-1]), timeout)[-1]


def two_partitions(topic="orders"):
    return TopicAssignment(topic, {0: [1, 2], 1: [2, 1]})


def leader_states():
    return {0: PartitionState(leader=1, leader_epoch=0, isr=[1, 2]),
            1: PartitionState(leader=2, leader_epoch=0, isr=[2, 1])}


def controller_with_topic(store, broker_id=1, topic="orders", on_change=None):
    """Elect ``store`` and create a two-partition topic with its states; returns the token."""
    lease = store.elect_controller(broker_id, on_change or Recorder())
    store.create_topic(two_partitions(topic), {"retention.ms": "1000"})
    store.create_partition_states(topic, leader_states(), lease)
    return lease


# --- brokers and sessions ------------------------------------------------------------------------------------

def test_registration_lists_brokers_with_growing_epochs(namespace):
    a, b = namespace.store(), namespace.store()
    one = a.register_broker(BrokerInfo(1, "host1", 9092, rack="r1"))
    two = b.register_broker(BrokerInfo(2, "host2", 9093))
    assert 0 <= one.epoch < two.epoch
    assert a.list_brokers() == b.list_brokers() == {1: one, 2: two}
    again = a.register_broker(BrokerInfo(1, "host1b", 9094))
    assert again.epoch > two.epoch
    assert b.list_brokers()[1] == again
    with pytest.raises(InvalidArgumentError):
        b.register_broker(BrokerInfo(1, "intruder", 1))


def test_an_updated_registration_keeps_its_epoch_and_reaches_every_watch(namespace):
    """update_broker (a dynamic advertised.listeners) changes a registration's addresses in place: same broker
    epoch, every store's watch_brokers delivers it; another session cannot update it."""
    a, b = namespace.store(), namespace.store()
    one = a.register_broker(BrokerInfo(1, "host1", 9092))
    seen = Recorder()
    b.watch_brokers(seen)
    seen.wait_latest(lambda brokers: brokers == {1: one})
    a.update_broker(BrokerInfo(1, "moved", 9092, endpoints=(("PLAINTEXT", "PLAINTEXT", "moved", 9092),)))
    latest = seen.wait_latest(lambda brokers: brokers[1].host == "moved")
    assert latest[1].epoch == one.epoch and latest[1].address("PLAINTEXT") == ("moved", 9092)
    with pytest.raises(InvalidArgumentError):
        b.update_broker(BrokerInfo(1, "intruder", 1))


def test_registration_keeps_every_listeners_address(namespace):
    """A broker of several listeners is registered with all of them (ZooKeeper: Kafka's endpoints and
    listener_security_protocol_map); a client is told the address of its own listener, none for one the
    broker does not have, and the inter-broker one outside a request."""
    store = namespace.store()
    endpoints = (("EXTERNAL", "SSL", "public.example", 9093), ("INTERNAL", "SASL_SSL", "::1", 9094))
    info = store.register_broker(BrokerInfo(1, "::1", 9094, endpoints=endpoints))
    assert store.list_brokers() == {1: info} and info.endpoints == endpoints
    assert [info.address(n) for n in ("EXTERNAL", "INTERNAL", "OTHER", None)] == [
        ("public.example", 9093), ("::1", 9094), None, ("::1", 9094)]
    if namespace.connect is not None:
        from kazoo.client import KazooClient
        zk = KazooClient(hosts=namespace.connect)
        zk.start()
        try:
            value = json.loads(zk.get("/brokers/ids/1")[0])
        finally:
            zk.stop()
        assert value["endpoints"] == ["EXTERNAL://public.example:9093", "INTERNAL://[::1]:9094"]
        assert value["listener_security_protocol_map"] == {"EXTERNAL": "SSL", "INTERNAL": "SASL_SSL"}


def test_a_restarted_broker_takes_over_its_dead_sessions_registration_and_controller_claim(namespace):
    """The session of a killed process lives on until it times out; the restarted broker (same host and port)
    replaces its registration at once with a new epoch, and the dead session's controller claim goes too, so
    another candidate wins with a new controller epoch. A different host or port is refused."""
    dead, other, restarted = namespace.store(), namespace.store(), namespace.store()
    old = dead.register_broker(BrokerInfo(1, "host1", 9092))
    first = dead.elect_controller(1, Recorder())
    dead._events.stop()          # the process is gone: its session lives on, but nothing runs its callbacks
    other.register_broker(BrokerInfo(2, "host2", 9093))
    changes = Recorder()
    assert other.elect_controller(2, changes) is None
    with pytest.raises(InvalidArgumentError):
        restarted.register_broker(BrokerInfo(1, "host1", 9092))                      # not asked to take over
    with pytest.raises(InvalidArgumentError):
        restarted.register_broker(BrokerInfo(1, "host1", 9999), take_over=True)      # another listener
    new = restarted.register_broker(BrokerInfo(1, "host1", 9092), take_over=True)
    assert new.epoch > old.epoch
    assert other.list_brokers()[1] == new
    won = changes.wait_latest(lambda change: change.lease is not None)
    assert won.controller_id == 2 and won.lease.epoch > first.epoch
    with pytest.raises(InvalidArgumentError):
        dead.register_broker(BrokerInfo(1, "host1", 9092))          # the old session lost the id for good


def test_states_record_when_they_were_written_against_broker_epochs(namespace):
    """``written`` orders a state's last write against registrations: a broker registered afterwards is a
    restarted ISR member (restarted_members)."""
    from seglog.cluster.metastore import restarted_members

    a, b = namespace.store(), namespace.store()
    one = a.register_broker(BrokerInfo(1, "h", 1))
    b.register_broker(BrokerInfo(2, "h", 2))
    lease = controller_with_topic(a)
    st = a.get_partition_state("orders", 0)
    assert st.written > one.epoch
    assert restarted_members(st, a.list_brokers()) == set()
    again = b.register_broker(BrokerInfo(2, "h", 2))              # registering again: a new epoch
    assert again.epoch > st.written
    assert restarted_members(st, a.list_brokers()) == {2}
    updated = a.update_partition_state("orders", 0, replace(st, isr=(1,)), lease)
    assert updated.written > again.epoch == a.list_brokers()[2].epoch
    assert a.get_partition_state("orders", 0).written == updated.written
    assert restarted_members(updated, a.list_brokers()) == set()
    shrunk = a.update_isr("orders", 0, updated, (1,))
    assert shrunk.written > updated.written


def test_controlled_shutdown_requests_are_ephemeral_and_watched(namespace):
    a, b = namespace.store(), namespace.store()
    seen = Recorder()
    b.watch_brokers_shutting_down(seen)
    seen.wait_latest(lambda requests: requests == {})
    one = a.register_broker(BrokerInfo(1, "h", 1))
    a.request_controlled_shutdown(1, one.epoch)
    a.request_controlled_shutdown(1, one.epoch)                      # asking again is fine
    assert b.brokers_shutting_down() == {1: one.epoch}
    seen.wait_latest(lambda requests: requests == {1: one.epoch})
    a.close()                                                        # the broker stopped: the request goes
    seen.wait_latest(lambda requests: requests == {})


def test_closing_the_session_removes_its_registration(namespace):
    a, b = namespace.store(), namespace.store()
    a.register_broker(BrokerInfo(1, "host1", 9092))
    brokers = Recorder()
    b.watch_brokers(brokers)
    brokers.wait_latest(lambda live: set(live) == {1})
    a.close()
    brokers.wait_latest(lambda live: live == {})
    assert b.register_broker(BrokerInfo(1, "host1", 9092)).id == 1


def test_session_expiry_removes_registration_and_the_listener_reregisters(namespace):
    a, b = namespace.store(), namespace.store()
    info = BrokerInfo(1, "host1", 9092)
    first = a.register_broker(info)
    events = Recorder()
    a.add_session_listener(events)
    a.add_session_listener(lambda event: event is SessionEvent.NEW_SESSION and a.register_broker(info))
    brokers = Recorder()
    b.watch_brokers(brokers)
    brokers.wait_latest(lambda live: live == {1: first})
    old_session = a.session_id

    a.expire_session()

    assert a.session_id != old_session
    lifecycle = events.wait_for(lambda seen: SessionEvent.NEW_SESSION in seen)
    assert [e for e in lifecycle if e is not SessionEvent.SUSPENDED] == [SessionEvent.EXPIRED,
                                                                         SessionEvent.NEW_SESSION]
    back = brokers.wait_latest(lambda live: 1 in live and live[1].epoch > first.epoch)
    assert back[1].host == "host1"


# --- cluster id ---------------------------------------------------------------------------------------------

def test_the_first_proposed_cluster_id_is_the_clusters_for_every_session(namespace):
    stores = [namespace.store() for _ in range(4)]
    got = []
    lock = threading.Lock()

    def ask(store, proposal):
        cluster_id = store.get_or_create_cluster_id(proposal)
        with lock:
            got.append(cluster_id)
    threads = [threading.Thread(target=ask, args=(s, f"proposal-{i}")) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and len(set(got)) == 1 and got[0].startswith("proposal-"), got
    later = namespace.store()                                    # a broker joining later, another session
    assert later.get_or_create_cluster_id("another") == got[0]
    stores[0].close()                                            # it outlives the session that created it
    assert later.get_or_create_cluster_id("yet-another") == got[0]
    with pytest.raises(InvalidArgumentError):
        later.get_or_create_cluster_id("")


# --- controller election ----------------------------------------------------------------------------------

def test_controller_election_increments_the_epoch_and_notifies_candidates(namespace):
    a, b = namespace.store(), namespace.store()
    on_a, on_b = Recorder(), Recorder()
    lease_a = a.elect_controller(1, on_a)
    assert (lease_a.broker_id, lease_a.epoch) == (1, 1)
    assert b.elect_controller(2, on_b) is None
    assert on_a.wait_latest(lambda change: True) == ControllerChange(1, lease_a)
    assert on_b.wait_latest(lambda change: True) == ControllerChange(1)
    assert a.get_controller() == b.get_controller() == 1
    with pytest.raises(InvalidArgumentError):
        a.elect_controller(1, on_a)

    a.resign_controller()

    change = on_b.wait_latest(lambda change: change.lease is not None)
    assert change.controller_id == 2 and change.lease.epoch == 2
    assert a.get_controller() == 2
    assert a.elect_controller(1, Recorder()) is None
    assert on_a.values == [ControllerChange(1, lease_a)]        # resigning does not call on_change


def test_candidate_takes_over_and_the_expired_controller_is_fenced(namespace):
    a, b = namespace.store(), namespace.store()
    on_a, on_b = Recorder(), Recorder()
    lease_a = controller_with_topic(a, on_change=on_a)
    assert b.elect_controller(2, on_b) is None
    state = b.get_partition_state("orders", 0)

    a.expire_session()                                            # a long pause: a is a zombie now

    on_a.wait_latest(lambda change: change == ControllerChange(None))
    lease_b = on_b.wait_latest(lambda change: change.lease is not None).lease
    assert lease_b.epoch == lease_a.epoch + 1 and b.get_controller() == 2
    moved = replace(state, leader=2, leader_epoch=1, isr=[2])
    with pytest.raises(StaleControllerEpochError):
        a.update_partition_state("orders", 0, moved, lease_a)
    with pytest.raises(StaleControllerEpochError):
        a.update_partition_states([("orders", 0, moved), ("orders", 1, moved)], lease_a)
    with pytest.raises(StaleControllerEpochError):
        a.delete_topic("orders", lease_a)
    a.add_partitions("orders", {2: [1, 2]})
    with pytest.raises(StaleControllerEpochError):
        a.create_partition_states("orders", {2: PartitionState(1, 0, [1, 2])}, lease_a)
    assert b.get_partition_state("orders", 0) == state

    stored = b.update_partition_state("orders", 0, moved, lease_b)
    assert (stored.leader, stored.controller_epoch, stored.version) == (2, lease_b.epoch, state.version + 1)
    assert a.elect_controller(1, Recorder()) is None             # back in the race, but b holds it


# --- topics ------------------------------------------------------------------------------------------------

def test_topic_create_get_list_and_config(namespace):
    a, b = namespace.store(), namespace.store()
    assignment = two_partitions()
    a.create_topic(assignment, {"cleanup.policy": "compact"})
    with pytest.raises(TopicAlreadyExistsError):
        b.create_topic(two_partitions(), {})
    assert b.get_topic("orders") == assignment
    assert b.list_topics() == ["orders"]
    assert b.get_topic_config("orders") == {"cleanup.policy": "compact"}
    b.set_topic_config("orders", {"retention.ms": "5"})
    assert a.get_topic_config("orders") == {"retention.ms": "5"}
    for call in (lambda: a.get_topic("nope"), lambda: a.get_topic_config("nope"),
                 lambda: a.set_topic_config("nope", {})):
        with pytest.raises(UnknownTopicOrPartitionError):
            call()
    for name in ("", ".", "a/b", "x" * 250):
        with pytest.raises(InvalidTopicError):
            a.create_topic(TopicAssignment(name, {0: [1]}))
    with pytest.raises(InvalidPartitionsError):
        a.create_topic(TopicAssignment("gap", {0: [1], 2: [1]}))
    with pytest.raises(InvalidReplicaAssignmentError):
        a.create_topic(TopicAssignment("dup", {0: [1, 1]}))
    assert a.list_topics() == ["orders"]


def test_add_partitions(namespace):
    a = namespace.store()
    original = two_partitions()
    a.create_topic(original)
    extended = a.add_partitions("orders", {2: [1, 2], 3: [2, 1]})
    assert a.get_topic("orders") == extended and sorted(extended.partitions) == [0, 1, 2, 3]
    assert extended.topic_id == original.topic_id and extended.partitions[3] == (2, 1)
    with pytest.raises(InvalidPartitionsError):
        a.add_partitions("orders", {5: [1]})
    with pytest.raises(UnknownTopicOrPartitionError):
        a.add_partitions("nope", {0: [1]})
    a.mark_topic_for_deletion("orders")
    with pytest.raises(InvalidTopicError):
        a.add_partitions("orders", {4: [1]})


def test_replica_assignments_are_a_fenced_controller_write_kept_with_the_reassignment(namespace):
    """A reassignment's full replica set and its adding / removing replicas are stored with the topic (Kafka's
    adding_replicas / removing_replicas) and seen by every store's watch; partitions added meanwhile stay;
    only the current controller may write them."""
    a, b = namespace.store(), namespace.store()
    lease = controller_with_topic(a)
    seen = Recorder()
    b.watch_topic("orders", seen)
    a.add_partitions("orders", {2: [1, 2]})
    moving = ReplicaAssignment((1, 2)).reassign_to([2, 3])
    stored = a.update_replica_assignments("orders", {0: moving}, lease)
    assert stored.replica_assignment(0) == moving and stored.partitions[2] == (1, 2)
    assert b.get_topic("orders") == stored and stored.reassigning() == [0]
    seen.wait_latest(lambda t: t is not None and t.replica_assignment(0) == moving)
    done = a.update_replica_assignments("orders", {0: ReplicaAssignment((2, 3))}, lease)
    assert done.reassigning() == [] and b.get_topic("orders").partitions[0] == (2, 3)
    with pytest.raises(UnknownTopicOrPartitionError):
        a.update_replica_assignments("orders", {7: ReplicaAssignment((1,))}, lease)
    with pytest.raises(InvalidReplicaAssignmentError):
        a.update_replica_assignments("orders", {0: ReplicaAssignment((1, 1))}, lease)
    a.resign_controller()
    b.elect_controller(2, Recorder())
    with pytest.raises(StaleControllerEpochError):
        a.update_replica_assignments("orders", {0: ReplicaAssignment((1, 2))}, lease)
    assert b.get_topic("orders").partitions[0] == (2, 3)


def test_topic_deletion_is_queued_then_done_by_the_controller(namespace):
    a, b = namespace.store(), namespace.store()
    lease = controller_with_topic(a)
    queued = Recorder()
    a.watch_topic_deletions(queued)
    queued.wait_latest(lambda topics: topics == [])
    b.mark_topic_for_deletion("orders")
    b.mark_topic_for_deletion("orders")
    with pytest.raises(UnknownTopicOrPartitionError):
        b.mark_topic_for_deletion("nope")
    queued.wait_latest(lambda topics: topics == ["orders"])
    assert b.topics_marked_for_deletion() == ["orders"]

    a.delete_topic("orders", lease)

    queued.wait_latest(lambda topics: topics == [])
    assert b.list_topics() == [] and b.get_partition_states("orders") == {}
    with pytest.raises(UnknownTopicOrPartitionError):
        b.get_topic_config("orders")
    with pytest.raises(UnknownTopicOrPartitionError):
        a.delete_topic("orders", lease)
    b.create_topic(two_partitions())
    assert b.get_topic_config("orders") == {}


# --- partition state -------------------------------------------------------------------------------------

def test_partition_states_are_created_once_and_updated_conditionally(namespace):
    a = namespace.store()
    lease = a.elect_controller(1, Recorder())
    a.create_topic(two_partitions())
    created = a.create_partition_states("orders", leader_states(), lease)
    assert created[0] == PartitionState(1, 0, (1, 2), controller_epoch=lease.epoch, version=0)
    assert a.get_partition_states("orders") == created
    with pytest.raises(InvalidUpdateVersionError):
        a.create_partition_states("orders", {0: PartitionState(1, 0, [1])}, lease)
    with pytest.raises(UnknownTopicOrPartitionError):
        a.create_partition_states("orders", {7: PartitionState(1, 0, [1])}, lease)
    with pytest.raises(UnknownTopicOrPartitionError):
        a.get_partition_state("orders", 7)

    moved = a.update_partition_state("orders", 0, replace(created[0], leader=2, leader_epoch=1), lease)
    assert moved == replace(created[0], leader=2, leader_epoch=1, version=1)
    assert a.get_partition_state("orders", 0) == moved
    with pytest.raises(InvalidUpdateVersionError):
        a.update_partition_state("orders", 0, replace(created[0], leader_epoch=5), lease)
    with pytest.raises(InvalidArgumentError):
        a.update_partition_state("orders", 0, replace(moved, version=-1), lease)
    with pytest.raises(InvalidArgumentError):
        a.update_partition_state("orders", 0, replace(moved, leader=3), lease)
    offline = a.update_partition_state("orders", 0, replace(moved, leader=-1, isr=[2]), lease)
    assert offline.leader == -1 and offline.version == 2


def test_a_batch_of_partition_state_updates_answers_each_on_its_own(namespace):
    a, other = namespace.store(), namespace.store()
    lease = controller_with_topic(a)
    s0, s1 = a.get_partition_state("orders", 0), a.get_partition_state("orders", 1)
    other.update_isr("orders", 1, s1, [s1.leader])                  # partition 1 changes under the controller
    done = a.update_partition_states([("orders", 0, replace(s0, leader_epoch=s0.leader_epoch + 1)),
                                      ("orders", 1, replace(s1, leader_epoch=s1.leader_epoch + 1)),
                                      ("orders", 9, s0)], lease)
    assert done[0] == a.get_partition_state("orders", 0) and done[0].leader_epoch == s0.leader_epoch + 1
    assert isinstance(done[1], InvalidUpdateVersionError)
    assert isinstance(done[2], UnknownTopicOrPartitionError)
    assert a.get_partition_state("orders", 1).leader_epoch == s1.leader_epoch, "a refused write changes nothing"
    assert a.update_partition_states([], lease) == []


def test_leader_isr_update_with_a_stale_version_fails(namespace):
    leader, controller = namespace.store(), namespace.store()
    lease = controller_with_topic(controller)
    seen = leader.get_partition_state("orders", 0)

    shrunk = leader.update_isr("orders", 0, seen, [1])
    assert (shrunk.isr, shrunk.version, shrunk.leader_epoch) == ((1,), seen.version + 1, seen.leader_epoch)
    with pytest.raises(InvalidUpdateVersionError):
        leader.update_isr("orders", 0, seen, [1, 2])               # raced with its own earlier write
    with pytest.raises(InvalidArgumentError):
        leader.update_isr("orders", 0, shrunk, [2])                # the ISR must keep the leader

    controller.update_partition_state("orders", 0, replace(shrunk, leader_epoch=1), lease)
    with pytest.raises(InvalidUpdateVersionError):
        leader.update_isr("orders", 0, shrunk, [1, 2])             # the controller wrote since: re-read
    fresh = leader.get_partition_state("orders", 0)
    expanded = leader.update_isr("orders", 0, fresh, [1, 2])
    assert expanded.isr == (1, 2) and expanded.leader_epoch == 1
    with pytest.raises(UnknownTopicOrPartitionError):
        leader.update_isr("nope", 0, fresh, [1])


# --- watches and lifecycle -----------------------------------------------------------------------------

def test_watches_deliver_the_current_value_then_changes_on_the_event_thread(namespace):
    a, b = namespace.store(), namespace.store()
    topics, topic, config, state = Recorder(), Recorder(), Recorder(), Recorder()
    b.watch_topics(topics)
    b.watch_topic("orders", topic)
    config_subscription = b.watch_topic_config("orders", config)
    b.watch_partition_state("orders", 0, state)
    topics.wait_latest(lambda names: names == [])
    topic.wait_latest(lambda assignment: assignment is None)
    state.wait_latest(lambda value: value is None)

    lease = controller_with_topic(a)
    topics.wait_latest(lambda names: names == ["orders"])
    topic.wait_latest(lambda assignment: assignment is not None and len(assignment.partitions) == 2)
    config.wait_latest(lambda value: value == {"retention.ms": "1000"})
    first = state.wait_latest(lambda value: value is not None)
    a.add_partitions("orders", {2: [1, 2]})
    topic.wait_latest(lambda assignment: len(assignment.partitions) == 3)
    a.update_isr("orders", 0, first, [1])
    state.wait_latest(lambda value: value.isr == (1,))

    config_subscription.cancel()
    a.set_topic_config("orders", {"retention.ms": "2"})
    a.mark_topic_for_deletion("orders")
    a.delete_topic("orders", lease)
    topics.wait_latest(lambda names: names == [])
    topic.wait_latest(lambda assignment: assignment is None)
    state.wait_latest(lambda value: value is None)
    time.sleep(0.2)
    assert config.values[-1] == {"retention.ms": "1000"}
    for recorder in (topics, topic, state):                   # equal values are not repeated
        assert all(before != after for before, after in zip(recorder.values, recorder.values[1:]))
    caller = threading.current_thread().name
    for recorder in (topics, topic, config, state):
        assert recorder.threads and caller not in recorder.threads
        assert all(name.startswith("seglog-metastore") for name in recorder.threads)


def test_a_closed_store_refuses_calls(namespace):
    a = namespace.store()
    a.close()
    a.close()
    for call in (a.list_topics, a.list_brokers, a.get_controller, lambda: a.watch_topics(Recorder()),
                 lambda: a.elect_controller(1, Recorder())):
        with pytest.raises(LogClosedError):
            call()


# --- ZooKeeper only ---------------------------------------------------------------------------------------

@pytest.mark.zookeeper
def test_zookeeper_layout_matches_kafkas(zookeeper_server):
    from kazoo.client import KazooClient

    from seglog.cluster.zk import ZooKeeperMetadataStore
    from seglog.cluster.zklayout import decode_topic_id

    chroot = f"/layout-{uuid.uuid4().hex[:8]}"
    store = ZooKeeperMetadataStore(zookeeper_server.connect_string + chroot)
    raw = KazooClient(zookeeper_server.connect_string + chroot)
    raw.start()
    try:
        store.register_broker(BrokerInfo(3, "h3", 9092, rack="r"))
        lease = controller_with_topic(store, broker_id=3)
        store.mark_topic_for_deletion("orders")

        def read(path):
            return json.loads(raw.get(path)[0])

        broker = read("/brokers/ids/3")
        assert (broker["host"], broker["port"], broker["rack"]) == ("h3", 9092, "r")
        assert broker["endpoints"] == ["PLAINTEXT://h3:9092"]
        assert raw.get("/brokers/ids/3")[1].ephemeralOwner == store.session_id
        assert read("/controller")["brokerid"] == 3
        assert raw.get("/controller_epoch")[0] == str(lease.epoch).encode()
        topic = read("/brokers/topics/orders")
        assert topic["partitions"] == {"0": [1, 2], "1": [2, 1]}
        assert decode_topic_id(topic["topic_id"]) == store.get_topic("orders").topic_id
        assert len(topic["topic_id"]) == 22
        assert read("/brokers/topics/orders/partitions/0/state") == {
            "version": 1, "leader": 1, "leader_epoch": 0, "isr": [1, 2], "controller_epoch": lease.epoch}
        assert read("/config/topics/orders") == {"version": 1, "config": {"retention.ms": "1000"}}
        store.update_replica_assignments("orders", {0: ReplicaAssignment((1, 2)).reassign_to([2, 3])}, lease)
        topic = read("/brokers/topics/orders")
        assert (topic["partitions"]["0"], topic["adding_replicas"], topic["removing_replicas"]) == \
            ([2, 3, 1], {"0": [3]}, {"0": [1]})
        assert raw.exists("/admin/delete_topics/orders") is not None
        assert store.get_or_create_cluster_id("A1b2C3d4E5f6G7h8I9j0Kw") == "A1b2C3d4E5f6G7h8I9j0Kw"
        assert read("/cluster/id") == {"version": "1", "id": "A1b2C3d4E5f6G7h8I9j0Kw"}
    finally:
        raw.stop()
        raw.close()
        store.close()


@pytest.mark.zookeeper
def test_an_unreadable_topic_node_is_left_out_logged_once_and_read_again_when_repaired(zookeeper_server, caplog):
    """A topic node holding what Kafka does not write there: get_topic raises MalformedTopicError (an unknown
    topic to every caller that skips those), one ERROR per version of the node names it, watch_topic delivers None
    for it, then the assignment once the node is repaired; other topics read as before."""
    from kazoo.client import KazooClient

    from seglog.cluster.metastore import MalformedTopicError
    from seglog.cluster.zk import ZooKeeperMetadataStore
    from seglog.cluster.zklayout import encode_topic

    chroot = f"/malformed-{uuid.uuid4().hex[:8]}"
    store = ZooKeeperMetadataStore(zookeeper_server.connect_string + chroot)
    raw = KazooClient(zookeeper_server.connect_string + chroot)
    raw.start()
    try:
        orders = two_partitions("orders")
        store.create_topic(orders)
        raw.create("/brokers/topics/broken", b"\x00garbage")
        assignments = Recorder()
        store.watch_topic("broken", assignments)
        assignments.wait_latest(lambda a: a is None)
        for _ in range(3):
            with pytest.raises(MalformedTopicError, match=r"/brokers/topics/broken cannot be read \(not JSON"):
                store.get_topic("broken")
        with pytest.raises(UnknownTopicOrPartitionError):
            store.add_partitions("broken", {0: [1]})
        assert store.get_topic("orders") == orders
        errors = [r for r in caplog.records if r.levelname == "ERROR" and "/brokers/topics/broken" in r.message]
        assert len(errors) == 1, errors

        raw.set("/brokers/topics/broken", b'{"version":3,"partitions":{"0":[-1]}}')
        with pytest.raises(MalformedTopicError, match=r"not a list of distinct broker ids"):
            store.get_topic("broken")
        repaired = TopicAssignment("broken", {0: (1, 2)})
        raw.set("/brokers/topics/broken", encode_topic(repaired))
        assignments.wait_latest(lambda a: a == repaired)
        assert store.get_topic("broken") == repaired
        assert len([r for r in caplog.records if r.levelname == "ERROR" and "/brokers/topics/broken" in r.message]) == 2
    finally:
        raw.stop()
        raw.close()
        store.close()


@pytest.mark.zookeeper
def test_a_zookeeper_restart_suspends_then_resumes_the_same_session(zookeeper_installed, tmp_path, free_port):
    from seglog.cluster.zk import ZooKeeperMetadataStore
    from seglog.cluster.zookeeper_server import ZooKeeperServer

    # The session must outlive the restart: ZooKeeper restores it with a fresh timeout once loaded, and a
    # loaded machine can take seconds to start the JVM and answer the reconnect (6 s expired it once in CI).
    with ZooKeeperServer(tmp_path, free_port(), tick_time_ms=1000) as server:
        store = ZooKeeperMetadataStore(server.connect_string + "/restart", session_timeout=20.0,
                                       request_timeout=1.0)
        try:
            events, changes, topics = Recorder(), Recorder(), Recorder()
            store.add_session_listener(events)
            registered = store.register_broker(BrokerInfo(1, "host1", 9092))
            lease = controller_with_topic(store, on_change=changes)
            store.watch_topics(topics)
            topics.wait_latest(lambda names: names == ["orders"])

            server.stop()
            events.wait_latest(lambda event: event is SessionEvent.SUSPENDED)
            with pytest.raises(NetworkError):
                store.list_topics()
            server.start()

            events.wait_latest(lambda event: event is SessionEvent.RECONNECTED, timeout=30.0)
            assert store.list_brokers() == {1: registered} and store.get_controller() == 1
            assert changes.wait_latest(lambda change: True) == ControllerChange(1, lease)
            state = store.get_partition_state("orders", 0)
            assert store.update_partition_state("orders", 0, replace(state, leader_epoch=1), lease).version == 1
            store.create_topic(two_partitions("payments"))
            topics.wait_latest(lambda names: names == ["orders", "payments"])
        finally:
            store.close()


def test_unreachable_zookeeper_raises_network_error(free_port):
    from seglog.cluster.zk import ZooKeeperMetadataStore

    started = time.monotonic()
    with pytest.raises(NetworkError):
        ZooKeeperMetadataStore(f"127.0.0.1:{free_port()}", connect_timeout=1.0)
    assert time.monotonic() - started < 5


def test_producer_id_blocks_never_overlap(namespace):
    a, b = namespace.store(), namespace.store()
    blocks = []
    lock = threading.Lock()

    def take(store, broker_id):
        for _ in range(10):
            start = store.allocate_producer_ids(broker_id, 100)
            with lock:
                blocks.append(range(start, start + 100))
    threads = [threading.Thread(target=take, args=(s, i)) for i, s in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [i for block in blocks for i in block]
    assert len(ids) == 2000 and len(set(ids)) == 2000
    assert min(ids) == 0


# --- a process paused past its session timeout ---------------------------------------------------------------

_PAUSED_WRITER = r"""
import sys
from seglog.cluster import TopicAssignment
from seglog.cluster.zk import ZooKeeperMetadataStore
store = ZooKeeperMetadataStore(sys.argv[1], session_timeout=2.0)
store.create_topic(TopicAssignment("t", {0: [1]}))
print("ready", flush=True)
for n, line in enumerate(sys.stdin):
    try:
        store.set_topic_config("t", {"retention.ms": str(n)})
        print("ok", flush=True)
    except Exception as exc:
        print(f"failed {exc!r}", flush=True)
"""


@pytest.mark.zookeeper
def test_a_write_right_after_a_pause_past_the_session_timeout_lands_on_the_new_session(zookeeper_server):
    """SIGSTOP past the session timeout, then SIGCONT and a write at once (as a broker answering AlterConfigs
    does): the server refuses it on the expired session, and the store repeats it on the new one instead of
    failing the request with "ZooKeeper is unreachable"."""
    import os
    import signal
    import subprocess
    import sys

    from cluster_harness import seglog_env

    connect = f"{zookeeper_server.connect_string}/paused-{uuid.uuid4().hex[:12]}"
    child = subprocess.Popen([sys.executable, "-c", _PAUSED_WRITER, connect], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=seglog_env())
    try:
        assert child.stdout.readline().strip() == "ready"
        for _ in range(2):
            os.kill(child.pid, signal.SIGSTOP)
            time.sleep(3.5)                                      # past the 2 s session: the server expires it
            os.kill(child.pid, signal.SIGCONT)
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "ok"
    finally:
        child.kill()
        child.wait()


def test_a_connection_cut_right_after_connecting_does_not_fail_the_start(zookeeper_server, monkeypatch):
    """The connection cut just after it was established (a ZooKeeper ping lost on a loaded machine): the
    first request sent fails with ConnectionLoss. As Kafka's ZooKeeperClient, the store repeats it once
    connected again instead of failing its constructor (a restarting broker exited with status 1)."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss

    from seglog.cluster.zk import ZooKeeperMetadataStore

    real = KazooClient._call
    cut = []

    def call(client, request, async_object):
        if not cut and client.chroot:                 # the store's own session, not its chroot creator's
            cut.append(type(request).__name__)
            async_object.set_exception(ConnectionLoss())
            return False
        return real(client, request, async_object)

    monkeypatch.setattr(KazooClient, "_call", call)
    connect = f"{zookeeper_server.connect_string}/cut-{uuid.uuid4().hex[:12]}"
    store = ZooKeeperMetadataStore(connect, session_timeout=6.0)
    try:
        assert cut, "no request was cut"
        assert store.get_or_create_cluster_id("c1") == "c1"
    finally:
        store.close()


# -- client quotas (Kafka's /config/users and /config/clients) ------------------------------------------------------

def test_client_quotas_are_stored_per_entity_and_watched(namespace):
    a, b = namespace.store(), namespace.store()
    seen = Recorder()
    b.watch_entity_configs(seen)
    seen.wait_latest(lambda v: v == {})
    a.update_entity_configs("users/alice", lambda c: {**c, "producer_byte_rate": "1024"})
    a.update_entity_configs("users/alice/clients/c%2F1", lambda c: {**c, "consumer_byte_rate": "2048"})
    a.update_entity_configs("clients/<default>", lambda c: {**c, "request_percentage": "50.0"})
    expected = {"users/alice": {"producer_byte_rate": "1024"},
                "users/alice/clients/c%2F1": {"consumer_byte_rate": "2048"},
                "clients/<default>": {"request_percentage": "50.0"}}
    assert b.get_entity_configs() == expected
    seen.wait_latest(lambda v: v == expected)
    # a change keeps what else the node holds; an entity left without configs is no longer listed
    a.update_entity_configs("users/alice", lambda c: {**c, "SCRAM-SHA-256": "salt=x"})
    a.update_entity_configs("users/alice", lambda c: {k: v for k, v in c.items() if k != "producer_byte_rate"})
    a.update_entity_configs("clients/<default>", lambda c: {})
    expected = {"users/alice": {"SCRAM-SHA-256": "salt=x"}, "users/alice/clients/c%2F1": {"consumer_byte_rate": "2048"}}
    assert a.get_entity_configs() == expected
    seen.wait_latest(lambda v: v == expected)
    if namespace.connect is not None:                 # Kafka's znodes and change notifications
        from kazoo.client import KazooClient
        zk = KazooClient(hosts=namespace.connect)
        zk.start()
        try:
            assert json.loads(zk.get("/config/users/alice/clients/c%2F1")[0]) == {
                "version": 1, "config": {"consumer_byte_rate": "2048"}}
            notices = [json.loads(zk.get(f"/config/changes/{n}")[0]) for n in sorted(zk.get_children("/config/changes"))]
            assert notices[0] == {"version": 2, "entity_path": "users/alice"}
            assert len(notices) == 6 and all(n["version"] == 2 for n in notices)
        finally:
            zk.stop()
