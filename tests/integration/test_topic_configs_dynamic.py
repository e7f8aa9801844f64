"""Altered topic configs take effect at once, on the leader, the followers and the log, as in Kafka (issue 12,
item 3): min.insync.replicas (both ways), max.message.bytes, message.timestamp.type, segment.bytes,
retention.ms, retention.bytes and cleanup.policy, on a 3-broker cluster (ZooKeeper + ``python -m seglog broker``
subprocesses, configs altered with ``seglog topics --alter`` and kafka-python's AdminClient) and on a lone broker.
(unclean.leader.election.enable, which the controller reads, is covered by test_cluster_faults.py.)
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time

import pytest

from cluster_harness import Cluster, raw_produce, replica_log, seglog_env, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

NOT_ENOUGH_REPLICAS = 19
RECORD_TOO_LARGE = 10
LOG_APPEND_TIME = 0x08            # the timestamp-type bit of a v2 batch's attributes


def alter_with_cli(bootstrap: str, topic: str, **configs) -> None:
    """``seglog topics --bootstrap-server ... --alter --topic T --config k=v``, as a user types it."""
    args = [sys.executable, "-m", "seglog", "topics", "--bootstrap-server", bootstrap, "--alter", "--topic", topic]
    for k, v in configs.items():
        args += ["--config", f"{k.replace('_', '.')}={v}"]
    res = subprocess.run(args, capture_output=True, text=True, env=seglog_env(), timeout=60)
    assert res.returncode == 0, res.stderr


def alter_with_admin(bootstrap: str, topic: str, configs: dict) -> None:
    """kafka-python's AdminClient.alter_configs (AlterConfigs: the complete set of overrides)."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        results = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    finally:
        admin.close()
    assert results == {"topic": {topic: "OK"}}, results


