"""The handlers at the newest versions seglog speaks, driven through the codec (request bytes -> handler ->
response bytes -> decoded body) on a lone broker's view: the fields each version added are filled as Kafka
fills them."""

from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace

import pytest

from helpers.kafka_wire import record_batch
from seglog import errors
from seglog.broker.handlers import HANDLERS, Handlers
from seglog.broker.local_view import LocalView
from seglog.broker.metrics import Metrics
from seglog.node import Node
from seglog.offsets_format import OffsetAndMetadata, TopicPartition
from seglog.protocol import ApiKey, RequestHeader, decode_request, decode_response, encode_request, encode_response

UNSUPPORTED_VERSION, UNKNOWN_MEMBER_ID, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC, INVALID_REQUEST = 35, 25, 100, 3, 42
NOT_LEADER, FENCED_LEADER_EPOCH = 6, 74
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


class Broker(SimpleNamespace):
    """What the handlers use of the server, without sockets (and without an authorizer or quotas: all allowed,
    never throttled)."""

    quotas = SimpleNamespace(enabled=False)

    def quota_throttle(self, key, value):
        return 0

    def request_size(self):
        return 0

    def check_mutations(self):
        pass

    def record_mutations(self, partitions, strict):
        pass

    def allowed(self, *args):
        return True

    def allowed_any(self, *args):
        return True

    def records_chunk(self, view):
        return view

    def data_version(self):
        return self.node.data_version()

    async def wait_for_data(self, partitions, since_version, timeout):
        await asyncio.sleep(timeout)

    def note_wait(self, seconds):
        pass

    def current_peer_host(self):
        return "/127.0.0.1"

    def client_gone(self):
        return asyncio.Event()

    async def on_disk(self, fn, *args):
        return fn(*args)

    async def append_on_disk(self, topic, index, fn, *args):
        return fn(*args)


@pytest.fixture
def broker(tmp_path):
    node = Node(tmp_path / "d")
    node.create_topic("t", 2)
    b = Broker(node=node, config=node.config, view=LocalView(node, 0, "127.0.0.1", 9092), metrics=Metrics())
    b.handlers = Handlers(b)
    yield b
    node.close()


def call(broker, api_key, version, body):
    """One request through the wire codec and the handler; the decoded response (None: no response)."""
    header = RequestHeader(api_key, version, 11, "client")
    frame = encode_request(header, body)[0][4:]
    header, decoded = decode_request(frame)
    answer = asyncio.run(HANDLERS[api_key](broker.handlers, header, decoded))
    if answer is None:
        return None
    parts = encode_response(header, answer)
    return decode_response(header, b"".join(bytes(p) for p in parts)[4:])


def produce_body(topic, partition, records, acks=-1):
    return {"acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_are_answered_with_unsupported_version(broker, version):
    r = call(broker, ApiKey.PRODUCE, version, produce_body("t", 0, b"\x00" * 40))
    [p] = r["responses"][0]["partition_responses"]
    assert (p["index"], p["error_code"], p["base_offset"]) == (0, UNSUPPORTED_VERSION, -1)
    assert broker.node.partition("t", 0).log_end_offset == 0


def test_produce_v9_appends(broker):
    r = call(broker, ApiKey.PRODUCE, 9, produce_body("t", 1, record_batch([(1, b"k", b"v", [])])))
    [p] = r["responses"][0]["partition_responses"]
    assert (p["error_code"], p["base_offset"], p["log_start_offset"], p["record_errors"]) == (0, 0, 0, [])


def test_metadata_v12_topic_ids_and_unknown_ids(broker):
    r = call(broker, ApiKey.METADATA, 12, {"topics": [{"name": "t"}, {"name": None, "topic_id": uuid.uuid4()}],
                                          "allow_auto_topic_creation": False})
    by_name = {t["name"]: t for t in r["topics"]}
    assert by_name["t"]["error_code"] == 0 and len(by_name["t"]["partitions"]) == 2
    topic_id = broker.node.topic("t").topic_id
    assert by_name["t"]["topic_id"] == topic_id != uuid.UUID(int=0)
    assert by_name[None]["error_code"] == UNKNOWN_TOPIC_ID
    assert r["brokers"] == [{"node_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}]
    by_id = call(broker, ApiKey.METADATA, 12, {"topics": [{"name": None, "topic_id": topic_id}],
                                               "allow_auto_topic_creation": False})["topics"]
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in by_id] == [("t", topic_id, 0)]


def _fetch_body(topic: dict, offset: int = 0, replica_id: int = -1) -> dict:
    return {"replica_id": replica_id, "replica_state": {"replica_id": replica_id, "replica_epoch": -1},
            "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{**topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                                                 "last_fetched_epoch": -1, "log_start_offset": -1,
                                                 "partition_max_bytes": 1 << 20}]}]}


