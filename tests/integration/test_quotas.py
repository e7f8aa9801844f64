"""Client quotas through real clients: `seglog configs` (kafka-configs.sh's options and output) sets and shows
them, a producer and a consumer over their byte rates are throttled (throttle_time_ms in their responses, their
connection muted) so that moving N bytes takes about N / rate, and in a ZooKeeper cluster a quota set through
one broker applies on every broker.

The brokers here measure rates over quota.window.num=2 samples of 1 s (Kafka's default is 11): a client may
burst one window's worth before it is throttled, so the tests take seconds, not tens of seconds.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from helpers.kafka_wire import RawConnection, fetch_body, produce_body, record_batch

import seglog
from seglog.broker import RunningBroker
from seglog.cli import main
from seglog.protocol import ApiKey
from seglog.security.acls import AclBinding

pytestmark = pytest.mark.timeout(180)

WINDOW = {"quota_window_num": 2}
CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST = 31, 42


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with seglog.serve(tmp_path_factory.mktemp("quotas"), group_initial_rebalance_delay_ms=0, **WINDOW) as b:
        yield b


def configs(capfd, broker, *args) -> tuple[int, str, str]:
    """`seglog configs --bootstrap-server <broker> ARGS` in this process: (status, stdout, stderr)."""
    capfd.readouterr()
    status = main(["configs", "--bootstrap-server", broker.bootstrap_servers, *map(str, args)])
    out, err = capfd.readouterr()
    return status, out, err


def set_quota(capfd, broker, entity: list[str], quota: str) -> None:
    assert configs(capfd, broker, "--alter", *entity, "--add-config", quota)[0] == 0


def test_configs_alter_and_describe_as_kafka_configs(broker, capfd):
    assert configs(capfd, broker, "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048",
                   "--entity-type", "clients", "--entity-name", "cli-c1") == \
        (0, "Completed updating config for client cli-c1.\n", "")
    assert configs(capfd, broker, "--alter", "--add-config", "request_percentage=200", "--entity-type", "users",
                   "--entity-default", "--entity-type", "clients", "--entity-default") == \
        (0, "Completed updating default config for users in the cluster.\n", "")
    assert configs(capfd, broker, "--alter", "--add-config", "producer_byte_rate=4096", "--entity-type", "users",
                   "--entity-name", "cli-alice", "--entity-type", "clients", "--entity-name", "cli-c1") == \
        (0, "Completed updating config for user cli-alice.\n", "")
    assert configs(capfd, broker, "--describe", "--entity-type", "clients", "--entity-name", "cli-c1") == \
        (0, "Quota configs for client-id 'cli-c1' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n", "")
    status, out, _ = configs(capfd, broker, "--describe", "--entity-type", "users", "--entity-type", "clients")
    assert status == 0
    assert "Quota configs for the default user-principal, the default client-id are request_percentage=200.0\n" in out
    assert "Quota configs for user-principal 'cli-alice', client-id 'cli-c1' are producer_byte_rate=4096.0\n" in out
    assert "cli-c1' are consumer" not in out                # a client id's own entity: not a user's (strict)

    assert configs(capfd, broker, "--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "clients",
                   "--entity-name", "cli-c1")[0] == 0
    assert configs(capfd, broker, "--describe", "--entity-type", "clients", "--entity-name", "cli-c1")[1] == \
        "Quota configs for client-id 'cli-c1' are producer_byte_rate=1024.0\n"
    for entity in (["users", "--entity-name", "cli-alice", "--entity-type", "clients", "--entity-name", "cli-c1"],
                   ["users", "--entity-default", "--entity-type", "clients", "--entity-default"],
                   ["clients", "--entity-name", "cli-c1"]):
        assert configs(capfd, broker, "--alter", "--delete-config", "producer_byte_rate,request_percentage",
                       "--entity-type", *entity)[0] == 0
    assert configs(capfd, broker, "--describe", "--entity-type", "users", "--entity-type", "clients") == (0, "", "")

    # refusals: Kafka's messages from the broker, usage errors from the command
    assert configs(capfd, broker, "--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "clients",
                   "--entity-name", "x") == (1, "", "seglog configs: error: Error while executing config command: "
                                                    "Configuration producer_byte_rate must be a LONG value\n")
    assert "Invalid configuration key consumer_rate" in configs(
        capfd, broker, "--alter", "--add-config", "consumer_rate=5", "--entity-type", "users", "--entity-name", "x")[2]
    assert configs(capfd, broker, "--alter", "--add-config", "producer_byte_rate=1", "--entity-type", "clients")[:2] \
        == (2, "")
    assert "Cannot parse quota configuration value for producer_byte_rate: fast" in configs(
        capfd, broker, "--alter", "--add-config", "producer_byte_rate=fast", "--entity-type", "clients",
        "--entity-name", "x")[2]


def _raw_quota_client(capfd, broker, client_id: str, quota: int) -> None:
    set_quota(capfd, broker, ["--entity-type", "clients", "--entity-name", client_id], f"producer_byte_rate={quota}")


def test_produce_throttle_time_is_kafkas_and_mutes_the_connection(broker, capfd):
    """A 30 KB produce over a fresh 10 KB/s rate (one 1 s window): (30 KB - 10 KB) / 10 KB x 1 s of throttle, exact.
    v9 (KIP-219) gets its response at once and the connection reads nothing for that long; v5 gets the response
    only after it."""
    broker.node.create_topic("raw", 1)
    batch = record_batch([(0, None, b"x" * 30_000, [])])
    for version, client_id in ((9, "raw-v9"), (5, "raw-v5")):
        _raw_quota_client(capfd, broker, client_id, 10_000)
        with RawConnection(("127.0.0.1", broker.port), client_id=client_id, timeout=30) as conn:
            header, frame = conn.frame(ApiKey.PRODUCE, version, produce_body("raw", 0, batch, acks=1))
            started = time.monotonic()
            conn.send_bytes(frame)
            response = conn.recv(header)
            answered = time.monotonic() - started
            throttle = response["throttle_time_ms"]
            assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
            assert throttle == round((len(frame) - 10_000) / 10_000 * 1000)      # ~2000 ms
            conn.request(ApiKey.METADATA, 8, {"topics": [], "allow_auto_topic_creation": False})
            done = time.monotonic() - started
        assert done >= throttle / 1000 * 0.9                  # muted (v9) or answered late (v5) for the throttle
        if version == 5:
            assert answered >= throttle / 1000 * 0.9
        else:
            assert answered < throttle / 1000                 # generous: answered without waiting


def test_kafka_python_producer_is_held_to_its_byte_rate(broker, capfd):
    from kafka import KafkaProducer

    rate, total = 50_000, 250_000
    set_quota(capfd, broker, ["--entity-type", "clients", "--entity-name", "kp-throttled"],
              f"producer_byte_rate={rate}")
    broker.node.create_topic("kp-quota", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="kp-throttled", linger_ms=5,
                             batch_size=16_384)
    try:
        started = time.monotonic()
        for _ in range(total // 1000):
            producer.send("kp-quota", b"p" * 1000)
        producer.flush(60)
        elapsed = time.monotonic() - started
        throttle_max = producer.metrics()["producer-metrics"]["throttle-time-max"]
    finally:
        producer.close(5)
    assert throttle_max > 0
    # at most one window's burst goes through unthrottled: the rest at the rate (generous: 80% of it)
    assert elapsed >= 0.8 * (total - rate) / rate, elapsed
    assert broker.node.partition("kp-quota", 0).log.end_offset == total // 1000


def test_confluent_consumer_is_held_to_its_byte_rate(broker, capfd):
    from confluent_kafka import Consumer

    rate, total = 50_000, 250_000
    broker.node.create_topic("ck-quota", 1)
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="ck-filler", linger_ms=5)
    for _ in range(total // 1000):
        producer.send("ck-quota", b"c" * 1000)
    producer.flush(30)
    producer.close(5)
    set_quota(capfd, broker, ["--entity-type", "clients", "--entity-name", "ck-throttled"],
              f"consumer_byte_rate={rate}")
    throttles = []

    def stats(text):
        for b in json.loads(text)["brokers"].values():
            throttles.append(b.get("throttle", {}).get("max", 0))

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "ck-throttled",
                         "group.id": f"ck-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                         "statistics.interval.ms": 500, "stats_cb": stats})
    try:
        consumer.subscribe(["ck-quota"])
        got, started = 0, time.monotonic()
        while got < total // 1000 and time.monotonic() - started < 60:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        elapsed = time.monotonic() - started
        deadline = time.monotonic() + 5
        while not any(throttles) and time.monotonic() < deadline:
            consumer.poll(0.2)
    finally:
        consumer.close()
    assert got == total // 1000
    assert any(throttles)                                   # the broker's throttle_time_ms reached the client
    assert elapsed >= 0.8 * (total - rate) / rate, elapsed


def test_fetch_over_quota_is_answered_empty_and_its_bytes_taken_back(broker, capfd):
    broker.node.create_topic("raw-fetch", 1)
    with RawConnection(("127.0.0.1", broker.port), client_id="raw-fetch") as conn:
        conn.request(ApiKey.PRODUCE, 9, produce_body("raw-fetch", 0, record_batch([(0, None, b"f" * 20_000, [])])))
    set_quota(capfd, broker, ["--entity-type", "clients", "--entity-name", "raw-fetch"], "consumer_byte_rate=5000")
    with RawConnection(("127.0.0.1", broker.port), client_id="raw-fetch", timeout=30) as conn:
        r = conn.request(ApiKey.FETCH, 11, fetch_body("raw-fetch", 0, 0))
        # 20 KB over a 5 KB/s quota's window of 1 s (the fetch's max bytes cut to one window: one batch still goes)
        assert r["throttle_time_ms"] > 0 and r["responses"] == []
        started = time.monotonic()
        r = conn.request(ApiKey.FETCH, 11, fetch_body("raw-fetch", 0, 0))
        assert time.monotonic() - started >= 0.5           # muted first
        assert r["throttle_time_ms"] > 0 and r["responses"] == []   # taken back: the same fetch again after it


def test_request_percentage_throttles_any_request_at_most_one_window(broker, capfd):
    """10 ns of handling a second (0.000001 %): a Metadata request's own handling time is over it, so its response
    says so, throttled by (rate - quota) / quota x window, capped at one window (1 s) as Kafka caps request quotas."""
    set_quota(capfd, broker, ["--entity-type", "users", "--entity-name", "ANONYMOUS", "--entity-type", "clients",
                              "--entity-name", "req-pct"], "request_percentage=0.000001")
    with RawConnection(("127.0.0.1", broker.port), client_id="req-pct", timeout=30) as conn:
        started = time.monotonic()
        throttles = [conn.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
                     ["throttle_time_ms"] for _ in range(2)]
        assert time.monotonic() - started >= 0.9, throttles  # the first one's mute
    assert throttles == [1000, 1000]
    assert broker.broker.metrics.snapshot()["latency"]["metadata_throttle"]["count"] >= 2
    # a fetch over its request time is answered empty too, as one over its bytes
    broker.node.create_topic("req-pct", 1)
    with RawConnection(("127.0.0.1", broker.port), client_id="req-pct-fetch", timeout=30) as conn:
        conn.request(ApiKey.PRODUCE, 9, produce_body("req-pct", 0, record_batch([(0, None, b"r", [])])))
    set_quota(capfd, broker, ["--entity-type", "clients", "--entity-name", "req-pct-fetch"],
              "request_percentage=0.000001")
    with RawConnection(("127.0.0.1", broker.port), client_id="req-pct-fetch", timeout=30) as conn:
        r = conn.request(ApiKey.FETCH, 11, fetch_body("req-pct", 0, 0))
    assert (r["throttle_time_ms"], r["responses"]) == (1000, [])
    with RawConnection(("127.0.0.1", broker.port), client_id="another", timeout=30) as conn:
        assert conn.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})[
            "throttle_time_ms"] == 0


def test_a_long_poll_is_no_request_time(broker, capfd):
    """A fetch waiting 1.5 s for records that never come is parked, not handled: under a 200 ms/s request quota
    (20 %; the wait would count for 150 %) it is not throttled."""
    broker.node.create_topic("idle", 1)
    set_quota(capfd, broker, ["--entity-type", "clients", "--entity-name", "idle-poll"], "request_percentage=20")
    with RawConnection(("127.0.0.1", broker.port), client_id="idle-poll", timeout=30) as conn:
        started = time.monotonic()
        r = conn.request(ApiKey.FETCH, 11, fetch_body("idle", 0, 0, max_wait_ms=1500, min_bytes=1))
        assert time.monotonic() - started >= 1.4
    assert r["throttle_time_ms"] == 0 and r["responses"][0]["partitions"][0]["records"] in (None, b"")


def _create_topics(conn, version: int, topics: dict[str, int]) -> dict:
    return conn.request(ApiKey.CREATE_TOPICS, version, {"timeout_ms": 10_000, "validate_only": False, "topics": [
        {"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
        for n, p in topics.items()]})


def test_controller_mutation_rate_refuses_or_throttles_topic_changes(broker, capfd):
    """1 partition/s over 2 windows: a burst of 2 tokens. CreateTopics v7 (strict, KIP-599): a topic of 5
    partitions passes (2 - 5 = -3 tokens), the next one is refused THROTTLING_QUOTA_EXCEEDED with the 3 s it
    has to wait; DeleteTopics v5 likewise. v5 of CreateTopics (permissive) creates and is throttled."""
    for client_id in ("mut-strict", "mut-old"):
        set_quota(capfd, broker, ["--entity-type", "clients", "--entity-name", client_id], "controller_mutation_rate=1")
    with RawConnection(("127.0.0.1", broker.port), client_id="mut-strict", timeout=30) as conn, \
            RawConnection(("127.0.0.1", broker.port), client_id="mut-strict", timeout=30) as other:
        r = _create_topics(conn, 7, {"mut-a": 5, "mut-b": 1})
        assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("mut-a", 0), ("mut-b", 89)]
        assert r["topics"][1]["error_message"] == "The throttling quota has been exceeded."
        assert 1000 < r["throttle_time_ms"] <= 3000            # 3 s, less the refill since mut-a
        # `conn` is muted until the bucket is back at zero; another connection of the client is refused meanwhile
        r = other.request(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["mut-a"], "timeout_ms": 10_000})
        assert r["responses"][0]["error_code"] == 89 and 0 < r["throttle_time_ms"] <= 3000
    assert broker.node.topic("mut-a").partitions == 5
    with RawConnection(("127.0.0.1", broker.port), client_id="mut-old", timeout=30) as conn:
        r = _create_topics(conn, 5, {"mut-c": 4})
        assert r["topics"][0]["error_code"] == 0 and 1500 < r["throttle_time_ms"] <= 2000


def test_quota_apis_need_the_cluster_configs_acls(tmp_path, capfd):
    with seglog.serve(tmp_path, acls=[AclBinding.allow("User:ANONYMOUS", "DescribeConfigs", "Cluster")]) as b:
        with RawConnection(("127.0.0.1", b.port)) as conn:
            r = conn.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [
                {"entity": [{"entity_type": "client-id", "entity_name": "c"}],
                 "ops": [{"key": "producer_byte_rate", "value": 10.0, "remove": False}]}]})
            assert [e["error_code"] for e in r["entries"]] == [CLUSTER_AUTHORIZATION_FAILED]
            r = conn.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
            assert (r["error_code"], r["entries"]) == (0, [])
            r = conn.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, {"components": [
                {"entity_type": "user", "match_type": 2, "match": None},
                {"entity_type": "user", "match_type": 1, "match": None}], "strict": False})
            assert (r["error_code"], r["error_message"]) == (INVALID_REQUEST, "Duplicate user filter component "
                                                                              "entity type")
        assert "Cluster authorization failed" in configs(capfd, b, "--alter", "--add-config", "producer_byte_rate=1",
                                                         "--entity-type", "users", "--entity-name", "u")[2]


@pytest.mark.zookeeper
def test_a_quota_set_through_one_broker_applies_on_every_broker(zookeeper_server, tmp_path, capfd):
    from kazoo.client import KazooClient

    from seglog.cluster.zk import ZooKeeperMetadataStore

    connect = f"{zookeeper_server.connect_string}/quotas-{uuid.uuid4().hex[:8]}"
    brokers = []
    try:
        for i in range(2):
            brokers.append(RunningBroker(tmp_path / f"b{i}", broker_id=i, **WINDOW,
                                         metadata_store=ZooKeeperMetadataStore(connect, session_timeout=10)))
        assert configs(capfd, brokers[0], "--alter", "--add-config", "producer_byte_rate=10000", "--entity-type",
                       "users", "--entity-name", "ANONYMOUS", "--entity-type", "clients", "--entity-name", "zk-c")[0] == 0
        zk = KazooClient(hosts=connect)
        zk.start()
        try:
            assert json.loads(zk.get("/config/users/ANONYMOUS/clients/zk-c")[0]) == {
                "version": 1, "config": {"producer_byte_rate": "10000"}}
        finally:
            zk.stop()
        assert configs(capfd, brokers[1], "--describe", "--entity-type", "users", "--entity-type", "clients")[1] == \
            "Quota configs for user-principal 'ANONYMOUS', client-id 'zk-c' are producer_byte_rate=10000.0\n"
        for b in brokers:
            deadline = time.monotonic() + 10
            while b.broker.quotas.quota("producer_byte_rate", "ANONYMOUS", "zk-c")[1] != 10000.0:
                assert time.monotonic() < deadline, "the quota never reached a broker"
                time.sleep(0.05)
        # enforced where it was not set: a produce to the second broker is throttled
        status = main(["topics", "--bootstrap-server", brokers[1].bootstrap_servers, "--create", "--topic", "zq",
                       "--partitions", "1", "--replication-factor", "1"])
        assert status == 0
        for b in brokers:              # the leader appends, the other refuses (NOT_LEADER): both count the bytes
            with RawConnection(("127.0.0.1", b.port), client_id="zk-c", timeout=30) as conn:
                r = conn.request(ApiKey.PRODUCE, 9, produce_body("zq", 0, record_batch([(0, None, b"z" * 30_000, [])]),
                                                                 acks=1))
                assert r["throttle_time_ms"] > 1000, (b.broker.config.broker_id, r)
    finally:
        stoppers = [threading.Thread(target=b.stop) for b in brokers]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
