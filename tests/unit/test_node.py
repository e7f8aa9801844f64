"""Node (``seglog.open``): topics (create, describe, list, alter, delete), Kafka's topic name rules, partition
growth, config validation, auto-creation, persistence across restarts, adoption of bare partition directories,
the data directory lock, and producer id allocation.

Everything goes through the public Node / Producer / Consumer API; the partition Log itself is covered by
test_log.py.
"""

import errno
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

import seglog
from seglog import Log, LogConfig
from seglog.faults import OPS, FaultPlan
from seglog.errors import (InvalidConfigError, InvalidPartitionsError, InvalidRecordError,
                           InvalidReplicationFactorError, InvalidRequiredAcksError, InvalidTopicError, LogClosedError,
                           OffsetOutOfRangeError, StorageError, TopicAlreadyExistsError, TopicDeletionDisabledError,
                           UnknownTopicOrPartitionError)

FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100"}


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def node(data_dir):
    n = seglog.open(data_dir, FAST_GROUPS)
    yield n
    n.close()


def values_of(node, topic):
    """Every record value of every partition of `topic`, by partition, read straight from the logs."""
    return {p.index: [r.value for r in p.log.records()] for p in node.partitions(topic)}


def produce(node, topic, items, keyed=False, **producer_kw):
    """Send (partition, value) pairs (keyed: with the value as key too) and return the offsets."""
    with seglog.Producer(node, **producer_kw) as prod:
        futs = [prod.send(topic, v, key=v if keyed else None, partition=p) for p, v in items]
        prod.flush()
        return [f.get().offset for f in futs]


# --- create / describe / list -------------------------------------------------------------------------------

def test_create_describe_list(node, data_dir):
    info = node.create_topic("pet", partitions=3, config={"retention.ms": "604800000", "segment.bytes": 1 << 20})
    assert (info.name, info.partitions) == ("pet", 3)
    assert isinstance(info.topic_id, uuid.UUID)
    assert info.overrides == {"retention.ms": "604800000", "segment.bytes": str(1 << 20)}
    assert info.config.retention_ms == 604800000 and info.config.segment_bytes == 1 << 20
    described = node.topic("pet")
    assert (described.partitions, described.topic_id, described.overrides) == (3, info.topic_id, info.overrides)
    for p in range(3):                                  # Kafka's <topic>-<partition> directories
        assert (data_dir / f"pet-{p}").is_dir()
        assert node.partition("pet", p).log.config.segment_bytes == 1 << 20
    assert not (data_dir / "pet-3").exists()
    node.create_topic("a.b-c_d", 1)
    assert node.topics() == ["a.b-c_d", "pet"]
    stored = json.loads((data_dir / "topics.json").read_text())["topics"]
    assert stored["pet"]["partitions"] == 3 and stored["pet"]["config"]["retention.ms"] == "604800000"


def test_create_uses_num_partitions_and_rejects_duplicates(data_dir):
    with seglog.open(data_dir, {"num.partitions": "4"}) as node:
        assert node.create_topic("t").partitions == 4
        with pytest.raises(TopicAlreadyExistsError):
            node.create_topic("t", 2)
        assert node.topic("t").partitions == 4


def test_describe_unknown_topic_and_partition(node):
    node.create_topic("t", 2)
    with pytest.raises(UnknownTopicOrPartitionError):
        node.topic("nope")
    with pytest.raises(UnknownTopicOrPartitionError):
        node.partition("t", 2)
    with pytest.raises(UnknownTopicOrPartitionError):
        node.partition("nope", 0)
    with pytest.raises(UnknownTopicOrPartitionError):
        node.partitions("nope")


@pytest.mark.parametrize("partitions", [0, -1, "3", 2.0, True])
def test_bad_partition_counts(node, partitions):
    with pytest.raises(InvalidPartitionsError):
        node.create_topic("t", partitions)
    assert node.topics() == []


