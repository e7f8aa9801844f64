"""The broker under bad, slow, many and interrupted clients, with raw sockets and seglog's protocol codec.

Bad frames (too large, negative, truncated, garbage, unknown API or version) close that connection and nothing
else; the broker keeps answering everyone. Slow readers and a thousand idle connections cost the others
nothing. acks=0 gets no answer, pipelined requests are answered in order, long polls wake on data and time
out on time, consumers never see past the high watermark, large fetches leave through sendfile, and a broker
stopped cleanly or killed with -9 comes back with every acknowledged record. A hypothesis fuzz test mutates
valid frames and sends them to a live broker (the codec's own decoder fuzz test is
tests/unit/test_protocol_fuzz.py).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.kafka_wire import RawConnection, batches, fetch_body, produce_body, record_batch
from seglog.protocol import SUPPORTED_VERSIONS, ApiKey

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

NO_ERROR, OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 2, 3
NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE, INVALID_REQUIRED_ACKS, UNSUPPORTED_VERSION = 6, 10, 21, 35
INVALID_CONFIG, INVALID_REQUEST, POLICY_VIOLATION = 40, 42, 44


def address(broker):
    return (broker.host, broker.port)


def assert_serving(broker, topic: str | None = None) -> None:
    """A fresh connection gets well-formed ApiVersions and Metadata answers (and a produce, if topic given)."""
    with RawConnection(address(broker), timeout=10) as c:
        body = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert body["error_code"] == 0
        assert {k["api_key"] for k in body["api_keys"]} == set(SUPPORTED_VERSIONS)
        md = c.request(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False})
        assert [b["node_id"] for b in md["brokers"]] == [0]
        if topic is not None:
            r = c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, record_batch([(1, b"k", b"alive", [])])))
            assert r["responses"][0]["partition_responses"][0]["error_code"] == NO_ERROR


def one(resp, key="responses", inner="partition_responses"):
    [t] = resp[key]
    [p] = t[inner]
    return p


# -- frames the broker must refuse ------------------------------------------------------------------------------

def test_frame_over_socket_request_max_bytes_closes_before_reading_it(start_broker):
    b = start_broker(socket_request_max_bytes=64 * 1024)
    topic = "limit"
    b.node.create_topic(topic, 1)
    with RawConnection(address(b)) as c:
        c.send_bytes(struct.pack(">i", 64 * 1024 + 1))    # only the prefix: the broker decides from it alone
        assert c.closed_by_peer(timeout=5)
    with RawConnection(address(b)) as c:
        c.send_bytes(struct.pack(">i", 0x7FFFFFFF))       # 2 GiB announced: never allocated, never awaited
        assert c.closed_by_peer(timeout=5)
    # a real request just over the limit is refused; just under it is served
    big = record_batch([(1, None, b"x" * (64 * 1024), [])])
    with RawConnection(address(b)) as c:
        c.send(ApiKey.PRODUCE, 8, produce_body(topic, 0, big))
        assert c.closed_by_peer(timeout=5)
    small = record_batch([(1, None, b"x" * (60 * 1024), [])])
    with RawConnection(address(b)) as c:
        assert one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, small)))["error_code"] == NO_ERROR
    # an announced size within the limit keeps the connection waiting for the rest (the limit is what closed it)
    with RawConnection(address(b)) as c:
        c.send_bytes(struct.pack(">i", 1000) + b"\x00\x03")
        assert not c.closed_by_peer(timeout=0.5)
    assert b.node.partition(topic, 0).log_end_offset == 1
    assert b.metrics()["connection_errors"] >= 3
    assert_serving(b, topic)


@pytest.mark.parametrize("data", [
    pytest.param(struct.pack(">i", -1), id="negative-size"),
    pytest.param(struct.pack(">i", -2**31), id="most-negative-size"),
    pytest.param(struct.pack(">i", 4) + b"\x00\x03\x00\x08", id="header-truncated"),
    pytest.param(struct.pack(">i", 12) + struct.pack(">hhih", 3, 8, 7, 5) + b"ab", id="client-id-past-the-end"),
    pytest.param(struct.pack(">i", 64) + os.urandom(64), id="garbage"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http-request"),
    pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 7, -1), id="unknown-api-key"),
    pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 7, -1), id="unsupported-metadata-version"),
    pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 0, 10, 7, -1), id="produce-v10-above-range"),
    pytest.param(struct.pack(">i", 14) + struct.pack(">hhih", 3, 8, 7, -1) + b"\x00\x00\x00\x05", id="body-truncated"),
])
def test_bad_frames_close_the_connection_and_the_broker_keeps_serving(seglog_broker, data):
    errors_before = seglog_broker.metrics()["connection_errors"]
    with RawConnection(address(seglog_broker)) as bystander:      # a client connected before and after
        bystander.request(ApiKey.API_VERSIONS, 0, {})
        with RawConnection(address(seglog_broker)) as c:
            c.send_bytes(data)
            assert c.closed_by_peer(timeout=5)
        assert bystander.request(ApiKey.METADATA, 1, {"topics": None})["brokers"]
    assert seglog_broker.metrics()["connection_errors"] > errors_before
    assert_serving(seglog_broker)


def test_a_bad_frame_is_one_log_line_naming_the_client(seglog_broker, caplog):
    caplog.set_level(logging.INFO, logger="seglog.broker")
    with RawConnection(address(seglog_broker)) as c:
        me = "%s:%d" % c.sock.getsockname()[:2]
        c.send_bytes(struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 7, -1))      # an API nobody has
        assert c.closed_by_peer(timeout=5)
    deadline = time.monotonic() + 5
    while not [r for r in caplog.records if me in r.getMessage()] and time.monotonic() < deadline:
        time.sleep(0.02)                                 # logged by the broker's thread
    [record] = [r for r in caplog.records if me in r.getMessage()]
    assert record.levelno == logging.WARNING and record.name == "seglog.broker"
    assert record.getMessage().startswith(f"closing connection from {me}: ") and "\n" not in record.getMessage()
    assert record.exc_info is None                       # one line: no traceback


def test_a_corrupt_stored_batch_is_an_error_line_and_a_metric(start_broker, tmp_path, caplog):
    """A fetch meeting a batch damaged on disk (found after a restart: the segment's verified prefix is gone) is
    answered CORRUPT_MESSAGE and is loud: an ERROR line naming the file, the offset read and the position of
    the damage, and the partition's corrupt_batches metric."""
    caplog.set_level(logging.INFO, logger="seglog")
    b = start_broker(data_dir=tmp_path / "data")
    b.node.create_topic("dmg", 1)
    with RawConnection(address(b)) as c:
        for i in range(3):
            r = c.request(ApiKey.PRODUCE, 8, produce_body("dmg", 0, record_batch([(1, b"k", b"v%d" % i, [])])))
            assert one(r)["error_code"] == NO_ERROR
    path = os.path.join(b.node.partition("dmg", 0).log.path, "00000000000000000000.log")
    b.stop()
    with open(path, "r+b") as f:                                      # flip a byte inside the second batch
        f.seek(8)
        position = 12 + struct.unpack(">i", f.read(4))[0]
        f.seek(position + 40)
        byte = f.read(1)
        f.seek(position + 40)
        f.write(bytes([byte[0] ^ 0xFF]))
    b = start_broker(data_dir=tmp_path / "data")
    with RawConnection(address(b)) as c:
        r = c.request(ApiKey.FETCH, 11, fetch_body("dmg", 0, 1))
        assert one(r, "responses", "partitions")["error_code"] == CORRUPT_MESSAGE
    errors = [rec for rec in caplog.records if rec.levelno == logging.ERROR and "corrupt batch" in rec.getMessage()]
    assert errors, [rec.getMessage() for rec in caplog.records]
    msg = errors[0].getMessage()
    assert path in msg and "offset 1" in msg and f"position {position}" in msg, msg
    assert b.metrics()["corrupt_batches"] == {"dmg-0": 1}


def test_a_partition_reopened_without_its_data_shows_in_the_metrics(start_broker, tmp_path, caplog):
    """A partition whose .log files vanished while the broker was down reopens empty, loudly: a WARNING and
    the recovery_lost_offsets metric (offsets its checkpoint vouched for), on /metrics too."""
    caplog.set_level(logging.WARNING, logger="seglog")
    b = start_broker(data_dir=tmp_path / "data", metrics_port=0)
    b.node.create_topic("gone", 2)
    with RawConnection(address(b)) as c:
        for i in range(5):
            r = c.request(ApiKey.PRODUCE, 8, produce_body("gone", 1, record_batch([(1, b"k", b"v%d" % i, [])])))
            assert one(r)["error_code"] == NO_ERROR
    d = b.node.partition("gone", 1).log.path
    b.stop()
    for name in os.listdir(d):
        if name.endswith(".log"):
            os.unlink(os.path.join(d, name))
    b = start_broker(data_dir=tmp_path / "data", metrics_port=0)
    assert b.metrics()["recovery_lost_offsets"] == {"gone-1": 5}
    assert 'seglog_recovery_lost_offsets{partition="gone-1"} 5' in _http_get(b.metrics_port, "/metrics")[2]
    assert [r for r in caplog.records if r.levelno == logging.WARNING and "offsets are lost" in r.getMessage()]


def test_frame_cut_short_by_the_client(seglog_broker):
    with RawConnection(address(seglog_broker)) as c:
        header, frame = c.frame(ApiKey.METADATA, 8, {"topics": None})
        c.send_bytes(frame[:len(frame) - 3])             # size says more than what comes
        c.sock.shutdown(socket.SHUT_WR)                  # ... then the client stops sending
        assert c.closed_by_peer(timeout=5)
    with RawConnection(address(seglog_broker)) as c:
        c.send_bytes(b"\x00\x00")                        # half a size prefix, then EOF
        c.sock.shutdown(socket.SHUT_WR)
        assert c.closed_by_peer(timeout=5)
    assert_serving(seglog_broker)


def test_unsupported_api_versions_version_gets_the_v0_fallback(seglog_broker):
    with RawConnection(address(seglog_broker)) as c:
        client_id = b"future-client"
        # ApiVersions v99 from a newer client: a body seglog cannot know, that the broker must not parse
        frame = struct.pack(">hhih", 18, 99, 4242, len(client_id)) + client_id + b"\x00\x05hello\x01\x02\x00"
        c.send_bytes(struct.pack(">i", len(frame)) + frame)
        resp = c.recv_frame()
        # response header v0 + ApiVersionsResponse v0: error_code, [api_key min max], nothing else
        cid, err, n = struct.unpack_from(">ihi", resp)
        assert (cid, err) == (4242, UNSUPPORTED_VERSION)
        entries = [struct.unpack_from(">hhh", resp, 10 + 6 * i) for i in range(n)]
        assert len(resp) == 10 + 6 * n, "a v0 body: no throttle time, no tagged fields"
        assert {k: (lo, hi) for k, lo, hi in entries} == dict(SUPPORTED_VERSIONS)
        # the client then retries on the same connection with a version both know
        assert c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "x",
                                                  "client_software_version": "1"})["error_code"] == 0


