"""seglog's broker against kafka-python, a Kafka client nobody here wrote, started by the tests themselves.

Every record produced must come back exactly once, in order per partition, byte for byte (key, value, headers,
timestamp), also while a consumer group rebalances under the producer's feet; records cross between the wire
door (kafka-python) and the in-process door (seglog.Producer, Partition.log) unchanged; the admin API and the
error codes kafka-python sees are Kafka's.

The other clients (confluent-kafka / librdkafka, kcat, aiokafka) are in test_broker_clients_librdkafka.py and
test_broker_clients_aiokafka.py.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

kafka = pytest.importorskip("kafka")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka import errors as kerr  # noqa: E402
from kafka.admin import (ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions,  # noqa: E402
                         NewTopic)
from kafka.structs import OffsetAndMetadata  # noqa: E402

import seglog  # noqa: E402
from helpers.kafka_wire import stored_batches  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

#: metadata_max_age_ms: kafka-python 3.0 drops an update requested while a Metadata request is in flight (the
#: stale answer clears its need-update flag), so a consumer that subscribed during its bootstrap refresh can lead
#: a rebalance without the topic's partitions ("No partition metadata for topic") and, at the default 300 s age,
#: not learn them for 5 minutes. A 1 s age bounds that, as topic.metadata.refresh.interval.ms does for librdkafka.
FAST_GROUP = {"heartbeat_interval_ms": 100, "session_timeout_ms": 6000, "retry_backoff_ms": 50,
              "metadata_max_age_ms": 1000}


def make_records(n: int, seed: int, ts0: int, null_header_values: bool = False):
    """n records with varied keys (some None), binary values (some empty), headers (some with None values if
    asked: kafka-python refuses them), increasing explicit timestamps: (key, value, headers, timestamp)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else b"key-%d-\x00\xff" % (i % 23)
        value = b"" if i % 11 == 0 else bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 200)))
        headers = [("i", str(i).encode()), ("bin", bytes([i & 0xFF, 0, 0xFF]))]
        if null_header_values and i % 5 == 0:
            headers.append(("null-value", None))
        if i % 13 == 0:
            headers = []
        out.append((key, value, headers, ts0 + i))
    return out


def norm_headers(headers) -> list:
    return [(k, None if v is None else bytes(v)) for k, v in headers or ()]


# -- the default producer and a rebalancing consumer group ------------------------------------------------------

class Member(threading.Thread):
    """One kafka-python group member: polls, records what it got in the shared log, commits after processing."""

    def __init__(self, name, bootstrap, topic, group, shared, lock):
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.shared, self.lock = shared, lock
        self.stop_flag = threading.Event()
        self.assigned_ever: set[int] = set()
        self.errors: list[BaseException] = []
        self.commits = 0
        self.got_partitions = threading.Event()     # set at the first poll that found partitions assigned

    def run(self):
        try:
            c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
                              enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=50,
                              **FAST_GROUP)
            c.subscribe([self.topic])
            try:
                while not self.stop_flag.is_set():
                    got = c.poll(timeout_ms=50)
                    if c.assignment():
                        self.assigned_ever |= {tp.partition for tp in c.assignment()}
                        self.got_partitions.set()
                    if not got:
                        continue
                    done = {}
                    with self.lock:
                        for tp, msgs in got.items():
                            for m in msgs:
                                self.shared.append((self.name, m.partition, m.offset, m.key, m.value,
                                                    norm_headers(m.headers), m.timestamp, m.timestamp_type))
                            done[tp] = OffsetAndMetadata(msgs[-1].offset + 1, "", -1)
                    c.commit(done)                       # manual commit after processing
                    self.commits += 1
            finally:
                c.close()                                # LeaveGroup: the others rebalance at once
        except BaseException as e:                       # reported by the test
            self.errors.append(e)


