"""Partition reassignment (KIP-455) on a real 3-broker cluster (ZooKeeper + ``python -m seglog broker``
subprocesses, brokers 0, 1, 2), driven by `seglog reassign-partitions` and by kafka-python's AdminClient:

- a partition with data moves from brokers [0, 1] to [1, 2] while a producer writes with acks=all: no
  acknowledged record is lost, leadership leaves broker 0, the new replica holds the same log byte for byte,
  and broker 0 deletes its copy;
- a reassignment that cannot complete (its new replica's broker is stalled) is listed with its adding and
  removing replicas, and cancelled back to the original replicas; errors are Kafka's; a broker that is not
  the controller answers NOT_CONTROLLER to a change and lists from the metadata store; `seglog topics
  --describe` shows the adding and removing replicas;
- the controller stops in the middle of a move: the next one completes it, and the removed broker deletes its
  copy when it starts again;
- --generate proposes a placement over the brokers listed; bad JSON files are refused with Kafka's messages;
- a replica added after DeleteRecords left the leader's log start offset inside a batch catches up;
- brokers with two log dirs: "log_dirs" in the plan puts each replica in the directory named (the new one as
  it is created, the kept one moved there), --replica-alter-log-dirs-throttle limits the copy, --verify waits for
  the moves and removes the throttles.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_cli import fails, ok

from cluster_harness import (HOST, OFFSETS_TOPIC, BackgroundProducer, Cluster, close_producers, consume_all,
                             raw_produce, replica_log, wait_until)

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(300)]

NOT_CONTROLLER, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS = 41, 39, 85


@pytest.fixture(scope="module")
def cluster(zookeeper_server, tmp_path_factory):
    # a long session: a paused broker stays registered (alive to the controller) while a test holds it
    c = Cluster(zookeeper_server.connect_string, tmp_path_factory.mktemp("reassign"), 3,
                {"zookeeper.session.timeout.ms": 20000}, chroot=f"/reassign-{int(time.time() * 1000) % 10**8}")
    try:
        c.start()
        yield c
    finally:
        close_producers()
        c.close()


def create(c: Cluster, topic: str, replicas: list[int]) -> None:
    from kafka.admin import NewTopic

    admin = c.admin()
    try:
        admin.create_topics([NewTopic(topic, num_partitions=-1, replication_factor=-1,
                                      replica_assignments={0: replicas})])
    finally:
        admin.close()
    c.wait_isr(topic, 0, replicas)


def plan_file(path, topic: str, replicas: list[int]) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}))
    return str(path)


def local_copies(c: Cluster, broker: int, topic: str) -> list[str]:
    """The broker's directories of the topic's partition 0, those renamed for deletion included."""
    return sorted(d.name for d in c.brokers[broker].data_dir.iterdir() if d.name.startswith(f"{topic}-0"))


def test_a_partition_moves_with_its_data_while_a_producer_writes(cluster, tmp_path):
    c = cluster
    create(c, "moved", [0, 1])
    producer = BackgroundProducer(c.bootstrap, "moved", [0], tag=b"m", rate=200)
    producer.send_sync(3000)                                       # data to copy before the new replica syncs
    producer.start()
    producer.wait_acked(100, 30)
    plan = plan_file(tmp_path / "plan.json", "moved", [1, 2])
    out = ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--execute", "--reassignment-json-file", plan)
    assert out.splitlines() == [
        "Current partition replica assignment", "",
        '{"version":1,"partitions":[{"topic":"moved","partition":0,"replicas":[0,1],"log_dirs":["any","any"]}]}',
        "", "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignment for moved-0"]

    def completed():
        out = ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--verify", "--reassignment-json-file",
                 plan)
        assert out.splitlines()[0] == "Status of partition reassignment:"
        return out.splitlines()[1] == "Reassignment of partition moved-0 is completed."
    wait_until(completed, 90, "the reassignment to complete", interval=1, details=c.describe)
    producer.wait_acked(100, 30, details=c.describe)                # the producer goes on at the new leader
    producer.stop()

    assert c.assignment("moved") == {0: [1, 2]}
    st = c.wait_isr("moved", 0, [1, 2])
    assert st["leader"] in (1, 2)
    acked = {seq for seq, _, _ in producer.acked[0]}
    records = consume_all(c.bootstrap, "moved", [0])[0]
    stored = {BackgroundProducer.parse(v)[2] for _, _, v in records}
    assert len(acked) > 3000 and not acked - stored, sorted(acked - stored)[:10]
    log = c.wait_converged("moved", 0, min_end=len(records))
    assert log.end_offset >= len(records)
    wait_until(lambda: local_copies(c, 0, "moved") == [], 30, "broker 0 to delete its replica of moved-0",
               details=lambda: f"{local_copies(c, 0, 'moved')}\n{c.describe()}")
    assert ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--list") == \
        "No partition reassignments found.\n"


def test_a_new_replica_catches_up_from_a_log_start_offset_inside_a_batch(cluster, tmp_path):
    """DeleteRecords leaves the leader's log start offset inside a batch (offset 5 of the batch 0-9); a replica
    added afterwards is answered OFFSET_OUT_OF_RANGE from 0, restarts empty at 5, is sent the whole batch, and
    must take it (as Kafka's Partition: its log restarts at the batch) to join the ISR."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient

    c = cluster
    create(c, "midbatch", [0])
    assert raw_produce(HOST, c.brokers[0].port, "midbatch", 0, [b"r%d" % i for i in range(10)], acks=1) == (0, 0)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    [(_, fut)] = admin.delete_records([ck.TopicPartition("midbatch", 0, 5)]).items()
    assert fut.result(30).low_watermark == 5
    plan = plan_file(tmp_path / "plan.json", "midbatch", [0, 1])
    ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--execute", "--reassignment-json-file", plan)
    c.wait_isr("midbatch", 0, [0, 1], timeout=60)
    logs = c.wait_converged("midbatch", 0, min_end=10)
    assert logs.end_offset == 10
    records = consume_all(c.bootstrap, "midbatch", [0])[0]
    assert [v for _, _, v in records] == [b"r%d" % i for i in range(5, 10)]


def test_a_stuck_reassignment_is_listed_and_cancelled(cluster, tmp_path):
    """A broker other than the controller is paused (still registered): a move onto it is accepted and cannot
    complete, so it is listed, refused a second --execute, and cancelled back to the original replicas."""
    from kafka import TopicPartition
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey

    c = cluster
    controller, _ = c.controller()
    stalled = max(b for b in c.brokers if b != controller)
    a, b = sorted(set(c.brokers) - {stalled})
    reachable = c.bootstrap_of([a, b])
    create(c, "held", [a, b])
    tp = TopicPartition("held", 0)
    admin = c.admin()
    try:
        results = admin.alter_partition_reassignments({tp: [a, 9], TopicPartition("held", 4): [a, b]})
        assert results[tp] is InvalidReplicationAssignmentError                  # broker 9 is not alive
        assert results[TopicPartition("held", 4)].errno == 3                     # UNKNOWN_TOPIC_OR_PARTITION
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        conn = BrokerConnection("127.0.0.1", c.brokers[stalled].port, client_id="reassign-test", timeout=10)
        try:
            r = conn.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"timeout_ms": 1000, "topics": [
                {"name": "held", "partitions": [{"partition_index": 0, "replicas": [a, b]}]}]})
            assert r["error_code"] == NOT_CONTROLLER
            r = conn.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 1000, "topics": None})
            assert (r["error_code"], r["topics"]) == (0, [])         # any broker lists, from the store
        finally:
            conn.close()

        plan = plan_file(tmp_path / "plan.json", "held", [a, stalled])
        before = c.wait_isr("held", 0, [a, b])
        c.brokers[stalled].pause()                     # registered, but it will not fetch: the move cannot end
        try:
            assert admin.alter_partition_reassignments({tp: [a, stalled]}) == {tp: None}
            st = c.state("held", 0)                     # Kafka's phase A: a new epoch for the grown replica set
            assert (st["leader"], st["leader_epoch"], sorted(st["isr"])) == \
                (before["leader"], before["leader_epoch"] + 1, [a, b])
            assert admin.list_partition_reassignments() == {
                tp: {"replicas": [a, stalled, b], "adding_replicas": [stalled], "removing_replicas": [b]}}
            assert ok("reassign-partitions", "--bootstrap-server", reachable, "--list").splitlines() == [
                "Current partition reassignments:",
                f"held-0: replicas: {a},{stalled},{b}. adding: {stalled}. removing: {b}."]
            described = ok("topics", "--bootstrap-server", reachable, "--describe", "--topic", "held").splitlines()
            assert "\tReplicationFactor: 2\t" in described[0]              # the original replicas' count
            assert described[1].endswith(f"\tReplicas: {a},{stalled},{b}\tIsr: {a},{b}\tAdding Replicas: "
                                         f"{stalled}\tRemoving Replicas: {b}"), described
            assert ok("topics", "--bootstrap-server", reachable, "--describe", "--topic", "held",
                      "--under-replicated-partitions") == ""
            fails(1, "Cannot execute because there is an existing partition assignment", "reassign-partitions",
                  "--bootstrap-server", reachable, "--execute", "--reassignment-json-file", plan)
            assert ok("reassign-partitions", "--bootstrap-server", reachable, "--verify",
                      "--reassignment-json-file", plan).splitlines()[1] == \
                "Reassignment of partition held-0 is still in progress."
            assert ok("reassign-partitions", "--bootstrap-server", reachable, "--cancel",
                      "--reassignment-json-file", plan) == "Successfully cancelled partition reassignment for: held-0\n"
            assert c.assignment("held") == {0: [a, b]}
            st = c.state("held", 0)                     # the cancel completes at once (phase B): one more epoch
            assert (st["leader"], st["leader_epoch"], sorted(st["isr"])) == \
                (before["leader"], before["leader_epoch"] + 2, [a, b])
        finally:
            c.brokers[stalled].resume()
        assert admin.list_partition_reassignments() == {}
        assert ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--cancel",
                  "--reassignment-json-file", plan) == "None of the specified partition reassignments are active.\n"
        c.wait_isr("held", 0, [a, b])
        wait_until(lambda: local_copies(c, stalled, "held") == [], 30,
                   f"broker {stalled} to hold no replica of held-0", details=c.describe)
    finally:
        admin.close()


