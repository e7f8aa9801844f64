"""A broker joining a cluster (ClusterMember on the in-memory metadata store): it takes the cluster's one id
(Kafka's /cluster/id) into its data directory and refuses a directory of another cluster, as Kafka does
(InconsistentClusterIdException); and while __consumer_offsets cannot be created yet, clients get
COORDINATOR_NOT_AVAILABLE without the broker logging a warning on every request."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from seglog.cluster.member import ClusterMember, ClusterView
from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.cluster.metastore import BrokerInfo
from seglog.config import BrokerConfig
from seglog.errors import CoordinatorNotAvailableError, InconsistentClusterIdError
from seglog.node import Node


def meta_properties(path) -> dict[str, str]:
    lines = (path / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@pytest.fixture
def members():
    """start(cluster, data_dir, broker_id) -> a started ClusterMember; all are closed at the end."""
    started = []

    def start(cluster, data_dir, broker_id, **props):
        config = BrokerConfig.from_properties({"broker.id": broker_id, **props})
        node = Node(data_dir, config)
        member = ClusterMember(node, config, MemoryMetadataStore(cluster), "127.0.0.1", 9000 + broker_id)
        try:
            member.start()
        except BaseException:
            node.close()                  # as the broker does when it cannot start
            raise
        started.append((member, node))
        return member

    yield start
    for member, node in started:
        member.close()
        node.close()


def test_every_broker_reports_the_clusters_id(tmp_path, members):
    cluster = MemoryCluster()
    a = members(cluster, tmp_path / "a", 0)
    b = members(cluster, tmp_path / "b", 1)
    assert cluster.cluster_id is not None and len(cluster.cluster_id) == 22
    assert a.node.cluster_id == b.node.cluster_id == cluster.cluster_id
    assert meta_properties(tmp_path / "a")["cluster.id"] == meta_properties(tmp_path / "b")["cluster.id"] \
        == cluster.cluster_id


def test_a_directory_of_another_cluster_is_refused(tmp_path, members):
    first = MemoryCluster()
    stopped = members(first, tmp_path / "a", 0)
    stopped.close()
    stopped.node.close()
    old_id = first.cluster_id
    other = MemoryCluster()
    members(other, tmp_path / "b", 1)
    with pytest.raises(InconsistentClusterIdError) as e:
        members(other, tmp_path / "a", 0)
    assert f"The Cluster ID {other.cluster_id} doesn't match stored clusterId {old_id}" in str(e.value)
    assert meta_properties(tmp_path / "a")["cluster.id"] == old_id, "the directory is left as it was"
    assert set(other.brokers) == {1}, "the refused broker must not register"
    # the same directory back in its own cluster is welcome
    assert members(first, tmp_path / "a", 0).node.cluster_id == old_id


def test_a_zookeeper_broker_leaves_a_new_directorys_cluster_id_to_the_cluster(tmp_path):
    with Node(tmp_path / "zk", {"zookeeper.connect": "127.0.0.1:1/seglog"}) as node:
        assert node.cluster_id is None
        assert not (tmp_path / "zk" / "meta.properties").exists()
        node.adopt_cluster_id("ClusterIdFromZooKeeper")
        assert meta_properties(tmp_path / "zk")["cluster.id"] == "ClusterIdFromZooKeeper"
    with Node(tmp_path / "zk", {"zookeeper.connect": "127.0.0.1:1/seglog"}) as node:
        assert node.cluster_id == "ClusterIdFromZooKeeper"
        with pytest.raises(InconsistentClusterIdError):
            node.adopt_cluster_id("SomeOtherCluster")


def test_offsets_topic_not_creatable_yet_is_warned_about_once(caplog):
    member = SimpleNamespace(assignments={}, states={}, brokers={0: BrokerInfo(0, "h", 1)}, broker_id=0,
                             config=BrokerConfig.from_properties({"offsets.topic.replication.factor": 3}))
    view = ClusterView(member)
    caplog.set_level(logging.INFO, logger="seglog.cluster")
    for _ in range(50):                   # clients retry FindCoordinator every 100 ms or so
        with pytest.raises(CoordinatorNotAvailableError):
            view.coordinator_for("g")
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "1 live brokers, offsets.topic.replication.factor=3" in warnings[0].getMessage()


def test_a_leader_without_the_clients_listener_is_listener_not_found():
    """Kafka's MetadataCache: a live leader with no endpoint on the request's listener gives LISTENER_NOT_FOUND
    and no leader (the handler answers LEADER_NOT_AVAILABLE below Metadata v6); a dead one LEADER_NOT_AVAILABLE;
    brokers without the listener are left out of the broker list."""
    from seglog.cluster.metastore import PartitionState
    both = (("EXTERNAL", "SSL", "h0", 9093), ("INTERNAL", "PLAINTEXT", "h0", 9092))
    listener = ["EXTERNAL"]
    member = SimpleNamespace(
        assignments={"t": SimpleNamespace(partitions={0: [0, 1], 1: [1, 0], 2: [2, 0]})},
        states={("t", 0): PartitionState(0, 3, [0, 1]), ("t", 1): PartitionState(1, 4, [1, 0]),
                ("t", 2): PartitionState(2, 5, [2, 0])},
        brokers={0: BrokerInfo(0, "h0", 9092, endpoints=both),
                 1: BrokerInfo(1, "h1", 9092, endpoints=(("INTERNAL", "PLAINTEXT", "h1", 9092),))},
        broker_id=0, current_listener=lambda: listener[0])
    view = ClusterView(member)
    ok, no_listener, dead = (view.partition_metadata("t", p) for p in range(3))
    assert (ok["error_code"], ok["leader_id"]) == (0, 0)
    assert (no_listener["error_code"], no_listener["leader_id"], no_listener["leader_epoch"]) == (72, -1, 4)
    assert no_listener["replica_nodes"] == [1, 0] and no_listener["isr_nodes"] == [1, 0]
    assert (dead["error_code"], dead["leader_id"], dead["offline_replicas"]) == (5, -1, [2])
    assert [b["node_id"] for b in view.brokers()] == [0]
    listener[0] = "INTERNAL"
    assert view.partition_metadata("t", 1)["error_code"] == 0 and len(view.brokers()) == 2


def test_a_new_session_whose_first_store_calls_fail_still_rejoins_the_cluster(tmp_path, members, monkeypatch):
    """After its session expired, a broker registers again, enters the controller election and unfences its
    replicas. A store call failing on the way (a ZooKeeper request timing out on a loaded machine) is retried:
    the broker must not stay fenced and out of the election (a chaos run saw two of three brokers stuck so,
    the partitions' ISRs shrunk to one replica for good)."""
    import time

    from seglog.errors import RequestTimedOutError

    cluster = MemoryCluster()
    member = members(cluster, tmp_path / "a", 0)
    assert member.controller_id == 0
    store = member.store
    real = store.elect_controller
    failures = []

    def flaky(*args, **kwargs):
        if len(failures) < 2:
            failures.append(1)
            raise RequestTimedOutError("ZooKeeper request timed out")
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "elect_controller", flaky)
    store.expire_session()
    deadline = time.monotonic() + 10
    while len(failures) < 2:                            # the expiry was taken in, the election tried twice
        assert time.monotonic() < deadline, f"the election was tried {len(failures)} time(s), not retried"
        time.sleep(0.05)
    while not (member.controller_id == 0 and member.controller is not None and not member.replicas._fenced):
        assert time.monotonic() < deadline, (member.controller_id, member.replicas._fenced)
        time.sleep(0.05)