def test_a_create_that_fails_midway_undoes_only_what_it_did(node, data_dir, monkeypatch):
    """Opening partition 3 of a billion fails (as EMFILE would): the three opened ones are dropped, and the
    clean-up is bounded by them, not by the count asked for (it used to stat a billion directories while holding
    the node lock, so closing the node hung)."""
    real = type(node)._open_partition

    def open_partition(self, info, p):
        if p == 3:
            raise StorageError("cannot open segment: Too many open files", str(data_dir / f"{info.name}-3"), 24)
        return real(self, info, p)
    monkeypatch.setattr(type(node), "_open_partition", open_partition)
    t = time.monotonic()
    with pytest.raises(StorageError):
        node.create_topic("huge", 1_000_000_000)
    assert time.monotonic() - t < 5
    assert node.topics() == []
    assert not [d for d in os.listdir(data_dir) if d.startswith("huge-") and not d.endswith("-delete")]
    monkeypatch.undo()
    assert node.create_topic("huge", 2).partitions == 2


def test_replication_factor_on_a_single_node(node):
    with pytest.raises(InvalidReplicationFactorError, match="Replication factor: 4 larger than available brokers: 1"):
        node.create_topic("t", 1, replication_factor=4)
    with pytest.raises(InvalidReplicationFactorError):
        node.create_topic("t", 1, replication_factor=0)
    assert node.create_topic("t", 1, replication_factor=1).partitions == 1


# --- topic names ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "a\\b", "caf\u00e9", "a:b", "a*", "\u0000",
                                  "tab\t", "new\nline", "../escape"])
def test_illegal_topic_names(node, data_dir, name):
    with pytest.raises(InvalidTopicError):
        node.create_topic(name, 1)
    assert node.topics() == []
    assert sorted(os.listdir(data_dir)) == [".lock", "meta.properties", "topics.json"]


@pytest.mark.parametrize("name", ["x" * 249, "...", "a..b", "-", "_", "A-Z_0.9", ".hidden"])
def test_legal_topic_names(node, name):
    node.create_topic(name, 1)
    assert name in node.topics()


def test_non_string_topic_name(node):
    with pytest.raises(InvalidTopicError):
        node.create_topic(b"bytes", 1)


@pytest.mark.parametrize("first, second", [("a.b", "a_b"), ("a_b", "a.b"), ("x._y", "x_.y")])
def test_period_and_underscore_collide(node, first, second):
    node.create_topic(first, 1)
    with pytest.raises(InvalidTopicError, match="collides"):
        node.create_topic(second, 1)
    assert node.topics() == [first]


# --- partitions grow, never shrink ---------------------------------------------------------------------------

def test_partitions_grow_but_never_shrink(node, data_dir):
    node.create_topic("t", 2)
    produce(node, "t", [(0, b"a"), (1, b"b")])
    assert node.create_partitions("t", 5).partitions == 5
    assert [p.index for p in node.partitions("t")] == [0, 1, 2, 3, 4]
    assert (data_dir / "t-4").is_dir()
    for total in (5, 4, 1, 0):
        with pytest.raises(InvalidPartitionsError):
            node.create_partitions("t", total)
    assert node.topic("t").partitions == 5
    assert values_of(node, "t") == {0: [b"a"], 1: [b"b"], 2: [], 3: [], 4: []}
    with pytest.raises(UnknownTopicOrPartitionError):
        node.create_partitions("nope", 3)


def test_adding_partitions_is_all_or_nothing(node, data_dir):
    """A partition that cannot be created (a file where its directory must go) leaves the topic as it was:
    the partitions opened before it are removed again, and a restart sees the old count."""
    node.create_topic("t", 1)
    (data_dir / "t-3").write_bytes(b"in the way")
    with pytest.raises(StorageError):
        node.create_partitions("t", 5)
    assert node.topic("t").partitions == 1 and [p.index for p in node.partitions("t")] == [0]
    with pytest.raises(UnknownTopicOrPartitionError):
        node.partition("t", 1)
    deadline = time.monotonic() + 10                      # the removed directories go in the background
    while any((data_dir / f"t-{p}").exists() for p in (1, 2)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any((data_dir / f"t-{p}").exists() for p in (1, 2))
    (data_dir / "t-3").unlink()
    node.close()
    with seglog.Node(data_dir) as again:
        assert again.topic("t").partitions == 1
        assert again.create_partitions("t", 5).partitions == 5


def test_producer_sees_added_partitions(node):
    node.create_topic("t", 1)
    with seglog.Producer(node, linger_ms=0) as prod:
        prod.send("t", b"x").get()
        node.create_partitions("t", 3)
        assert prod.partitions_for("t") == [0, 1, 2]
        assert prod.send("t", b"y", partition=2).get().partition == 2


# --- configs -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [{"retention.ms": "abc"}, {"segment.bytes": "-5"}, {"no.such.config": "1"},
                                    {"cleanup.policy": "bogus"}, {"compression.type": "rar"},
                                    {"message.timestamp.type": "Whenever"}, {"min.cleanable.dirty.ratio": "2"}])
