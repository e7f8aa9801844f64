"""Real clients negotiate the flexible versions seglog now speaks (Kafka 3.7's), and what those versions add
works through them: confluent-kafka (librdkafka 2.16), kafka-python 3, kcat. Each test records the
(api, version) of every request the broker decodes and checks the versions the client chose."""

from __future__ import annotations

import collections
import shutil
import subprocess
import time

import pytest

import seglog.broker.server as server
from helpers.kafka_wire import RawConnection, record_batch
from seglog.protocol import ApiKey

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]
UNSUPPORTED_VERSION = 35


@pytest.fixture
def versions(monkeypatch):
    """{api name: {versions}} of the requests the (in-process) broker decodes during the test."""
    seen = collections.defaultdict(set)
    decode = server.decode_request

    def recording(frame):
        header, body = decode(frame)
        seen[ApiKey(header.api_key).name].add(header.api_version)
        return header, body

    monkeypatch.setattr(server, "decode_request", recording)
    return seen


def test_librdkafka_speaks_flexible_versions(seglog_broker, topic_name, versions):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

    bs = seglog_broker.bootstrap_servers
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    producer = ck.Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 0})
    now = int(time.time() * 1000)
    for i, ts in enumerate([now - 30, now - 5, now - 20]):              # one batch each
        producer.produce(topic, b"v%d" % i, key=b"k", partition=0, timestamp=ts)
        producer.flush(10)
    assert len(producer) == 0
    # KIP-734: the offset of the largest timestamp (ListOffsets v7)
    [result] = admin.list_offsets({ck.TopicPartition(topic, 0): OffsetSpec.max_timestamp()}).values()
    info = result.result(10)
    assert (info.offset, info.timestamp) == (1, now - 5)
    consumer = ck.Consumer({"bootstrap.servers": bs, "group.id": topic, "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [b"v0", b"v1", b"v2"]
        consumer.commit(asynchronous=False)
        committed = consumer.committed([ck.TopicPartition(topic, 0)], timeout=10)      # OffsetFetch v9
        assert committed[0].offset == 3
    finally:
        consumer.close()
    admin.delete_topics([topic])[topic].result(10)
    for api, flexible in {"PRODUCE": 10, "FETCH": 16, "METADATA": 12, "LIST_OFFSETS": 7, "OFFSET_COMMIT": 9,
                          "OFFSET_FETCH": 9, "INIT_PRODUCER_ID": 4, "API_VERSIONS": 3}.items():
        assert max(versions[api]) == flexible, (api, versions[api])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_get_unsupported_version_on_an_open_connection(seglog_broker, topic_name, version):
    """As Kafka 4: Produce is advertised from v0 (old librdkafka turns compression off otherwise) and v0-2 are
    answered with UNSUPPORTED_VERSION, never a silently dropped connection."""
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    body = {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": record_batch([(1, None, b"v", [])])}]}]}
    with RawConnection((seglog_broker.host, seglog_broker.port)) as c:
        versions_table = {k["api_key"]: (k["min_version"], k["max_version"])
                          for k in c.request(ApiKey.API_VERSIONS, 3, {})["api_keys"]}
        assert versions_table[ApiKey.PRODUCE] == (0, 10)
        [p] = c.request(ApiKey.PRODUCE, version, body)["responses"][0]["partition_responses"]
        assert (p["index"], p["error_code"], p["base_offset"]) == (0, UNSUPPORTED_VERSION, -1)
        assert c.request(ApiKey.METADATA, 12, {"topics": None})["brokers"]        # still connected
    assert seglog_broker.node.partition(topic, 0).log_end_offset == 0


def test_delegation_token_requests_are_answered_as_kafka_answers_them_without_tokens(seglog_broker):
    """seglog has no delegation tokens: as a Kafka 3.7 broker without delegation.token.secret.key, it advertises
    the four APIs at Kafka's versions and answers them; over PLAINTEXT, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, on
    a connection that stays open."""
    with RawConnection((seglog_broker.host, seglog_broker.port), timeout=5) as c:
        advertised = {k["api_key"]: (k["min_version"], k["max_version"])
                      for k in c.request(ApiKey.API_VERSIONS, 3, {})["api_keys"]}
        assert [advertised[k] for k in (38, 39, 40, 41)] == [(0, 3), (0, 2), (0, 2), (0, 3)]
        r = c.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, {"owner_principal_type": None, "owner_principal_name": None,
                                                          "renewers": [], "max_lifetime_ms": -1})
        assert (r["error_code"], r["principal_name"], r["token_id"]) == (64, "ANONYMOUS", "")
        assert c.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 0, {"owners": []})["error_code"] == 64
        assert c.request(ApiKey.METADATA, 12, {"topics": None})["brokers"]        # still connected


def test_kafka_python_speaks_flexible_versions(seglog_broker, topic_name, versions):
    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient, NewTopic

    bs = seglog_broker.bootstrap_servers
    topic = topic_name()
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        created = admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "3600000"})])
        [t] = created["topics"]
        assert (t["error_code"], t["num_partitions"], t["replication_factor"]) == (0, 2, 1)     # v5+ fields
        assert t["configs"]["retention.ms"]["value"] == "3600000"
        producer = kafka.KafkaProducer(bootstrap_servers=bs, acks="all")
        for i in range(5):
            producer.send(topic, b"v%d" % i, key=b"k", partition=0)
        producer.flush(10)
        producer.close()
        consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bs, group_id=topic, auto_offset_reset="earliest",
                                       consumer_timeout_ms=15000)
        got = []
        for m in consumer:
            got.append(m.value)
            if len(got) == 5:
                break
        consumer.commit()
        consumer.close()
        assert got == [b"v%d" % i for i in range(5)]
        assert [(g["group_id"], g["group_state"]) for g in admin.list_groups() if g["group_id"] == topic] == \
            [(topic, "Empty")]
        offsets = admin.list_group_offsets(topic)[topic]
        assert offsets[kafka.TopicPartition(topic, 0)].offset == 5
        deleted = admin.delete_topics([topic])
        assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(topic, 0)]
    finally:
        admin.close()
    for api, flexible in {"PRODUCE": 9, "FETCH": 12, "METADATA": 12, "CREATE_TOPICS": 7, "FIND_COORDINATOR": 4,
                          "SYNC_GROUP": 5, "LEAVE_GROUP": 5, "OFFSET_FETCH": 8, "DELETE_TOPICS": 6,
                          "LIST_GROUPS": 5}.items():
        assert max(versions[api]) == flexible, (api, versions[api])