def test_dynamic_broker_configs_apply_on_every_member_and_before_registering(tmp_path, members):
    """A cluster's dynamic configs (the store's brokers/<default> and brokers/<id>) reach every member's node,
    its own config and its controller at once; a member starting later applies them before it registers."""
    import time

    cluster = MemoryCluster()
    a = members(cluster, tmp_path / "a", 0)
    store = MemoryMetadataStore(cluster)
    store.update_entity_configs("brokers/<default>", lambda c: {**c, "unclean.leader.election.enable": "true",
                                                                "log.retention.ms": "1000"})
    store.update_entity_configs("brokers/1", lambda c: {**c, "log.retention.ms": "2000"})
    deadline = time.monotonic() + 10
    while not a.node.config.unclean_leader_election_enable and time.monotonic() < deadline:
        time.sleep(0.01)
    assert a.config.unclean_leader_election_enable and a.controller.config.unclean_leader_election_enable
    assert a.node.config.log_config().retention_ms == 1000
    b = members(cluster, tmp_path / "b", 1)
    assert b.node.config.log_config().retention_ms == 2000            # its own entity over the default
    store.close()


def test_a_restarted_broker_serves_only_once_every_topic_is_loaded(tmp_path, members, monkeypatch):
    """A broker whose topics load slowly (their logs recovered after kill -9 on a loaded machine, longer than
    the session timeout) does not start serving without them: its Metadata answer for a topic still loading
    was UNKNOWN_TOPIC_OR_PARTITION, and librdkafka took the topic for deleted (partition count 3 -> 0, its
    idempotent producer reset the sequences and bumped its epoch, storing re-sent batches twice)."""
    import asyncio
    import threading

    from seglog.broker.handlers import Handlers

    cluster = MemoryCluster()
    first = members(cluster, tmp_path / "a", 0, **{"num.partitions": 3, "default.replication.factor": 1})
    for name in ("t1", "t2", "t3"):
        first.view.create_topic(name, 3, {}, 1, assignment={p: [0] for p in range(3)})
    real = Node.apply_topic
    slow = threading.Event()

    def slow_apply(node, topic, *args, **kwargs):
        if topic == "t2" and not slow.is_set():
            slow.wait(1.5)                          # several session timeouts of the member below
        return real(node, topic, *args, **kwargs)

    monkeypatch.setattr(Node, "apply_topic", slow_apply)
    second = members(cluster, tmp_path / "b", 1, **{"zookeeper.session.timeout.ms": 200})
    broker = SimpleNamespace(view=second.view, node=second.node, config=second.config,
                             allowed=lambda *a: True)
    header = SimpleNamespace(api_version=12)
    answer = asyncio.run(Handlers.handle_metadata(
        SimpleNamespace(broker=broker, node=second.node, config=second.config), header,
        {"topics": [{"name": n, "topic_id": None} for n in ("t1", "t2", "t3")],
         "allow_auto_topic_creation": False}))
    assert [(t["name"], t["error_code"], len(t["partitions"])) for t in answer["topics"]] == \
        [("t1", 0, 3), ("t2", 0, 3), ("t3", 0, 3)]


