"""A broker with two log directories through kafka-python: DescribeLogDirs lists both, AlterReplicaLogDirs moves a
replica while a producer and a consumer go on using it."""

from __future__ import annotations

import threading
import time

import pytest

kafka = pytest.importorskip("kafka")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka import errors as kerr  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402
from kafka.structs import TopicPartitionReplica  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


@pytest.fixture
def two_dir_broker(start_broker, tmp_path):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    return start_broker(dirs, replication_quota_window_num=2), dirs     # a fresh rate's burst: one window


def described(admin) -> dict[str, dict]:
    [broker] = admin.describe_log_dirs()
    return {d["log_dir"]: d for d in broker["log_dirs"]}


def partitions_in(d) -> set[tuple[str, int, bool]]:
    return {(t["name"], p["partition_index"], p["is_future_key"]) for t in d["topics"] for p in t["partitions"]}


def test_describe_and_alter_replica_log_dirs(two_dir_broker):
    broker, (d1, d2) = two_dir_broker
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", linger_ms=5)
    try:
        admin.create_topics([NewTopic("moving", 2, 1)])
        found = described(admin)
        assert set(found) == {d1, d2}
        assert partitions_in(found[d1]) == {("moving", 0, False)} and partitions_in(found[d2]) == {("moving", 1, False)}
        assert all(d["error_code"] == 0 and 0 < d["usable_bytes"] <= d["total_bytes"] for d in found.values())

        for i in range(20000):
            producer.send("moving", b"%06d" % i + b"v" * 200, partition=0)
        producer.flush()
        broker.node.replica_alter_log_dirs_rate = 1 << 20           # 4 MB: a few seconds of copying
        sent, stop = [20000], threading.Event()

        def produce():
            while not stop.is_set():
                producer.send("moving", b"%06d" % sent[0], partition=0).get(30)
                sent[0] += 1

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            tpr = TopicPartitionReplica("moving", 0, 0)
            assert admin.alter_replica_log_dirs({tpr: d2}) == {tpr: kerr.NoError}
            seen_future = False
            deadline = time.monotonic() + 120
            while True:
                assert time.monotonic() < deadline
                found = described(admin)
                seen_future |= ("moving", 0, True) in partitions_in(found[d2])
                if ("moving", 0, False) in partitions_in(found[d2]):
                    break
                time.sleep(0.05)
            assert seen_future and ("moving", 0, False) not in partitions_in(found[d1])
        finally:
            stop.set()
            writer.join()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("moving", 0)])
        consumer.seek_to_beginning()
        got = [int(m.value[:6]) for m in consumer]
        consumer.close()
        assert got == list(range(sent[0]))

        missing = TopicPartitionReplica("moving", 0, 0)
        assert admin.alter_replica_log_dirs({missing: "/no/such/dir"}) == {missing: kerr.LogDirNotFoundError}
        unknown = TopicPartitionReplica("moving", 7, 0)
        assert admin.alter_replica_log_dirs({unknown: d1}) == {unknown: kerr.UnknownTopicOrPartitionError}
        here = TopicPartitionReplica("moving", 1, 0)
        assert admin.alter_replica_log_dirs({here: d2}) == {here: kerr.NoError}
    finally:
        producer.close()
        admin.close()