def test_kafka_python_deletes_topics_by_id(seglog_broker, topic_name, versions):
    """DeleteTopics v6 names topics by id: kafka-python's delete_topics with uuids deletes them; an id no topic
    has is refused UNKNOWN_TOPIC_ID."""
    pytest.importorskip("kafka")
    import uuid

    from kafka.admin import KafkaAdminClient
    from kafka.errors import UnknownTopicIdError

    topic = topic_name()
    seglog_broker.node.create_topic(topic, 2)
    admin = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        [described] = admin.describe_topics([topic])
        topic_id = uuid.UUID(str(described["topic_id"]))
        assert topic_id == seglog_broker.node.topic(topic).topic_id
        with pytest.raises(UnknownTopicIdError):
            admin.delete_topics([uuid.uuid4()])
        deleted = admin.delete_topics([topic_id])
        assert [(t["name"], str(t["topic_id"]), t["error_code"]) for t in deleted["topics"]] == \
            [(topic, str(topic_id), 0)]
        assert topic not in seglog_broker.node.topics()
    finally:
        admin.close()
    assert versions["DELETE_TOPICS"] == {6}


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_produces_and_consumes_at_flexible_versions(seglog_broker, topic_name, versions):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    bs = seglog_broker.bootstrap_servers
    subprocess.run(["kcat", "-b", bs, "-P", "-t", topic, "-p", "0"], input=b"a\nb\nc\n", check=True, timeout=60)
    out = subprocess.run(["kcat", "-b", bs, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"],
                         capture_output=True, check=True, timeout=60).stdout
    assert out.split() == [b"a", b"b", b"c"]
    listing = subprocess.run(["kcat", "-b", bs, "-L", "-t", topic], capture_output=True, check=True,
                             timeout=60).stdout.decode()
    assert f'topic "{topic}" with 1 partitions' in listing
    # kcat's librdkafka 2.0 stops below the flexible Produce and Fetch; it gets the newest versions it knows
    assert (max(versions["PRODUCE"]), max(versions["FETCH"])) == (7, 11), dict(versions)


def test_confluent_delete_records(seglog_broker, topic_name, versions):
    """AdminClient.delete_records (stream processors trim repartition topics with it): DeleteRecords v2."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    topic = topic_name()
    seglog_broker.node.create_topic(topic, 2)
    producer = ck.Producer({"bootstrap.servers": seglog_broker.bootstrap_servers})
    for i in range(6):
        producer.produce(topic, b"v%d" % i, partition=0)
    producer.flush(10)
    admin = AdminClient({"bootstrap.servers": seglog_broker.bootstrap_servers})
    futures = admin.delete_records([ck.TopicPartition(topic, 0, 4), ck.TopicPartition(topic, 1, ck.OFFSET_END)])
    results = {tp.partition: f.result(10).low_watermark for tp, f in futures.items()}
    assert results == {0: 4, 1: 0}
    assert seglog_broker.node.partition(topic, 0).log_start_offset == 4
    [(tp, f)] = admin.delete_records([ck.TopicPartition(topic, 0, 99)]).items()
    with pytest.raises(ck.KafkaException) as info:
        f.result(10)
    assert info.value.args[0].code() == ck.KafkaError.OFFSET_OUT_OF_RANGE
    assert max(versions["DELETE_RECORDS"]) == 2


def test_kafka_python_lists_the_earliest_local_offset(seglog_broker, topic_name, versions):
    """OffsetSpec.EARLIEST_LOCAL (KIP-405's -4) needs ListOffsets v8: without tiered storage the whole log is
    local, so it is the log start offset, as a Kafka without remote storage answers."""
    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.consumer.offsets import OffsetSpec

    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    part = seglog_broker.node.partition(topic, 0)
    for i in range(5):
        part.append(record_batch([(1, None, b"v%d" % i, [])]), 1)
    part.log.delete_records_before(2)
    admin = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        tp = kafka.TopicPartition(topic, 0)
        found = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST_LOCAL})
        earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})
    finally:
        admin.close()
    assert found[tp].offset == earliest[tp].offset == 2
    assert max(versions["LIST_OFFSETS"]) == 8


def test_kafka_python_describe_cluster_and_log_dirs(seglog_broker, topic_name, versions):
    """kafka-python's describe_cluster and describe_log_dirs (which raised IncompatibleBrokerVersion before)."""
    pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient

    topic = topic_name()
    seglog_broker.node.create_topic(topic, 2)
    admin = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        cluster = admin.describe_cluster()
        assert cluster["cluster_id"] == seglog_broker.node.cluster_id
        assert [b["broker_id"] for b in cluster["brokers"]] == [0]
        dirs = admin.describe_log_dirs()
    finally:
        admin.close()
    text = repr(dirs)
    assert seglog_broker.node.path in text and topic in text
    assert max(versions["DESCRIBE_CLUSTER"]) >= 0 and max(versions["DESCRIBE_LOG_DIRS"]) == 4