def _wait(cond, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_kafka_python_default_producer_and_rebalancing_group_exactly_once(seglog_broker, topic_name):
    """Driven by events, not sleeps: the producer sends in chunks, each released by a change of the group
    (a member joins, one leaves), so every change happens while records flow and every member gets
    partitions before production ends, however slow the machine."""
    topic, group = topic_name(), topic_name()
    seglog_broker.node.create_topic(topic, partitions=6)
    n, chunks = 3000, 5
    records = make_records(n, seed=1, ts0=1_700_000_000_000)
    produced: dict[tuple[int, int], tuple] = {}
    producer_errors: list[BaseException] = []
    shared: list[tuple] = []
    lock = threading.Lock()
    gates = [threading.Event() for _ in range(chunks)]   # gates[i] releases chunk i

    def produce():
        try:
            p = KafkaProducer(bootstrap_servers=seglog_broker.bootstrap_servers, linger_ms=2)
            # kafka-python 3's defaults: idempotent, acks=all (InitProducerId on the wire)
            assert p.config["enable_idempotence"] is True and p.config["acks"] in ("all", -1)
            futures = []
            size = n // chunks
            for i, (key, value, headers, ts) in enumerate(records):
                if i % size == 0:
                    assert gates[i // size].wait(60), f"chunk {i // size} never released"
                futures.append((p.send(topic, value=value, key=key, headers=headers, timestamp_ms=ts),
                                records[i]))
            p.flush()
            for fut, rec in futures:
                md = fut.get(timeout=30)
                produced[(md.partition, md.offset)] = rec
            p.close()
        except BaseException as e:
            producer_errors.append(e)

    def consumed_by(name):
        with lock:
            return any(r[0] == name for r in shared)

    bs = seglog_broker.bootstrap_servers
    members = [Member(f"m{i}", bs, topic, group, shared, lock) for i in range(4)]
    t_prod = threading.Thread(target=produce, daemon=True)
    try:
        members[0].start()
        t_prod.start()
        gates[0].set()
        _wait(lambda: consumed_by("m0"), "m0 to consume")
        gates[1].set()
        members[1].start()                               # join while messages flow
        assert members[1].got_partitions.wait(60)
        gates[2].set()
        members[2].start()                               # three members
        assert members[2].got_partitions.wait(60)
        gates[3].set()
        members[0].stop_flag.set()                       # one leaves while messages flow ...
        members[0].join(30)
        members[3].start()                               # ... and another takes its place
        assert members[3].got_partitions.wait(60)
        gates[4].set()                                   # the last chunk: after every member got partitions
        t_prod.join(120)
        assert not t_prod.is_alive() and not producer_errors, producer_errors
        assert len(produced) == n
        _wait(lambda: len(shared) >= n, f"{n} records consumed")
    finally:
        for gate in gates:
            gate.set()
        for m in members:
            m.stop_flag.set()
        for m in members:
            if m.is_alive() or m.ident is not None:
                m.join(30)
    for m in members:
        assert not m.errors, (m.name, m.errors)
    assert all(m.commits > 0 for m in members[1:]), [m.commits for m in members]
    assert all(m.assigned_ever for m in members), "every member got partitions at some point"

    # exactly once across the group
    got_keys = [(p, o) for _, p, o, *_ in shared]
    assert len(got_keys) == len(set(got_keys)), f"{len(got_keys) - len(set(got_keys))} records delivered twice"
    assert set(got_keys) == set(produced)
    # in order per partition (in the order the group consumed them)
    last: dict[int, int] = {}
    for _, p, o, *_ in shared:
        assert o > last.get(p, -1), f"partition {p}: offset {o} after {last[p]}"
        last[p] = o
    # byte for byte
    for _, p, o, key, value, headers, ts, ts_type in shared:
        key_, value_, headers_, ts_ = produced[(p, o)]
        assert (key, value, headers, ts, ts_type) == (key_, value_, norm_headers(headers_), ts_, 0), (p, o)

    # the offsets the group committed are the partitions' ends
    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(6)]
    ends = c.end_offsets(tps)
    assert {tp: c.committed(tp) for tp in tps} == ends
    c.close()

    # what is stored: idempotent batches (producer id >= 0, sequences from 0 without gaps), CRCs valid
    for p in range(6):
        seq = 0
        for b in stored_batches(seglog_broker.node.partition(topic, p)):
            assert b.validate_crc() and b.producer_id >= 0 and b.producer_epoch == 0
            assert b.base_sequence == seq, (p, b.base_offset, b.base_sequence, seq)
            seq += b.last_offset_delta + 1


# -- cross-door: the wire and the in-process API see the same records --------------------------------------------

@pytest.mark.parametrize("compression", [None, "gzip", "lz4", "snappy", "zstd"])
def test_kafka_python_produced_records_read_in_process(seglog_broker, topic_name, compression):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=2)
    records = make_records(400, seed=2, ts0=1_690_000_000_000)
    p = KafkaProducer(bootstrap_servers=seglog_broker.bootstrap_servers, compression_type=compression,
                      linger_ms=5)
    futures = [(p.send(topic, value=v, key=k, headers=h, timestamp_ms=ts), (k, v, h, ts))
               for k, v, h, ts in records]
    p.flush()
    produced = {}
    for fut, rec in futures:
        md = fut.get(timeout=10)
        produced[(md.partition, md.offset)] = rec
    p.close()
    got = {}
    for part in seglog_broker.node.partitions(topic):
        for r in part.log.records():
            got[(part.index, r.offset)] = (r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp)
    assert got == {po: (k, v, norm_headers(h), ts) for po, (k, v, h, ts) in produced.items()}