# -- Kafka error codes on raw requests ------------------------------------------------------------------------

def test_produce_error_codes_on_raw_frames(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1, config={"max.message.bytes": "4000"})
    part = seglog_broker.node.partition(topic, 0)
    good = record_batch([(1_700_000_000_000, b"k", b"v", [("h", b"1")])])
    with RawConnection(address(seglog_broker)) as c:
        # CORRUPT_MESSAGE: one bit of the CRC-covered area flipped (a record byte), CRC left as it was
        bad = bytearray(good)
        bad[-3] ^= 0x01
        r = one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, bytes(bad))))
        assert r["error_code"] == CORRUPT_MESSAGE and r["base_offset"] == -1
        # ... and a wrong CRC field itself
        bad = bytearray(good)
        bad[17:21] = bytes(4)
        assert one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, bytes(bad))))["error_code"] == CORRUPT_MESSAGE
        # INVALID_REQUIRED_ACKS: acks=2
        r = one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, good, acks=2)))
        assert r["error_code"] == INVALID_REQUIRED_ACKS
        # MESSAGE_TOO_LARGE: over the topic's max.message.bytes
        r = one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, record_batch([(1, None, b"z" * 5000, [])]))))
        assert r["error_code"] == MESSAGE_TOO_LARGE
        # UNKNOWN_TOPIC_OR_PARTITION: a partition the topic does not have
        assert one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 7, good)))["error_code"] == \
            UNKNOWN_TOPIC_OR_PARTITION
        assert part.log_end_offset == 0, "nothing was appended by the refused requests"
        r = one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, good)))
        assert (r["error_code"], r["base_offset"]) == (NO_ERROR, 0)
        # OFFSET_OUT_OF_RANGE with the offsets a client resets to
        f = c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 5))
        p = one(f, inner="partitions")
        assert (p["error_code"], p["high_watermark"], p["log_start_offset"]) == (OFFSET_OUT_OF_RANGE, 1, 0)
        f = c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 0))
        [batch] = batches(one(f, inner="partitions")["records"])
        assert batch.validate_crc() and [(r.key, r.value) for r in batch] == [(b"k", b"v")]