@pytest.mark.parametrize("version", [13, 15, 16])
def test_fetch_v13_and_later_name_topics_by_id(broker, version):
    """Fetch v13+ (KIP-516) names each topic by its id and is answered by id; an id no topic has is
    UNKNOWN_TOPIC_ID for its partitions, answered at once; v15 carries the replica id in replica_state."""
    part = broker.node.partition("t", 0)
    part.append(record_batch([(1, None, b"v", [])]), 1)
    topic_id = broker.node.topic("t").topic_id
    r = call(broker, ApiKey.FETCH, version, _fetch_body({"topic_id": topic_id}))
    [t] = r["responses"]
    assert t["topic_id"] == topic_id and t["partitions"][0]["error_code"] == 0
    assert t["partitions"][0]["high_watermark"] == part.high_watermark > 0 and len(t["partitions"][0]["records"])
    started = time.monotonic()
    body = _fetch_body({"topic_id": uuid.uuid4()})
    body["max_wait_ms"], body["min_bytes"] = 5000, 1
    [t] = call(broker, ApiKey.FETCH, version, body)["responses"]
    assert t["partitions"][0]["error_code"] == UNKNOWN_TOPIC_ID and time.monotonic() - started < 4
    # empty records, as Kafka answers every partition error: librdkafka fails the whole response on a null
    # one ("invalid MessageSetSize -1")
    assert t["partitions"][0]["records"] is not None and len(t["partitions"][0]["records"]) == 0


def test_list_offsets_v7_max_timestamp(broker):
    now = int(time.time() * 1000)
    part = broker.node.partition("t", 0)
    for ts in (now - 30, now - 5, now - 20):
        part.append(record_batch([(ts, None, b"v", [])]), 1)
    request = {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": -3}, {"partition_index": 1, "timestamp": -3}]}]}
    r = call(broker, ApiKey.LIST_OFFSETS, 7, request)
    p0, p1 = r["topics"][0]["partitions"]
    assert (p0["error_code"], p0["offset"], p0["timestamp"]) == (0, 1, now - 5)
    assert (p1["error_code"], p1["offset"], p1["timestamp"]) == (0, -1, -1)       # empty partition
    old = call(broker, ApiKey.LIST_OFFSETS, 6, request)                              # -3 is v7+
    assert all(p["error_code"] for p in old["topics"][0]["partitions"])


@pytest.mark.parametrize("version", [9, 10])
def test_produce_v10_names_the_leader_of_a_partition_this_broker_does_not_lead(broker, monkeypatch, version):
    """KIP-951: a partition refused with NOT_LEADER_OR_FOLLOWER is answered with its current leader (id, epoch)
    and that leader's endpoint, once however many partitions name it; the other partitions carry no leader.
    v9 has neither field."""
    view = broker.view
    leaders = {("t", 0): (1, 7), ("t", 1): (1, 7), ("gone", 0): None}

    def check_produce(topic, p, acks):
        if (topic, p) in leaders:
            raise errors.NotLeaderOrFollowerError(f"broker 0 does not lead {topic}-{p}")

    def partition_metadata(topic, p):
        if leaders[(topic, p)] is None:
            raise errors.UnknownTopicOrPartitionError(topic)
        leader, epoch = leaders[(topic, p)]
        return {"error_code": 0, "partition_index": p, "leader_id": leader, "leader_epoch": epoch}

    monkeypatch.setattr(view, "check_produce", check_produce)
    monkeypatch.setattr(view, "partition_metadata", partition_metadata)
    monkeypatch.setattr(view, "brokers", lambda: [{"node_id": n, "host": f"b{n}", "port": 9092 + n, "rack": None}
                                                  for n in (0, 1, 2)])
    broker.node.create_topic("u", 1)
    body = {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": p, "records": record_batch([(1, None, b"v", [])])}
                                         for p in (0, 1)]},
        {"name": "gone", "partition_data": [{"index": 0, "records": record_batch([(1, None, b"v", [])])}]},
        {"name": "u", "partition_data": [{"index": 0, "records": record_batch([(1, None, b"v", [])])}]}]}
    r = call(broker, ApiKey.PRODUCE, version, body)
    answers = {(t["name"], p["index"]): p for t in r["responses"] for p in t["partition_responses"]}
    assert {k: p["error_code"] for k, p in answers.items()} == {("t", 0): NOT_LEADER, ("t", 1): NOT_LEADER,
                                                                ("gone", 0): NOT_LEADER, ("u", 0): 0}
    if version == 9:
        assert all(p["current_leader"] == NO_LEADER for p in answers.values()) and r["node_endpoints"] == []
        return
    assert {k: p["current_leader"] for k, p in answers.items()} == {
        ("t", 0): {"leader_id": 1, "leader_epoch": 7}, ("t", 1): {"leader_id": 1, "leader_epoch": 7},
        ("gone", 0): NO_LEADER, ("u", 0): NO_LEADER}
    assert r["node_endpoints"] == [{"node_id": 1, "host": "b1", "port": 9093, "rack": None}]