def test_in_process_producer_records_consumed_by_kafka_python(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=3)
    records = make_records(1500, seed=3, ts0=1_680_000_000_000)
    sent = {}
    with seglog.Producer(seglog_broker.node, compression_type="lz4") as p:
        futures = [(p.send(topic, value=v, key=k, headers=h, timestamp=ts), (k, v, h, ts)) for k, v, h, ts in records]
        p.flush()
        for fut, rec in futures:
            md = fut.get()
            sent[(md.partition, md.offset)] = rec
    c = KafkaConsumer(bootstrap_servers=seglog_broker.bootstrap_servers, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    c.assign([TopicPartition(topic, i) for i in range(3)])
    got = [(m.partition, m.offset, m.key, m.value, norm_headers(m.headers), m.timestamp) for m in c]
    c.close()
    assert len(got) == len(records)
    for p_, o, key, value, headers, ts in got:
        k, v, h, t = sent.pop((p_, o))
        assert (key, value, headers, ts) == (k, v, norm_headers(h), t)
    assert not sent


# -- admin ------------------------------------------------------------------------------------------------------

def test_kafka_python_admin(seglog_broker, topic_name):
    bs = seglog_broker.bootstrap_servers
    a = KafkaAdminClient(bootstrap_servers=bs)
    t1, t2, t3 = topic_name(), topic_name(), topic_name()
    try:
        a.create_topics([NewTopic(t1, 2, 1, topic_configs={"retention.ms": "60000"}), NewTopic(t2, 1, 1)])
        assert {t1, t2} <= set(a.list_topics())
        assert seglog_broker.node.topic(t1).partitions == 2

        with pytest.raises(kerr.TopicAlreadyExistsError):
            a.create_topics([NewTopic(t1, 2, 1)])
        with pytest.raises(kerr.InvalidReplicationFactorError,
                           match=r"Replication factor: 3 larger than available brokers: 1\."):
            a.create_topics([NewTopic(t3, 1, 3)])
        assert t3 not in a.list_topics()

        a.create_partitions({t1: NewPartitions(4)})
        [desc] = a.describe_topics([t1])
        assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2, 3]
        with pytest.raises(kerr.UnknownTopicOrPartitionError):
            a.create_partitions({t3: NewPartitions(4)})

        configs = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t1)], config_filter="all")
        topic_cfg = configs["topic"][t1]
        assert topic_cfg["retention.ms"]["value"] == "60000"
        assert topic_cfg["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert topic_cfg["segment.bytes"]["value"] == "1073741824"
        assert topic_cfg["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        # configs change through IncrementalAlterConfigs (kafka-python's default when the broker has it) and
        # AlterConfigs (replace semantics: kafka-python sends the other overrides along)
        topic = ConfigResource(ConfigResourceType.TOPIC, t1)
        assert a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t1, configs={"segment.ms": "3600000"})]) \
            == {"topic": {t1: "OK"}}
        assert seglog_broker.node.topic(t1).overrides == {"retention.ms": "60000", "segment.ms": "3600000"}
        assert a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t1, configs={"retention.ms": "120000"})],
                               incremental=False) == {"topic": {t1: "OK"}}
        assert seglog_broker.node.topic(t1).overrides == {"retention.ms": "120000", "segment.ms": "3600000"}
        assert seglog_broker.node.partition(t1, 3).log.config.retention_ms == 120000
        a.reset_configs([ConfigResource(ConfigResourceType.TOPIC, t1, configs=["segment.ms"])])
        assert seglog_broker.node.topic(t1).overrides == {"retention.ms": "120000"}
        result = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t1, configs={"retention.ms": "soon"})],
                                 raise_on_unknown=False)
        assert result["topic"][t1] == ("[Error 40] InvalidConfigurationError: Invalid value 'soon' for "
                                       "configuration retention.ms: not a value of type LONG")
        result = a.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", configs={"num.partitions": "3"})],
                                 raise_on_unknown=False)
        assert "Cannot update these configs dynamically: Set(num.partitions)" in result["broker"]["0"]
        assert a.describe_configs([topic])["topic"][t1]["retention.ms"]["value"] == "120000"
        configs = a.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")
        broker_cfg = configs["broker"]["0"]
        assert broker_cfg["auto.create.topics.enable"]["value"] == "true"
        assert broker_cfg["group.initial.rebalance.delay.ms"]["value"] == "0"

        a.delete_topics([t2])
        assert t2 not in a.list_topics()
        assert t2 not in seglog_broker.node.topics()
        with pytest.raises(kerr.UnknownTopicOrPartitionError):
            a.delete_topics([t2])

        # consumer groups: a live member, listed and described
        group = topic_name()
        c = KafkaConsumer(t1, bootstrap_servers=bs, group_id=group, client_id="described", **FAST_GROUP)
        try:
            deadline = time.monotonic() + 20
            while not c.assignment() and time.monotonic() < deadline:
                c.poll(timeout_ms=100)
            assert c.assignment()
            assert group in {g["group_id"] for g in a.list_groups()}
            d = a.describe_groups([group])[group]
            assert d["group_state"] == "Stable" and d["protocol_type"] == "consumer"
            [member] = d["members"]
            assert member["client_id"] == "described"
            assert member["client_host"] == "/127.0.0.1"                # as Kafka reports it (InetAddress)
            assert member["member_id"].startswith("described-")
            assert member["member_metadata"]["topics"] == [t1]
            assert member["member_assignment"]["assigned_partitions"] == [{"topic": t1, "partitions": [0, 1, 2, 3]}]
        finally:
            c.close()
    finally:
        a.close()


