"""A broker told to stop (SIGTERM: Kafka's controlled shutdown in a cluster) while its disk fails: it stops within
a bound, says so in its log, corrupts nothing already stored, and the next start, with room again, serves every
acknowledged record and committed offset.

The disk fails through helpers/failing_disk.py (the broker runs under it; the engine's file calls fail from the
moment the test says, with the errno it says): ENOSPC for every call that writes data, or EIO for every file call.
Every write of a stopping broker is covered that way: the last batches and index entries, leader-epoch, recovery
point and high-watermark checkpoints, producer-state snapshots, the clean-shutdown markers, consumer offsets.

Cluster scenarios: SIGTERM before or after the disk starts failing under idempotent acks=all producers; SIGTERM
while an acks=all produce waits for paused followers (the controller among them, so the controlled shutdown
cannot complete and the broker stops anyway after controlled.shutdown.max.retries x retry.backoff.ms); SIGTERM to
every broker at once, the controller moving leaderships away from brokers that are themselves stopping; SIGTERM
to a broker still starting, waiting for metadata that does not come; topic nodes in ZooKeeper that cannot be read
(garbage, JSON of the wrong shape) left out while the controller keeps handling controlled shutdowns and failovers. A broker that took its log dir offline
before SIGTERM exits with status 1, any other with 0, never with the signal's."""

from __future__ import annotations

import errno
import json
import os
import re
import threading
import time

import pytest

from cluster_harness import ConfluentBackgroundProducer, raw_produce, wait_until
from helpers.failing_disk import clear_trigger, write_trigger
from seglog.faults import OPS
from test_cluster_faults import converge_and_consume

STOP_BOUND_S = 15.0
"""A broker told to stop exits within this (the cluster tests' controlled shutdown is bounded well below it)."""
WRITES = ("pwrite", "write", "fallocate", "ftruncate", "fsync", "fdatasync")
DISKS = pytest.mark.parametrize("error,ops", [(errno.ENOSPC, WRITES), (errno.EIO, OPS)],
                                ids=["ENOSPC", "EIO"])
SHUTDOWN = {"controlled.shutdown.max.retries": 2, "controlled.shutdown.retry.backoff.ms": 2000}
"""Kafka's bound on a controlled shutdown that cannot complete, shortened: 2 x 2 s, then the broker stops anyway."""


def stopped_within(proc, bound: float) -> tuple[int, float]:
    """SIGTERM, then (exit status, seconds it took); AssertionError if still running after `bound` s."""
    t0 = time.monotonic()
    proc.terminate()
    return waited_exit(proc, t0, bound)


def waited_exit(proc, t0: float, bound: float) -> tuple[int, float]:
    while proc.poll() is None and time.monotonic() - t0 < bound:
        time.sleep(0.02)
    took = time.monotonic() - t0
    assert proc.poll() is not None, f"still running {took:.1f} s after SIGTERM"
    return proc.returncode, took


def log_has(text: str, pattern: str) -> bool:
    return any(re.search(pattern, line) for line in text.splitlines())


def assert_exit_status(broker_id: int, status: int, text: str) -> None:
    """A stopped broker's status is 1 once it took its log dir offline (it saw its disk fail before SIGTERM),
    else 0: never the signal's. `text` is its log since it started."""
    failed_first = log_has(text, rf"Shutdown broker {broker_id} because all log dirs in .* have failed")
    assert status == (1 if failed_first else 0), f"exit status {status}:\n{text[-3000:]}"


# -- a lone broker ------------------------------------------------------------------------------------------------

