"""seglog's broker against librdkafka: confluent-kafka 2.16 (librdkafka 2.16) and kcat (Debian, librdkafka 2.0).

Compressed batches of every codec, headers, null keys and null values, idempotence with acks=all, a consumer
group with manual commits, the admin API, and the command-line tool's metadata, produce and consume modes.
Every record must come back exactly once, in order per partition, byte for byte; what lands on disk is checked
with kafka-python's independent batch reader (codec, producer id, CRC).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import threading
import time

import pytest

ck = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AdminClient, ConfigResource, NewPartitions, NewTopic,  # noqa: E402
                                   ResourceType)

from helpers.kafka_wire import stored_batches  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
FAST_GROUP = {"heartbeat.interval.ms": 100, "session.timeout.ms": 6000, "topic.metadata.refresh.interval.ms": 1000}


def make_records(n: int, seed: int, ts0: int):
    """(key, value, headers, timestamp): null keys, null values, both null, empty values, binary bytes,
    headers with null values, repeated header keys, no headers; compressible and incompressible values."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else b"k\x00%d" % (i % 17)
        if i % 9 == 0:
            value = None
        elif i % 10 == 0:
            value = b""
        elif i % 2:
            value = (b"compressible %d " % i) * rnd.randrange(1, 40)
        else:
            value = rnd.randbytes(rnd.randrange(1, 300))
        headers = [("seq", str(i).encode()), ("dup", b"1"), ("dup", b"2"), ("nul", None)] if i % 4 else None
        out.append((key, value, headers, ts0 + i))
    return out


def produce_all(conf: dict, topic: str, records, partition: int | None = None) -> dict:
    """Produce with confluent-kafka; {(partition, offset): record} from the delivery reports."""
    delivered, failed = {}, []

    def report(err, msg, rec):
        if err is not None:
            failed.append(err)
        else:
            delivered[(msg.partition(), msg.offset())] = rec

    p = Producer(conf)
    for rec in records:
        key, value, headers, ts = rec
        kwargs = {"key": key, "value": value, "timestamp": ts,
                  "on_delivery": lambda err, msg, rec=rec: report(err, msg, rec)}
        if headers is not None:
            kwargs["headers"] = headers
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(30) == 0
    assert not failed, failed[:5]
    assert len(delivered) == len(records)
    return delivered


def message_tuple(m):
    headers = m.headers()
    return (m.key(), m.value(), None if headers is None else [(k, v) for k, v in headers], m.timestamp())


def check_exact(got: list, delivered: dict) -> None:
    """got: (partition, offset, key, value, headers, (ts type, ts)) in consumption order."""
    keys = [(p, o) for p, o, *_ in got]
    assert len(keys) == len(set(keys)), "a record came back twice"
    assert set(keys) == set(delivered)
    last: dict[int, int] = {}
    for p, o, key, value, headers, ts in got:
        assert o > last.get(p, -1)
        last[p] = o
        key_, value_, headers_, ts_ = delivered[(p, o)]
        assert (key, value, headers, ts) == (key_, value_, headers_, (ck.TIMESTAMP_CREATE_TIME, ts_)), (p, o)


# A commit that races a rebalance fails on Kafka too: ILLEGAL_GENERATION when it still carries the previous
# generation after the join completed, REBALANCE_IN_PROGRESS between the new generation's JoinGroup and the
# leader's SyncGroup. librdkafka returns both to a synchronous commit; an application retries once the
# generation is complete (librdkafka finishes the join in its own thread), the offsets are still its to commit.
REBALANCE_COMMIT_ERRORS = (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION)


def commit_message(c, m, timeout: float = 15) -> None:
    """Synchronously commit the offset after message m, retrying while the group completes a rebalance."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            c.commit(message=m, asynchronous=False)
            return
        except KafkaException as e:
            if e.args[0].code() not in REBALANCE_COMMIT_ERRORS or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def consume_assigned(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30) -> list:
    """Read a topic from the beginning without a group (assign), until `expected` records arrived."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), *message_tuple(m)))
    finally:
        c.close()
    return got


# -- producer: codecs, headers, nulls, idempotence ---------------------------------------------------------------