def test_bad_config_values_create_nothing(node, data_dir, config):
    with pytest.raises(InvalidConfigError):
        node.create_topic("t", 2, config=config)
    assert node.topics() == []
    assert not (data_dir / "t-0").exists()
    node.create_topic("t", 2)                          # the name is still free


def test_alter_config_set_delete_and_reject(node, data_dir):
    node.create_topic("t", 2, config={"retention.ms": "1000"})
    default_retention = seglog.BrokerConfig().retention_ms()
    info = node.alter_topic_config("t", {"retention.ms": 5000, "segment.bytes": "1048576"})
    assert info.overrides == {"retention.ms": "5000", "segment.bytes": "1048576"}
    assert all(p.log.config.retention_ms == 5000 for p in node.partitions("t"))      # open logs use it at once
    info = node.alter_topic_config("t", delete=["retention.ms"])
    assert info.overrides == {"segment.bytes": "1048576"}
    assert node.partition("t", 1).log.config.retention_ms == default_retention
    before = (data_dir / "topics.json").read_text()
    with pytest.raises(InvalidConfigError):
        node.alter_topic_config("t", {"segment.bytes": "lots"})
    with pytest.raises(InvalidConfigError):
        node.alter_topic_config("t", {"bogus.name": "1"})
    assert node.topic("t").overrides == {"segment.bytes": "1048576"}
    assert node.partition("t", 0).log.config.segment_bytes == 1048576
    assert (data_dir / "topics.json").read_text() == before
    with pytest.raises(UnknownTopicOrPartitionError):
        node.alter_topic_config("nope", {"retention.ms": "1"})
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: bogus.name"):
        node.alter_topic_config("t", delete=["bogus.name"])          # deleting an unknown name too
    assert node.alter_topic_config("t", {"retention.ms": "7"}, validate_only=True).overrides == \
        {"segment.bytes": "1048576", "retention.ms": "7"}
    assert node.topic("t").overrides == {"segment.bytes": "1048576"}
    assert (data_dir / "topics.json").read_text() == before


def test_offsets_topic_reports_its_real_configs(node, data_dir):
    """Kafka creates __consumer_offsets with cleanup.policy=compact, compression.type=producer and
    segment.bytes=offsets.topic.segment.bytes as the topic's own configs: they are what DescribeConfigs and
    `topics --describe` report (not the broker defaults delete / 1 GiB), also for a directory written before."""
    node.create_topic("t", 1)
    with seglog.Consumer(node, group_id="g", enable_auto_commit=False) as c:
        c.assign([("t", 0)])
        c.commit({("t", 0): 0})
    info = node.topic("__consumer_offsets")
    assert info.overrides == {"cleanup.policy": "compact", "compression.type": "producer",
                              "segment.bytes": "104857600"}
    assert info.config.compact and not info.config.delete and info.config.segment_bytes == 104857600
    node.alter_topic_config("__consumer_offsets", {"retention.ms": "1000"}, ["cleanup.policy"])
    assert node.topic("__consumer_offsets").config.cleanup_policy == ("compact",)    # never un-compacted
    node.close()
    topics = json.loads((data_dir / "topics.json").read_text())
    topics["topics"]["__consumer_offsets"]["config"] = {}               # as directories written before stored it
    (data_dir / "topics.json").write_text(json.dumps(topics))
    with seglog.open(data_dir) as again:
        assert again.topic("__consumer_offsets").overrides["cleanup.policy"] == "compact"


def test_bad_broker_config_value():
    with pytest.raises(InvalidConfigError):
        seglog.BrokerConfig.from_properties({"num.partitions": "0"})
    with pytest.raises(InvalidConfigError):
        seglog.BrokerConfig.from_properties({"auto.create.topics.enable": "maybe"})


