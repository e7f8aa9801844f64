"""Transactions on a replicated cluster: ZooKeeper + three ``python -m seglog broker`` subprocesses
(tests/cluster_harness.py) and confluent-kafka's transactional producer.

The transaction coordinator of an id is the leader of its ``__transaction_state`` partition; markers go to
every partition's leader (WriteTxnMarkers to the other brokers). Killing the coordinator broker (kill -9) in
the middle of a transaction moves the coordinator with the partition's leadership: the new one reads the
replicated state log and the transaction then commits or aborts, whole. read_committed consumers must see every
transaction entirely or not at all, and every transaction whose commit returned.
"""

from __future__ import annotations

import re
import time

import pytest

from cluster_harness import Cluster, close_producers

import seglog

ck = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(400)]

TXN_OVERRIDES = {"transaction.state.log.num.partitions": 3, "transaction.state.log.replication.factor": 3,
                 "transaction.state.log.min.isr": 2,
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}


@pytest.fixture
def cluster(zookeeper_server, tmp_path, request):
    name = re.sub(r"[^a-zA-Z0-9]", "-", request.node.name)[:80]
    c = Cluster(zookeeper_server.connect_string, tmp_path / "cluster", 3, TXN_OVERRIDES,
                chroot=f"/{name}-{int(time.time() * 1000) % 10**8}")
    c.start()
    yield c
    close_producers()
    c.close()


def create_topic(c: Cluster, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})   # kept alive until the result: a destroyed
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)   # handle fails it with _DESTROY


def read_committed(bootstrap: str, topic: str, expected_min: int, idle_s: float = 3.0) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time()}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        c.subscribe([topic])
        values, last = [], time.monotonic()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is None or m.error():
                if len(values) >= expected_min and time.monotonic() - last > idle_s:
                    break
                continue
            values.append(m.value())
            last = time.monotonic()
        return values
    finally:
        c.close()


def coordinator_of(c: Cluster, tid: str) -> int:
    node = seglog.connect(c.bootstrap)
    try:
        return node.txn_coordinator.coordinator(tid)[0]
    finally:
        node.close()


def test_commits_and_aborts_with_markers_on_every_broker(cluster):
    create_topic(cluster, "out", 6)                      # leaders spread over the three brokers
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "spread"})
    p.init_transactions(60)
    committed = []
    for t in range(8):
        p.begin_transaction()
        values = [b"t%d-%d" % (t, i) for i in range(24)]
        for i, v in enumerate(values):
            p.produce("out", v, partition=i % 6)
        if t % 2:
            p.flush()
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed += values
    assert sorted(read_committed(cluster.bootstrap, "out", len(committed))) == sorted(committed)


ROUNDS = 4


def test_coordinator_killed_mid_transaction_commits_or_aborts_whole(cluster):
    """Each round kills the transaction's coordinator broker, alternately before commit_transaction and right
    after it returned, then restarts it. Every round's values are visible all together or not at all; the
    rounds whose commit returned are all visible."""
    create_topic(cluster, "eos", 3)
    tid = "killed-coordinator"
    outcome: dict[int, str] = {}
    conf = {"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "transaction.timeout.ms": 20000}
    p = Producer(conf)
    p.init_transactions(60)
    for r in range(ROUNDS):
        values = [b"r%d-%d" % (r, i) for i in range(30)]
        p.begin_transaction()
        for i, v in enumerate(values):
            p.produce("eos", v, partition=i % 3)
        p.flush(60)
        victim = cluster.brokers[coordinator_of(cluster, tid)]
        try:
            if r % 2 == 0:
                victim.kill()
                p.commit_transaction(90)
            else:
                p.commit_transaction(90)
                victim.kill()
            outcome[r] = "committed"
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                p.abort_transaction(90)
                outcome[r] = "aborted"
            else:                                            # fatal or unknown: a new instance finishes it
                outcome[r] = "unknown"
                p = Producer(conf)
                p.init_transactions(90)
        victim.start()
        time.sleep(1.0)
    got = set(read_committed(cluster.bootstrap, "eos", 0, idle_s=5.0))
    for r in range(ROUNDS):
        values = {b"r%d-%d" % (r, i) for i in range(30)}
        seen = values & got
        assert seen in (set(), values), f"round {r} is half visible ({len(seen)} of 30), outcome {outcome[r]}"
        if outcome[r] == "committed":
            assert seen == values, f"round {r} committed but is not visible"
        if outcome[r] == "aborted":
            assert not seen, f"round {r} aborted but is visible"
    assert "committed" in outcome.values()