def test_fetch_v16_names_the_leader_of_a_fenced_partition(broker):
    """KIP-951 for Fetch: a consumer behind the leader epoch (FENCED_LEADER_EPOCH) learns the leader and epoch,
    and the leader's endpoint; a partition answered without error carries neither."""
    part = broker.node.partition("t", 0)
    part.log.leader_epoch = 3
    topic_id = broker.node.topic("t").topic_id
    body = _fetch_body({"topic_id": topic_id})
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = 2
    r = call(broker, ApiKey.FETCH, 16, body)
    [p] = r["responses"][0]["partitions"]
    assert p["error_code"] == FENCED_LEADER_EPOCH
    assert p["current_leader"] == {"leader_id": 0, "leader_epoch": 3}
    assert r["node_endpoints"] == [{"node_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}]
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = 3
    r = call(broker, ApiKey.FETCH, 16, body)
    [p] = r["responses"][0]["partitions"]
    assert (p["error_code"], p["current_leader"], r["node_endpoints"]) == (0, NO_LEADER, [])
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = 2
    [p] = call(broker, ApiKey.FETCH, 15, body)["responses"][0]["partitions"]           # before KIP-951
    assert (p["error_code"], p["current_leader"]) == (FENCED_LEADER_EPOCH, NO_LEADER)


def test_list_offsets_v8_earliest_local_is_the_log_start_offset(broker):
    """KIP-405's -4 (v8+): the first offset in local storage, which is all of a seglog log, so the log start
    offset (as Kafka without remote storage answers it); before v8 -4 is refused as an unknown timestamp."""
    part = broker.node.partition("t", 0)
    for i in range(5):
        part.append(record_batch([(1, None, b"v%d" % i, [])]), 1)
    part.log.delete_records_before(3)
    request = {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": -4}, {"partition_index": 1, "timestamp": -4}]}]}
    p0, p1 = call(broker, ApiKey.LIST_OFFSETS, 8, request)["topics"][0]["partitions"]
    assert (p0["error_code"], p0["offset"], p0["timestamp"]) == (0, 3, -1)
    assert (p1["error_code"], p1["offset"]) == (0, 0)
    assert all(p["error_code"] == INVALID_REQUEST
               for p in call(broker, ApiKey.LIST_OFFSETS, 7, request)["topics"][0]["partitions"])


def test_fetch_v12_reports_a_diverging_epoch(broker):
    part = broker.node.partition("t", 0)
    part.append(record_batch([(1, None, b"v", [])] * 3), 1)
    epoch = part.log.leader_epoch

    def fetch(offset, last_epoch):
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "fetch_offset": offset, "last_fetched_epoch": last_epoch,
             "partition_max_bytes": 1 << 20}]}]}
        return call(broker, ApiKey.FETCH, 12, body)["responses"][0]["partitions"][0]

    ok = fetch(1, epoch)
    assert ok["error_code"] == 0 and len(ok["records"]) > 0 and ok["diverging_epoch"]["epoch"] == -1
    # a fetcher that saw offsets this log never had in its epoch is told where the epoch ends here
    diverged = fetch(5, epoch)
    assert diverged["diverging_epoch"] == {"epoch": epoch, "end_offset": 3} and diverged["records"] is not None
    assert len(diverged["records"]) == 0 and diverged["high_watermark"] == 3
    unknown = fetch(1, epoch + 7)                        # an epoch this log does not have ends at the one below
    assert unknown["diverging_epoch"]["epoch"] == epoch