def test_a_new_controller_completes_a_reassignment_and_a_removed_broker_drops_its_copy_at_start(cluster,
                                                                                               tmp_path):
    """The controller stops while a move onto a stalled broker waits; the next controller completes the move once
    that broker catches up, and the stopped broker, removed meanwhile, deletes its copy when it starts again."""
    c = cluster
    first, _ = c.controller()
    stalled = max(b for b in c.brokers if b != first)
    other = next(b for b in c.brokers if b not in (first, stalled))
    create(c, "handover", [first, other])
    assert raw_produce("127.0.0.1", c.brokers[c.leader("handover", 0)].port, "handover", 0,
                       [b"v%d" % i for i in range(50)])[0] == 0
    plan = plan_file(tmp_path / "plan.json", "handover", [other, stalled])
    c.brokers[stalled].pause()
    assert ok("reassign-partitions", "--bootstrap-server", c.bootstrap_of([first, other]), "--execute",
              "--reassignment-json-file", plan).endswith("Successfully started partition reassignment for handover-0\n")
    c.brokers[first].stop()                            # a controlled shutdown: leadership goes to `other`
    try:
        wait_until(lambda: c.controller()[0] == other, 30, f"broker {other} to take over as controller",
                   details=c.describe)
        assert c.assignment("handover") == {0: [other, stalled, first]}           # still moving
        c.brokers[stalled].resume()
        wait_until(lambda: c.assignment("handover") == {0: [other, stalled]}, 60, "the move to complete",
                   details=c.describe)
        assert c.wait_isr("handover", 0, [other, stalled])["leader"] == other
        c.wait_converged("handover", 0, min_end=50)
        assert local_copies(c, first, "handover") == ["handover-0"]               # it was stopped meanwhile
    finally:
        c.brokers[stalled].resume()
        c.brokers[first].start()
    wait_until(lambda: local_copies(c, first, "handover") == [], 30, f"broker {first} to delete its old copy",
               details=c.describe)
    wait_until(lambda: set(c.live_ids()) == set(c.brokers), 30, "every broker registered", details=c.describe)