@pytest.mark.parametrize("props, needle", [
    ({"listeners": "PLAINTEXT://127.0.0.1:80000"}, "port 80000 is not in 0..65535"),
    ({"listeners": "SSL://127.0.0.1:9093"}, "a TLS listener \\(listener SSL\\) needs a key and certificate"),
    ({"listeners": "SASL_SSL://127.0.0.1:9093"}, "listener SASL_SSL\\) needs a key and certificate"),
    ({"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "GSSAPI"}, "seglog serves PLAIN, "
     "SCRAM-SHA-256, SCRAM-SHA-512, not GSSAPI"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": "/nonexistent.pem"}, "cannot load the TLS key"),
    ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "listener name PLAINTEXT is given twice"),
    ({"listeners": "INTERNAL://a:1"}, "unknown listener name INTERNAL"),
    ({"listeners": "PLAINTEXT://a:1", "advertised.listeners": "SSL://b:2"}, "listener SSL is not in listeners"),
    ({"listeners": "SASL_PLAINTEXT://a:1", "zookeeper.connect": "z:2181"}, "the inter-broker listener must be one of"),
    ({"listener.security.protocol.map": "A:TLS"}, "'A:TLS' is not NAME:PROTOCOL"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=(.*)$"}, "expected DEFAULT or RULE"),
    ({"advertised.listeners": "PLAINTEXT://h:0"}, "port 0 is not in 1..65535"),
    ({"zookeeper.connect": "bad:zk:string"}, "'bad:zk:string' is not host:port"),
    ({"zookeeper.connect": "127.0.0.1:notaport"}, "'127.0.0.1:notaport' is not host:port"),
    ({"zookeeper.connect": "127.0.0.1:2181/a//b"}, "bad chroot path"),
])
def test_broker_addresses_are_checked_when_the_config_is_built(props, needle):
    with pytest.raises(InvalidConfigError, match=needle):
        seglog.BrokerConfig.from_properties(props)


def test_good_broker_addresses():
    c = seglog.BrokerConfig.from_properties({"listeners": "PLAINTEXT://[::1]:0", "zookeeper.connect":
                                             "z1:2181,z2:2182,z3/seglog", "advertised.listeners": "h.example:9092"})
    assert (c.listeners, c.zookeeper_connect) == ("PLAINTEXT://[::1]:0", "z1:2181,z2:2182,z3/seglog")


def test_unknown_broker_properties_are_a_warning_unknown_keywords_an_error(caplog, tmp_path):
    """A server.properties file may hold any of Kafka's settings: unknown ones are logged as Kafka logs them
    (WARN) and ignored. seglog.serve's keyword settings are Python code: a typo there is an error."""
    with caplog.at_level(logging.INFO, logger="seglog.config"):
        c = seglog.BrokerConfig.from_properties({"num.partitions": "3", "sasl.kerberos.service.name": "kafka"})
    assert c.num_partitions == 3
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "The configuration 'sasl.kerberos.service.name' was supplied but isn't a known config.")]
    with pytest.raises(InvalidConfigError, match="Unknown broker config name: bogus"):
        seglog.serve(tmp_path / "d", bogus=1)
    with pytest.raises(InvalidConfigError, match="port 70000"):
        seglog.serve(tmp_path / "d", port=70000)
    with seglog.serve(tmp_path / "d", metrics_port=0) as broker:     # refused starts left the directory free
        assert broker.metrics_port > 0


# --- delete --------------------------------------------------------------------------------------------------

def test_delete_topic(node, data_dir):
    node.create_topic("t", 2)
    node.create_topic("keep", 1)
    produce(node, "t", [(0, b"old"), (1, b"old")])
    node.delete_topic("t")
    assert node.topics() == ["keep"]
    with pytest.raises(UnknownTopicOrPartitionError):
        node.topic("t")
    with pytest.raises(UnknownTopicOrPartitionError):
        node.partition("t", 0)
    assert not (data_dir / "t-0").exists() and not (data_dir / "t-1").exists()
    with pytest.raises(UnknownTopicOrPartitionError):
        node.delete_topic("t")
    node.create_topic("t", 3)                             # the name is free again, with nothing of the old data
    assert values_of(node, "t") == {0: [], 1: [], 2: []}