# -- error codes kafka-python sees ------------------------------------------------------------------------------

def test_kafka_python_message_too_large(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=1, config={"max.message.bytes": "2000"})
    p = KafkaProducer(bootstrap_servers=seglog_broker.bootstrap_servers, max_request_size=10_000_000,
                      enable_idempotence=False, acks=1, retries=0)
    with pytest.raises(kerr.MessageSizeTooLargeError):
        p.send(topic, b"x" * 5000).get(timeout=10)
    assert p.send(topic, b"small").get(timeout=10).offset == 0, "nothing was appended by the failed send"
    p.close()
    assert [r.value for r in seglog_broker.node.partition(topic, 0).log.records()] == [b"small"]


def test_kafka_python_unknown_topic_with_auto_create_off(start_broker, topic_name):
    b = start_broker(auto_create_topics_enable=False)
    topic = topic_name()
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    try:
        [desc] = a.describe_topics([topic])              # Metadata with allow_auto_topic_creation
        assert desc["error_code"] == kerr.UnknownTopicOrPartitionError.errno and desc["partitions"] == []
    finally:
        a.close()
    p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=1500)
    with pytest.raises(kerr.KafkaTimeoutError):          # kafka-python keeps asking, then gives up
        p.send(topic, b"v").get(timeout=5)
    p.close()
    assert topic not in b.node.topics()


