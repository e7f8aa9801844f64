"""KIP-951 on a real 2-broker cluster (ZooKeeper + ``python -m seglog broker`` subprocesses): a follower asked to
take a Produce v10 or a consumer's Fetch v16 answers NOT_LEADER_OR_FOLLOWER with the partition's current leader
and epoch (as ZooKeeper holds them) and that leader's endpoint, so a client can go there without a Metadata
round trip; at v9 / v15 the same refusal carries neither, as in Kafka 3.7. librdkafka 2.16 uses the hint: after
a leader moved, its refused batch goes to the new leader before any Metadata answer."""

from __future__ import annotations

import time

import pytest

from cluster_harness import HOST, Cluster

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(300)]

NOT_LEADER = 6
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


@pytest.fixture(scope="module")
def cluster(zookeeper_server, tmp_path_factory):
    c = Cluster(zookeeper_server.connect_string, tmp_path_factory.mktemp("hints"), 2,
                chroot=f"/hints-{int(time.time() * 1000) % 10**8}")
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_a_follower_names_the_leader_and_its_endpoint(cluster):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey

    c = cluster
    c.create_topic("hints", 1, rf=2)
    st = c.state("hints", 0)
    leader, epoch = st["leader"], st["leader_epoch"]
    follower = next(i for i in c.brokers if i != leader)
    hint = {"leader_id": leader, "leader_epoch": epoch}
    endpoint = [{"node_id": leader, "host": HOST, "port": c.brokers[leader].port, "rack": None}]
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])
    produce = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": "hints", "partition_data": [{"index": 0, "records": bytes(builder.build())}]}]}
    conn = BrokerConnection(HOST, c.brokers[follower].port, client_id="kip-951", timeout=15)
    try:
        topic_id = conn.request(ApiKey.METADATA, {"topics": [{"name": "hints"}], "allow_auto_topic_creation": False}
                                )["topics"][0]["topic_id"]
        fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                 "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                 "topics": [{"topic_id": topic_id, "partitions": [
                     {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": 0, "last_fetched_epoch": -1,
                      "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
        for api, body, new, old in ((ApiKey.PRODUCE, produce, 10, 9), (ApiKey.FETCH, fetch, 16, 15)):
            for version, want_hint, want_endpoints in ((new, hint, endpoint), (old, NO_LEADER, [])):
                r = conn.request(api, body, version=version)
                [t] = r["responses"]
                [p] = t.get("partition_responses") or t["partitions"]
                assert (p["error_code"], p["current_leader"], r["node_endpoints"]) == \
                    (NOT_LEADER, want_hint, want_endpoints), (api.name, version, c.describe())
        # the leader takes the batch at v10, with no hints
        conn_leader = BrokerConnection(HOST, c.brokers[leader].port, client_id="kip-951", timeout=15)
        try:
            r = conn_leader.request(ApiKey.PRODUCE, produce, version=10)
        finally:
            conn_leader.close()
        [p] = r["responses"][0]["partition_responses"]
        assert (p["error_code"], p["base_offset"], p["current_leader"], r["node_endpoints"]) == (0, 0, NO_LEADER, [])
    finally:
        conn.close()


def test_librdkafka_follows_the_leader_named_in_a_produce_answer(cluster):
    """librdkafka 2.16 sends Produce v10 and applies its KIP-951 hint: when the leader moved (a preferred-leader
    election) and its metadata still names the old one, the refused batch's answer moves the partition to the
    new leader before any Metadata answer arrives, and the record is delivered there."""
    import io
    import logging

    ck = pytest.importorskip("confluent_kafka")
    from kafka.structs import TopicPartition

    c = cluster
    admin = c.admin()
    try:
        from kafka.admin import NewTopic
        admin.create_topics([NewTopic("moved", -1, -1, replica_assignments={0: [0, 1]})])
    finally:
        admin.close()
    c.wait_isr("moved", 0, [0, 1])
    c.brokers[0].stop()                                       # leadership to broker 1, then 0 back in the ISR
    c.wait_leader("moved", 0, not_in=[0])
    c.brokers[0].start()
    c.wait_isr("moved", 0, [0, 1])
    log = io.StringIO()
    logger = logging.getLogger("librdkafka-kip951")
    logger.addHandler(logging.StreamHandler(log))
    logger.setLevel(logging.DEBUG)
    producer = ck.Producer({"bootstrap.servers": c.bootstrap, "debug": "protocol,metadata,topic,msg",
                            "logger": logger, "topic.metadata.refresh.interval.ms": 600000})
    delivered = []
    producer.produce("moved", b"a", partition=0, on_delivery=lambda e, m: delivered.append(e))
    producer.flush(20)
    admin = c.admin()
    try:
        admin.elect_leaders(0, [TopicPartition("moved", 0)])    # preferred: broker 0 leads again
    finally:
        admin.close()
    st = c.wait_leader("moved", 0, not_in=[1])
    mark = len(log.getvalue())
    producer.produce("moved", b"b", partition=0, on_delivery=lambda e, m: delivered.append(e))
    producer.flush(20)
    assert delivered == [None, None], c.describe()
    lines = log.getvalue()[mark:].splitlines()
    refused = next((i for i, line in enumerate(lines) if "Not leader for partition" in line), None)
    hinted = next((i for i, line in enumerate(lines)
                   if f"updated with leader 0 and epoch {st['leader_epoch']}" in line), None)
    metadata = [i for i, line in enumerate(lines) if "Received MetadataResponse" in line]
    assert refused is not None and hinted is not None, "\n".join(lines)
    assert refused < hinted and all(hinted < i for i in metadata), "\n".join(lines)
    assert any("Sent ProduceRequest (v10" in line for line in lines[:refused])