def test_unknown_topic_with_auto_create_off_raw(start_broker):
    b = start_broker(auto_create_topics_enable=False)
    with RawConnection(address(b)) as c:
        md = c.request(ApiKey.METADATA, 8, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": True})
        assert [(t["name"], t["error_code"]) for t in md["topics"]] == [("nope", UNKNOWN_TOPIC_OR_PARTITION)]
        r = one(c.request(ApiKey.PRODUCE, 8, produce_body("nope", 0, record_batch([(1, None, b"v", [])]))))
        assert r["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
        p = one(c.request(ApiKey.FETCH, 11, fetch_body("nope", 0, 0)), inner="partitions")
        assert p["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert b.node.topics() == []


def test_admin_requests_over_kafkas_record_limit_are_refused(start_broker):
    """Kafka's controller refuses a CreateTopics or CreatePartitions that would write more than 10000 metadata
    records (one per topic and per partition) with POLICY_VIOLATION for every topic of the request, and creates
    nothing: a flipped bit in a partition count cannot make the broker open logs without bound."""
    b = start_broker()
    b.node.create_topic("grow", 1)
    too_large = (POLICY_VIOLATION, "Unable to perform excessively large batch operation.")

    def create(c, *topics):
        body = {"topics": [{"name": n, "num_partitions": k, "replication_factor": 1, "assignments": [],
                            "configs": []} for n, k in topics], "timeout_ms": 1000, "validate_only": False}
        topics = c.request(ApiKey.CREATE_TOPICS, 4, body)["topics"]
        return [(t["name"], t["error_code"], t["error_message"]) for t in topics]

    def grow(c, count):
        body = {"topics": [{"name": "grow", "count": count, "assignments": None}], "timeout_ms": 1000,
                "validate_only": False}
        [r] = c.request(ApiKey.CREATE_PARTITIONS, 1, body)["results"]
        return r["error_code"], r["error_message"]

    with RawConnection(address(b), timeout=30) as c:
        t = time.monotonic()
        assert create(c, ("huge", 0x7F000002)) == [("huge", *too_large)]
        assert create(c, ("a", 6000), ("b", 6000)) == [("a", *too_large), ("b", *too_large)]   # the request's sum
        assert grow(c, 20_000) == too_large
        assert time.monotonic() - t < 5, "refused before opening anything"
        assert create(c, ("fine", 3)) == [("fine", NO_ERROR, None)]
        assert grow(c, 4) == (NO_ERROR, None)
    assert sorted(b.node.topics()) == ["fine", "grow"] and b.node.topic("grow").partitions == 4
    assert not [d for d in os.listdir(b.node.path) if d.startswith(("huge-", "a-", "b-"))]


# -- ordering, acks=0, long polls, high watermark -------------------------------------------------------------

def test_acks_zero_gets_no_response(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    with RawConnection(address(seglog_broker)) as c:
        c.send(ApiKey.PRODUCE, 8, produce_body(topic, 0, record_batch([(1, None, b"fire", [])]), acks=0))
        c.send(ApiKey.PRODUCE, 8, produce_body(topic, 0, record_batch([(2, None, b"forget", [])]), acks=0))
        assert not c.readable_within(0.5), "an acks=0 produce request is never answered"
        h = c.send(ApiKey.METADATA, 8, {"topics": None})
        assert c.recv(h)["brokers"]                      # the next answer is the Metadata one
    assert [r.value for r in seglog_broker.node.partition(topic, 0).log.records()] == [b"fire", b"forget"]


def test_a_failed_acks_zero_produce_closes_the_connection(seglog_broker, topic_name):
    """acks=0 gets no answer, so Kafka tells the client about an error by closing the connection (the client
    then refreshes its metadata): here for an unknown partition, a corrupt batch, an unknown topic, and a
    request with one good and one bad partition (the good one is appended)."""
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 2)
    good = record_batch([(1, None, b"kept", [])])
    corrupt = bytearray(good)
    corrupt[-2] ^= 0x01
    both = produce_body(topic, 0, good, acks=0)
    both["topic_data"][0]["partition_data"].append({"index": 9, "records": good})
    for body in (produce_body(topic, 5, good, acks=0), produce_body(topic, 1, bytes(corrupt), acks=0),
                 produce_body(topic_name(), 0, good, acks=0), both):
        with RawConnection(address(seglog_broker)) as c:
            c.send(ApiKey.PRODUCE, 8, body)
            assert c.closed_by_peer(timeout=5), body
    assert [r.value for r in seglog_broker.node.partition(topic, 0).log.records()] == [b"kept"]
    assert seglog_broker.node.partition(topic, 1).log_end_offset == 0
    assert_serving(seglog_broker, topic)


def test_alter_configs_on_raw_frames(start_broker):
    """IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT) and AlterConfigs (the whole override set) on topic
    resources, validated as Node.alter_topic_config validates: a bad name or value changes nothing. Broker
    configs are static: INVALID_REQUEST."""
    b = start_broker()
    b.node.create_topic("cfg", 2, config={"retention.ms": "60000"})
    topic = b.node.topic

    def incremental(c, *configs, name="cfg", rtype=2, validate_only=False):
        body = {"resources": [{"resource_type": rtype, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in configs]}], "validate_only": validate_only}
        [r] = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)["responses"]
        assert (r["resource_type"], r["resource_name"]) == (rtype, name)
        return r["error_code"], r["error_message"]

    def replace(c, configs, name="cfg"):
        body = {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
            {"name": k, "value": v} for k, v in configs.items()]}], "validate_only": False}
        [r] = c.request(ApiKey.ALTER_CONFIGS, 1, body)["responses"]
        return r["error_code"], r["error_message"]

    SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
    with RawConnection(address(b)) as c:
        assert incremental(c, ("segment.ms", SET, "3600000"), ("retention.ms", DELETE, None)) == (NO_ERROR, None)
        assert topic("cfg").overrides == {"segment.ms": "3600000"}
        assert b.node.partition("cfg", 1).log.config.segment_ms == 3_600_000          # the open logs have it
        assert b.node.partition("cfg", 1).log.config.retention_ms == 7 * 24 * 3600 * 1000
        assert incremental(c, ("cleanup.policy", APPEND, "compact")) == (NO_ERROR, None)
        assert topic("cfg").config.cleanup_policy == ("delete", "compact")          # Kafka's order: appended
        assert incremental(c, ("cleanup.policy", SUBTRACT, "delete")) == (NO_ERROR, None)
        assert topic("cfg").overrides["cleanup.policy"] == "compact"
        assert incremental(c, ("cleanup.policy", DELETE, None)) == (NO_ERROR, None)
        before = dict(topic("cfg").overrides)
        assert incremental(c, ("retention.ms", APPEND, "5")) == \
            (INVALID_CONFIG, "Config value append is not allowed for config key: retention.ms")
        assert incremental(c, ("segment.ms", SET, "1"), ("nope", SET, "1")) == \
            (INVALID_CONFIG, "Unknown topic config name: nope")
        assert incremental(c, ("nope", DELETE, None)) == (INVALID_CONFIG, "Unknown topic config name: nope")
        code, message = incremental(c, ("segment.ms", SET, "1"), ("retention.ms", SET, "soon"))
        assert code == INVALID_CONFIG and "retention.ms" in message
        assert incremental(c, ("segment.ms", SET, None))[0] == INVALID_REQUEST
        assert incremental(c, ("segment.ms", SET, "1"), ("segment.ms", DELETE, None)) == \
            (INVALID_REQUEST, "Error due to duplicate config keys")
        assert incremental(c, ("segment.ms", SET, "1"), validate_only=True) == (NO_ERROR, None)
        assert topic("cfg").overrides == before, "refused or validate-only requests changed nothing"
        assert incremental(c, ("segment.ms", SET, "1"), name="missing")[0] == UNKNOWN_TOPIC_OR_PARTITION
        code, message = incremental(c, ("num.partitions", SET, "3"), name="0", rtype=4)
        assert code == INVALID_REQUEST and "Cannot update these configs dynamically: Set(num.partitions)" in message
        assert incremental(c, name="0", rtype=4) == (NO_ERROR, None)
        assert incremental(c, name="7", rtype=4)[0] == INVALID_REQUEST
        assert incremental(c, name="g", rtype=32)[0] == INVALID_REQUEST
        # AlterConfigs: what is not named goes back to the default
        assert replace(c, {"retention.ms": "1000"}) == (NO_ERROR, None)
        assert topic("cfg").overrides == {"retention.ms": "1000"}
        assert replace(c, {"retention.ms": None})[0] == INVALID_REQUEST
        assert replace(c, {"retention.bogus": "1"}) == (INVALID_CONFIG, "Unknown topic config name: retention.bogus")
        assert topic("cfg").overrides == {"retention.ms": "1000"}
        assert replace(c, {}) == (NO_ERROR, None)
        assert topic("cfg").overrides == {}