def test_find_coordinator_v4_answers_every_key(broker):
    r = call(broker, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(c["key"], c["error_code"], c["node_id"], c["port"]) for c in r["coordinators"]] == \
        [("a", 0, 0, 9092), ("b", 0, 0, 9092)]
    txn = call(broker, ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx", "ty"]})
    assert [(c["key"], c["error_code"], c["node_id"], c["port"]) for c in txn["coordinators"]] == \
        [("tx", 0, 0, 9092), ("ty", 0, 0, 9092)]
    bad = call(broker, ApiKey.FIND_COORDINATOR, 4, {"key_type": 2, "coordinator_keys": ["x"]})
    assert bad["coordinators"][0]["error_code"] == 42 and "Unknown coordinator type 2" in \
        bad["coordinators"][0]["error_message"]


def test_offset_fetch_v8_answers_several_groups(broker):
    coord = broker.node.group_coordinator
    coord.commit_offsets("g1", {TopicPartition("t", 0): OffsetAndMetadata(5, -1, "m")})
    coord.commit_offsets("g2", {TopicPartition("t", 1): OffsetAndMetadata(7)})
    r = call(broker, ApiKey.OFFSET_FETCH, 8, {"groups": [
        {"group_id": "g1", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
        {"group_id": "g2", "topics": None}]})
    g1, g2 = r["groups"]
    assert g1["group_id"] == "g1" and g1["error_code"] == 0
    assert [(p["partition_index"], p["committed_offset"], p["metadata"]) for p in g1["topics"][0]["partitions"]] == \
        [(0, 5, "m"), (1, -1, "")]
    assert [(t["name"], [(p["partition_index"], p["committed_offset"]) for p in t["partitions"]])
            for t in g2["topics"]] == [("t", [(1, 7)])]


def test_join_sync_leave_at_the_newest_versions(broker):
    base = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m"}], "reason": None}
    first = call(broker, ApiKey.JOIN_GROUP, 9, {**base, "member_id": ""})      # v4+: member id required first
    member = first["member_id"]
    assert first["error_code"] == 79 and member
    joined = call(broker, ApiKey.JOIN_GROUP, 9, {**base, "member_id": member})
    assert (joined["error_code"], joined["protocol_type"], joined["protocol_name"], joined["leader"],
            joined["skip_assignment"]) == (0, "consumer", "range", member, False)
    synced = call(broker, ApiKey.SYNC_GROUP, 5, {
        "group_id": "g", "generation_id": joined["generation_id"], "member_id": member, "protocol_type": "consumer",
        "protocol_name": "range", "assignments": [{"member_id": member, "assignment": b"a"}]})
    assert (synced["error_code"], synced["protocol_type"], synced["protocol_name"], synced["assignment"]) == \
        (0, "consumer", "range", b"a")
    groups = call(broker, ApiKey.LIST_GROUPS, 4, {"states_filter": ["stable"]})["groups"]
    assert [(g["group_id"], g["group_state"]) for g in groups] == [("g", "Stable")]
    assert call(broker, ApiKey.LIST_GROUPS, 4, {"states_filter": ["Empty"]})["groups"] == []
    left = call(broker, ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [
        {"member_id": member, "group_instance_id": None, "reason": "bye"},
        {"member_id": "ghost", "group_instance_id": None, "reason": None}]})
    assert left["error_code"] == 0
    assert [(m["member_id"], m["error_code"]) for m in left["members"]] == [(member, 0), ("ghost", UNKNOWN_MEMBER_ID)]


def test_create_topics_v7_describes_the_created_topic(broker):
    r = call(broker, ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": "n", "num_partitions": 3, "replication_factor": -1, "assignments": [],
         "configs": [{"name": "cleanup.policy", "value": "compact"}]},
        {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]})
    created, exists = r["topics"]
    assert (created["error_code"], created["num_partitions"], created["replication_factor"]) == (0, 3, 1)
    configs = {c["name"]: (c["value"], c["config_source"]) for c in created["configs"]}
    assert configs["cleanup.policy"] == ("compact", 1)                     # TOPIC_CONFIG
    assert configs["retention.ms"][1] == 5                                   # DEFAULT_CONFIG
    assert exists["error_code"] == 36 and exists["error_message"] and exists["num_partitions"] == -1
    deleted = call(broker, ApiKey.DELETE_TOPICS, 5, {"topic_names": ["n", "nope"], "timeout_ms": 1000})
    assert [(d["name"], d["error_code"], d["error_message"] is None) for d in deleted["responses"]] == \
        [("n", 0, True), ("nope", UNKNOWN_TOPIC, False)]