@pytest.mark.parametrize("codec", sorted(CODECS))
def test_confluent_compressed_batches_round_trip_byte_for_byte(seglog_broker, topic_name, codec):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=3)
    records = make_records(600, seed=CODECS[codec], ts0=1_600_000_000_000)
    delivered = produce_all({"bootstrap.servers": seglog_broker.bootstrap_servers, "compression.type": codec,
                             "linger.ms": 20, "acks": 1}, topic, records)
    check_exact(consume_assigned(seglog_broker.bootstrap_servers, topic, 3, len(records)), delivered)

    # on disk: the client's compressed batches, as they came (codec bits, valid CRC, several records each)
    seen_records = 0
    for p in range(3):
        part = seglog_broker.node.partition(topic, p)
        for b in stored_batches(part):
            assert b.validate_crc()
            assert b.compression_type == CODECS[codec], (p, b.base_offset, b.compression_type)
            assert b.producer_id == -1                   # not idempotent here
            seen_records += b.last_offset_delta + 1
        # the in-process door reads the same records
        for r in part.log.records():
            key_, value_, headers_, ts_ = delivered[(p, r.offset)]
            assert (r.key, r.value, list(r.headers) or None, r.timestamp) == (key_, value_, headers_, ts_)
    assert seen_records == len(records)
    assert any(b.last_offset_delta > 0 for p in range(3)
               for b in stored_batches(seglog_broker.node.partition(topic, p))), "records were batched"


def test_confluent_idempotent_acks_all(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=2)
    records = make_records(2000, seed=5, ts0=1_650_000_000_000)
    conf = {"bootstrap.servers": seglog_broker.bootstrap_servers, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "compression.type": "lz4", "max.in.flight.requests.per.connection": 5,
            "batch.num.messages": 100}
    delivered = produce_all(conf, topic, records)
    check_exact(consume_assigned(seglog_broker.bootstrap_servers, topic, 2, len(records)), delivered)
    for p in range(2):
        seq, pid = 0, None
        for b in stored_batches(seglog_broker.node.partition(topic, p)):
            assert b.producer_id >= 0 and b.producer_epoch >= 0
            pid = b.producer_id if pid is None else pid
            assert b.producer_id == pid
            assert b.base_sequence == seq, "sequences without gaps or repeats: nothing written twice"
            seq += b.last_offset_delta + 1


# -- consumer group ------------------------------------------------------------------------------------------

def test_confluent_consumer_group_manual_commits(seglog_broker, topic_name):
    topic, group = topic_name(), topic_name()
    seglog_broker.node.create_topic(topic, partitions=4)
    bs = seglog_broker.bootstrap_servers
    first = make_records(1000, seed=7, ts0=1_610_000_000_000)
    delivered = produce_all({"bootstrap.servers": bs, "compression.type": "zstd", "linger.ms": 5}, topic, first)

    conf = {"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", **FAST_GROUP}
    consumers = [Consumer(dict(conf, **{"client.id": f"c{i}"})) for i in range(2)]
    assigned: dict[int, set] = {0: set(), 1: set()}
    for i, c in enumerate(consumers):
        c.subscribe([topic], on_assign=lambda cons, parts, i=i: assigned[i].update(tp.partition for tp in parts))
    got: list = []
    more = make_records(500, seed=8, ts0=1_620_000_000_000)
    producer_done = threading.Event()
    late: dict = {}

    def produce_more():                                  # records keep coming while the group forms
        late.update(produce_all({"bootstrap.servers": bs, "linger.ms": 1}, topic, more))
        producer_done.set()

    t = threading.Thread(target=produce_more, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    try:
        while (len(got) < len(first) + len(more) or not producer_done.is_set()) and time.monotonic() < deadline:
            for c in consumers:
                m = c.poll(0.05)
                if m is None:
                    continue
                assert m.error() is None, m.error()
                got.append((m.partition(), m.offset(), *message_tuple(m)))
                commit_message(c, m)                         # manual commit after processing
        t.join(30)
        assert assigned[0] and assigned[1], "both members got partitions"
        assert assigned[0] | assigned[1] == set(range(4))
        delivered.update(late)
        check_exact(got, delivered)
        committed = consumers[0].committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
        ends = {p: seglog_broker.node.partition(topic, p).high_watermark for p in range(4)}
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        for c in consumers:
            c.close()


# -- admin -----------------------------------------------------------------------------------------------------

def _result(fut):
    try:
        fut.result(10)
        return None
    except KafkaException as e:
        return e.args[0]


def test_confluent_admin_topics_partitions_configs_groups(seglog_broker, topic_name):
    bs = seglog_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    t1, t2, t3 = topic_name(), topic_name(), topic_name()

    fs = admin.create_topics([NewTopic(t1, 2, 1, config={"retention.ms": "3600000"}), NewTopic(t2, 1, 1)])
    assert _result(fs[t1]) is None and _result(fs[t2]) is None
    md = admin.list_topics(timeout=10)
    assert len(md.topics[t1].partitions) == 2 and md.topics[t1].partitions[0].leader == 0

    err = _result(admin.create_topics([NewTopic(t1, 2, 1)])[t1])
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS
    err = _result(admin.create_topics([NewTopic(t3, 1, 3)])[t3])
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "Replication factor: 3 larger than available brokers: 1." in err.str()

    assert _result(admin.create_partitions([NewPartitions(t1, 5)])[t1]) is None
    deadline = time.monotonic() + 10
    while len(admin.list_topics(t1, timeout=10).topics[t1].partitions) != 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(admin.list_topics(t1, timeout=10).topics[t1].partitions) == 5
    assert len(seglog_broker.node.partitions(t1)) == 5
    delivered = produce_all({"bootstrap.servers": bs}, t1, make_records(5, 1, 1_000), partition=4)
    assert set(delivered) == {(4, o) for o in range(5)}, "the new partition takes records"

    [res] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t1)]).values()
    configs = res.result(10)
    assert configs["retention.ms"].value == "3600000" and not configs["retention.ms"].is_default
    assert configs["segment.bytes"].value == "1073741824" and configs["segment.bytes"].is_default
    assert configs["cleanup.policy"].value == "delete"

    assert _result(admin.delete_topics([t2])[t2]) is None
    assert t2 not in admin.list_topics(timeout=10).topics
    err = _result(admin.delete_topics([t2])[t2])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # groups: one with a committed offset and a live member
    group = topic_name()
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, **FAST_GROUP})
    c.subscribe([t1])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                c.commit(message=m, asynchronous=False)
                break
        listed = admin.list_consumer_groups().result(10)
        assert group in {g.group_id for g in listed.valid}
        desc = admin.describe_consumer_groups([group])[group].result(10)
        assert desc.group_id == group and str(desc.state).endswith("STABLE")
        assert len(desc.members) == 1
        assert {tp.partition for tp in desc.members[0].assignment.topic_partitions} == set(range(5))
        # DeleteGroups: refused while the group has a member, per group errors
        err = _result(admin.delete_consumer_groups([group])[group])
        assert err.code() == KafkaError.NON_EMPTY_GROUP
    finally:
        c.close()
    ghost = topic_name()
    done = admin.delete_consumer_groups([group, ghost], request_timeout=10)
    assert _result(done[group]) is None
    assert _result(done[ghost]).code() == KafkaError.GROUP_ID_NOT_FOUND
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    assert seglog_broker.node.group_coordinator.fetch_offsets(group, None) == {}