def test_pipelined_requests_are_answered_in_order(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    with RawConnection(address(seglog_broker)) as c:
        frames, expect = [], []
        for i in range(60):
            kind = i % 5
            if kind == 0:
                h, f = c.frame(ApiKey.PRODUCE, 8, produce_body(topic, 0, record_batch([(i, None, b"%d" % i, [])])))
            elif kind == 1:
                h, f = c.frame(ApiKey.FETCH, 11, fetch_body(topic, 0, 0, max_wait_ms=50, min_bytes=10 << 20))
            elif kind == 2:
                h, f = c.frame(ApiKey.METADATA, 8, {"topics": [{"name": topic}]})
            elif kind == 3:
                h, f = c.frame(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
            else:
                h, f = c.frame(ApiKey.API_VERSIONS, 2, {})
            frames.append(f)
            expect.append(h)
        c.send_bytes(b"".join(frames))                   # all at once, before reading anything
        produced = 0
        for h in expect:
            body = c.recv(h)                             # decode_response checks the correlation id
            if h.api_key == ApiKey.PRODUCE:
                assert one(body)["base_offset"] == produced
                produced += 1
            elif h.api_key == ApiKey.LIST_OFFSETS:
                assert one(body, "topics", "partitions")["offset"] == produced


def test_fetch_long_poll_wakes_on_data_and_times_out_on_max_wait(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    with RawConnection(address(seglog_broker)) as c:
        # nothing arrives: answered at max_wait, empty
        t = time.monotonic()
        p = one(c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 0, max_wait_ms=700, min_bytes=1)),
                inner="partitions")
        waited = time.monotonic() - t
        assert p["error_code"] == 0 and len(p["records"]) == 0
        assert 0.65 <= waited < 2.0, waited

        # data arrives from another connection after 0.3 s: answered at once, long before max_wait
        def produce_later():
            time.sleep(0.3)
            with RawConnection(address(seglog_broker)) as other:
                other.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, record_batch([(1, None, b"wake", [])])))
        th = threading.Thread(target=produce_later)
        t = time.monotonic()
        th.start()
        p = one(c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 0, max_wait_ms=10_000, min_bytes=1)),
                inner="partitions")
        waited = time.monotonic() - t
        th.join()
        assert [r.value for b in batches(p["records"]) for r in b] == [b"wake"]
        assert 0.25 <= waited < 2.0, waited

        # min_bytes not reached: the fetch waits the whole max_wait, then returns what there is
        t = time.monotonic()
        p = one(c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 0, max_wait_ms=600, min_bytes=1 << 20)),
                inner="partitions")
        waited = time.monotonic() - t
        assert [r.value for b in batches(p["records"]) for r in b] == [b"wake"]
        assert 0.55 <= waited < 2.0, waited

        # an in-process append wakes a waiting wire fetch too
        def append_in_process():
            time.sleep(0.3)
            import seglog
            with seglog.Producer(seglog_broker.node, linger_ms=0) as prod:
                prod.send(topic, b"door", partition=0).get()
        th = threading.Thread(target=append_in_process)
        t = time.monotonic()
        th.start()
        p = one(c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 1, max_wait_ms=10_000, min_bytes=1)),
                inner="partitions")
        th.join()
        assert [r.value for b in batches(p["records"]) for r in b] == [b"door"]
        assert time.monotonic() - t < 2.0


def _http_get(port: int, path: str) -> tuple[str, dict[str, str], str]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.decode().partition("\r\n\r\n")
    status, *headers = head.split("\r\n")
    return status, dict(h.split(": ", 1) for h in headers), body


def test_metrics_endpoint(start_broker):
    """/metrics is Prometheus text (a # TYPE line before every family's samples), /metrics.json the same
    figures; a long poll's wait is reported apart from the fetch's latency; rates are recent."""
    b = start_broker(metrics_port=0)
    b.node.create_topic("m", 1)
    with RawConnection(address(b)) as c:
        c.request(ApiKey.PRODUCE, 8, produce_body("m", 0, record_batch([(1, None, b"x", [])])))
        t = time.monotonic()
        c.request(ApiKey.FETCH, 11, fetch_body("m", 0, 1, max_wait_ms=400, min_bytes=1))     # waits it all out
        assert time.monotonic() - t >= 0.35
    status, headers, text = _http_get(b.metrics_port, "/metrics")
    assert status == "HTTP/1.1 200 OK" and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    typed: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert kind in ("counter", "gauge", "summary") and name not in typed
            typed[name] = kind
        elif line and not line.startswith("#"):
            name = line.split("{")[0].split()[0]
            family = name.removesuffix("_sum").removesuffix("_count") if name not in typed else name
            assert family in typed, f"sample {name} without a # TYPE line before it"
            float(line.rsplit(" ", 1)[1])
    assert typed["seglog_requests_total"] == "counter" and typed["seglog_latency_seconds"] == "summary"
    assert 'seglog_requests_total{api="produce"} 1' in text and 'seglog_requests_total{api="fetch"} 1' in text
    assert 'seglog_latency_seconds_count{kind="fetch_wait"} 1' in text
    m = json.loads(_http_get(b.metrics_port, "/metrics.json")[2])
    assert m["latency"]["fetch_wait"]["max_ms"] >= 350               # the wait, reported apart ...
    assert m["latency"]["fetch"]["max_ms"] < 300                     # ... and not in the fetch's own latency
    assert m["requests"]["produce"] == 1 and m["requests_per_s"] > 0 and m["rate_window_s"] == 60
    assert _http_get(b.metrics_port, "/nothing")[0] == "HTTP/1.1 404 Not Found"


def _closed_at_once(conn: RawConnection) -> bool:
    """Did the broker close this connection without answering an ApiVersions request?"""
    try:
        conn.request(ApiKey.API_VERSIONS, 0, {})
    except (ConnectionError, OSError):
        return True
    return False


def test_connections_past_max_connections_per_ip_are_closed_at_once(start_broker, caplog):
    """max.connections.per.ip counts the connections open from one address: one more is closed before a byte
    is read, logged and counted, and a slot freed by a closed connection is taken again (Kafka's
    ConnectionQuotas)."""
    b = start_broker(max_connections_per_ip=2, metrics_port=0)
    first, second = RawConnection(address(b)), RawConnection(address(b))
    try:
        for c in (first, second):
            assert c.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
        with caplog.at_level(logging.INFO, logger="seglog.broker"), RawConnection(address(b)) as third:
            assert _closed_at_once(third)
        assert "Rejected connection from /127.0.0.1, address already has the configured maximum of 2" in caplog.text
        assert first.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0       # the others go on
        first.close()
        deadline = time.monotonic() + 10
        while True:                       # the slot is freed once the broker has seen the close
            with RawConnection(address(b)) as again:
                if not _closed_at_once(again):
                    break
            assert time.monotonic() < deadline, "a closed connection's slot was never freed"
            time.sleep(0.05)
    finally:
        first.close()
        second.close()
    text = _http_get(b.metrics_port, "/metrics")[2]
    [rejected] = [int(line.split()[1]) for line in text.splitlines()
                  if line.startswith("seglog_connections_rejected_total ")]
    assert rejected >= 1


def test_max_connections_per_ip_overrides_set_one_address_apart(start_broker):
    """An override replaces the default for its address only: with the default 0, only 127.0.0.1 (named by
    its host name) may connect, once at a time; a client from another loopback address gets nothing."""
    b = start_broker(host="127.0.0.1", max_connections_per_ip=0, max_connections_per_ip_overrides="localhost:1")
    with RawConnection(address(b)) as c:
        assert c.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
        with RawConnection(address(b)) as second:
            assert _closed_at_once(second)
    b0 = start_broker(host="0.0.0.0", max_connections_per_ip=0, max_connections_per_ip_overrides="127.0.0.1:5")
    with RawConnection(("127.0.0.1", b0.port)) as allowed:
        frame = allowed.frame(ApiKey.API_VERSIONS, 0, {})[1]
        assert allowed.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    with socket.create_connection(("127.0.0.1", b0.port), timeout=10, source_address=("127.0.0.2", 0)) as other:
        try:
            other.sendall(frame)
            answer = other.recv(4)
        except ConnectionResetError:            # closed before the frame was read
            answer = b""
        assert answer == b""                    # closed unanswered: 127.0.0.2 has the default, 0