def test_kafka_python_offset_out_of_range(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=1)
    p = KafkaProducer(bootstrap_servers=seglog_broker.bootstrap_servers)
    for i in range(10):
        p.send(topic, b"%d" % i)
    p.flush()
    p.close()
    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=seglog_broker.bootstrap_servers, auto_offset_reset="none",
                      enable_auto_commit=False)
    c.assign([tp])
    c.seek(tp, 50)
    with pytest.raises(kerr.OffsetOutOfRangeError):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            c.poll(timeout_ms=200)
    c.close()
    # with a reset policy the client recovers: earliest -> everything
    c = KafkaConsumer(bootstrap_servers=seglog_broker.bootstrap_servers, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=2000)
    c.assign([tp])
    c.seek(tp, 50)
    assert [m.value for m in c] == [b"%d" % i for i in range(10)]
    c.close()


def test_both_doors_write_one_partition_at_once(seglog_broker, topic_name):
    """kafka-python (idempotent, over the wire) and seglog.Producer (in-process) append to the same partition
    concurrently; every record is there once, each producer's records in its own order, sequences intact."""
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    n = 2000
    errors = []

    def wire():
        try:
            p = KafkaProducer(bootstrap_servers=seglog_broker.bootstrap_servers, linger_ms=1)
            for i in range(n):
                p.send(topic, key=b"wire", value=b"w%d" % i, partition=0)
            p.flush()
            p.close()
        except BaseException as e:
            errors.append(e)

    def local():
        try:
            with seglog.Producer(seglog_broker.node, linger_ms=1) as p:
                for i in range(n):
                    p.send(topic, value=b"l%d" % i, key=b"local", partition=0)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=wire), threading.Thread(target=local)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    c = KafkaConsumer(bootstrap_servers=seglog_broker.bootstrap_servers, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=2000)
    c.assign([TopicPartition(topic, 0)])
    got = [(m.offset, m.key, m.value) for m in c]
    c.close()
    assert [o for o, _, _ in got] == list(range(2 * n))
    assert [v for _, k, v in got if k == b"wire"] == [b"w%d" % i for i in range(n)]
    assert [v for _, k, v in got if k == b"local"] == [b"l%d" % i for i in range(n)]
    pids = {b.producer_id for b in stored_batches(seglog_broker.node.partition(topic, 0))}
    assert len(pids) == 2 and all(pid >= 0 for pid in pids), "two idempotent producers, distinct ids"


def test_deleted_topic_comes_back_empty(seglog_broker, topic_name):
    topic = topic_name()
    bs = seglog_broker.bootstrap_servers
    a = KafkaAdminClient(bootstrap_servers=bs)
    try:
        a.create_topics([NewTopic(topic, 2, 1)])
        p = KafkaProducer(bootstrap_servers=bs)
        for i in range(20):
            p.send(topic, b"old%d" % i)
        p.flush()
        a.delete_topics([topic])
        a.create_topics([NewTopic(topic, 3, 1)])
        assert [part.log_end_offset for part in seglog_broker.node.partitions(topic)] == [0, 0, 0]
        p.close()
        p = KafkaProducer(bootstrap_servers=bs)
        p.send(topic, b"new", partition=2).get(timeout=10)
        p.close()
        c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False,
                          consumer_timeout_ms=1500)
        c.assign([TopicPartition(topic, i) for i in range(3)])
        assert [(m.partition, m.offset, m.value) for m in c] == [(2, 0, b"new")]
        c.close()
    finally:
        a.close()