def test_generate_proposes_an_assignment_over_the_brokers_listed(cluster, tmp_path):
    c = cluster
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "moved"}]}))
    lines = ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--generate", "--topics-to-move-json-file",
               topics, "--broker-list", "0,2").splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[2:4] == [
        "", "Proposed partition reassignment configuration"]
    assert json.loads(lines[1])["partitions"] == [{"topic": "moved", "partition": 0, "replicas": [1, 2],
                                                   "log_dirs": ["any", "any"]}]
    [proposed] = json.loads(lines[4])["partitions"]
    assert sorted(proposed["replicas"]) == [0, 2] and proposed["log_dirs"] == ["any", "any"]
    fails(2, "exactly one action", "reassign-partitions", "--bootstrap-server", c.bootstrap, "--list", "--verify")


def test_bad_reassignment_files_are_refused_before_any_broker_is_asked(tmp_path):
    nowhere = "127.0.0.1:1"

    def refused(needle, doc, action="--execute"):
        path = tmp_path / "plan.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        fails(1, needle, "reassign-partitions", "--bootstrap-server", nowhere, action, "--reassignment-json-file",
              path)

    refused("is not JSON", "{")
    refused("Partition reassignment list cannot be empty", {"version": 1, "partitions": []})
    refused("each partition needs", {"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]})
    refused("duplicate topic partitions: t-0", {"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                                                               {"topic": "t", "partition": 0, "replicas": [2]}]})
    refused("may not contain duplicate entries: t-0 contains 1",
            {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "--verify")
    refused("log_dirs must be strings", {"partitions": [{"topic": "t", "partition": 0, "replicas": [1],
                                                         "log_dirs": [1]}]}, "--cancel")
    refused("different from size of log dirs list", {"partitions": [{"topic": "t", "partition": 0, "replicas": [1],
                                                                     "log_dirs": ["any", "any"]}]})
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "a"}, {"topic": "a"}]}))
    fails(1, "List of topics to reassign contains duplicate entries: a", "reassign-partitions", "--bootstrap-server",
          nowhere, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1,2")
    fails(2, "--generate needs", "reassign-partitions", "--bootstrap-server", nowhere, "--generate",
          "--broker-list", "1,2")


def test_a_replica_set_change_with_the_leader_kept_takes_kafkas_new_leader_epochs(cluster, tmp_path):
    """Kafka's controller bumps the leader epoch though the leader stays: once when the reassignment starts
    (phase A: the leader learns the grown replica set), once when it completes (phase B: the target replica
    set), and once for each removed replica leaving the ISR. The leader then writes in the last epoch, and
    every replica holds the same log."""
    c = cluster
    create(c, "grown", [0, 1])
    before = c.wait_isr("grown", 0, [0, 1])
    assert before["leader"] == 0
    host, port = c.client_addr[0]
    assert raw_produce(host, port, "grown", 0, [b"before"])[0] == 0
    ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--execute", "--reassignment-json-file",
       plan_file(tmp_path / "grown.json", "grown", [0, 2]))
    wait_until(lambda: c.assignment("grown") == {0: [0, 2]}, 60, "the reassignment to complete",
               details=c.describe)
    st = c.wait_isr("grown", 0, [0, 2])
    assert (st["leader"], st["leader_epoch"]) == (0, before["leader_epoch"] + 3), (before, st)
    wait_until(lambda: raw_produce(host, port, "grown", 0, [b"after"])[0] == 0, 30, "broker 0 to lead epoch "
               f"{st['leader_epoch']}", details=c.describe)
    log = c.wait_converged("grown", 0, min_end=2, ids=[0, 2])
    assert log.batches[0].leader_epoch == before["leader_epoch"] and \
        log.batches[-1].leader_epoch == st["leader_epoch"], [b.leader_epoch for b in log.batches]