def test_consumers_never_see_records_above_the_high_watermark(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    part = seglog_broker.node.partition(topic, 0)
    with RawConnection(address(seglog_broker)) as c:
        for i in range(10):
            c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, record_batch([(i, None, b"%d" % i, [])])))
        part.log.high_watermark = 4                      # as a leader whose followers lag would have it
        p = one(c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 0)), inner="partitions")
        assert p["high_watermark"] == 4
        assert [r.offset for b in batches(p["records"]) for r in b] == [0, 1, 2, 3]
        p = one(c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 4, max_wait_ms=300)), inner="partitions")
        assert (p["error_code"], len(p["records"])) == (0, 0), "between HW and log end: nothing, no error"
        lo = c.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert one(lo, "topics", "partitions")["offset"] == 4
        # a real client agrees
        from kafka import KafkaConsumer, TopicPartition
        kc = KafkaConsumer(bootstrap_servers=seglog_broker.bootstrap_servers, auto_offset_reset="earliest",
                           enable_auto_commit=False, consumer_timeout_ms=1500)
        kc.assign([TopicPartition(topic, 0)])
        assert [m.offset for m in kc] == [0, 1, 2, 3]
        part.log.high_watermark = 7
        assert [m.offset for m in kc] == [4, 5, 6]
        kc.close()
        # a replica fetch (replica_id >= 0) is no way around it: a lone broker has no followers to serve
        body = fetch_body(topic, 0, 0)
        body["replica_id"] = 1
        p = one(c.request(ApiKey.FETCH, 11, body), inner="partitions")
        assert (p["error_code"], len(p["records"])) == (NOT_LEADER_OR_FOLLOWER, 0)
        part.log.high_watermark = part.log.end_offset


# -- zero copy -------------------------------------------------------------------------------------------------

def test_large_fetches_are_sent_with_sendfile(seglog_broker, topic_name, monkeypatch):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    import seglog
    values = [os.urandom(1000) for _ in range(1000)]     # ~1 MB, incompressible
    with seglog.Producer(seglog_broker.node, linger_ms=0) as p:
        for v in values:
            p.send(topic, v, partition=0)
    calls = []
    real = os.sendfile

    def spy(out_fd, in_fd, offset, count, *args, **kwargs):
        sent = real(out_fd, in_fd, offset, count, *args, **kwargs)
        calls.append((threading.current_thread().name, sent))
        return sent

    def through_sendfile(expected: int) -> int:
        # The broker thread records a call once os.sendfile returned; the syscall releases the GIL, so the
        # bytes it sent can reach this thread (and be decoded) before the broker thread appends to `calls`.
        deadline = time.monotonic() + 10
        while sum(n for _, n in calls) < expected and time.monotonic() < deadline:
            time.sleep(0.01)
        return sum(n for _, n in calls)
    monkeypatch.setattr(os, "sendfile", spy)
    with RawConnection(address(seglog_broker)) as c:
        p = one(c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 0, partition_max_bytes=8 << 20)),
                inner="partitions")
        got = [r.value for b in batches(p["records"]) for r in b]
        assert got == values
        big = len(p["records"])
        sent = through_sendfile(big)
        assert sent == big, f"{big} record bytes, {sent} through sendfile"
        assert {name for name, _ in calls} == {"seglog-broker"}
        calls.clear()
        p = one(c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, 990, partition_max_bytes=8 << 20)),
                inner="partitions")
        assert [r.value for b in batches(p["records"]) for r in b][-10:] == values[-10:]
        assert len(p["records"]) < 64 * 1024 and calls == [], "small responses are plain writes"
    # a real client gets the same bytes through that path
    from kafka import KafkaConsumer, TopicPartition
    kc = KafkaConsumer(bootstrap_servers=seglog_broker.bootstrap_servers, auto_offset_reset="earliest",
                       enable_auto_commit=False, consumer_timeout_ms=2000, max_partition_fetch_bytes=4 << 20)
    kc.assign([TopicPartition(topic, 0)])
    assert [m.value for m in kc] == values
    kc.close()
    assert through_sendfile(900_000) >= 900_000


# -- slow and idle clients ---------------------------------------------------------------------------------------

def test_a_client_that_never_reads_does_not_block_others(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    import seglog
    with seglog.Producer(seglog_broker.node, linger_ms=0, compression_type=None) as p:
        for _ in range(4000):
            p.send(topic, os.urandom(1000), partition=0)   # 4 MB
    slow = RawConnection(address(seglog_broker))
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    out_before = seglog_broker.metrics()["bytes_out"]
    try:
        # 100 fetches of 4 MB each (400 MB) and a few small ones, never read
        for i in range(100):
            slow.send(ApiKey.FETCH, 11, fetch_body(topic, 0, 0, partition_max_bytes=8 << 20))
            slow.send(ApiKey.METADATA, 8, {"topics": None})
        time.sleep(0.3)
        worst = 0.0
        with RawConnection(address(seglog_broker)) as c:
            for i in range(40):
                t = time.monotonic()
                r = one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, record_batch([(i, None, b"fast", [])]))))
                assert r["error_code"] == 0
                p = one(c.request(ApiKey.FETCH, 11, fetch_body(topic, 0, r["base_offset"])), inner="partitions")
                assert [rec.value for b in batches(p["records"]) for rec in b] == [b"fast"]
                worst = max(worst, time.monotonic() - t)
        assert worst < 1.0, f"a produce + fetch round trip took {worst:.3f} s next to a stalled reader"
        # the slow connection really is stalled: most of its 400 MB of responses have not left
        assert seglog_broker.metrics()["bytes_out"] - out_before < 100 << 20
    finally:
        slow.close()
    assert_serving(seglog_broker)


def _raise_fd_limit(n: int) -> None:
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        if hard != resource.RLIM_INFINITY and hard < n:
            pytest.skip(f"needs {n} file descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


def test_a_thousand_idle_connections_cost_little(broker_process):
    n = 1200
    _raise_fd_limit(2 * n + 200)                          # the broker subprocess inherits it
    b = broker_process()
    addr = (b.host, b.port)
    with RawConnection(addr) as c:                        # warm up: codecs compiled, first allocations done
        for _ in range(3):
            c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "w", "client_software_version": "1"})
            c.request(ApiKey.METADATA, 8, {"topics": None})
    time.sleep(0.3)
    before = b.rss_bytes()
    conns = []
    try:
        for _ in range(n):
            c = RawConnection(addr)
            c.request(ApiKey.API_VERSIONS, 2, {})          # accepted and served: a live connection task
            conns.append(c)
        time.sleep(0.5)
        grown = b.rss_bytes() - before
        per_conn = grown / n
        print(f"{n} idle connections: broker RSS {before / 1e6:.1f} MB -> +{grown / 1e6:.2f} MB "
              f"({per_conn / 1024:.1f} KiB each)")
        assert grown < 40 << 20 and per_conn < 32 * 1024, f"{n} idle connections grew RSS by {grown / 1e6:.1f} MB"
        # the broker still answers promptly with all of them open
        t = time.monotonic()
        with RawConnection(addr) as c:
            c.request(ApiKey.METADATA, 8, {"topics": None})
        assert time.monotonic() - t < 1.0
        # and a 2 GiB size prefix from one of them is refused without allocating it
        conns[0].send_bytes(struct.pack(">i", 0x7FFFFFF0))
        assert conns[0].closed_by_peer(timeout=5)
        assert b.rss_bytes() - before < 60 << 20
    finally:
        for c in conns:
            c.close()
    assert b.stop() == 0