@DISKS
def test_lone_broker_stopped_on_a_failing_disk_exits_and_recovers_everything_acknowledged(
        broker_process, tmp_path, error, ops):
    """Records acknowledged and offsets committed, then the disk fails (a produce meets it and is refused), then
    SIGTERM: the broker exits at once with a line naming the logs it could not close cleanly; started again on
    the same directory with the disk working, it serves every acknowledged record and the committed offset."""
    ck = pytest.importorskip("confluent_kafka")
    data, trigger = tmp_path / "data", tmp_path / "disk"
    b = broker_process(data_dir=data, disk_trigger=trigger)
    acked, refused = [], []
    producer = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "enable.idempotence": True, "acks": "all",
                            "linger.ms": 5, "message.timeout.ms": 3000})

    def report(err, msg):
        (refused if err is not None else acked).append(msg.value())
    for i in range(2000):
        producer.produce("t", b"v%05d" % i, partition=0, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0 and len(acked) == 2000, refused[:3]
    consumer = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g", "enable.auto.commit": False})
    consumer.commit(offsets=[ck.TopicPartition("t", 0, 1500)], asynchronous=False)
    consumer.close()

    write_trigger(trigger, error, ops)
    producer.produce("t", b"late", partition=0, on_delivery=report)
    wait_until(lambda: producer.poll(0.1) >= 0 and (refused or len(acked) > 2000), 10, "an answer to the late record")
    status, took = stopped_within(b.proc, STOP_BOUND_S)
    b.kill()
    producer.flush(0)
    text = open(b.log_path, errors="replace").read()
    assert status == 0, text[-3000:]
    assert log_has(text, r"logs in .* were not closed cleanly .*" + os.strerror(error)), text[-3000:]

    clear_trigger(trigger)
    b = broker_process(data_dir=data)
    consumer = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})
    try:
        [committed] = consumer.committed([ck.TopicPartition("t", 0)], timeout=10)
        assert committed.offset == 1500
        consumer.assign([ck.TopicPartition("t", 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < len(acked) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    assert values[:len(acked)] == acked, f"{len(values)} records read back, {len(acked)} acknowledged"
    assert b.stop() == 0
    print(f"{errno.errorcode[error]}: stopped in {took:.2f} s")


# -- a cluster ------------------------------------------------------------------------------------------------------

@pytest.fixture
def make_cluster(make_cluster):
    """conftest's make_cluster for 3 brokers with SHUTDOWN's settings whose brokers run under
    helpers/failing_disk.py (BrokerProc.fail_disk)."""
    return lambda overrides=None: make_cluster(overrides=dict(SHUTDOWN, **(overrides or {})), disk_faults=True)


@pytest.mark.slow
@pytest.mark.zookeeper
@pytest.mark.timeout(300)
@pytest.mark.parametrize("order", ["stop-then-fail", "fail-then-stop"])
@DISKS
def test_member_stopped_while_its_disk_fails_exits_within_the_bound_and_rejoins(make_cluster, order, error, ops):
    """Under two idempotent acks=all producers, one broker (the leader of partition 0) gets SIGTERM and its disk
    fails during its controlled shutdown, or its disk fails first (it may then be stopping already, having seen the
    failure: Kafka's offline log dir, exit status 1) and SIGTERM follows. Either way it exits within the bound,
    its log says how its shutdown went; started again with a working disk it rejoins every ISR and nothing
    acknowledged is lost or stored twice."""
    c = make_cluster()
    topic = "t"
    c.create_topic(topic, partitions=3, rf=3, configs={"min.insync.replicas": 2})
    cp = ConfluentBackgroundProducer(c.bootstrap, topic, [0, 1, 2], tag=b"c", rate=300, max_pending=400,
                                     **{"message.timeout.ms": 60000}).start()
    try:
        cp.wait_acked(200, 60, details=c.describe)
        b = c.brokers[c.wait_leader(topic, 0)["leader"]]
        mark = len(b.log_text())
        t0 = time.monotonic()
        if order == "stop-then-fail":
            b.proc.terminate()
            time.sleep(0.1)
            b.fail_disk(error, ops)
        else:
            b.fail_disk(error, ops)
            time.sleep(0.3)
            b.proc.terminate()
        status, took = waited_exit(b.proc, t0, STOP_BOUND_S)
        text = b.log_text()[mark:]
        assert_exit_status(b.id, status, text)
        assert log_has(text, r"controlled shutdown (succeeded|incomplete)"), text[-3000:]
        assert log_has(text, rf"broker {b.id} stopped"), text[-3000:]
        cp.wait_acked(100, 30, details=c.describe)         # the others acknowledge meanwhile
        b.heal_disk()
        b.start()
        c.wait_full_isr(topic, [0, 1, 2], timeout=60)
        cp.wait_acked(100, 60, details=c.describe)
    finally:
        cp.stop()
    assert not cp.failed, f"sends failed: {cp.failed[:5]}"
    converge_and_consume(c, topic, [0, 1, 2], [cp])
    print(f"{order} {errno.errorcode[error]}: exit {status} after {took:.2f} s")


@pytest.mark.slow
@pytest.mark.zookeeper
@pytest.mark.timeout(300)
def test_leader_stopped_while_an_acks_all_produce_waits_for_paused_followers(make_cluster):
    """The two followers of a partition, the controller among them, are paused (still in the ISR:
    replica.lag.time.max.ms is long), so an acks=all produce to the leader waits. The leader gets SIGTERM while
    its disk fails: nobody can move its leadership (the controller is paused), so after controlled.shutdown.max.retries
    x retry.backoff.ms it stops anyway, answers the waiting produce (not acknowledged) and exits within the bound.
    With the followers resumed and the leader started again, what was acknowledged before is all there."""
    c = make_cluster({"replica.lag.time.max.ms": 30000, "zookeeper.session.timeout.ms": 20000})
    topic = "t"
    c.create_topic(topic, partitions=3, rf=3, configs={"min.insync.replicas": 2})
    controller = c.controller()[0]
    # a partition led by another broker than the controller (each broker is the preferred leader of one)
    p, st = next((p, st) for p in range(3) if (st := c.wait_leader(topic, p))["leader"] != controller)
    leader = c.brokers[st["leader"]]
    followers = [c.brokers[r] for r in st["isr"] if r != leader.id]
    assert controller in {f.id for f in followers}, c.describe()
    cp = ConfluentBackgroundProducer(c.bootstrap, topic, [p], tag=b"c", rate=200, max_pending=400,
                                     **{"message.timeout.ms": 120000}).start()
    try:
        cp.wait_acked(50, 60, details=c.describe)
        answer = {}

        def produce():      # unacknowledged, it may still be kept (a follower may have fetched it before its
            try:            # pause): a value of producer tag "w" in the harness's format, which the checks allow
                answer["result"] = raw_produce("127.0.0.1", leader.port, topic, p, [b"w-p%d-%08d" % (p, 0)],
                                               acks=-1, timeout_ms=30000, socket_timeout=40)
            except Exception as e:                          # noqa: BLE001 - the connection closed: no ack
                answer["error"] = repr(e)
        for f in followers:
            f.pause()
        try:
            waiter = threading.Thread(target=produce)
            waiter.start()
            time.sleep(1.0)
            assert waiter.is_alive(), f"the acks=all produce did not wait: {answer}"
            mark = len(leader.log_text())
            leader.fail_disk(errno.ENOSPC, WRITES)
            status, took = stopped_within(leader.proc, STOP_BOUND_S)
            waiter.join(10)
            assert not waiter.is_alive(), "the waiting produce was never answered"
            assert answer.get("result", (1, -1))[0] != 0, f"acknowledged without the followers: {answer}"
        finally:
            for f in followers:
                f.resume()
        text = leader.log_text()[mark:]
        assert_exit_status(leader.id, status, text)
        assert log_has(text, r"controlled shutdown incomplete after .* stopping anyway"), text[-3000:]
        leader.heal_disk()
        leader.start()
        c.wait_full_isr(topic, [0, 1, 2], timeout=60)
        cp.wait_acked(50, 60, details=c.describe)
    finally:
        cp.stop()
    assert not cp.failed, f"sends failed: {cp.failed[:5]}"
    converge_and_consume(c, topic, [p], [cp])
    print(f"leader stopped in {took:.2f} s with an acks=all produce waiting: {answer}")


@pytest.mark.slow
@pytest.mark.zookeeper
@pytest.mark.timeout(300)
def test_every_broker_stopped_at_once_while_one_disk_fails_while_the_controller_moves_leaderships(make_cluster):
    """SIGTERM to all three brokers at once, the first one's disk failing: the controller moves leaderships away
    from brokers that are all stopping (it is one of them), so some controlled shutdowns cannot complete; every
    broker exits within the bound anyway. Started again, the cluster serves everything acknowledged."""
    c = make_cluster()
    topic = "t"
    c.create_topic(topic, partitions=3, rf=3, configs={"min.insync.replicas": 2})
    cp = ConfluentBackgroundProducer(c.bootstrap, topic, [0, 1, 2], tag=b"c", rate=300, max_pending=400,
                                     **{"message.timeout.ms": 120000}).start()
    try:
        cp.wait_acked(200, 60, details=c.describe)
        brokers = list(c.brokers.values())
        brokers[0].fail_disk(errno.ENOSPC, WRITES)
        t0 = time.monotonic()
        for b in brokers:
            b.proc.terminate()
        took = {}
        for b in brokers:
            status, took[b.id] = waited_exit(b.proc, t0, STOP_BOUND_S)
            text = b.log_since_start()
            assert_exit_status(b.id, status, text)
            assert log_has(text, rf"broker {b.id} stopped"), text[-3000:]
        brokers[0].heal_disk()
        for b in brokers:
            b.spawn()
        for b in brokers:
            b.wait_started(60)
        c.wait_full_isr(topic, [0, 1, 2], timeout=90)
        cp.wait_acked(100, 90, details=c.describe)
    finally:
        cp.stop()
    assert not cp.failed, f"sends failed: {cp.failed[:5]}"
    converge_and_consume(c, topic, [0, 1, 2], [cp])
    print(f"every broker stopped at once; exits after {took} s")


@pytest.mark.slow
@pytest.mark.zookeeper
@pytest.mark.timeout(300)
def test_broker_told_to_stop_while_it_waits_for_metadata_at_start_up_stops(make_cluster):
    """A broker waits for a live controller before it serves (unbounded: the cluster may be electing one). One
    that never comes (here /controller is claimed, by a session of the test's own, for a broker id nobody
    registers) keeps it starting; SIGTERM then stops it within the bound, as Kafka's shutdown hook stops a broker
    during start-up, instead of being ignored until the start completes. With the claim gone a controller is
    elected, and the broker starts and rejoins every ISR."""
    c = make_cluster()
    topic = "t"
    c.create_topic(topic, partitions=3, rf=3, configs={"min.insync.replicas": 2})
    b = c.brokers[2]
    assert b.stop() == 0
    claim = c.zk.transaction()                # taken from the controller at once: no live broker can claim it
    claim.delete("/controller")
    claim.create("/controller", json.dumps({"version": 1, "brokerid": 7, "timestamp": "0"}).encode(),
                 ephemeral=True)
    assert not [r for r in claim.commit() if isinstance(r, Exception)]
    try:
        mark = len(b.log_text())
        b.spawn()
        wait_until(lambda: log_has(b.log_text()[mark:], r"broker 2 registered"), 30, "broker 2 to register",
                   details=lambda: b.log_tail(30))
        time.sleep(1.0)
        assert b.alive and not log_has(b.log_text()[mark:], r"listening on"), b.log_tail(30)
        status, took = stopped_within(b.proc, STOP_BOUND_S)
    finally:
        c.zk.delete("/controller")
    text = b.log_text()[mark:]
    assert status == 0, text[-3000:]
    assert log_has(text, r"broker 2: told to stop while starting; giving the start up"), text[-3000:]
    assert log_has(text, r"broker 2 stopped"), text[-3000:]
    b.start()
    c.wait_full_isr(topic, [0, 1, 2], timeout=60)
    print(f"stopped in {took:.2f} s while starting")


UNREADABLE = {"bad-garbage": b"\x00{not json\xff",
              "bad-shape": json.dumps({"version": 3, "partitions": {"0": "0,1,2", "1": [-1, 2]}}).encode()}
FAILOVER_MARGIN_S = 15.0
"""A kill -9'd leader's partitions have a new leader within the session timeout plus this (a loaded machine)."""


def metadata_errors(b, topics) -> dict[str, int]:
    """Metadata (auto-creation allowed) straight from broker ``b``: topic -> error code; answered within 15 s."""
    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey

    conn = BrokerConnection("127.0.0.1", b.port, client_id="unreadable-test", timeout=15)
    try:
        md = conn.request(ApiKey.METADATA, {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": True})
    finally:
        conn.close()
    return {t["name"]: t["error_code"] for t in md["topics"]}


@pytest.mark.slow
@pytest.mark.zookeeper
@pytest.mark.timeout(300)
def test_unreadable_topic_nodes_are_left_out_while_the_controller_keeps_working(make_cluster):
    """Topic nodes in ZooKeeper that are not what Kafka writes (garbage bytes; JSON whose replicas are a string and
    a negative broker id) while acks=all producers write to a good topic: every broker logs one ERROR per node
    naming it, Metadata answers UNKNOWN_TOPIC_OR_PARTITION for them at once, and the controller goes on: a
    controlled shutdown completes, a restarted broker starts and rejoins every ISR, a kill -9'd leader (the
    controller) is replaced within the session timeout + a margin while acks=all goes on. A repaired node makes
    its topic work."""
    from seglog.cluster import zklayout
    from seglog.cluster.metastore import TopicAssignment

    c = make_cluster()
    good = "good"
    c.create_topic(good, partitions=3, rf=3, configs={"min.insync.replicas": 2})
    for name, data in UNREADABLE.items():
        c.zk.create(f"/config/topics/{name}", b'{"version":1,"config":{}}')
        c.zk.create(f"/brokers/topics/{name}", data)
    cp = ConfluentBackgroundProducer(c.bootstrap, good, [0, 1, 2], tag=b"c", rate=200, max_pending=400).start()
    figures = {}
    try:
        cp.wait_acked(100, 60, details=c.describe)
        for b in c.brokers.values():
            wait_until(lambda: all(len(re.findall(rf"ERROR .*Topic node /brokers/topics/{n} cannot be read",
                                                  b.log_text())) == 1 for n in UNREADABLE), 20,
                       f"broker {b.id} to log one ERROR per unreadable node", details=lambda: b.log_tail(20))
            t0 = time.monotonic()
            assert metadata_errors(b, [good, *UNREADABLE]) == {good: 0, "bad-garbage": 3, "bad-shape": 3}
            figures[f"metadata-{b.id}"] = round(time.monotonic() - t0, 2)

        controller = c.controller()[0]
        p, st = next((p, st) for p in range(3) if (st := c.wait_leader(good, p))["leader"] != controller)
        leader = c.brokers[st["leader"]]
        mark = len(leader.log_text())
        status, took = stopped_within(leader.proc, STOP_BOUND_S)
        figures["controlled-shutdown"] = round(took, 2)
        text = leader.log_text()[mark:]
        assert status == 0, text[-3000:]
        assert log_has(text, rf"broker {leader.id}: controlled shutdown succeeded"), text[-3000:]
        c.wait_leader(good, p, not_in=(leader.id,), min_epoch=st["leader_epoch"] + 1)
        cp.wait_acked(100, 60, details=c.describe)
        t0 = time.monotonic()
        leader.start()
        figures["restart"] = round(time.monotonic() - t0, 2)
        c.wait_full_isr(good, [0, 1, 2], timeout=60)

        controller = c.controller()[0]
        leaders = {p: c.wait_leader(good, p)["leader"] for p in range(3)}
        victim = controller if controller in leaders.values() else leaders[0]   # the controller if it leads
        epochs = {p: c.state(good, p)["leader_epoch"] for p, b in leaders.items() if b == victim}
        t0 = time.monotonic()
        c.brokers[victim].kill()
        bound = c.overrides["zookeeper.session.timeout.ms"] / 1000 + FAILOVER_MARGIN_S
        for p, epoch in epochs.items():
            c.wait_leader(good, p, not_in=(victim,), min_epoch=epoch + 1, timeout=bound)
        figures[f"failover{'-controller' if victim == controller else ''}"] = round(time.monotonic() - t0, 2)
        cp.wait_acked(100, 60, details=c.describe)
        c.brokers[victim].start()
        c.wait_full_isr(good, [0, 1, 2], timeout=60)
    finally:
        cp.stop()
    assert not cp.failed, f"sends failed: {cp.failed[:5]}"
    converge_and_consume(c, good, [0, 1, 2], [cp])

    repaired = TopicAssignment("bad-shape", {0: (0, 1, 2), 1: (1, 2, 0)})
    c.zk.set("/brokers/topics/bad-shape", zklayout.encode_topic(repaired))
    for p in (0, 1):
        c.wait_full_isr("bad-shape", [p], timeout=60)
    for b in c.brokers.values():
        wait_until(lambda: metadata_errors(b, ["bad-shape", "bad-garbage"]) == {"bad-shape": 0, "bad-garbage": 3},
                   20, f"broker {b.id} to serve the repaired topic")
    leader = c.brokers[c.leader("bad-shape", 0)]
    assert raw_produce("127.0.0.1", leader.port, "bad-shape", 0, [b"repaired"])[0] == 0
    print(f"unreadable topic nodes left out: {figures}")