def broker_rates(c: Cluster, b: int) -> dict[str, tuple[str, int]]:
    """DescribeConfigs of broker `b` at that broker: the throttled rates' (value, config source)."""
    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey

    conn = BrokerConnection(*c.client_addr[b], client_id="throttle-test")
    try:
        r = conn.request(ApiKey.DESCRIBE_CONFIGS, {"resources": [{"resource_type": 4, "resource_name": str(b),
                                                                  "configuration_keys": None}]})
    finally:
        conn.close()
    return {e["name"]: (e["value"], e["config_source"]) for e in r["results"][0]["configs"]
            if e["name"].endswith("replication.throttled.rate")}


def test_a_throttled_reassignment_copies_at_the_throttled_rate_and_verify_removes_the_throttles(zookeeper_server,
                                                                                                tmp_path):
    """--execute --throttle sets Kafka's throttles (the rate on the brokers involved, the replica lists on the
    topic) and the new replica copies the log at about that rate; the same move without --throttle is fast;
    --verify, once the move is done, removes every throttle. Replication quotas over 2 windows of 1 s (the
    burst a fresh rate lets through is one window's) and 32 KiB replica fetches."""
    c = Cluster(zookeeper_server.connect_string, tmp_path / "c", 2,
                {"replication.quota.window.num": 2, "replica.fetch.max.bytes": 32768},
                chroot=f"/throttle-{int(time.time() * 1000) % 10**8}")
    rate, size = 100 * 1024, 640 * 1024
    try:
        c.start()
        host, port = c.client_addr[0]
        took = {}
        for topic, throttle in (("fast", ()), ("slow", ("--throttle", str(rate)))):
            create(c, topic, [0])
            for _ in range(size // (16 * 1024)):
                assert raw_produce(host, port, topic, 0, [b"v" * 1024] * 16, acks=1)[0] == 0
            out = ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--execute",
                     "--reassignment-json-file", plan_file(tmp_path / f"{topic}.json", topic, [0, 1]), *throttle)
            t0 = time.monotonic()
            if throttle:
                assert out.splitlines()[-3:] == [
                    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                    "throttle is removed.", f"The inter-broker throttle limit was set to {rate} B/s",
                    "Successfully started partition reassignment for slow-0"]
                config = json.loads(c.zk.get("/config/topics/slow")[0])["config"]
                assert (config["leader.replication.throttled.replicas"],
                        config["follower.replication.throttled.replicas"]) == ("0:0", "0:1")
                for b in (0, 1):
                    assert json.loads(c.zk.get(f"/config/brokers/{b}")[0])["config"] == {
                        "leader.replication.throttled.rate": str(rate),
                        "follower.replication.throttled.rate": str(rate)}
                dynamic = {"leader.replication.throttled.rate": (str(rate), 2),          # DYNAMIC_BROKER_CONFIG
                           "follower.replication.throttled.rate": (str(rate), 2)}
                wait_until(lambda: broker_rates(c, 1) == dynamic, 10, "broker 1 to describe its rates")
            c.wait_isr(topic, 0, [0, 1], timeout=120)
            took[topic] = time.monotonic() - t0
        print(f"{size} B moved in {took['fast']:.2f} s unthrottled, {took['slow']:.2f} s at {rate} B/s")
        assert took["slow"] >= size / rate - 1.5, took           # one window's burst, the last fetch's bytes
        assert took["fast"] < took["slow"] / 2, took
        wait_until(lambda: "Reassignment of partition slow-0 is completed." in ok(
            "reassign-partitions", "--bootstrap-server", c.bootstrap, "--verify", "--reassignment-json-file",
            str(tmp_path / "slow.json"), "--preserve-throttles"), 30, "the move to complete")
        assert "throttled.replicas" in c.zk.get("/config/topics/slow")[0].decode(), "--preserve-throttles kept them"
        out = ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--verify", "--reassignment-json-file",
                 str(tmp_path / "slow.json"))
        assert out.splitlines() == ["Status of partition reassignment:",
                                    "Reassignment of partition slow-0 is completed.", "",
                                    "Clearing broker-level throttles on brokers 0,1",
                                    "Clearing topic-level throttles on topic slow"]
        assert "throttled" not in c.zk.get("/config/topics/slow")[0].decode()
        for b in (0, 1):
            assert json.loads(c.zk.get(f"/config/brokers/{b}")[0])["config"] == {}
        wait_until(lambda: broker_rates(c, 0)["leader.replication.throttled.rate"] == (str((1 << 63) - 1), 5),
                   10, "broker 0 to describe its rate as the default (no limit)")
    finally:
        c.close()


