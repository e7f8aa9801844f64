"""Dynamic broker configs through real clients (issue 15): confluent-kafka's AdminClient (incremental_alter_configs
and describe_configs on BROKER resources), kafka-python's describe_configs and ``seglog configs --entity-type
brokers`` against a lone broker (applied at once, kept across a restart, advertised.listeners reaching Metadata),
and a dynamic default reaching every broker of a 3-broker cluster at once (min.insync.replicas refusing acks=all,
then deleted)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from cluster_harness import Cluster, raw_produce, replica_log, seglog_env, wait_until

NOT_ENOUGH_REPLICAS = 19


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def incremental(bootstrap: str, name: str, **ops) -> None:
    """confluent-kafka incremental_alter_configs of broker `name` (librdkafka takes no empty name, so the default
    goes through the CLI): k=value sets, k=None deletes."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET if v is not None
                           else AlterConfigOpType.DELETE) for k, v in ops.items()]
    admin = _admin(bootstrap)                                   # kept alive until the answer
    [future] = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, name, incremental_configs=entries)]).values()
    future.result(timeout=30)


def described(bootstrap: str, name: str) -> dict:
    from confluent_kafka.admin import ConfigResource, ResourceType
    admin = _admin(bootstrap)
    [future] = admin.describe_configs([ConfigResource(ResourceType.BROKER, name)]).values()
    return future.result(timeout=30)