def test_kafka_python_offsets_for_times_and_seek_into_a_compressed_batch(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    p = KafkaProducer(bootstrap_servers=seglog_broker.bootstrap_servers, compression_type="lz4", linger_ms=50,
                      batch_size=1 << 20)
    for i in range(100):
        p.send(topic, b"%d" % i, timestamp_ms=1_500_000_000_000 + 10 * i)
    p.flush()
    p.close()
    assert len(stored_batches(seglog_broker.node.partition(topic, 0))) < 10, "few large compressed batches"
    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=seglog_broker.bootstrap_servers, enable_auto_commit=False,
                      consumer_timeout_ms=1500)
    c.assign([tp])
    assert c.beginning_offsets([tp]) == {tp: 0} and c.end_offsets([tp]) == {tp: 100}
    found = c.offsets_for_times({tp: 1_500_000_000_000 + 555})[tp]
    assert (found.offset, found.timestamp) == (56, 1_500_000_000_000 + 560)
    assert c.offsets_for_times({tp: 1_600_000_000_000})[tp] is None
    c.seek(tp, 37)                                        # inside a batch: the client skips the batch's head
    assert [int(m.value) for m in c] == list(range(37, 100))
    c.close()


def test_kafka_python_create_topics_with_a_manual_replica_assignment(seglog_broker, topic_name):
    """A lone broker takes an assignment that names only itself, once per partition, and refuses the rest with
    INVALID_REPLICA_ASSIGNMENT and Kafka's messages; sizes and an assignment together are INVALID_REQUEST."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidReplicationAssignmentError, InvalidRequestError

    me = seglog_broker.node.config.broker_id
    admin = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        placed = topic_name()
        admin.create_topics([NewTopic(placed, num_partitions=-1, replication_factor=-1,
                                      replica_assignments={0: [me], 1: [me], 2: [me]})])
        assert seglog_broker.node.topic(placed).partitions == 3
        refused = {"unknown broker": ({0: [me + 1]}, "no such broker is registered"),
                   "twice": ({0: [me, me]}, "more than once"),
                   "gap": ({1: [me]}, "consecutive 0-based")}
        for what, (assignment, message) in refused.items():
            with pytest.raises(InvalidReplicationAssignmentError, match=message):
                admin.create_topics([NewTopic(topic_name(), num_partitions=-1, replication_factor=-1,
                                              replica_assignments=assignment)])
        with pytest.raises(InvalidRequestError, match="Both cannot be used at the same time"):
            admin.create_topics([NewTopic(topic_name(), num_partitions=2, replication_factor=-1,
                                          replica_assignments={0: [me], 1: [me]})])
    finally:
        admin.close()


def test_kafka_python_create_partitions_with_a_manual_replica_assignment(seglog_broker, topic_name):
    """CreatePartitions' assignments on a lone broker: one list naming this broker per new partition."""
    from kafka.admin import KafkaAdminClient, NewPartitions
    from kafka.errors import InvalidReplicationAssignmentError

    me = seglog_broker.node.config.broker_id
    t = topic_name()
    seglog_broker.node.create_topic(t, partitions=2)
    admin = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        admin.create_partitions({t: NewPartitions(4, [[me], [me]])})
        assert seglog_broker.node.topic(t).partitions == 4
        for assignments, message in (([[me]], "by 2 but 1 assignments"), ([[me + 1], [me]], "Unknown broker")):
            with pytest.raises(InvalidReplicationAssignmentError, match=message):
                admin.create_partitions({t: NewPartitions(6, assignments)})
        assert seglog_broker.node.topic(t).partitions == 4
    finally:
        admin.close()