def test_a_leader_reelected_for_a_replica_set_change_keeps_waiting_produces_and_groups(cluster, tmp_path):
    """As Kafka's Partition.makeLeader for a leader that is not new: a new epoch with the leader kept leaves its
    acks=all produces waiting (acknowledged once replicated, no error), and the groups of a __consumer_offsets
    partition whose replicas change stay loaded: a KIP-848 member heartbeats on in its epoch, and a classic
    group's rebalance goes on (a JoinGroup waiting for the other member is answered once it rejoins)."""
    import threading
    import uuid

    from kafka import TopicPartition
    from kafka.admin import NewTopic

    from seglog.client import BrokerConnection
    from seglog.offsets_store import partition_for_group
    from seglog.protocol import ApiKey

    c = cluster
    controller, _ = c.controller()
    stalled = max(b for b in c.brokers if b != controller)
    leader, added = sorted(set(c.brokers) - {stalled})
    admin = c.admin()
    try:
        admin.create_topics([NewTopic("waiting", num_partitions=-1, replication_factor=-1,
                                      replica_assignments={0: [leader, stalled]},
                                      topic_configs={"min.insync.replicas": "1"})])
        before = c.wait_isr("waiting", 0, [leader, stalled])
        assert before["leader"] == leader
        host, port = c.client_addr[leader]
        result = []
        c.brokers[stalled].pause()                  # the follower stops fetching: the produce waits for it
        try:
            sender = threading.Thread(target=lambda: result.append(
                raw_produce(host, port, "waiting", 0, [b"in flight"], timeout_ms=30000, socket_timeout=60)))
            sender.start()
            time.sleep(0.3)
            tp = TopicPartition("waiting", 0)
            assert admin.alter_partition_reassignments({tp: [leader, stalled, added]}) == {tp: None}
            wait_until(lambda: c.state("waiting", 0)["leader_epoch"] > before["leader_epoch"], 10,
                       "the reassignment to bump the leader epoch", details=c.describe)
            assert c.state("waiting", 0)["leader"] == leader
            assert result == []                         # still waiting across the new epoch
        finally:
            c.brokers[stalled].resume()
        sender.join(60)
        assert result and result[0][0] == 0, result
        wait_until(lambda: c.assignment("waiting") == {0: [leader, stalled, added]}, 60,
                   "the reassignment to complete", details=c.describe)

        group = "kept-members"
        p = partition_for_group(group, 3)
        conn = BrokerConnection(host, port, client_id="epoch-test", timeout=10)
        try:                                            # creates __consumer_offsets
            wait_until(lambda: conn.request(ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group]},
                                            version=4)["coordinators"][0]["error_code"] == 0, 30,
                       "a coordinator for the group", details=c.describe)
        finally:
            conn.close()
        st = c.wait_isr(OFFSETS_TOPIC, p, sorted(c.brokers))
        coordinator = st["leader"]
        member = str(uuid.uuid4())
        conn = BrokerConnection(*c.client_addr[coordinator], client_id="epoch-test", timeout=10)

        def heartbeat(epoch: int) -> dict:
            return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, {
                "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["waiting"],
                "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}, version=1)
        classic = next(g for g in (f"kept-classic-{i}" for i in range(100)) if partition_for_group(g, 3) == p)
        first = BrokerConnection(*c.client_addr[coordinator], client_id="epoch-test", timeout=60)
        second = BrokerConnection(*c.client_addr[coordinator], client_id="epoch-test", timeout=60)

        def join(conn, member_id: str = "") -> dict:
            body = {"group_id": classic, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
                    "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}]}
            r = conn.request(ApiKey.JOIN_GROUP, body, version=5)
            if r["error_code"] == 79:                   # MEMBER_ID_REQUIRED
                body["member_id"] = r["member_id"]
                r = conn.request(ApiKey.JOIN_GROUP, body, version=5)
            return r
        try:
            joined = heartbeat(0)
            assert joined["error_code"] == 0, joined
            a = join(first)
            assert a["error_code"] == 0 and a["generation_id"] == 1, a
            s = first.request(ApiKey.SYNC_GROUP, {"group_id": classic, "generation_id": 1, "member_id": a["member_id"],
                                                  "group_instance_id": None, "assignments": []}, version=3)
            assert s["error_code"] == 0, s
            pending = []                                # a second member's JoinGroup waits for the first to rejoin
            joiner = threading.Thread(target=lambda: pending.append(join(second)))
            joiner.start()
            time.sleep(0.5)
            replicas = c.assignment(OFFSETS_TOPIC)[p]
            removed = max(r for r in replicas if r != coordinator)
            keep = sorted(r for r in replicas if r != removed)
            otp = TopicPartition(OFFSETS_TOPIC, p)
            target = [coordinator] + [r for r in keep if r != coordinator]
            assert admin.alter_partition_reassignments({otp: target}) == {otp: None}
            wait_until(lambda: sorted(c.assignment(OFFSETS_TOPIC)[p]) == keep
                       and c.state(OFFSETS_TOPIC, p)["leader_epoch"] > st["leader_epoch"], 60,
                       "the offsets partition's reassignment to complete", details=c.describe)
            assert c.state(OFFSETS_TOPIC, p)["leader"] == coordinator
            for _ in range(6):                          # while the coordinator applies the new epochs
                again = heartbeat(joined["member_epoch"])
                assert (again["error_code"], again["member_epoch"]) == (0, joined["member_epoch"]), again
                time.sleep(0.5)
            assert pending == []                        # still waiting: the rebalance goes on
            rejoined = join(first, a["member_id"])
            joiner.join(30)
            assert (rejoined["error_code"], rejoined["generation_id"]) == (0, 2), rejoined
            assert pending and (pending[0]["error_code"], pending[0]["generation_id"]) == (0, 2), pending
        finally:
            conn.close()
            first.close()
            second.close()
    finally:
        admin.close()


def test_log_dirs_in_the_plan_place_the_replicas_and_verify_follows_them(zookeeper_server, tmp_path):
    c = Cluster(zookeeper_server.connect_string, tmp_path / "c", 3,
                chroot=f"/logdirs-{int(time.time() * 1000) % 10**8}", log_dirs=2)
    try:
        c.start()
        create(c, "jbod", [0, 1])
        host, port = c.client_addr[0]
        for i in range(64):
            assert raw_produce(host, port, "jbod", 0, [b"%04d" % i + b"v" * 1020] * 16, acks=-1)[0] == 0
        assert (c.work_dir / "d1" / "jbod-0").is_dir()
        target = {1: f"{c.work_dir / 'd1'}-1", 2: f"{c.work_dir / 'd2'}-1"}
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "jbod", "partition": 0, "replicas": [1, 2], "log_dirs": [target[1], target[2]]}]}))
        out = ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--execute", "--reassignment-json-file",
                 str(plan), "--replica-alter-log-dirs-throttle", "500000", "--timeout", "30000")
        lines = out.splitlines()
        assert "The replica-alter-dir throttle limit was set to 500000 B/s" in lines
        assert "Successfully started partition reassignment for jbod-0" in lines
        started = sorted(r for line in lines if line.startswith("Successfully started log directory move")
                         for r in line.split(": ", 1)[1].split(","))
        assert started == ["jbod-0-1", "jbod-0-2"], out
        for b in (1, 2):
            assert json.loads(c.zk.get(f"/config/brokers/{b}")[0])["config"] == {
                "replica.alter.log.dirs.io.max.bytes.per.second": "500000"}

        def verified():
            text = ok("reassign-partitions", "--bootstrap-server", c.bootstrap, "--verify",
                      "--reassignment-json-file", str(plan))
            return text if "Clearing broker-level throttles" in text else None
        text = wait_until(verified, 120, "the partition and replica moves to complete")
        assert "Status of replica log dir movement:" in text
        assert "Reassignment of replica jbod-0-1 completed successfully." in text
        assert "Reassignment of replica jbod-0-2 completed successfully." in text
        for b in (1, 2):
            assert json.loads(c.zk.get(f"/config/brokers/{b}")[0])["config"] == {}
            assert (Path(target[b]) / "jbod-0").is_dir()
            assert not (c.work_dir / f"d{b}" / "jbod-0").exists()
        wait_until(lambda: replica_log(Path(target[1]) / "jbod-0").data == replica_log(Path(target[2]) / "jbod-0").data
                   and replica_log(Path(target[2]) / "jbod-0").end_offset == 64 * 16, 30, "the same log on both")
    finally:
        c.close()