def _bomb(codec: str, inflated_mib: int) -> bytes:
    """A valid batch (CRC and all) of one record of zeros that inflates to inflated_mib MiB."""
    from seglog import _engine
    w = _engine.BatchWriter(next_offset=0, compression=codec, batch_bytes=1 << 62, max_record_bytes=1 << 62)
    w.add(bytes(inflated_mib << 20))
    w.finish()
    return bytes(w.take())


def test_decompression_bombs_of_every_codec_leave_broker_memory_bounded(broker_process):
    """A produce request is bounded in memory whatever its batches inflate to: the frame (socket.request.max.bytes)
    plus one batch inflated to at most 32 x max.message.bytes at a time (32 MiB by default). Bombs a few KB
    long that inflate to 200-300 MiB are refused with MESSAGE_TOO_LARGE; snappy cannot inflate more than ~21x,
    so its densest batch under max.message.bytes is stored. The broker's peak RSS (VmHWM) is what is measured:
    about +64 MiB (one inflation buffer at a time, plus what the allocator keeps of earlier ones in the disk
    threads' arenas), against 300-600 MiB per bomb when inflation was unbounded."""
    from seglog import _engine
    limit = _engine.inflate_limit(1048588)
    bombs = {"gzip": _bomb("gzip", 300), "lz4": _bomb("lz4", 200), "zstd": _bomb("zstd", 300),
             "snappy": _bomb("snappy", 20)}
    assert all(len(b) <= 1048588 for b in bombs.values()), {c: len(b) for c, b in bombs.items()}
    b = broker_process()
    with RawConnection((b.host, b.port), timeout=60) as c:
        c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "bombs", "num_partitions": 4, "replication_factor": 1,
                                                       "assignments": [], "configs": []}],
                                            "timeout_ms": 10000, "validate_only": False})
        ok = record_batch([(1, b"k", b"warm", [])])
        for codec in range(5):                                   # warm up: every codec module imported
            warm = record_batch([(1, b"k", b"warm" * 100, [])], compression=codec)
            assert one(c.request(ApiKey.PRODUCE, 8, produce_body("bombs", 0, warm)))["error_code"] == NO_ERROR
        time.sleep(0.3)
        before = b.peak_rss_bytes()
        for codec, bomb in bombs.items():
            r = one(c.request(ApiKey.PRODUCE, 8, produce_body("bombs", 1, bomb)))
            assert r["error_code"] == (NO_ERROR if codec == "snappy" else MESSAGE_TOO_LARGE), (codec, r)
        # all four in one request, one partition each: inflated one after the other, never together
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                "topic_data": [{"name": "bombs", "partition_data": [{"index": i, "records": bomb}
                                                                   for i, bomb in enumerate(bombs.values())]}]}
        codes = [p["error_code"] for p in c.request(ApiKey.PRODUCE, 8, body)["responses"][0]["partition_responses"]]
        assert codes == [MESSAGE_TOO_LARGE, MESSAGE_TOO_LARGE, MESSAGE_TOO_LARGE, NO_ERROR]
        grown = b.peak_rss_bytes() - before
        print(f"decompression bombs (gzip 300 MiB, lz4 200 MiB, zstd 300 MiB, snappy 20 MiB inflated): broker peak "
              f"RSS +{grown / 2**20:.1f} MiB (inflation limit {limit / 2**20:.0f} MiB)")
        assert grown < 3 * limit, f"peak RSS grew by {grown / 2**20:.1f} MiB"
        assert one(c.request(ApiKey.PRODUCE, 8, produce_body("bombs", 0, ok)))["error_code"] == NO_ERROR
    assert b.stop() == 0


def test_a_stalled_partition_fsync_does_not_block_fetches_of_another(start_broker):
    """Appends (and their fsyncs) run on the broker's disk threads, not its event loop: while every fdatasync of
    one partition's log stalls for 3 s, a fetch of another partition on another connection is answered at once.
    (Not tightly timed: the bound is half the stall.)"""
    from seglog.faults import FaultPlan
    b = start_broker()
    b.node.create_topic("stalled", 1, config={"flush.messages": "1"})        # every append fdatasyncs
    b.node.create_topic("healthy", 1)
    with RawConnection(address(b)) as c:
        assert one(c.request(ApiKey.PRODUCE, 8, produce_body("healthy", 0, record_batch([(1, b"k", b"v", [])]))))[
            "error_code"] == NO_ERROR
    produced = {}

    def produce_stalled():
        with RawConnection(address(b), timeout=30) as c:
            t = time.monotonic()
            r = c.request(ApiKey.PRODUCE, 8, produce_body("stalled", 0, record_batch([(1, b"k", b"slow", [])]),
                                                          timeout_ms=30000))
            produced.update(code=one(r)["error_code"], seconds=time.monotonic() - t)

    stall = 3.0
    with FaultPlan().delay("fdatasync", stall, path="*/stalled-0/*") as plan:
        writer = threading.Thread(target=produce_stalled)
        writer.start()
        deadline = time.monotonic() + 10
        while not plan.fired and time.monotonic() < deadline:                 # the stall has begun
            time.sleep(0.01)
        assert plan.fired, "the stalled partition never reached its fdatasync"
        with RawConnection(address(b), timeout=30) as c:
            t = time.monotonic()
            r = c.request(ApiKey.FETCH, 11, fetch_body("healthy", 0, 0))
            fetch_seconds = time.monotonic() - t
            p = one(r, "responses", "partitions")
            assert p["error_code"] == NO_ERROR and p["records"]
        writer.join()
    assert produced["code"] == NO_ERROR and produced["seconds"] >= stall
    assert fetch_seconds < stall / 2, f"a fetch of a healthy partition took {fetch_seconds:.2f} s during the stall"


# -- shutdown, restart, kill -9 --------------------------------------------------------------------------------

def _marker(data_dir, topic, p):
    return os.path.join(data_dir, f"{topic}-{p}", ".clean-shutdown")