def cli(bootstrap: str, *args) -> str:
    res = subprocess.run([sys.executable, "-m", "seglog", "configs", "--bootstrap-server", bootstrap, *args],
                         capture_output=True, text=True, env=seglog_env(), timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_lone_broker_configs_change_at_once_and_survive_a_restart(start_broker, tmp_path):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigSource
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    broker = start_broker(data_dir=tmp_path / "d", log_retention_hours=2)
    bs, port = broker.bootstrap_servers, broker.broker.port
    broker.node.create_topic("t", 1)

    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:                 # what kafka-python's own suite asks (test_describe_configs_broker_resource_returns_configs)
        entry = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, 0)],
                                       config_filter="all")["broker"]["0"]["advertised.listeners"]
    finally:
        admin.close()
    assert (entry["read_only"], entry["config_source"], entry["synonyms"]) == (False, "DEFAULT_CONFIG", [])

    assert cli(bs, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
               "min.insync.replicas=2,log.retention.ms=60000") == \
        "Completed updating default config for brokers in the cluster.\n"
    assert broker.node.partition("t", 0).log.config.retention_ms == 60000
    assert raw_produce("127.0.0.1", port, "t", 0, [b"refused"])[0] == NOT_ENOUGH_REPLICAS    # ISR of one < 2
    assert raw_produce("127.0.0.1", port, "t", 0, [b"acks1"], acks=1)[0] == 0
    incremental(bs, "0", log_retention_ms="30000", advertised_listeners=f"PLAINTEXT://localhost:{port}")
    assert broker.node.partition("t", 0).log.config.retention_ms == 30000
    [meta] = _admin(bs).list_topics(timeout=10).brokers.values()
    assert (meta.host, meta.port) == ("localhost", port)

    configs = described(bs, "0")
    retention = configs["log.retention.ms"]
    assert (retention.value, retention.source, retention.is_read_only) == (
        "30000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    assert set(retention.synonyms) == {"log.retention.ms", "log.retention.hours"}     # a dict by name here
    assert configs["listeners"].is_read_only and configs["log.retention.hours"].is_read_only
    assert configs["min.insync.replicas"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert cli(bs, "--describe", "--entity-type", "brokers", "--entity-default").splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=60000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=60000, "
        "STATIC_BROKER_CONFIG:log.retention.hours=2, DEFAULT_CONFIG:log.retention.hours=168}",
        "  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2, "
        "DEFAULT_CONFIG:min.insync.replicas=1}"]
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically: Set\\(listeners\\)"):
        incremental(bs, "0", listeners="PLAINTEXT://127.0.0.1:0")
    incremental(bs, "0", num_io_threads="4")                                  # the disk-call pool, resized
    assert broker.node.partition("t", 0).log_end_offset == 1                  # served through it from now on
    assert raw_produce("127.0.0.1", port, "t", 0, [b"after"], acks=1)[0] == 0

    out = cli(bs, "--describe", "--entity-type", "brokers", "--entity-name", "0")
    assert out.splitlines()[0] == "Dynamic configs for broker 0 are:"
    assert "  log.retention.ms=30000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=30000, " \
           "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=60000, STATIC_BROKER_CONFIG:log.retention.hours=2, " \
           "DEFAULT_CONFIG:log.retention.hours=168}" in out.splitlines()

    broker.stop()                                                             # kept across a restart
    broker = start_broker(data_dir=tmp_path / "d", log_retention_hours=2)
    assert broker.node.partition("t", 0).log.config.retention_ms == 30000
    assert broker.node.partition("t", 0).log.config.min_insync_replicas == 2
    assert cli(broker.bootstrap_servers, "--alter", "--entity-type", "brokers", "--entity-default",
               "--delete-config", "min.insync.replicas") == "Completed updating default config for brokers in the " \
                                                            "cluster.\n"
    assert broker.node.partition("t", 0).log.config.min_insync_replicas == 1
    assert raw_produce("127.0.0.1", broker.broker.port, "t", 0, [b"accepted"])[0] == 0


@pytest.fixture
def cluster(zookeeper_server, tmp_path):
    c = Cluster(zookeeper_server.connect_string, tmp_path / "cluster", 3,
                chroot=f"/dynamic-{int(time.time() * 1000) % 10**8}")
    c.start()
    yield c
    c.close()


@pytest.mark.slow
@pytest.mark.zookeeper
@pytest.mark.timeout(300)
def test_dynamic_default_reaches_every_broker_of_a_cluster_at_once(cluster):
    c = cluster
    topic = "dyn"
    c.create_topic(topic, partitions=1, rf=3)
    own = "own-min-isr"
    c.create_topic(own, partitions=1, rf=3, configs={"min.insync.replicas": 1})
    st = c.wait_leader(topic, 0)
    leader = c.brokers[st["leader"]]
    follower = next(b for i, b in c.brokers.items() if i != leader.id)
    live = ",".join(f"127.0.0.1:{b.port}" for b in c.brokers.values() if b is not follower)
    follower.pause()
    try:
        c.wait_isr(topic, 0, [i for i in c.brokers if i != follower.id], timeout=40)
        assert raw_produce("127.0.0.1", leader.port, topic, 0, [b"isr2"])[0] == 0
        # until its session expires the paused broker stays in Metadata, where a client may pick it for a request
        # any broker answers (the default resource) and wait its whole timeout, as Kafka's clients would
        wait_until(lambda: follower.id not in metadata_hosts(f"127.0.0.1:{leader.port}"), 30,
                   "the paused broker out of the live brokers", details=c.describe)
        out = cli(live, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                  "min.insync.replicas=3")
        assert out == "Completed updating default config for brokers in the cluster.\n"
        wait_until(lambda: raw_produce("127.0.0.1", leader.port, topic, 0, [b"refused"])[0] == NOT_ENOUGH_REPLICAS,
                   15, "acks=all refused with a dynamic default min.insync.replicas=3 and an ISR of 2",
                   details=c.describe)
        own_leader = c.brokers[c.wait_leader(own, 0)["leader"]]
        if own_leader is not follower:                          # its own override (1) wins over the default
            assert raw_produce("127.0.0.1", own_leader.port, own, 0, [b"own"])[0] == 0
        for b in c.brokers.values():
            if b is not follower:
                entry = described(f"127.0.0.1:{b.port}", str(b.id))["min.insync.replicas"]
                assert (entry.value, entry.is_read_only) == ("3", False)
        assert cli(live, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config",
                   "min.insync.replicas") == "Completed updating default config for brokers in the cluster.\n"
        wait_until(lambda: raw_produce("127.0.0.1", leader.port, topic, 0, [b"again"])[0] == 0,
                   15, "acks=all accepted again once the dynamic default is deleted", details=c.describe)
    finally:
        follower.resume()
    c.wait_isr(topic, 0, list(c.brokers), timeout=60)

    # a default log.segment.bytes: every replica, the followers too, rolls its segments by it at once
    assert cli(c.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
               "log.segment.bytes=16384") == "Completed updating default config for brokers in the cluster.\n"
    wait_until(lambda: all(described(f"127.0.0.1:{b.port}", str(b.id))["log.segment.bytes"].value == "16384"
                           for b in c.brokers.values()), 15, "every broker applied the default")
    for i in range(120):
        assert raw_produce("127.0.0.1", leader.port, topic, 0, [b"%06d" % i + b"x" * 1000])[0] == 0
    end = replica_log(leader.partition_dir(topic, 0)).end_offset
    c.wait_converged(topic, 0, min_end=end)
    for b in c.brokers.values():
        segments = replica_log(b.partition_dir(topic, 0)).segments
        assert len(segments) >= 5, f"broker {b.id} kept {segments} with a default log.segment.bytes=16384"


def metadata_hosts(bootstrap: str) -> dict[int, tuple[str, int]]:
    """The brokers' (host, port) in the Metadata of the broker at `bootstrap` (confluent-kafka)."""
    return {b.id: (b.host, b.port) for b in _admin(bootstrap).list_topics(timeout=10).brokers.values()}


@pytest.mark.slow
@pytest.mark.zookeeper
@pytest.mark.timeout(300)
def test_advertised_listeners_of_a_cluster_member_change_in_place(cluster):
    """A per-broker advertised.listeners re-registers the broker in ZooKeeper with its epoch kept (no
    bounce: its leaderships stay), every broker's Metadata names the new address at once, and a restart
    registers it there again (the dynamic config applies before the registration)."""
    c = cluster
    c.create_topic("adv", partitions=3, rf=3)
    states = {p: c.wait_leader("adv", p) for p in range(3)}
    target = c.brokers[1]
    other = f"127.0.0.1:{c.brokers[0].port}"
    incremental(f"127.0.0.1:{target.port}", "1", advertised_listeners=f"PLAINTEXT://localhost:{target.port}")
    wait_until(lambda: metadata_hosts(other)[1] == ("localhost", target.port), 15,
               "broker 0's Metadata names broker 1 at localhost", details=c.describe)
    assert metadata_hosts(other)[2] == ("127.0.0.1", c.brokers[2].port)
    assert {p: c.wait_leader("adv", p)["leader_epoch"] for p in range(3)} == \
        {p: st["leader_epoch"] for p, st in states.items()}, "no bounce: every leader epoch as it was"
    entry = described(f"127.0.0.1:{target.port}", "1")["advertised.listeners"]
    assert (entry.value, entry.source, entry.is_read_only) == (f"PLAINTEXT://localhost:{target.port}", 2, False)

    target.kill()
    target.start()
    wait_until(lambda: metadata_hosts(other).get(1) == ("localhost", target.port), 30,
               "broker 1 registered again at its dynamic address", details=c.describe)