def test_delete_topics_v6_by_topic_id(broker):
    """v6 names a topic by id or by name: an unknown id is UNKNOWN_TOPIC_ID, neither is INVALID_REQUEST for that
    entry, both in one entry fail the whole request INVALID_REQUEST and delete nothing."""
    broker.node.create_topic("u", 1)
    t_id, u_id, nil = broker.node.topic("t").topic_id, broker.node.topic("u").topic_id, uuid.UUID(int=0)
    both = call(broker, ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": u_id},
                                                             {"name": "t", "topic_id": t_id}], "timeout_ms": 1000})
    assert [(d["name"], d["topic_id"], d["error_code"]) for d in both["responses"]] == \
        [(None, u_id, INVALID_REQUEST), ("t", t_id, INVALID_REQUEST)]
    assert sorted(broker.node.topics()) == ["t", "u"]
    ghost = uuid.uuid4()
    r = call(broker, ApiKey.DELETE_TOPICS, 6, {"topics": [
        {"name": None, "topic_id": u_id}, {"name": None, "topic_id": ghost}, {"name": "t", "topic_id": nil},
        {"name": None, "topic_id": nil}, {"name": "nope", "topic_id": nil}], "timeout_ms": 1000})
    assert [(d["name"], d["topic_id"], d["error_code"]) for d in r["responses"]] == [
        ("u", u_id, 0), (None, ghost, UNKNOWN_TOPIC_ID), ("t", nil, 0), (None, nil, INVALID_REQUEST),
        ("nope", nil, UNKNOWN_TOPIC)]
    assert broker.node.topics() == []


def test_delete_topics_v6_hides_the_name_of_an_id_not_described(broker, monkeypatch):
    from seglog.security.acls import AclOperation
    t_id = broker.node.topic("t").topic_id
    monkeypatch.setattr(broker, "allowed", lambda op, *a: op != AclOperation.DESCRIBE, raising=False)
    r = call(broker, ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": t_id}], "timeout_ms": 1000})
    assert [(d["name"], d["topic_id"], d["error_code"]) for d in r["responses"]] == [(None, t_id, 29)]
    assert broker.node.topics() == ["t"]


def test_subtracting_the_last_cleanup_policy_leaves_none_as_kafka(broker):
    """Kafka's cleanup.policy is a list that may be empty (neither deleted by retention nor compacted):
    SUBTRACT of its only item is accepted and described as ""."""
    r = call(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": 2, "resource_name": "t", "configs": [
            {"name": "cleanup.policy", "config_operation": 3, "value": "delete"}]}], "validate_only": False})
    assert r["responses"][0]["error_code"] == 0, r
    config = broker.node.topic("t").config
    assert config.cleanup_policy == () and not config.delete and not config.compact
    r = call(broker, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
        "resource_type": 2, "resource_name": "t", "configuration_keys": ["cleanup.policy"]}]})
    [entry] = r["results"][0]["configs"]
    assert (entry["value"], entry["config_source"]) == ("", 1)
    r = call(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": 2, "resource_name": "t", "configs": [
            {"name": "cleanup.policy", "config_operation": 2, "value": "delete,compact"}]}], "validate_only": False})
    assert broker.node.topic("t").config.cleanup_policy == ("delete", "compact"), "in the order given, as Kafka"