def test_clean_shutdown_writes_markers_and_restart_recovers_everything(start_broker, tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    data = tmp_path / "data"
    b = start_broker(data_dir=data)
    b.node.create_topic("keep", 3)
    prod = KafkaProducer(bootstrap_servers=b.bootstrap_servers, linger_ms=2)
    sent = {}
    futs = [(prod.send("keep", key=b"k%d" % (i % 9), value=b"v%d" % i, headers=[("i", b"%d" % i)],
                       timestamp_ms=1_700_000_000_000 + i), i) for i in range(3000)]
    prod.flush()
    for f, i in futs:
        md = f.get(10)
        sent[(md.partition, md.offset)] = i
    prod.close()
    kc = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id="keepers", enable_auto_commit=False)
    kc.commit({TopicPartition("keep", 0): OffsetAndMetadata(5, "meta", -1)})
    kc.close()
    for p in range(3):
        assert not os.path.exists(_marker(data, "keep", p)), "no marker while the broker runs"
    b.stop()
    for p in range(3):
        assert os.path.exists(_marker(data, "keep", p)), f"partition {p}: no clean-shutdown marker"

    b2 = start_broker(data_dir=data)
    for p in range(3):
        rec = b2.node.partition("keep", p).log.recovery
        assert rec.clean_shutdown and rec.segments_scanned == 0 and rec.bytes_truncated == 0
    kc = KafkaConsumer(bootstrap_servers=b2.bootstrap_servers, group_id="keepers", enable_auto_commit=False,
                       auto_offset_reset="earliest", consumer_timeout_ms=2000)
    assert kc.committed(TopicPartition("keep", 0)) == 5, "committed offsets survive the restart"
    kc.assign([TopicPartition("keep", p) for p in range(3)])
    kc.seek_to_beginning()
    got = {(m.partition, m.offset): (m.key, m.value, m.headers, m.timestamp) for m in kc}
    kc.close()
    assert got == {po: (b"k%d" % (i % 9), b"v%d" % i, [("i", b"%d" % i)], 1_700_000_000_000 + i)
                   for po, i in sent.items()}


def test_kill_minus_9_loses_no_acknowledged_record(broker_process, tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    data = tmp_path / "data"
    b = broker_process(data_dir=data)
    acked: dict[tuple[int, int], bytes] = {}
    failed = []
    stop = threading.Event()

    def report(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            failed.append(err)

    prod = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "acks": "all", "linger.ms": 1,
                        "enable.idempotence": True, "message.timeout.ms": 3000,
                        "reconnect.backoff.max.ms": 100, "topic.metadata.refresh.interval.ms": 500})

    def produce():
        i = 0
        while not stop.is_set():
            try:
                prod.produce("durable", b"value-%08d" % i, key=b"%d" % (i % 4), on_delivery=report)
                i += 1
            except BufferError:
                pass
            prod.poll(0 if i % 100 else 0.001)

    th = threading.Thread(target=produce, daemon=True)
    th.start()
    deadline = time.monotonic() + 20
    while len(acked) < 20_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(acked) >= 1000, "the producer got going"
    b.kill()                                              # -9, mid-stream
    stop.set()
    th.join(10)
    prod.flush(8)
    del prod                                              # stop its reconnect attempts
    assert acked
    markers = [f for f in os.listdir(data) if os.path.exists(os.path.join(data, f, ".clean-shutdown"))]
    assert markers == [], "a killed broker writes no clean-shutdown marker"

    b2 = broker_process(data_dir=data)
    from kafka import KafkaConsumer, TopicPartition
    kc = KafkaConsumer(bootstrap_servers=b2.bootstrap_servers, auto_offset_reset="earliest",
                       enable_auto_commit=False, consumer_timeout_ms=3000)
    parts = kc.partitions_for_topic("durable")
    kc.assign([TopicPartition("durable", p) for p in parts])
    got = {(m.partition, m.offset): m.value for m in kc}
    kc.close()
    missing = [po for po in acked if got.get(po) != acked[po]]
    print(f"kill -9 after {len(acked)} acknowledged records ({len(failed)} failed, {len(got)} on disk after restart)")
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged records lost or changed: {missing[:5]}"
    assert b2.stop() == 0


# -- fuzzing a live broker ---------------------------------------------------------------------------------------

def _valid_frames():
    """One well-formed frame of most APIs the broker speaks, as (api key, frame bytes with size prefix)."""
    c = RawConnection.__new__(RawConnection)
    c.client_id = "fuzz"
    batch = record_batch([(1_700_000_000_000, b"key", b"value", [("h", b"v")]), (1_700_000_000_001, None, None, [])])
    bodies = [
        (ApiKey.API_VERSIONS, 3, {"client_software_name": "fuzz", "client_software_version": "1"}),
        (ApiKey.API_VERSIONS, 0, {}),
        (ApiKey.METADATA, 8, {"topics": [{"name": "fuzz"}], "allow_auto_topic_creation": True}),
        (ApiKey.METADATA, 1, {"topics": None}),
        (ApiKey.PRODUCE, 8, produce_body("fuzz", 0, batch)),
        (ApiKey.PRODUCE, 3, produce_body("fuzz", 0, batch, acks=1)),
        (ApiKey.FETCH, 11, fetch_body("fuzz", 0, 0, max_wait_ms=10)),
        (ApiKey.FETCH, 4, fetch_body("fuzz", 0, 0, max_wait_ms=10)),
        (ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "topics": [
            {"name": "fuzz", "partitions": [{"partition_index": 0, "timestamp": -2}]}]}),
        (ApiKey.FIND_COORDINATOR, 2, {"key": "g", "key_type": 0}),
        (ApiKey.JOIN_GROUP, 5, {"group_id": "g", "session_timeout_ms": 6000, "rebalance_timeout_ms": 100,
                                "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                "protocols": [{"name": "range", "metadata": b"\x00\x01"}]}),
        (ApiKey.HEARTBEAT, 3, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}),
        (ApiKey.OFFSET_COMMIT, 7, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                                   "group_instance_id": None, "topics": [{"name": "fuzz", "partitions": [
                                       {"partition_index": 0, "committed_offset": 1,
                                        "committed_metadata": ""}]}]}),
        (ApiKey.OFFSET_FETCH, 5, {"group_id": "g", "topics": None}),
        (ApiKey.LIST_GROUPS, 2, {}),
        (ApiKey.DESCRIBE_GROUPS, 4, {"groups": ["g"], "include_authorized_operations": False}),
        (ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 1000}),
        # validate_only: a flipped bit in num_partitions is a valid request for thousands of partitions, which
        # a broker (Kafka too) takes minutes and thousands of file descriptors to create: not a bad frame
        (ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "fuzz2", "num_partitions": 2, "replication_factor": 1,
                                               "assignments": [], "configs": []}], "timeout_ms": 1000,
                                   "validate_only": True}),
        (ApiKey.DESCRIBE_CONFIGS, 3, {"resources": [{"resource_type": 2, "resource_name": "fuzz",
                                                     "configuration_keys": None}]}),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": -1, "topics": [
            {"topic": "fuzz", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
    ]
    return [c.frame(k, v, body)[1] for k, v, body in bodies]


VALID_FRAMES = None


def mutate_frame(draw, frame: bytes) -> bytes:
    """`frame` (size prefix included) after 1-4 drawn bit flips, byte sets, truncations, insertions and
    deletions; the size prefix made consistent again or not, as drawn."""
    frame = bytearray(frame)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete"]))
        if op == "flip" and len(frame) > 4:
            i = draw(st.integers(4, len(frame) - 1))
            frame[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and len(frame) > 4:
            i = draw(st.integers(4, len(frame) - 1))
            frame[i] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif op == "truncate":
            del frame[draw(st.integers(0, len(frame))):]
        elif op == "insert":
            i = draw(st.integers(4, max(4, len(frame))))
            frame[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and len(frame) > 5:
            i = draw(st.integers(4, len(frame) - 1))
            del frame[i:i + draw(st.integers(1, 8))]
    if draw(st.booleans()) and len(frame) >= 4:           # keep the size prefix consistent (body-level fuzz)
        frame[0:4] = struct.pack(">i", len(frame) - 4)
    return bytes(frame)


@st.composite
def mutated_frames(draw):
    global VALID_FRAMES
    if VALID_FRAMES is None:
        VALID_FRAMES = _valid_frames()
    return mutate_frame(draw, draw(st.sampled_from(VALID_FRAMES)))


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    import seglog
    with seglog.serve(tmp_path_factory.mktemp("fuzz-broker"), group_initial_rebalance_delay_ms=0,
                      socket_request_max_bytes=1 << 20) as b:
        b.node.create_topic("fuzz", 2)
        yield b


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(frame=mutated_frames())
def test_fuzz_mutated_frames_against_a_live_broker(fuzz_broker, frame):
    with RawConnection(address(fuzz_broker), timeout=5) as c:
        c.send_bytes(frame)
        c.sock.shutdown(socket.SHUT_WR)                   # no more bytes: a truncated frame ends here
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:                # read whatever comes until the broker closes
            try:
                if not c.sock.recv(65536):
                    break
            except (ConnectionResetError, socket.timeout):
                break
        else:
            raise AssertionError("the broker kept a connection open after its client's EOF")
    with RawConnection(address(fuzz_broker), timeout=5) as c:
        assert c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "after",
                                                  "client_software_version": "1"})["error_code"] == 0
        md = c.request(ApiKey.METADATA, 8, {"topics": [{"name": "fuzz"}], "allow_auto_topic_creation": False})
        assert md["topics"][0]["error_code"] == 0 and len(md["topics"][0]["partitions"]) == 2


