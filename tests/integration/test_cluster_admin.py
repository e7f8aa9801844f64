"""Admin requests on a real 3-broker cluster (ZooKeeper + ``python -m seglog broker`` subprocesses) are answered
within their timeout, or with a clear error (issue 12, item 2):

- a broker accepts connections only once it registered and knows the brokers, the controller and the topics,
  so a client connecting the moment the three ports accept can create a replicated topic at once (before,
  confluent-kafka's AdminClient was told there was no controller, and timed out after 30 s);
- CreateTopics waits for the partitions' leaders only as long as its timeout_ms says, then answers
  REQUEST_TIMED_OUT with a message (the topic exists), as Kafka does.
"""

from __future__ import annotations

import socket
import time

import pytest

from cluster_harness import Cluster, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(300)]

FRESH_CLUSTERS = 3
REQUEST_TIMED_OUT = 7


def accepting(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_a_fresh_cluster_creates_a_topic_as_soon_as_its_ports_accept(zookeeper_server, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    took = []
    for run in range(FRESH_CLUSTERS):
        c = Cluster(zookeeper_server.connect_string, tmp_path / f"c{run}", 3,
                    chroot=f"/fresh-{run}-{int(time.time() * 1000) % 10**8}")
        try:
            for b in c.brokers.values():
                b.spawn()
            for b in c.brokers.values():
                wait_until(lambda: accepting(b.port), 60, f"broker {b.id} to accept connections",
                           interval=0.005, details=c.describe)
            t0 = time.monotonic()
            admin = AdminClient({"bootstrap.servers": c.bootstrap})
            futures = admin.create_topics([NewTopic("r", 1, 3)], operation_timeout=10, request_timeout=30)
            futures["r"].result(35)
            took.append(round(time.monotonic() - t0, 2))
            st = c.state("r", 0)
            assert st is not None and sorted(st["isr"]) == [0, 1, 2], c.describe()
        finally:
            c.close()
    assert max(took) < 10, took
    print(f"CreateTopics on {FRESH_CLUSTERS} fresh clusters answered after {took} s")


def test_create_topics_answers_request_timed_out_within_its_timeout_when_no_leader_comes(zookeeper_server,
                                                                                       tmp_path):
    """With the controller paused (its session not yet expired: the others still follow it), nobody gives the new
    topic's partitions a leader: CreateTopics answers REQUEST_TIMED_OUT after its timeout_ms, with a message."""
    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey

    c = Cluster(zookeeper_server.connect_string, tmp_path / "c", 3,
                {"zookeeper.session.timeout.ms": 20000}, chroot=f"/paused-{int(time.time() * 1000) % 10**8}")
    c.start()
    try:
        controller, _ = c.controller()
        other = next(b for i, b in c.brokers.items() if i != controller)
        c.brokers[controller].pause()
        conn = BrokerConnection("127.0.0.1", other.port, client_id="admin-test", timeout=30)
        try:
            t0 = time.monotonic()
            r = conn.request(ApiKey.CREATE_TOPICS, {"topics": [
                {"name": "nobody-leads", "num_partitions": 1, "replication_factor": 2, "assignments": [],
                 "configs": []}], "timeout_ms": 1500, "validate_only": False})
            took = time.monotonic() - t0
        finally:
            conn.close()
        t = r["topics"][0]
        assert t["error_code"] == REQUEST_TIMED_OUT and "nobody-leads" in t["error_message"], t
        assert 1.4 < took < 5, took
        assert "nobody-leads" in c.topics()                 # created all the same; a controller will elect
        c.brokers[controller].resume()
        wait_until(lambda: c.state("nobody-leads", 0), 30, "a state once the controller resumed",
                   details=c.describe)
    finally:
        c.close()


def test_create_topics_with_a_manual_replica_assignment(zookeeper_server, tmp_path):
    """CreateTopics' assignments place the replicas as given (first replica: preferred leader), on a cluster
    as on a lone broker; an assignment naming an unknown broker is refused with Kafka's error and message."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidReplicationAssignmentError

    c = Cluster(zookeeper_server.connect_string, tmp_path / "c", 3, chroot=f"/manual-{int(time.time() * 1000) % 10**8}")
    c.start()
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic("placed", num_partitions=-1, replication_factor=-1,
                                      replica_assignments={0: [2, 0], 1: [1, 2], 2: [0, 1]})])
        assert c.assignment("placed") == {0: [2, 0], 1: [1, 2], 2: [0, 1]}
        for p, leader in ((0, 2), (1, 1), (2, 0)):
            assert c.wait_leader("placed", p)["leader"] == leader
        with pytest.raises(InvalidReplicationAssignmentError, match="includes broker 9, but no such broker"):
            admin.create_topics([NewTopic("nowhere", num_partitions=-1, replication_factor=-1,
                                          replica_assignments={0: [0, 9]})])
        assert "nowhere" not in admin.list_topics()
        # CreatePartitions' assignments: one replica list per new partition, the topic's replication factor
        from kafka.admin import NewPartitions
        admin.create_partitions({"placed": NewPartitions(5, [[1, 0], [0, 2]])})
        assert c.assignment("placed") == {0: [2, 0], 1: [1, 2], 2: [0, 1], 3: [1, 0], 4: [0, 2]}
        assert c.wait_leader("placed", 3)["leader"] == 1
        with pytest.raises(InvalidReplicationAssignmentError, match="partition 0 has 2 while partitions \\[5\\]"):
            admin.create_partitions({"placed": NewPartitions(6, [[1]])})
        assert len(c.assignment("placed")) == 5
        # DeleteTopics v6 by topic id, at any broker: the cluster's id of the topic deletes it everywhere
        import uuid

        from kafka.errors import UnknownTopicIdError
        [described] = admin.describe_topics(["placed"])
        topic_id = uuid.UUID(str(described["topic_id"]))
        with pytest.raises(UnknownTopicIdError):
            admin.delete_topics([uuid.uuid4()])
        deleted = admin.delete_topics([topic_id])
        assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [("placed", 0)]
        wait_until(lambda: "placed" not in c.topics(), 30, "the topic deleted by id to be gone", details=c.describe)
    finally:
        admin.close()
        c.close()


def test_leader_elections_preferred_and_unclean_from_the_clients_and_the_cli(zookeeper_server, tmp_path):
    """ElectLeaders at the controller of a cluster that does not rebalance by itself: after its preferred leader
    bounced, a partition is led by another replica until `seglog leader-election --election-type PREFERRED`
    (kafka-leader-election.sh's options and lines) gives leadership back in a new epoch; asked again, confluent-
    kafka's AdminClient.elect_leaders gets ELECTION_NOT_NEEDED, as does an unclean election of a partition with
    a live leader; an unknown partition is reported per partition and makes the command exit 1."""
    import subprocess
    import sys

    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    from cluster_harness import seglog_env

    c = Cluster(zookeeper_server.connect_string, tmp_path / "c", 3, {"auto.leader.rebalance.enable": "false"},
                chroot=f"/elect-{int(time.time() * 1000) % 10**8}")
    c.start()
    try:
        c.create_topic("e", partitions=2, rf=3)
        from helpers.kafka_wire import RawConnection
        from seglog.cluster.zklayout import decode_topic_id
        from seglog.protocol import ApiKey
        import json
        stored = decode_topic_id(json.loads(c.zk.get("/brokers/topics/e")[0])["topic_id"])
        for b in c.brokers.values():                    # the topic's one id, from ZooKeeper, on every broker
            with RawConnection(("127.0.0.1", b.port)) as conn:
                [t] = conn.request(ApiKey.METADATA, 12, {"topics": [{"name": "e"}],
                                                         "allow_auto_topic_creation": False})["topics"]
            assert t["topic_id"] == stored and stored.int
        preferred = c.assignment("e")[0][0]
        c.brokers[preferred].stop()
        c.brokers[preferred].start()
        st = c.wait_isr("e", 0, c.assignment("e")[0], timeout=60)
        assert st["leader"] != preferred, st

        def cli(*args):
            return subprocess.run([sys.executable, "-m", "seglog", "leader-election", "--bootstrap-server",
                                   c.bootstrap, *args], capture_output=True, text=True, timeout=60, env=seglog_env())
        r = cli("--election-type", "PREFERRED", "--topic", "e", "--partition", "0")
        assert (r.returncode, r.stdout) == (0, "Successfully completed leader election (PREFERRED) for partitions "
                                               "e-0\n"), r.stderr
        back = c.wait_leader("e", 0, min_epoch=st["leader_epoch"] + 1)
        assert back["leader"] == preferred

        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
            result = admin.elect_leaders(election, [TopicPartition("e", 0)]).result(30)
            assert result[TopicPartition("e", 0)].code() == 84, result          # ELECTION_NOT_NEEDED
        assert c.state("e", 0)["leader_epoch"] == back["leader_epoch"]

        r = cli("--election-type", "unclean", "--path-to-json-file", str(_json(tmp_path, [("e", 1), ("e", 7)])))
        assert r.returncode == 1
        assert "Valid replica already elected for partitions e-1\n" in r.stdout
        assert "Error completing leader election (UNCLEAN) for partition: e-7: UnknownTopicOrPartitionError" in r.stdout
        assert r.stderr.strip() == "seglog leader-election: error: 1 replica(s) could not be elected"
    finally:
        c.close()


def _json(tmp_path, partitions):
    import json
    path = tmp_path / "partitions.json"
    path.write_text(json.dumps({"partitions": [{"topic": t, "partition": p} for t, p in partitions]}))
    return path