def test_produce_v8_names_the_records_a_compacted_topic_refuses(broker):
    broker.node.create_topic("c", 1, {"cleanup.policy": "compact"})
    batch = record_batch([(1, b"k0", b"v", []), (1, None, b"v", []), (1, b"k2", b"v", []), (1, None, b"v", [])])
    r = call(broker, ApiKey.PRODUCE, 8, produce_body("c", 0, batch))
    [p] = r["responses"][0]["partition_responses"]
    assert (p["error_code"], p["base_offset"]) == (87, -1)                          # INVALID_RECORD
    assert [e["batch_index"] for e in p["record_errors"]] == [1, 3]
    assert p["record_errors"][0]["batch_index_error_message"] == \
        "Compacted topic cannot accept message without key in topic partition c-0."
    assert p["error_message"].startswith("One or more records have been rejected due to 2 record errors in total")
    assert broker.node.partition("c", 0).log_end_offset == 0                         # the batch is refused whole
    ok = call(broker, ApiKey.PRODUCE, 8, produce_body("c", 0, record_batch([(1, b"k", b"v", [])])))
    assert ok["responses"][0]["partition_responses"][0]["record_errors"] == []


def test_produce_v9_names_the_records_with_timestamps_out_of_range(broker):
    broker.node.create_topic("w", 1, {"message.timestamp.before.max.ms": "3600000"})
    now = int(time.time() * 1000)
    batch = record_batch([(now, b"k", b"v", []), (now - 7_200_000, b"k", b"v", []), (now, b"k", b"v", [])])
    [p] = call(broker, ApiKey.PRODUCE, 9, produce_body("w", 0, batch))["responses"][0]["partition_responses"]
    assert (p["error_code"], [e["batch_index"] for e in p["record_errors"]]) == (32, [1])   # INVALID_TIMESTAMP
    assert p["record_errors"][0]["batch_index_error_message"].startswith(
        f"Timestamp {now - 7_200_000} of message with offset 1 is out of range. The timestamp should be within [")
    assert p["error_message"] == "One or more records have been rejected due to invalid timestamp"
    # a batch-level refusal names no record
    [p] = call(broker, ApiKey.PRODUCE, 9, produce_body("w", 0, b"\x00" * 70))["responses"][0]["partition_responses"]
    assert p["error_code"] != 0 and p["record_errors"] == []