def test_kafka_python_describe_configs_types_and_sources(seglog_broker, topic_name):
    """DescribeConfigs v3+ gives each config Kafka's type; a broker config left at its default is DEFAULT_CONFIG,
    one set in the broker's properties STATIC_BROKER_CONFIG, a topic override DYNAMIC_TOPIC_CONFIG."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    t = topic_name()
    seglog_broker.node.create_topic(t, partitions=1, config={"retention.ms": "60000"})
    admin = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        topic = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)], config_filter="all")["topic"][t]
        assert (topic["retention.bytes"]["config_type"], topic["retention.bytes"]["config_source"]) == \
            ("LONG", "DEFAULT_CONFIG")
        assert (topic["retention.ms"]["config_source"], topic["retention.ms"]["value"]) == ("DYNAMIC_TOPIC_CONFIG", "60000")
        assert topic["cleanup.policy"]["config_type"] == "LIST"
        assert topic["unclean.leader.election.enable"]["config_type"] == "BOOLEAN"
        broker_id = str(seglog_broker.node.config.broker_id)
        broker = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, broker_id)],
                                        config_filter="all")["broker"][broker_id]
        assert broker["log.dirs"]["config_source"] == "STATIC_BROKER_CONFIG"          # set by serve(data_dir)
        assert broker["num.io.threads"]["config_source"] == "DEFAULT_CONFIG"
        assert broker["num.io.threads"]["config_type"] == "INT"
        assert broker["ssl.key.password"]["config_type"] == "PASSWORD"
    finally:
        admin.close()


def test_kafka_python_delete_group_offsets(seglog_broker, topic_name):
    """OffsetDelete through kafka-python's admin: while a member subscribes to one topic, that topic's offsets
    are refused (GROUP_SUBSCRIBED_TO_TOPIC) and another topic's are deleted; once the member left, the rest."""
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition as TP
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError

    read, other = topic_name(), topic_name()
    node = seglog_broker.node
    for t in (read, other):
        node.create_topic(t, partitions=1)
    node.group_coordinator.commit_offsets("dg", {(other, 0): 3})
    consumer = KafkaConsumer(read, bootstrap_servers=seglog_broker.bootstrap_servers, group_id="dg",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    admin = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(200)
        assert consumer.assignment() == {TP(read, 0)}
        consumer.commit({TP(read, 0): OffsetAndMetadata(0, "", -1)})
        result = admin.delete_group_offsets("dg", [TP(read, 0), TP(other, 0)])
        assert result == {TP(read, 0): GroupSubscribedToTopicError, TP(other, 0): NoError}
        consumer.close()
        assert admin.delete_group_offsets("dg", [TP(read, 0)]) == {TP(read, 0): NoError}
        assert node.group_coordinator.fetch_offsets("dg", None) == {}
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("no-such-group", [TP(read, 0)])
    finally:
        consumer.close()
        admin.close()


def test_kafka_python_describe_producers(seglog_broker, topic_name):
    """DescribeProducers through kafka-python's admin: the idempotent producer that wrote a partition, with its
    epoch and last sequence; a partition nobody wrote has none."""
    from kafka import KafkaProducer, TopicPartition as TP
    from kafka.admin import KafkaAdminClient

    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=seglog_broker.bootstrap_servers, enable_idempotence=True,
                             acks="all", linger_ms=0)
    for i in range(7):
        producer.send(topic, b"v%d" % i, partition=0).get(10)
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        states = admin.describe_producers([TP(topic, 0), TP(topic, 1)])
        [state] = states[TP(topic, 0)].active_producers
        assert (state.producer_epoch, state.last_sequence, state.coordinator_epoch,
                state.current_transaction_start_offset) == (0, 6, -1, -1)
        assert abs(state.last_timestamp - time.time() * 1000) < 60_000
        assert states[TP(topic, 1)].active_producers == []
        log_producers = seglog_broker.node.partition(topic, 0).log.active_producers()
        assert [(a.producer_id, a.last_sequence) for a in log_producers] == [(state.producer_id, 6)]
    finally:
        admin.close()