def test_file_system_errors_are_storage_errors(data_dir, monkeypatch):
    from faults import fail_os_call
    fail_os_call(monkeypatch, "replace", "meta.properties")
    with pytest.raises(StorageError, match="meta.properties") as e:
        seglog.open(data_dir)
    assert e.value.path.startswith(str(data_dir / "meta.properties"))   # the file that failed
    monkeypatch.undo()
    with seglog.open(data_dir) as node:
        node.create_topic("t", 1)
        fail_os_call(monkeypatch, "rename", str(data_dir / "t-0"))
        with pytest.raises(StorageError, match="cannot delete partition directory"):
            node.delete_topic("t")
        monkeypatch.undo()
    fail_os_call(monkeypatch, "open", ".lock")
    with pytest.raises(StorageError, match="lock file"):
        seglog.open(data_dir)


@pytest.mark.parametrize("error,ops", [(errno.ENOSPC, ("pwrite", "write", "fallocate", "ftruncate")),
                                       (errno.EIO, OPS)], ids=["ENOSPC", "EIO"])
def test_close_on_a_failing_disk_closes_every_log_says_so_and_the_next_open_recovers(data_dir, caplog, error, ops):
    """Every write of a close failing (the last batches, index trims, checkpoints, producer snapshots, the
    clean-shutdown markers): close() still closes every log and releases the directory, one ERROR line names how
    many logs were not closed cleanly; the next open recovers them and serves every record written before."""
    node = seglog.open(data_dir)
    node.create_topic("t", 3)
    produce(node, "t", [(i % 3, b"v%d" % i) for i in range(300)])
    with seglog.Producer(node) as prod:              # buffered in the logs, written by close()
        for i in range(300, 330):
            prod.send("t", b"v%d" % i, partition=i % 3)
    before = values_of(node, "t")
    plan = FaultPlan()
    for op in ops:
        plan.fail(op, error, times=None)
    with caplog.at_level(logging.WARNING, logger="seglog.node"), plan:
        node.close()
    assert plan.fired
    assert node.closed
    summary = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(summary) == 1 and re.match(rf"3 of 3 logs in {re.escape(str(data_dir))} were not closed cleanly "
                                          rf"\(first: t-\d: .*{os.strerror(error)}", summary[0]), summary
    with seglog.open(data_dir) as node:
        assert values_of(node, "t") == before
        assert not any(node.partition("t", p).log.recovery.clean_shutdown for p in range(3))