def test_describe_configs_v4_with_no_keys_describes_every_config(broker):
    for keys in (None, []):                              # Kafka: null or empty both ask for all
        r = call(broker, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": "t", "configuration_keys": keys}]})
        names = {c["name"] for c in r["results"][0]["configs"]}
        assert {"cleanup.policy", "retention.ms", "segment.bytes"} <= names


@pytest.mark.parametrize("api_key,version,op", [(ApiKey.ALTER_CONFIGS, 2, None),
                                                (ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, 0)])
def test_message_format_version_is_accepted_and_ignored(broker, api_key, version, op):
    """Kafka 3.x still accepts the deprecated message.format.version (every batch is format v2 anyway)."""
    config = {"name": "message.format.version", "value": "2.8"}
    if op is not None:
        config["config_operation"] = op
    r = call(broker, api_key, version, {"resources": [{"resource_type": 2, "resource_name": "t",
                                                       "configs": [config]}]})
    assert [(x["error_code"], x["error_message"]) for x in r["responses"]] == [(0, None)]
    described = call(broker, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configuration_keys": ["message.format.version"]}]})
    assert [(c["name"], c["value"]) for c in described["results"][0]["configs"]] == [("message.format.version", "2.8")]


def test_delete_records_raises_the_log_start_offset(broker):
    part = broker.node.partition("t", 0)
    part.append(record_batch([(1, None, b"v", [])] * 5), 1)

    def delete(offsets, version=2):
        r = call(broker, ApiKey.DELETE_RECORDS, version, {"timeout_ms": 1000, "topics": [{"name": "t", "partitions": [
            {"partition_index": p, "offset": o} for p, o in offsets]}]})
        return [(p["partition_index"], p["low_watermark"], p["error_code"]) for p in r["topics"][0]["partitions"]]

    assert delete([(0, 2)]) == [(0, 2, 0)]
    assert part.log_start_offset == 2
    assert delete([(0, 9), (1, -1)], version=0) == [(0, -1, 1), (1, 0, 0)]        # OFFSET_OUT_OF_RANGE; empty
    assert delete([(0, -1), (7, 0)]) == [(0, 5, 0), (7, -1, UNKNOWN_TOPIC)]         # -1: the high watermark
    assert part.log_start_offset == 5
    broker.node.group_coordinator.commit_offsets("g", {TopicPartition("t", 0): OffsetAndMetadata(1)})
    r = call(broker, ApiKey.DELETE_RECORDS, 2, {"timeout_ms": 1000, "topics": [
        {"name": "__consumer_offsets", "partitions": [{"partition_index": 0, "offset": -1}]}]})
    assert r["topics"][0]["partitions"][0]["error_code"] == 17                    # INVALID_TOPIC_EXCEPTION


def test_describe_cluster_and_log_dirs(broker):
    r = call(broker, ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False})
    assert (r["error_code"], r["cluster_id"], r["controller_id"]) == (0, broker.node.cluster_id, 0)
    assert r["brokers"] == [{"broker_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}]
    controllers = call(broker, ApiKey.DESCRIBE_CLUSTER, 1, {"endpoint_type": 2})
    assert controllers["error_code"] == 114 and controllers["brokers"] == []      # MISMATCHED_ENDPOINT_TYPE
    broker.node.partition("t", 1).append(record_batch([(1, None, b"v" * 100, [])]), 1)
    every = call(broker, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    [d] = every["results"]
    assert d["error_code"] == 0 and d["log_dir"] == broker.node.path and d["total_bytes"] >= d["usable_bytes"] > 0
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in d["topics"] for p in t["partitions"]}
    assert sizes[("t", 0)] == 0 and sizes[("t", 1)] > 100
    one = call(broker, ApiKey.DESCRIBE_LOG_DIRS, 0, {"topics": [{"topic": "t", "partitions": [1]}]})
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in one["results"][0]["topics"]] == \
        [("t", [1])]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_replica_log_dirs_at_every_version(broker, version):
    """v2 is flexible; each partition answers NONE (already in that dir), LOG_DIR_NOT_FOUND (57) or
    UNKNOWN_TOPIC_OR_PARTITION (3)."""
    r = call(broker, ApiKey.ALTER_REPLICA_LOG_DIRS, version, {"dirs": [
        {"path": broker.node.path,
         "topics": [{"name": "t", "partitions": [0, 1]}, {"name": "nope", "partitions": [0]}]},
        {"path": "/not/a/log/dir", "topics": [{"name": "t", "partitions": [5]}]}]})
    assert {(t["topic_name"], p["partition_index"]): p["error_code"] for t in r["results"] for p in t["partitions"]} \
        == {("t", 0): 0, ("t", 1): 0, ("nope", 0): 3, ("t", 5): 57}


@pytest.mark.parametrize("protocol,principal,expected", [
    ("PLAINTEXT", "User:ANONYMOUS", 64), ("SSL", "User:ANONYMOUS", 64),     # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    ("SSL", "User:CN=alice", 61), ("SASL_PLAINTEXT", "User:alice", 61), ("SASL_SSL", "User:alice", 61)])
def test_delegation_token_requests_are_answered_as_a_kafka_without_tokens(broker, protocol, principal, expected):
    """Kafka 3.7 without delegation.token.secret.key: not allowed over PLAINTEXT and one-way TLS, else
    DELEGATION_TOKEN_AUTH_DISABLED (61); the owner and requester are named, timestamps -1."""
    conn = SimpleNamespace(listener=SimpleNamespace(protocol=protocol), principal=principal)
    broker.connection = lambda: conn
    create = {"owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1}
    r = call(broker, ApiKey.CREATE_DELEGATION_TOKEN, 3, create)
    name = principal.partition(":")[2]
    assert (r["error_code"], r["principal_name"], r["token_requester_principal_name"]) == (expected, name, name)
    assert (r["issue_timestamp_ms"], r["expiry_timestamp_ms"], r["max_timestamp_ms"], r["hmac"]) == (-1, -1, -1, b"")
    for api in (ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN):
        period = "renew_period_ms" if api == ApiKey.RENEW_DELEGATION_TOKEN else "expiry_time_period_ms"
        r = call(broker, api, 2, {"hmac": b"x", period: 1000})
        assert (r["error_code"], r["expiry_timestamp_ms"]) == (expected, -1)
    r = call(broker, ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
    assert (r["error_code"], r["tokens"]) == (expected, [])
    if expected == 61:                              # renewers must be Users, checked before "disabled"
        create["renewers"] = [{"principal_type": "Group", "principal_name": "ops"}]
        assert call(broker, ApiKey.CREATE_DELEGATION_TOKEN, 3, create)["error_code"] == 67    # INVALID_PRINCIPAL_TYPE