def test_confluent_unknown_topic_with_auto_create_off(start_broker, topic_name):
    b = start_broker(auto_create_topics_enable=False)
    topic = topic_name()
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "message.timeout.ms": 10000,
                  "topic.metadata.propagation.max.ms": 500})
    errors = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert [e.code() for e in errors] in ([KafkaError.UNKNOWN_TOPIC_OR_PART], [KafkaError._UNKNOWN_TOPIC])
    assert topic not in b.node.topics()
    md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(topic, timeout=10)
    assert md.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_message_too_large(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=1, config={"max.message.bytes": "2000"})
    p = Producer({"bootstrap.servers": seglog_broker.bootstrap_servers, "message.max.bytes": 10_000_000})
    errors = []
    p.produce(topic, b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]    # the broker's error 10
    p.produce(topic, b"y" * 100, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors[1:] == [None], "the connection and the partition still work"
    part = seglog_broker.node.partition(topic, 0)
    assert [r.value for r in part.log.records()] == [b"y" * 100], "nothing over max.message.bytes stored"


def test_confluent_without_api_version_request_lists_topics(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 2)
    c = Consumer({"bootstrap.servers": seglog_broker.bootstrap_servers, "group.id": "v0",
                  "api.version.request": False, "broker.version.fallback": "0.9.0"})   # Metadata v0
    try:
        md = c.list_topics(timeout=10)
    finally:
        c.close()
    assert topic in md.topics and len(md.topics[topic].partitions) == 2


# -- kcat (librdkafka 2.0, a C program) ------------------------------------------------------------------------

kcat_bin = shutil.which("kcat") or shutil.which("kafkacat")
needs_kcat = pytest.mark.skipif(kcat_bin is None, reason="kcat (Debian package kafkacat) is not installed")


def kcat(*args, stdin: bytes | None = None, timeout: float = 30) -> str:
    res = subprocess.run([kcat_bin, *args], input=stdin, capture_output=True, timeout=timeout)
    assert res.returncode == 0, (args, res.returncode, res.stderr.decode(errors="replace"))
    return res.stdout.decode()


@needs_kcat
def test_kcat_metadata(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=3)
    host, port = seglog_broker.host, seglog_broker.port
    text = kcat("-b", seglog_broker.bootstrap_servers, "-L", "-t", topic)
    assert " 1 brokers:" in text
    assert f"broker 0 at {host}:{port} (controller)" in text
    assert f'topic "{topic}" with 3 partitions:' in text
    for p in range(3):
        assert f"partition {p}, leader 0, replicas: 0, isrs: 0" in text
    data = json.loads(kcat("-b", seglog_broker.bootstrap_servers, "-L", "-J"))
    assert data["brokers"] == [{"id": 0, "name": f"{host}:{port}"}]
    [t] = [t for t in data["topics"] if t["topic"] == topic]
    assert [(p["partition"], p["leader"]) for p in t["partitions"]] == [(0, 0), (1, 0), (2, 0)]


@needs_kcat
def test_kcat_produce_with_keys_and_consume_to_end(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, partitions=2)
    bs = seglog_broker.bootstrap_servers
    lines = [(f"key{i % 3}", f"value {i} \u00e9") for i in range(200)]
    stdin = "".join(f"{k}:{v}\n" for k, v in lines).encode()
    kcat("-b", bs, "-t", topic, "-P", "-K:", "-p", "1", stdin=stdin)
    kcat("-b", bs, "-t", topic, "-P", "-K:", "-p", "0", "-z", "snappy", stdin=b"a:first\nb:second\n")

    part = seglog_broker.node.partition(topic, 1)
    assert [(r.key, r.value) for r in part.log.records()] == [(k.encode(), v.encode()) for k, v in lines]

    out = kcat("-b", bs, "-t", topic, "-C", "-o", "beginning", "-e", "-f", "%p|%o|%k|%s\n")
    rows = [line.split("|", 3) for line in out.splitlines()]
    assert len(rows) == 202
    by_part = {p: [(int(o), k, s) for pp, o, k, s in rows if int(pp) == p] for p in (0, 1)}
    assert by_part[0] == [(0, "a", "first"), (1, "b", "second")]
    assert by_part[1] == [(i, k, v) for i, (k, v) in enumerate(lines)]

    # JSON output carries the same offsets and keys
    out = kcat("-b", bs, "-t", topic, "-p", "0", "-C", "-o", "beginning", "-e", "-J")
    msgs = [json.loads(line) for line in out.splitlines()]
    assert [(m["offset"], m["key"], m["payload"]) for m in msgs] == [(0, "a", "first"), (1, "b", "second")]


# -- timestamps, offsets for times, large records ----------------------------------------------------------------

def test_confluent_log_append_time_topic(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    delivered = []
    p = Producer({"bootstrap.servers": seglog_broker.bootstrap_servers, "linger.ms": 5, "compression.type": "lz4"})
    for i in range(50):
        p.produce(topic, b"v%d" % i, timestamp=1_000_000 + i,
                  on_delivery=lambda err, msg: delivered.append((err, msg.timestamp())))
    p.flush(10)
    after = int(time.time() * 1000)
    assert all(err is None for err, _ in delivered)
    # the delivery report carries the broker's append time (Produce response log_append_time_ms)
    assert all(ts_type == ck.TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after for _, (ts_type, ts) in delivered)
    got = consume_assigned(seglog_broker.bootstrap_servers, topic, 1, 50)
    assert [m[3] for m in got] == [b"v%d" % i for i in range(50)]
    for *_, (ts_type, ts) in got:
        assert ts_type == ck.TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after
    for b in stored_batches(seglog_broker.node.partition(topic, 0)):
        assert b.timestamp_type == 1 and b.validate_crc() and before <= b.max_timestamp <= after


def test_confluent_offsets_for_times_and_watermarks(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    records = [(None, b"v%d" % i, None, 1_500_000_000_000 + 1000 * i) for i in range(100)]
    produce_all({"bootstrap.servers": seglog_broker.bootstrap_servers, "linger.ms": 0,
                 "batch.num.messages": 7}, topic, records)
    c = Consumer({"bootstrap.servers": seglog_broker.bootstrap_servers, "group.id": "oft"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 100)
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, 1_500_000_000_000 + 41_500)], timeout=10)
        assert tp.offset == 42 and tp.error is None
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, 1_500_000_000_000)], timeout=10)
        assert tp.offset == 0
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, 1_600_000_000_000)], timeout=10)
        assert tp.offset == -1, "after the last timestamp: no offset (OFFSET_END)"
    finally:
        c.close()