def describe_partitions(bootstrap: str, topic: str, flag: str) -> list[str]:
    """``seglog topics --describe --topic T <flag>``: the partition lines kafka-topics.sh's filter keeps."""
    res = subprocess.run([sys.executable, "-m", "seglog", "topics", "--bootstrap-server", bootstrap, "--describe",
                          "--topic", topic, flag], capture_output=True, text=True, env=seglog_env(), timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def timestamp_types(directory) -> set[bool]:
    """Whether each stored batch has LogAppendTime (its attributes' timestamp-type bit)."""
    return {bool(struct.unpack_from(">h", b.data, 21)[0] & LOG_APPEND_TIME) for b in replica_log(directory).batches}


def produce(host: str, port: int, topic: str, n: int, size: int = 100, acks: int = -1) -> None:
    for i in range(n):
        err, _ = raw_produce(host, port, topic, 0, [b"%06d" % i + b"x" * size], acks=acks)
        assert err == 0, f"record {i}: error {err}"


@pytest.fixture
def cluster(zookeeper_server, tmp_path):
    c = Cluster(zookeeper_server.connect_string, tmp_path / "cluster", 3,
                {"log.retention.check.interval.ms": 300},
                chroot=f"/configs-{int(time.time() * 1000) % 10**8}")
    c.start()
    yield c
    c.close()


@pytest.mark.zookeeper
def test_altered_configs_reach_leader_and_followers_at_once(cluster):
    c = cluster
    topic = "altered"
    c.create_topic(topic, partitions=1, rf=3, configs={"min.insync.replicas": 2})
    st = c.wait_leader(topic, 0)
    leader = c.brokers[st["leader"]]
    replicas = [c.brokers[i] for i in c.assignment(topic)[0]]

    # min.insync.replicas raised above the ISR refuses acks=all at once; lowered again, accepts it at once
    follower = next(b for b in replicas if b is not leader)
    # the CLI is pointed at the live brokers: a paused bootstrap broker costs a client its request.timeout.ms
    live = ",".join(f"127.0.0.1:{b.port}" for b in c.brokers.values() if b is not follower)
    follower.pause()
    try:
        c.wait_isr(topic, 0, [b.id for b in replicas if b is not follower], timeout=30)
        assert raw_produce("127.0.0.1", leader.port, topic, 0, [b"isr2"])[0] == 0
        [line] = describe_partitions(live, topic, "--under-replicated-partitions")
        assert line.startswith(f"\tTopic: {topic}\tPartition: 0\tLeader: {leader.id}\t") and \
            sorted(line.split("Isr: ")[1].split(",")) == sorted(str(b.id) for b in replicas if b is not follower)
        assert describe_partitions(live, topic, "--at-min-isr-partitions") == [line]
        assert describe_partitions(live, topic, "--under-min-isr-partitions") == []
        assert describe_partitions(live, topic, "--unavailable-partitions") == []
        alter_with_cli(live, topic, min_insync_replicas=3)
        assert describe_partitions(live, topic, "--under-min-isr-partitions") == [line]
        wait_until(lambda: raw_produce("127.0.0.1", leader.port, topic, 0, [b"refused"])[0] == NOT_ENOUGH_REPLICAS,
                   10, "acks=all refused with min.insync.replicas=3 and an ISR of 2", details=c.describe)
        assert raw_produce("127.0.0.1", leader.port, topic, 0, [b"acks1"], acks=1)[0] == 0
        alter_with_cli(live, topic, min_insync_replicas=2)
        wait_until(lambda: raw_produce("127.0.0.1", leader.port, topic, 0, [b"again"])[0] == 0,
                   10, "acks=all accepted again with min.insync.replicas=2", details=c.describe)
    finally:
        follower.resume()
    c.wait_isr(topic, 0, [b.id for b in replicas], timeout=60)
    # the brokers' metadata follows ZooKeeper's ISR a moment later: wait for the one the CLI asks
    wait_until(lambda: describe_partitions(c.bootstrap, topic, "--under-replicated-partitions") == [], 20,
               "no under-replicated partition once the ISR is full again", details=c.describe)

    # max.message.bytes: the leader refuses a larger batch
    alter_with_admin(c.bootstrap, topic, {"min.insync.replicas": "2", "max.message.bytes": "2000"})
    wait_until(lambda: raw_produce("127.0.0.1", leader.port, topic, 0, [b"y" * 5000])[0] == RECORD_TOO_LARGE,
               10, "a 5000-byte record refused with max.message.bytes=2000")

    # message.timestamp.type=LogAppendTime: the leader stamps batches, followers store them as the leader wrote
    alter_with_cli(c.bootstrap, topic, max_message_bytes=1048588, message_timestamp_type="LogAppendTime")
    time.sleep(0.5)
    produce("127.0.0.1", leader.port, topic, 3)
    end = replica_log(leader.partition_dir(topic, 0)).end_offset
    c.wait_converged(topic, 0, min_end=end)
    for b in replicas:
        batches = replica_log(b.partition_dir(topic, 0)).batches
        assert bool(struct.unpack_from(">h", batches[-1].data, 21)[0] & LOG_APPEND_TIME), f"broker {b.id}"
        assert not struct.unpack_from(">h", batches[0].data, 21)[0] & LOG_APPEND_TIME

    # segment.bytes: every replica rolls its segments by the new size
    alter_with_cli(c.bootstrap, topic, segment_bytes=16384)
    time.sleep(0.5)
    produce("127.0.0.1", leader.port, topic, 120, size=1000)
    end = replica_log(leader.partition_dir(topic, 0)).end_offset
    c.wait_converged(topic, 0, min_end=end)
    for b in replicas:
        segments = replica_log(b.partition_dir(topic, 0)).segments
        assert len(segments) >= 5, f"broker {b.id} kept {segments} with segment.bytes=16384"

    # retention.ms: every replica deletes its closed segments
    alter_with_cli(c.bootstrap, topic, segment_bytes=16384, retention_ms=1)
    for b in replicas:
        wait_until(lambda: len(replica_log(b.partition_dir(topic, 0)).segments) == 1, 20,
                   f"broker {b.id} to delete its old segments with retention.ms=1", details=c.describe)


@pytest.mark.zookeeper
def test_altered_retention_bytes_and_cleanup_policy_reach_every_replica(cluster):
    c = cluster
    sized, keyed = "sized", "keyed"
    for topic in (sized, keyed):
        c.create_topic(topic, partitions=1, rf=3, configs={"segment.bytes": 16384,
                                                          "min.cleanable.dirty.ratio": "0.01"})
    st = c.wait_leader(sized, 0)
    produce("127.0.0.1", c.brokers[st["leader"]].port, sized, 120, size=1000)
    kst = c.wait_leader(keyed, 0)

    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", linger_ms=0)
    for i in range(400):
        p.send(keyed, key=b"k%d" % (i % 4), value=b"v%05d" % i + b"z" * 400, partition=0)
    p.flush(30)
    p.close()
    for topic, leader in ((sized, st["leader"]), (keyed, kst["leader"])):
        c.wait_converged(topic, 0, min_end=replica_log(c.brokers[leader].partition_dir(topic, 0)).end_offset)

    alter_with_cli(c.bootstrap, sized, segment_bytes=16384, retention_bytes=40000)
    alter_with_cli(c.bootstrap, keyed, segment_bytes=16384, min_cleanable_dirty_ratio="0.01", cleanup_policy="compact")
    for b in c.brokers.values():
        wait_until(lambda: sum(len(x.data) for x in replica_log(b.partition_dir(sized, 0)).batches) <= 40000 + 16384,
                   20, f"broker {b.id} to trim {sized} to retention.bytes=40000", details=c.describe)
    for b in c.brokers.values():
        wait_until(lambda: len(replica_log(b.partition_dir(keyed, 0)).records()) < 100, 60,
                   f"broker {b.id} to compact {keyed} (400 records, 4 keys)", details=c.describe)


def test_altered_configs_apply_on_a_lone_broker(tmp_path):
    import seglog

    with seglog.serve(tmp_path / "data", log_retention_check_interval_ms=300) as broker:
        topic = "lone"
        from kafka.admin import KafkaAdminClient, NewTopic
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.close()
        host, port = broker.host, broker.port
        assert raw_produce(host, port, topic, 0, [b"a"])[0] == 0
        alter_with_admin(broker.bootstrap_servers, topic, {"min.insync.replicas": "2"})
        assert raw_produce(host, port, topic, 0, [b"refused"])[0] == NOT_ENOUGH_REPLICAS     # ISR of 1 < 2
        assert raw_produce(host, port, topic, 0, [b"acks1"], acks=1)[0] == 0
        alter_with_admin(broker.bootstrap_servers, topic, {"min.insync.replicas": "1"})
        assert raw_produce(host, port, topic, 0, [b"again"])[0] == 0
        alter_with_admin(broker.bootstrap_servers, topic, {"max.message.bytes": "2000"})
        assert raw_produce(host, port, topic, 0, [b"y" * 5000])[0] == RECORD_TOO_LARGE
        alter_with_admin(broker.bootstrap_servers, topic, {"message.timestamp.type": "LogAppendTime",
                                                           "segment.bytes": "16384"})
        produce(host, port, topic, 60, size=1000)
        d = tmp_path / "data" / f"{topic}-0"
        assert timestamp_types(d) == {False, True}
        assert len(replica_log(d).segments) >= 3
        alter_with_admin(broker.bootstrap_servers, topic, {"segment.bytes": "16384", "retention.ms": "1"})
        wait_until(lambda: len(replica_log(d).segments) == 1, 20, "old segments deleted with retention.ms=1")