def test_deleted_topic_stays_deleted_after_restart(data_dir):
    with seglog.open(data_dir) as node:
        node.create_topic("t", 2)
        produce(node, "t", [(0, b"x")])
        node.delete_topic("t")
    with seglog.open(data_dir) as node:
        assert node.topics() == []
    deadline = time.monotonic() + 10                     # the renamed directories go in the background
    while any(n.startswith("t-") for n in os.listdir(data_dir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(n.startswith("t-") for n in os.listdir(data_dir))


def test_delete_topic_disabled(data_dir):
    with seglog.open(data_dir, {"delete.topic.enable": "false"}) as node:
        node.create_topic("t", 1)
        produce(node, "t", [(0, b"kept")])
        with pytest.raises(TopicDeletionDisabledError):
            node.delete_topic("t")
        assert node.topics() == ["t"]
        assert values_of(node, "t") == {0: [b"kept"]}


def test_internal_offsets_topic_is_hidden_and_undeletable(node):
    node.create_topic("t", 1)
    with seglog.Consumer(node, group_id="g", enable_auto_commit=False, auto_offset_reset="earliest") as c:
        c.assign([("t", 0)])
        c.commit({("t", 0): 0})
    assert node.topics() == ["t"]
    assert "__consumer_offsets" in node.topics(include_internal=True)
    with pytest.raises(InvalidTopicError):
        node.delete_topic("__consumer_offsets")


def test_consumer_offsets_records_always_have_keys(node):
    """__consumer_offsets is compacted, so every write to it (commits, group metadata, the tombstones of a
    deleted group) carries a key: a keyless one would be refused, and Kafka's cleaner would drop it."""
    node.create_topic("t", 2)
    produce(node, "t", [(0, b"x"), (1, b"y")])
    with seglog.Consumer(node, group_id="g", enable_auto_commit=False, auto_offset_reset="earliest") as c:
        c.subscribe(["t"])
        seen, deadline = 0, time.monotonic() + 10
        while seen < 2 and time.monotonic() < deadline:
            seen += len(c.poll(0.2))
        assert seen == 2
        c.commit()
    coord = node.group_coordinator
    coord.commit_offsets("simple", {("t", 0): 1})
    assert coord.delete_groups(["simple"]) == {"simple": None}
    offsets = node.topic("__consumer_offsets")
    assert offsets.config.compact
    records = [r for p in range(offsets.partitions) for r in node.partition("__consumer_offsets", p).log.records()]
    assert any(r.value is None for r in records) and len(records) >= 4      # commits, metadata, tombstones
    assert all(r.key is not None for r in records)
    with pytest.raises(InvalidRecordError):
        node.partition("__consumer_offsets", 0).log.append(b"no key")


# --- auto-creation -------------------------------------------------------------------------------------------

def test_auto_create_on(data_dir):
    with seglog.open(data_dir, {"num.partitions": "3"}) as node:
        with seglog.Producer(node) as prod:
            md = prod.send("fresh", b"v", key=b"k").get()
        assert node.topic("fresh").partitions == 3
        assert values_of(node, "fresh")[md.partition] == [b"v"]
        assert node.ensure_topic("fresh2").partitions == 3


def test_auto_create_off(data_dir):
    with seglog.open(data_dir, {"auto.create.topics.enable": "false"}) as node:
        with pytest.raises(UnknownTopicOrPartitionError):
            node.ensure_topic("fresh")
        with seglog.Producer(node) as prod:
            with pytest.raises(UnknownTopicOrPartitionError):
                prod.send("fresh", b"v")
        with seglog.Consumer(node, group_id="g") as c:
            c.subscribe(["fresh"])
            with pytest.raises(UnknownTopicOrPartitionError):
                c.poll(0.5)
        assert node.topics() == []
        node.create_topic("fresh", 1)                   # explicit creation still works
        assert node.ensure_topic("fresh").partitions == 1


# --- persistence ---------------------------------------------------------------------------------------------

def test_state_survives_a_restart(data_dir):
    with seglog.open(data_dir) as node:
        a = node.create_topic("a", 3, config={"retention.ms": "123456", "cleanup.policy": "compact"})
        b = node.create_topic("b", 1)
        node.create_partitions("b", 2)
        node.alter_topic_config("b", {"max.message.bytes": "2000"})
        offsets = produce(node, "a", [(p, b"a%d-%d" % (p, i)) for p in range(3) for i in range(50)], keyed=True,
                          compression_type="lz4")                  # a compacted topic takes keyed records only
        assert offsets == [i for _ in range(3) for i in range(50)]
        produce(node, "b", [(1, b"b1")])
        cluster_id = node.cluster_id
    with seglog.open(data_dir) as node:
        assert node.topics() == ["a", "b"]
        ia, ib = node.topic("a"), node.topic("b")
        assert (ia.topic_id, ia.partitions, ia.overrides) == (a.topic_id, 3, {"retention.ms": "123456",
                                                                              "cleanup.policy": "compact"})
        assert ia.config.retention_ms == 123456 and ia.config.cleanup_policy == ("compact",)
        assert (ib.topic_id, ib.partitions, ib.overrides) == (b.topic_id, 2, {"max.message.bytes": "2000"})
        assert node.partition("b", 1).log.config.max_message_bytes == 2000
        assert values_of(node, "a") == {p: [b"a%d-%d" % (p, i) for i in range(50)] for p in range(3)}
        assert values_of(node, "b") == {0: [], 1: [b"b1"]}
        assert node.cluster_id == cluster_id
        # appends continue after the recovered end
        assert produce(node, "b", [(1, b"b2")]) == [1]


def meta_properties(data_dir) -> dict[str, str]:
    lines = (data_dir / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_a_directory_of_another_broker_id_is_refused(data_dir):
    """As Kafka (InconsistentBrokerIdException): meta.properties' broker.id must be the configured one. The
    refusal names both ids and the file, leaves the directory as it was and releases it."""
    with seglog.open(data_dir, {"broker.id": 1}) as node:
        produce(node, "t", [(0, b"kept")])
        cluster_id = node.cluster_id
    before = (data_dir / "meta.properties").read_text()
    assert meta_properties(data_dir)["broker.id"] == "1"
    for configured in (2, 0):
        with pytest.raises(InvalidConfigError) as e:
            seglog.open(data_dir, {"broker.id": configured})
        assert str(e.value).startswith(f"Configured broker.id {configured} doesn't match stored broker.id 1 in "
                                       f"{data_dir / 'meta.properties'}."), str(e.value)
        assert (data_dir / "meta.properties").read_text() == before
    with seglog.open(data_dir, {"broker.id": 1}) as node:     # the right id opens it, data intact
        assert node.cluster_id == cluster_id and values_of(node, "t") == {0: [b"kept"]}


def test_a_directory_without_a_stored_broker_id_adopts_the_configured_one(data_dir):
    """meta.properties written before broker.id was stored still opens; the configured id is recorded then, and
    from then on another id is refused. An id written with spaces or leading zeros is the same number."""
    with seglog.open(data_dir) as node:
        produce(node, "t", [(0, b"old")])
        cluster_id = node.cluster_id
    (data_dir / "meta.properties").write_text(f"#old\nversion=0\ncluster.id={cluster_id}\n")
    with seglog.open(data_dir, {"broker.id": 3}) as node:
        assert node.cluster_id == cluster_id and values_of(node, "t") == {0: [b"old"]}
    assert meta_properties(data_dir) == {"version": "0", "broker.id": "3", "cluster.id": cluster_id}
    with pytest.raises(InvalidConfigError, match="Configured broker.id 4 doesn't match stored broker.id 3"):
        seglog.open(data_dir, {"broker.id": 4})
    (data_dir / "meta.properties").write_text(f"version=0\nbroker.id = 03\ncluster.id={cluster_id}\n")
    with seglog.open(data_dir, {"broker.id": 3}) as node:
        assert node.cluster_id == cluster_id


def test_data_survives_an_unclean_exit(data_dir):
    script = textwrap.dedent(f"""
        import os, seglog
        node = seglog.open({str(data_dir)!r})
        node.create_topic("t", 2)
        with seglog.Producer(node, linger_ms=0) as prod:
            for i in range(100):
                prod.send("t", b"v%d" % i, partition=i % 2).get()
        node.flush()
        os._exit(0)                         # no close: no clean-shutdown markers, the lock just goes away
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ), timeout=60)
    with seglog.open(data_dir) as node:
        assert values_of(node, "t") == {p: [b"v%d" % i for i in range(p, 100, 2)] for p in range(2)}


# --- adoption of bare partition directories -----------------------------------------------------------------

def test_bare_partition_directories_are_adopted(data_dir):
    data_dir.mkdir()
    for p in range(3):
        with Log(data_dir / f"legacy.events-{p}", LogConfig()) as lg:
            lg.append_batch([b"p%d-%d" % (p, i) for i in range(10)])
    with Log(data_dir / "other-0", LogConfig()) as lg:
        lg.append(b"o")
    (data_dir / "not-a-partition").mkdir()           # no -<number> suffix: not adopted
    (data_dir / "stray-7.txt").write_text("x")        # a file, not a directory
    with seglog.open(data_dir) as node:
        assert node.topics() == ["legacy.events", "other"]
        assert node.topic("legacy.events").partitions == 3 and node.topic("legacy.events").overrides == {}
        with seglog.Consumer(node, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False) as c:
            c.assign([("legacy.events", p) for p in range(3)])
            got = []
            while len(got) < 30:
                batch = c.poll(1.0)
                assert batch, "adopted data is not readable"
                got += batch
            assert sorted(r.value for r in got) == sorted(b"p%d-%d" % (p, i) for p in range(3) for i in range(10))
        produce(node, "legacy.events", [(1, b"new")])
        tid = node.topic("legacy.events").topic_id
    with seglog.open(data_dir) as node:                 # adopted once, then remembered
        assert node.topic("legacy.events").topic_id == tid
        assert values_of(node, "legacy.events")[1][-1] == b"new"


def test_adoption_with_a_missing_middle_partition(data_dir):
    data_dir.mkdir()
    for p in (0, 2):
        with Log(data_dir / f"gap-{p}", LogConfig()) as lg:
            lg.append_batch([b"%d" % p])
    with seglog.open(data_dir) as node:
        assert node.topic("gap").partitions == 3
        assert values_of(node, "gap") == {0: [b"0"], 1: [], 2: [b"2"]}


def test_partition_written_with_log_append_is_adopted_with_its_records(data_dir):
    data_dir.mkdir()
    with Log(data_dir / "single-0", LogConfig()) as lg:
        assert lg.append(b"only") == 0
    with seglog.open(data_dir) as node:
        assert values_of(node, "single") == {0: [b"only"]}


# --- the directory lock -------------------------------------------------------------------------------------

def test_second_node_in_the_same_process_is_refused(data_dir):
    node = seglog.open(data_dir)
    try:
        node.create_topic("t", 1)
        with pytest.raises(StorageError, match="already open in this process"):
            seglog.open(data_dir)
        with pytest.raises(StorageError, match="already open in this process"):
            seglog.open(os.path.join(data_dir, ".", "..", os.path.basename(data_dir)))    # another spelling
        assert node.topics() == ["t"]                      # the refused open did not disturb the owner
        produce(node, "t", [(0, b"still works")])
    finally:
        node.close()
    with seglog.open(data_dir) as again:                   # released on close
        assert values_of(again, "t") == {0: [b"still works"]}


def test_second_process_is_refused(data_dir):
    script = textwrap.dedent(f"""
        import sys, seglog
        from seglog.errors import StorageError
        try:
            seglog.open({str(data_dir)!r})
        except StorageError as e:
            print("refused:", e)
            sys.exit(3)
        sys.exit(0)
    """)
    with seglog.open(data_dir) as node:
        node.create_topic("t", 1)
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ))
        assert res.returncode == 3, res.stdout + res.stderr
        assert "in use" in res.stdout
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ))
    assert res.returncode == 0, res.stdout + res.stderr


def test_closed_node_refuses_work(data_dir):
    node = seglog.open(data_dir)
    node.create_topic("t", 1)
    node.close()
    node.close()                                         # idempotent
    assert node.closed
    with pytest.raises(LogClosedError):
        node.create_topic("u", 1)
    with pytest.raises(LogClosedError):
        node.init_producer_id()


# --- producer ids --------------------------------------------------------------------------------------------

def test_producer_ids_never_repeat_across_restarts(data_dir):
    seen = []
    for _ in range(3):
        with seglog.open(data_dir) as node:
            seen += [node.init_producer_id() for _ in range(5)]
            seen += [seglog.Producer(node).producer_id for _ in range(2)]
    assert len(set(seen)) == len(seen) == 21
    assert all(isinstance(p, int) and p >= 0 for p in seen)


def test_producer_ids_never_repeat_after_a_crash(data_dir):
    script = textwrap.dedent(f"""
        import os, seglog
        node = seglog.open({str(data_dir)!r})
        print(" ".join(str(node.init_producer_id()) for _ in range(3)), flush=True)
        os._exit(0)
    """)
    seen = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                             timeout=60, env=dict(os.environ)).stdout
        seen += [int(x) for x in out.split()]
        with seglog.open(data_dir) as node:
            seen.append(node.init_producer_id())
    assert len(seen) == 8 and len(set(seen)) == 8, seen


def test_producer_ids_unique_across_threads(node):
    out, lock = [], threading.Lock()

    def take():
        ids = [node.init_producer_id() for _ in range(600)]   # crosses several id blocks
        with lock:
            out.extend(ids)
    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(out)) == len(out) == 2400


# --- partitions: produce and fetch entry points -------------------------------------------------------------

def test_partition_fetch_stays_below_the_high_watermark(node):
    node.create_topic("t", 1)
    produce(node, "t", [(0, b"a"), (0, b"b")])
    part = node.partition("t", 0)
    assert (part.log_start_offset, part.high_watermark, part.log_end_offset) == (0, 2, 2)
    res = part.fetch(0, 1 << 20)
    assert len(res.records) > 0 and res.next_offset == 2 and res.high_watermark == 2
    empty = part.fetch(2, 1 << 20)
    assert len(empty.records) == 0 and empty.next_offset == -1
    with pytest.raises(OffsetOutOfRangeError):
        part.fetch(3, 1 << 20)
    with pytest.raises(InvalidRequiredAcksError):
        part.append(bytes(res.records), acks=2)
    assert part.log_end_offset == 2


def test_wait_for_data_wakes_on_append(node):
    node.create_topic("t", 1)
    version = node.data_version()
    assert node.wait_for_data(version, 0.05) is False
    timer = threading.Timer(0.1, lambda: produce(node, "t", [(0, b"x")], linger_ms=0))
    timer.start()
    t = time.monotonic()
    assert node.wait_for_data(version, 10) is True
    assert time.monotonic() - t < 5
    timer.join()