def test_a_topic_created_elsewhere_and_not_yet_known_here_is_leader_not_available(tmp_path, members, monkeypatch):
    """Metadata with auto-creation for a topic another broker just created, which this broker's view of the
    store does not hold yet: Kafka answers LEADER_NOT_AVAILABLE (its "already exists", retriable), never
    UNKNOWN_TOPIC_OR_PARTITION, which librdkafka takes for a deleted topic (partition count to 0)."""
    import asyncio

    from seglog.broker.handlers import Handlers
    from seglog.errors import TopicAlreadyExistsError

    member = members(MemoryCluster(), tmp_path / "a", 0)

    def created_elsewhere(name, *args, **kwargs):
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")

    monkeypatch.setattr(member.view, "create_topic", created_elsewhere)
    broker = SimpleNamespace(view=member.view, node=member.node, config=member.config, allowed=lambda *a: True)
    answer = asyncio.run(Handlers.handle_metadata(
        SimpleNamespace(broker=broker, node=member.node, config=member.config, may_create_topic=lambda _: True),
        SimpleNamespace(api_version=12),
        {"topics": [{"name": "fresh", "topic_id": None}], "allow_auto_topic_creation": True}))
    assert [(t["name"], t["error_code"], t["partitions"]) for t in answer["topics"]] == [("fresh", 5, [])]