def test_fuzz_broker_survived(fuzz_broker):
    """After the fuzz run: the broker thread is alive, the node open, and produce/fetch still work; the fuzz
    run both got answers and had connections closed on it."""
    assert fuzz_broker._thread.is_alive() and not fuzz_broker.node.closed
    m = fuzz_broker.metrics()
    assert m["connection_errors"] > 50 and m["requests_total"] > 600, m
    assert_serving(fuzz_broker, "fuzz")


# -- more protocol semantics on raw frames ----------------------------------------------------------------------

def test_metadata_topic_list_semantics_v1_and_later(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 2)
    with RawConnection(address(seglog_broker)) as c:
        for v in (1, 4, 8):                                # null asks for every topic, an empty array for none
            assert topic in {t["name"] for t in c.request(ApiKey.METADATA, v, {"topics": None})["topics"]}
            assert c.request(ApiKey.METADATA, v, {"topics": []})["topics"] == []


def test_metadata_v0_empty_topic_array_means_all_topics(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 2)
    with RawConnection(address(seglog_broker)) as c:
        names = {t["name"] for t in c.request(ApiKey.METADATA, 0, {"topics": []})["topics"]}
    assert topic in names


def test_idempotent_produce_on_raw_frames(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    with RawConnection(address(seglog_broker)) as c:
        r = c.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert r["error_code"] == 0 and r["producer_id"] >= 0
        pid, epoch = r["producer_id"], r["producer_epoch"]

        def send(seq, values):
            batch = record_batch([(1, None, v, []) for v in values], producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq)
            return one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, batch)))

        assert (send(0, [b"a", b"b"])["base_offset"]) == 0
        again = send(0, [b"a", b"b"])                    # a retry of the same batch: acknowledged, not rewritten
        assert (again["error_code"], again["base_offset"]) == (0, 0)
        gap = send(5, [b"x"])
        assert gap["error_code"] == 45                   # OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(2, [b"c"])["base_offset"] == 2
    assert [r.value for r in seglog_broker.node.partition(topic, 0).log.records()] == [b"a", b"b", b"c"]


def test_invalid_batches_on_raw_frames(seglog_broker, topic_name):
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    good = record_batch([(1, None, b"v", [])])
    two = good + record_batch([(2, None, b"w", [])])
    control = bytearray(good)
    control[22] |= 0x20                                    # attributes bit 5: control batch
    from kafka.record.util import calc_crc32c
    with RawConnection(address(seglog_broker)) as c:
        r = one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, two)))
        assert r["error_code"] == 87, "v3+ produce carries exactly one batch: INVALID_RECORD"
        control[17:21] = struct.pack(">I", calc_crc32c(bytes(control[21:])))    # a valid CRC again
        r = one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, bytes(control))))
        assert r["error_code"] == 87, "clients may not write control batches"
        old = bytearray(good)
        old[16] = 1                                        # magic 1
        r = one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, bytes(old))))
        assert r["error_code"] != 0
        r = one(c.request(ApiKey.PRODUCE, 8, produce_body(topic, 0, good[:40])))
        assert r["error_code"] in (CORRUPT_MESSAGE, 87)
    assert seglog_broker.node.partition(topic, 0).log_end_offset == 0


def test_group_error_codes_on_raw_frames(seglog_broker, topic_name):
    group = topic_name()
    topic = topic_name()
    seglog_broker.node.create_topic(topic, 1)
    with RawConnection(address(seglog_broker)) as c:
        r = c.request(ApiKey.HEARTBEAT, 3, {"group_id": group, "generation_id": 1, "member_id": "ghost",
                                            "group_instance_id": None})
        assert r["error_code"] in (16, 25)                 # a group nobody joined: unknown member
        join = {"group_id": group, "session_timeout_ms": 10, "rebalance_timeout_ms": 1000, "member_id": "",
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}]}
        assert c.request(ApiKey.JOIN_GROUP, 5, join)["error_code"] == 26      # INVALID_SESSION_TIMEOUT
        join["session_timeout_ms"] = 6000
        r = c.request(ApiKey.JOIN_GROUP, 5, join)
        assert r["error_code"] == 79 and r["member_id"]                         # MEMBER_ID_REQUIRED (v4+)
        join["member_id"] = r["member_id"]
        r = c.request(ApiKey.JOIN_GROUP, 5, join)
        assert r["error_code"] == 0 and r["leader"] == r["member_id"] and r["generation_id"] >= 1
        gen, member = r["generation_id"], r["member_id"]
        s = c.request(ApiKey.SYNC_GROUP, 3, {"group_id": group, "generation_id": gen, "member_id": member,
                                             "group_instance_id": None,
                                             "assignments": [{"member_id": member, "assignment": b"\x00\x01"}]})
        assert s["error_code"] == 0 and s["assignment"] == b"\x00\x01"
        commit = {"group_id": group, "generation_id_or_member_epoch": gen + 7, "member_id": member,
                  "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                      {"partition_index": 0, "committed_offset": 3, "committed_metadata": "m"}]}]}
        r = c.request(ApiKey.OFFSET_COMMIT, 7, commit)
        assert r["topics"][0]["partitions"][0]["error_code"] == 22              # ILLEGAL_GENERATION
        commit["generation_id_or_member_epoch"] = gen
        assert c.request(ApiKey.OFFSET_COMMIT, 7, commit)["topics"][0]["partitions"][0]["error_code"] == 0
        f = c.request(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
        assert f["error_code"] == 0
        assert [(t["name"], p["partition_index"], p["committed_offset"], p["metadata"])
                for t in f["topics"] for p in t["partitions"]] == [(topic, 0, 3, "m")]
        assert c.request(ApiKey.HEARTBEAT, 3, {"group_id": group, "generation_id": gen, "member_id": member,
                                               "group_instance_id": None})["error_code"] == 0
        assert c.request(ApiKey.LEAVE_GROUP, 1, {"group_id": group, "member_id": member})["error_code"] == 0
        r = c.request(ApiKey.FIND_COORDINATOR, 2, {"key": "txn", "key_type": 1})      # a transaction coordinator
        assert (r["error_code"], r["node_id"]) == (0, seglog_broker.node.config.broker_id)
        r = c.request(ApiKey.FIND_COORDINATOR, 2, {"key": "txn", "key_type": 7})      # no such key type
        assert r["error_code"] != 0