def test_confluent_record_larger_than_fetch_limits_still_delivered(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    big = random.Random(9).randbytes(900_000)
    produce_all({"bootstrap.servers": seglog_broker.bootstrap_servers}, topic,
                [(b"big", big, None, 1), (b"small", b"s", None, 2)])
    c = Consumer({"bootstrap.servers": seglog_broker.bootstrap_servers, "group.id": "unused",
                  "fetch.max.bytes": 100_000, "message.max.bytes": 100_000,
                  "max.partition.fetch.bytes": 50_000, "receive.message.max.bytes": 2_000_000})
    c.assign([TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < 2 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append((m.key(), m.value()))
    finally:
        c.close()
    assert got == [(b"big", big), (b"small", b"s")]


@needs_kcat
def test_kcat_offsets_by_time_and_from_end(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    produce_all({"bootstrap.servers": seglog_broker.bootstrap_servers, "linger.ms": 0}, topic,
                [(None, b"m%d" % i, None, 1_500_000_000_000 + 1000 * i) for i in range(20)])
    bs = seglog_broker.bootstrap_servers
    out = kcat("-b", bs, "-t", topic, "-C", "-o", f"s@{1_500_000_000_000 + 15_000}", "-e", "-f", "%o:%s\n")
    assert out.splitlines() == [f"{i}:m{i}" for i in range(15, 20)]
    out = kcat("-b", bs, "-t", topic, "-C", "-o", "-3", "-e", "-f", "%o:%s\n")
    assert out.splitlines() == [f"{i}:m{i}" for i in range(17, 20)]


# -- group membership failures ----------------------------------------------------------------------------------

def test_confluent_cooperative_sticky_and_static_members(seglog_broker, topic_name):
    topic, group = topic_name(), topic_name()
    seglog_broker.node.create_topic(topic, 4)
    bs = seglog_broker.bootstrap_servers
    delivered = produce_all({"bootstrap.servers": bs}, topic, make_records(400, seed=11, ts0=1_000_000))
    got: list = []

    def member(i, **extra):
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "partition.assignment.strategy": "cooperative-sticky",
                      "client.id": f"coop{i}", **FAST_GROUP, **extra})
        c.subscribe([topic])
        return c

    def drain(consumers, until, seconds):
        deadline = time.monotonic() + seconds
        while not until() and time.monotonic() < deadline:
            for c in consumers:
                m = c.poll(0.05)
                if m is not None:
                    assert m.error() is None, m.error()
                    got.append((m.partition(), m.offset(), *message_tuple(m)))
                    commit_message(c, m)

    a = member(0, **{"group.instance.id": "static-a"})
    b = member(1)
    try:
        drain([a, b], lambda: len(got) >= 200 and a.assignment() and b.assignment(), 30)
        assert a.assignment() and b.assignment()
        assert {tp.partition for tp in a.assignment()} | {tp.partition for tp in b.assignment()} == set(range(4))
        b.close()                                         # b leaves: a gets everything, incrementally
        b = None
        drain([a], lambda: len(a.assignment()) == 4 and len(got) >= 400, 30)
        assert len(a.assignment()) == 4
    finally:
        a.close()
        if b is not None:                                 # a failure above must not leave a member running
            b.close()
    check_exact(got, delivered)


def test_confluent_member_killed_with_minus_9_is_expired_and_its_partitions_move(seglog_broker, topic_name,
                                                                                 tmp_path):
    import sys
    topic, group = topic_name(), topic_name()
    seglog_broker.node.create_topic(topic, 4)
    bs = seglog_broker.bootstrap_servers
    conf = {"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "heartbeat.interval.ms": 100, "session.timeout.ms": 1500}
    child = subprocess.Popen([sys.executable, "-c", f"""
import sys, time, confluent_kafka as ck
c = ck.Consumer({conf!r})
c.subscribe([{topic!r}], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.1)
"""], stdout=subprocess.PIPE, text=True)
    local = None
    try:
        assert child.stdout.readline().startswith("assigned 4")
        local = Consumer(dict(conf, **{"client.id": "survivor"}))
        local.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(local.assignment()) != 2 and time.monotonic() < deadline:
            local.poll(0.05)
        assert len(local.assignment()) == 2, "the group split the partitions between the two members"
        child.kill()                                      # no LeaveGroup: the coordinator must expire it
        child.wait(10)
        t = time.monotonic()
        while len(local.assignment()) != 4 and time.monotonic() < deadline + 15:
            local.poll(0.05)
        took = time.monotonic() - t
        assert len(local.assignment()) == 4
        assert took < 1.5 + 5, f"took {took:.1f} s for a 1.5 s session timeout"
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()
        if local is not None:
            local.close()
