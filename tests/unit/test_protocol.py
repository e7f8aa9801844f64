"""seglog.protocol: round trips of every API/version in both directions, framing, external chunks, errors.

The sample generator here (random bodies drawn from the schemas) is shared with the kafka-python cross-check
and the fuzz tests (``from test_protocol import ...``).
"""

import random
import struct
import uuid
from array import array

import pytest

from seglog import errors
from seglog.protocol import (MAX_REQUEST_BYTES, SUPPORTED_VERSIONS, ApiKey, RequestHeader, api_versions_body,
                             api_versions_fallback, decode_request, decode_response, encode_request,
                             encode_response, frame_size)
from seglog.protocol.compiler import compile_message
from seglog.protocol.registry import api
from seglog.protocol.schema import NEVER_FLEXIBLE, array as array_field, field, struct as struct_field

# --- samples drawn from the schemas -------------------------------------------------------------------------

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINT_BITS = {"uint16": 16, "uint32": 32}
_TEXT = "abcxyz-_.0123456789é€😀"


def sample_primitive(t, rng):
    if t == "bool":
        return rng.random() < 0.5
    if t in _INT_BITS:
        low, high = -(1 << _INT_BITS[t] - 1), (1 << _INT_BITS[t] - 1) - 1
        return rng.choice((-1, 0, low, high, rng.randint(low, high)))
    if t in _UINT_BITS:
        return rng.randint(0, (1 << _UINT_BITS[t]) - 1)
    if t == "float64":
        return rng.uniform(-1e9, 1e9)
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if t == "string":
        return "".join(rng.choice(_TEXT) for _ in range(rng.randint(0, 12)))
    assert t in ("bytes", "records"), t
    return rng.randbytes(rng.randint(0, 40))


def sample_value(f, version, rng):
    if f.nullable_at(version) and rng.random() < 0.25:
        return None
    if f.type == "{}":
        return sample_struct(f.fields, version, rng)
    if f.type.startswith("[]"):
        make = (lambda: sample_struct(f.fields, version, rng)) if f.element == "[]" else (
            lambda: sample_primitive(f.element, rng))
        return [make() for _ in range(rng.randint(0, 3))]
    return sample_primitive(f.type, rng)


def sample_struct(fields, version, rng):
    """A random body holding exactly the fields present at ``version``."""
    return {f.name: sample_value(f, version, rng) for f in fields if f.present(version)}


def complete(fields, version, body):
    """What a decoder returns for ``body``: every schema field, absent ones at their defaults."""
    out = {}
    for f in fields:
        if not f.present(version):
            out[f.name] = f.default_value()
            continue
        value = body[f.name]
        if value is not None and f.type == "{}":
            value = complete(f.fields, version, value)
        elif value is not None and f.type == "[]":
            value = [complete(f.fields, version, item) for item in value]
        out[f.name] = value
    return out


def plain(value):
    """Decoded values with memoryviews turned into bytes, for comparisons."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, memoryview):
        return value.tobytes()
    return value


def schema(api_key, response):
    spec = api(api_key)
    return spec.response if response else spec.request


ALL_VERSIONS = [(k, v) for k, (lo, hi) in SUPPORTED_VERSIONS.items() for v in range(lo, hi + 1)]


def ids(param):
    return f"{ApiKey(param[0]).name}-v{param[1]}"


def one_frame(parts):
    assert len(parts) == 1 and isinstance(parts[0], bytes)
    size = struct.unpack_from(">i", parts[0])[0]
    assert size == len(parts[0]) - 4
    return parts[0][4:]


def request_frame(api_key, version, body, correlation_id=7, client_id="test-client"):
    return one_frame(encode_request(RequestHeader(api_key, version, correlation_id, client_id), body))


# --- round trips ----------------------------------------------------------------------------------------------

def test_supported_versions_are_the_advertised_table():
    assert dict(SUPPORTED_VERSIONS) == {
        0: (0, 10), 1: (4, 16), 2: (1, 8), 3: (0, 12), 8: (2, 9), 9: (1, 9), 10: (0, 4), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 3), 19: (2, 7), 20: (1, 6), 21: (0, 2),
        22: (0, 4), 23: (2, 4), 24: (0, 4), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 29: (0, 3), 30: (0, 3),
        31: (0, 3), 32: (0, 4), 33: (0, 2), 34: (0, 2), 35: (0, 4), 36: (0, 2), 37: (0, 3), 38: (0, 3), 39: (0, 2),
        40: (0, 2), 41: (0, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1),
        45: (0, 0), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 60: (0, 1), 61: (0, 0),
        65: (0, 0), 66: (0, 0), 68: (0, 1), 69: (0, 1)}
    assert sorted(SUPPORTED_VERSIONS) == sorted(ApiKey)
    flexible_from = {0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3,
                     17: NEVER_FLEXIBLE, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 24: 3, 25: 3, 26: 3, 27: 1, 28: 3,
                     29: 2, 30: 2, 31: 2, 32: 4, 33: 2, 34: 2, 35: 2, 36: 2, 37: 2, 38: 2, 39: 2, 40: 2, 41: 2, 42: 2,
                     43: 2, 44: 1, 45: 0, 46: 0,
                     47: NEVER_FLEXIBLE, 48: 1, 49: 1, 50: 0, 51: 0, 60: 0, 61: 0, 65: 0, 66: 0, 68: 0, 69: 0}
    assert {k: api(k).flexible for k in SUPPORTED_VERSIONS} == flexible_from


@pytest.mark.parametrize("api_version", ALL_VERSIONS, ids=ids)
def test_request_round_trip(api_version):
    api_key, version = api_version
    fields = schema(api_key, False)
    for seed in range(6):
        body = sample_struct(fields, version, random.Random(seed))
        frame = request_frame(api_key, version, body, correlation_id=seed - 3)
        header, decoded = decode_request(frame)
        assert header == RequestHeader(api_key, version, seed - 3, "test-client")
        assert plain(decoded) == complete(fields, version, body)
        assert request_frame(api_key, version, decoded, correlation_id=seed - 3) == frame


@pytest.mark.parametrize("api_version", ALL_VERSIONS, ids=ids)
def test_response_round_trip(api_version):
    api_key, version = api_version
    fields = schema(api_key, True)
    for seed in range(6):
        body = sample_struct(fields, version, random.Random(seed))
        header = RequestHeader(api_key, version, 1000 + seed, None)
        frame = one_frame(encode_response(header, body))
        assert struct.unpack_from(">i", frame)[0] == 1000 + seed
        decoded = decode_response(header, frame)
        assert plain(decoded) == complete(fields, version, body)
        assert one_frame(encode_response(header, decoded)) == frame


def test_missing_fields_take_kafka_defaults():
    header = RequestHeader(ApiKey.PRODUCE, 8, 1)
    frame = one_frame(encode_response(header, {"responses": [{"name": "t", "partition_responses": [{"index": 2}]}]}))
    assert decode_response(header, frame) == {
        "responses": [{"name": "t", "partition_responses": [{
            "index": 2, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": -1,
            "record_errors": [], "error_message": None,
            "current_leader": {"leader_id": -1, "leader_epoch": -1}}]}],     # v10+ fields: at their defaults
        "throttle_time_ms": 0, "node_endpoints": []}
    _, fetch = decode_request(request_frame(ApiKey.FETCH, 4, {"topics": [{"topic": "t", "partitions": [{}]}]}))
    assert fetch["replica_id"] == -1 and fetch["max_bytes"] == 0x7FFFFFFF
    assert fetch["session_epoch"] == -1 and fetch["session_id"] == 0 and fetch["rack_id"] == ""
    assert fetch["forgotten_topics_data"] == []             # v7+ field, reported at its default for v4
    assert fetch["topics"][0]["partitions"][0]["current_leader_epoch"] == -1


def test_unknown_body_keys_are_ignored():
    header = RequestHeader(ApiKey.HEARTBEAT, 1, 1)
    assert one_frame(encode_response(header, {"error_code": 27, "extra": object()})) == \
        one_frame(encode_response(header, {"error_code": 27}))


def test_produce_v8_request_layout_is_kafkas():
    frame = request_frame(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                                                "topic_data": [{"name": "t", "partition_data": [
                                                    {"index": 3, "records": b"BATCH"}]}]}, 9, "c")
    assert frame == (b"\x00\x00\x00\x08\x00\x00\x00\x09\x00\x01c"     # header v1
                     b"\xff\xff\xff\xff\x00\x00\x75\x30"               # null transactional_id, acks, timeout
                     b"\x00\x00\x00\x01\x00\x01t"                      # one topic "t"
                     b"\x00\x00\x00\x01\x00\x00\x00\x03\x00\x00\x00\x05BATCH")


def test_produce_v10_response_layout_is_kafkas():
    """KIP-951 as ProduceResponse.json lays it out: CurrentLeader is tag 0 of a partition answer (a struct with
    its own empty tag section), NodeEndpoints tag 0 of the response; both left out at their defaults."""
    header = RequestHeader(ApiKey.PRODUCE, 10, 9)
    partition = {"index": 2, "error_code": 6, "base_offset": -1, "current_leader": {"leader_id": 1, "leader_epoch": 5}}
    body = {"responses": [{"name": "t", "partition_responses": [partition]}], "throttle_time_ms": 0,
            "node_endpoints": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]}
    minus_one = b"\xff" * 8
    kafkas = (b"\x00\x00\x00\x09\x00"                                 # correlation id, header tags (v1)
              b"\x02\x02t\x02"                                         # one topic "t", one partition
              b"\x00\x00\x00\x02\x00\x06" + minus_one * 3 +            # index, NOT_LEADER_OR_FOLLOWER, offsets
              b"\x01\x00"                                              # no record errors, null message
              b"\x01\x00\x09\x00\x00\x00\x01\x00\x00\x00\x05\x00"      # tag 0, 9 bytes: leader 1, epoch 5
              b"\x00"                                                   # topic tags
              b"\x00\x00\x00\x00"                                       # throttle time
              b"\x01\x00\x0d\x02\x00\x00\x00\x01\x02h\x00\x00\x23\x84\x00\x00")  # tag 0: one node, rack null
    assert one_frame(encode_response(header, body)) == kafkas
    assert decode_response(header, kafkas) == {**body, "responses": [{"name": "t", "partition_responses": [
        {**partition, "log_append_time_ms": -1, "log_start_offset": -1, "record_errors": [], "error_message": None}]}]}
    partition["error_code"], partition["current_leader"] = 0, {"leader_id": -1, "leader_epoch": -1}
    body["node_endpoints"] = []
    untagged = (b"\x00\x00\x00\x09\x00\x02\x02t\x02\x00\x00\x00\x02\x00\x00" + minus_one * 3
                + b"\x01\x00\x00\x00\x00\x00\x00\x00\x00")        # empty tag sections: v9's bytes
    assert one_frame(encode_response(header, body)) == untagged
    assert one_frame(encode_response(RequestHeader(ApiKey.PRODUCE, 9, 9), body)) == untagged


def test_delegation_token_layouts_are_kafkas():
    """Kafka's *DelegationToken*.json, which kafka-python does not implement: Create v3 (flexible, the owner and
    requester principals), Describe v3 with a null owner list, Renew v1 (classic)."""
    create = request_frame(38, 3, {"owner_principal_type": "User", "owner_principal_name": "bob",
                                   "renewers": [{"principal_type": "User", "principal_name": "carol"}],
                                   "max_lifetime_ms": -1}, 9, "c")
    assert create == (b"\x00\x26\x00\x03\x00\x00\x00\x09\x00\x01c\x00"       # header v2
                      b"\x05User\x04bob"                                       # owner type and name (v3+)
                      b"\x02\x05User\x06carol\x00"                              # one renewer
                      + b"\xff" * 8 + b"\x00")                                 # max lifetime, tags
    header = RequestHeader(38, 3, 9)
    answer = {"error_code": 61, "principal_type": "User", "principal_name": "bob",
              "token_requester_principal_type": "User", "token_requester_principal_name": "alice",
              "issue_timestamp_ms": -1, "expiry_timestamp_ms": -1, "max_timestamp_ms": -1, "token_id": "",
              "hmac": b"", "throttle_time_ms": 0}
    wire = (b"\x00\x00\x00\x09\x00" b"\x00\x3d" b"\x05User\x04bob\x05User\x06alice" + b"\xff" * 24
            + b"\x01\x01" b"\x00\x00\x00\x00\x00")                          # empty id and hmac, throttle, tags
    assert one_frame(encode_response(header, answer)) == wire and decode_response(header, wire) == answer
    assert request_frame(41, 3, {"owners": None}, 9, "c") == b"\x00\x29\x00\x03\x00\x00\x00\x09\x00\x01c\x00\x00\x00"
    renew = request_frame(39, 1, {"hmac": b"\x01\x02", "renew_period_ms": 3600000}, 9, "c")
    assert renew == b"\x00\x27\x00\x01\x00\x00\x00\x09\x00\x01c" b"\x00\x00\x00\x02\x01\x02" b"\x00\x00\x00\x00\x00\x36\xee\x80"
    header = RequestHeader(39, 1, 9)
    wire = b"\x00\x00\x00\x09" b"\x00\x40" + b"\xff" * 8 + b"\x00\x00\x00\x00"
    assert one_frame(encode_response(header, {"error_code": 64, "expiry_timestamp_ms": -1})) == wire


# --- records: zero copy and external chunks ----------------------------------------------------------------------

class FileSlice:
    """Stands for a (file, offset, count) the broker would sendfile: only its length is known to the codec."""

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)


def materialize(parts):
    return b"".join(p.data if isinstance(p, FileSlice) else p for p in parts)


def test_decoded_records_are_zero_copy_views_of_the_frame():
    records = [bytes([i]) * 1000 for i in range(3)]
    frame = bytearray(request_frame(ApiKey.PRODUCE, 7, {"acks": 1, "topic_data": [
        {"name": "t", "partition_data": [{"index": i, "records": r} for i, r in enumerate(records)]}]}))
    _, body = decode_request(frame)
    views = [p["records"] for p in body["topic_data"][0]["partition_data"]]
    assert all(isinstance(v, memoryview) and v.obj is frame for v in views)
    assert [v.tobytes() for v in views] == records
    frame[frame.index(b"\x01" * 1000)] = 0x7F                     # a view sees changes to the frame: no copy
    assert views[1][0] == 0x7F
    receive_buffer = bytearray(b"\x00" * 7) + frame + bytearray(5)  # a broker's reusable receive buffer
    _, body = decode_request(memoryview(receive_buffer)[7:7 + len(frame)])
    assert body["topic_data"][0]["partition_data"][2]["records"].obj is receive_buffer


def fetch_body(records):
    return {"session_id": 5, "responses": [{"topic": "t", "partitions": [
        {"partition_index": i, "high_watermark": 100 + i, "records": r} for i, r in enumerate(records)]}]}


def test_external_chunks_split_the_frame_around_them():
    header = RequestHeader(ApiKey.FETCH, 11, 42)
    data = [b"A" * 300, b"", b"C" * 17, b"D" * 5]
    chunks = [FileSlice(data[0]), FileSlice(data[1]), data[2], None, FileSlice(data[3])]
    parts = encode_response(header, fetch_body(chunks))
    assert [type(p) for p in parts] == [bytes, FileSlice, bytes, FileSlice, bytes, FileSlice]   # records end it
    assert parts[1] is chunks[0] and parts[3] is chunks[1] and parts[5] is chunks[4]
    inline = one_frame(encode_response(header, fetch_body([data[0], data[1], data[2], None, data[3]])))
    wire = materialize(parts)
    assert wire[4:] == inline and struct.unpack_from(">i", wire)[0] == len(inline)
    decoded = decode_response(header, inline)["responses"][0]["partitions"]
    assert [plain(p["records"]) for p in decoded] == [data[0], data[1], data[2], None, data[3]]


def test_external_chunk_in_a_produce_request():
    header = RequestHeader(ApiKey.PRODUCE, 8, 1, "cli")
    body = {"acks": -1, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": FileSlice(b"xyz")}]}]}
    parts = encode_request(header, body)
    assert len(parts) == 2 and parts[1] is body["topic_data"][0]["partition_data"][0]["records"]   # records end it
    got_header, decoded = decode_request(materialize(parts)[4:])
    assert got_header == header
    assert decoded["topic_data"][0]["partition_data"][0]["records"] == b"xyz"


def test_records_accept_any_buffer_and_reject_other_objects():
    header = RequestHeader(ApiKey.FETCH, 4, 1)
    ints = array("i", [1, 2, 3])
    for value in (ints.tobytes(), bytearray(ints.tobytes()), memoryview(ints), memoryview(ints.tobytes())):
        frame = one_frame(encode_response(header, fetch_body([value])))
        assert decode_response(header, frame)["responses"][0]["partitions"][0]["records"] == ints.tobytes()
    with pytest.raises(errors.InvalidArgumentError):
        encode_response(header, fetch_body([12345]))


# --- framing ----------------------------------------------------------------------------------------------------

def test_frame_size_checks_the_limit_before_allocation():
    assert MAX_REQUEST_BYTES == 100 * 1024 * 1024
    assert frame_size(struct.pack(">i", MAX_REQUEST_BYTES)) == MAX_REQUEST_BYTES
    assert frame_size(b"\x00\x00\x00\x00") == 0
    for bad in (MAX_REQUEST_BYTES + 1, -1, -(1 << 31), (1 << 31) - 1):
        with pytest.raises(errors.InvalidRequestError):
            frame_size(struct.pack(">i", bad))
    with pytest.raises(errors.InvalidRequestError):
        frame_size(struct.pack(">i", 1001), max_bytes=1000)
    with pytest.raises(errors.InvalidRequestError):
        frame_size(b"\x00\x01")


def test_truncated_header_is_invalid():
    frame = request_frame(ApiKey.METADATA, 1, {"topics": None}, correlation_id=77, client_id="abcdef")
    assert len(frame) == 20 and decode_request(frame)[0].client_id == "abcdef"
    for cut in range(len(frame)):
        with pytest.raises(errors.InvalidRequestError) as info:
            decode_request(frame[:cut])
        assert not isinstance(info.value, errors.UnsupportedVersionError)
        if cut < 8:
            assert info.value.header is None
        else:                                                     # fixed part readable: reported for logging
            assert info.value.header[:3] == (ApiKey.METADATA, 1, 77)


@pytest.mark.parametrize("api_key,version", [(17, 2), (999, 0), (-1, 0), (0, 11), (1, 3), (1, 17), (2, 0), (2, 9), (3, 13),
                                                     (18, 4)])
def test_unsupported_api_or_version_still_gives_the_header(api_key, version):
    frame = struct.pack(">hhih", api_key, version, 123456, 3) + b"cli" + b"\x00garbage"
    with pytest.raises(errors.UnsupportedVersionError) as info:
        decode_request(frame)
    assert info.value.header == RequestHeader(api_key, version, 123456, "cli")
    assert info.value.code == 35


def test_unsupported_api_versions_gets_the_v0_fallback():
    # kafka-python 3.0 opens with ApiVersions v4: request header v2, compact strings, tagged fields
    frame = struct.pack(">hhih", 18, 4, 31, 5) + b"kafka" + b"\x00" + b"\x0dkafka-python\x073.0.12\x00"
    with pytest.raises(errors.UnsupportedVersionError) as info:
        decode_request(frame)
    header = info.value.header
    assert header == RequestHeader(18, 4, 31, "kafka")
    wire = one_frame(api_versions_fallback(header))
    ranges = sorted(SUPPORTED_VERSIONS.items())
    assert wire == (struct.pack(">ihi", 31, 35, len(ranges))
                    + b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in ranges))
    # our client asking v3 and getting the fallback decodes it as v0, like Kafka's clients
    body = decode_response(RequestHeader(18, 3, 31), wire)
    assert body["error_code"] == 35
    assert {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]} == dict(SUPPORTED_VERSIONS)


def test_api_versions_v3_uses_flexible_request_and_v0_response_header():
    header = RequestHeader(ApiKey.API_VERSIONS, 3, 5, "rdkafka")
    frame = request_frame(18, 3, {"client_software_name": "librdkafka", "client_software_version": "2.16.1"}, 5,
                          "rdkafka")
    assert frame == struct.pack(">hhih", 18, 3, 5, 7) + b"rdkafka\x00\x0blibrdkafka\x072.16.1\x00"
    assert decode_request(frame)[1]["client_software_name"] == "librdkafka"
    response = one_frame(encode_response(header, api_versions_body()))
    assert response[:6] == struct.pack(">ih", 5, 0)               # correlation id then error code: no header tags
    assert response[6] == len(SUPPORTED_VERSIONS) + 1              # compact array
    body = decode_response(header, response)
    assert body["api_keys"] == api_versions_body()["api_keys"] and body["finalized_features_epoch"] == -1


def test_request_header_v2_tagged_fields_are_skipped():
    body = b"\x03ab\x03cd\x00"
    plain_frame = struct.pack(">hhih", 18, 3, 1, -1) + b"\x00" + body
    tagged_frame = struct.pack(">hhih", 18, 3, 1, -1) + b"\x02\x00\x01x\x05\x00" + body
    assert decode_request(plain_frame) == decode_request(tagged_frame)
    assert decode_request(plain_frame)[0].client_id is None


def test_tagged_fields_round_trip_and_unknown_tags_are_skipped():
    header = RequestHeader(ApiKey.API_VERSIONS, 3, 9)
    body = {"api_keys": [], "supported_features": [{"name": "metadata.version", "min_version": 1, "max_version": 20}],
            "finalized_features_epoch": 77, "zk_migration_ready": True}
    decoded = decode_response(header, one_frame(encode_response(header, body)))
    assert decoded["supported_features"] == body["supported_features"]
    assert decoded["finalized_features_epoch"] == 77 and decoded["zk_migration_ready"] is True
    assert decoded["finalized_features"] == []
    default = one_frame(encode_response(header, {"api_keys": []}))
    assert len(default) == 4 + 2 + 1 + 4 + 1 and default.endswith(b"\x00")   # defaults: no tagged field written
    frame = one_frame(encode_response(header, {"api_keys": [], "zk_migration_ready": True}))
    assert frame.endswith(b"\x01\x03\x01\x01")                    # 1 tag: tag 3, size 1, true
    prefix = frame[:-4]
    extended = prefix + b"\x03\x07\x02zz\x03\x01\x01\x09\x00"         # unknown tags 7 and 9 around tag 3
    assert decode_response(header, extended) == decode_response(header, frame)
    for bad in (b"\x01\x03\x02\x01\x00",                              # tag 3 says 2 bytes, a bool is 1
                b"\x01\x03\x05\x01",                                  # tag 3 says 5 bytes, 1 left
                b"\x02\x03\x01\x01",                                  # 2 tags announced, 1 present
                b"\x01\x83\x80\x80\x80\x80\x01\x00"):                     # varint longer than 5 bytes
        with pytest.raises(errors.InvalidRequestError):
            decode_response(header, prefix + bad)


def test_trailing_bytes_are_ignored_in_requests_only():
    """Kafka's brokers ignore bytes after a request body, and librdkafka sends some (see below)."""
    frame = request_frame(ApiKey.HEARTBEAT, 0, {"group_id": "g", "member_id": "m"})
    assert decode_request(frame + b"\x00")[1]["member_id"] == "m"
    header = RequestHeader(ApiKey.HEARTBEAT, 0, 8)
    response = one_frame(encode_response(header, {}))
    with pytest.raises(errors.InvalidRequestError):
        decode_response(header, response + b"\x00")
    with pytest.raises(errors.InvalidRequestError):
        decode_response(header._replace(correlation_id=9), response)


def test_librdkafka_metadata_request_for_all_topics():
    """librdkafka 2.x asks for all topics at Metadata v9+ with its 4-byte array-count placeholder left in place
    (00 00 00 00: a null compact array and three stray bytes), then allow_auto_topic_creation true; Kafka reads
    the null array and the bytes after it as the booleans, and ignores the rest."""
    frame = bytes.fromhex("0003000c00000003000772646b61666b61" "00" "00000000" "01" "00" "00")
    header, body = decode_request(frame)
    assert header == RequestHeader(ApiKey.METADATA, 12, 3, "rdkafka")
    assert body["topics"] is None and body["allow_auto_topic_creation"] is False


def test_lengths_are_checked_before_allocating():
    head = struct.pack(">hhih", ApiKey.METADATA, 1, 1, -1)
    for count in (0x7FFFFFFF, 1 << 20, 2):                      # each topic needs at least 2 bytes
        with pytest.raises(errors.InvalidRequestError, match="cannot fit"):
            decode_request(head + struct.pack(">i", count) + b"\x00\x01")
    with pytest.raises(errors.InvalidRequestError, match="exceeds"):
        decode_request(head + struct.pack(">ih", 1, 0x7FFF) + b"x")
    with pytest.raises(errors.InvalidRequestError, match="invalid array length"):
        decode_request(head + struct.pack(">i", -2))
    with pytest.raises(errors.InvalidRequestError, match="invalid array length"):
        decode_request(struct.pack(">hhih", ApiKey.METADATA, 0, 1, -1) + struct.pack(">i", -1))   # not nullable in v0
    assert decode_request(head + struct.pack(">i", -1))[1]["topics"] is None                    # nullable from v1


def test_bad_utf8_is_invalid():
    frame = struct.pack(">hhih", ApiKey.FIND_COORDINATOR, 0, 1, -1) + struct.pack(">h", 2) + b"\xc3\x28"
    with pytest.raises(errors.InvalidRequestError):
        decode_request(frame)
    with pytest.raises(errors.InvalidRequestError):
        decode_request(struct.pack(">hhih", ApiKey.FIND_COORDINATOR, 0, 1, 2) + b"\xff\xfe" + b"\x00\x00")


def test_encoding_errors_name_the_message():
    with pytest.raises(errors.InvalidArgumentError, match="PRODUCE v8"):
        encode_request(RequestHeader(ApiKey.PRODUCE, 8, 1), {"acks": 1 << 20})
    with pytest.raises(errors.InvalidArgumentError):
        encode_response(RequestHeader(ApiKey.METADATA, 8, 1), {"topics": [{"name": None}]})
    with pytest.raises(errors.InvalidArgumentError):
        encode_request(RequestHeader(ApiKey.HEARTBEAT, 0, 1, "x" * 40000), {})      # client_id over int16
    with pytest.raises(errors.InvalidArgumentError):
        encode_response(RequestHeader(ApiKey.HEARTBEAT, 0, 1 << 31), {})            # correlation id over int32
    with pytest.raises(errors.UnsupportedVersionError):
        encode_response(RequestHeader(ApiKey.PRODUCE, 11, 1), {})
    with pytest.raises(errors.UnsupportedVersionError):
        encode_request(RequestHeader(99, 0, 1), {})


# --- the compiler on types the supported versions do not use ------------------------------------------------------

EVERY_TYPE = (
    field("flag", "bool"), field("i8", "int8"), field("u16", "uint16"), field("u32", "uint32"),
    field("f64", "float64"), field("id", "uuid"), field("ids", "[]uuid"), field("names", "[]string"),
    field("maybe_name", "string", nullable="0+"), field("blob", "bytes", nullable="0+"),
    field("records", "records", nullable="0+"), field("longs", "[]int64", nullable="0+"),
    struct_field("leader", field("leader_id", "int32", default=-1), field("epoch", "int32")),
    array_field("items", field("key", "string"), field("value", "bytes"), nullable="0+"),
    array_field("tagged_items", field("k", "int16"), tag=0),
    struct_field("tagged_struct", field("x", "int64", default=-1), tag=5),
    field("tagged_uuid", "uuid", tag=2),
)


@pytest.mark.parametrize("flexible", [False, True])
def test_compiler_covers_every_type(flexible):
    fields = EVERY_TYPE if flexible else tuple(f for f in EVERY_TYPE if f.tag is None)
    codec = compile_message(fields, 0, flexible, "EveryType")
    for seed in range(20):
        body = sample_struct(fields, 0, random.Random(seed))
        out = []
        assert codec.encode(body, out) is False
        wire = b"".join(out)
        decoded, end = codec.decode(memoryview(wire), 0)
        assert end == len(wire)
        assert plain(decoded) == complete(fields, 0, body)
    empty = []
    codec.encode({}, empty)
    decoded, _ = codec.decode(memoryview(b"".join(empty)), 0)
    assert decoded["leader"] == {"leader_id": -1, "epoch": 0} and decoded["id"] == uuid.UUID(int=0)
    if flexible:
        assert decoded["tagged_struct"] == {"x": -1} and decoded["tagged_items"] == []
        assert b"".join(empty).endswith(b"\x00")                  # defaults: no tagged field written


def test_unsigned_varints():
    from seglog.protocol.wire import read_uvarint, uvarint
    cases = {0: b"\x00", 1: b"\x01", 127: b"\x7f", 128: b"\x80\x01", 300: b"\xac\x02", 16384: b"\x80\x80\x01",
             (1 << 32) - 1: b"\xff\xff\xff\xff\x0f"}
    for value, wire in cases.items():
        assert uvarint(value) == wire
        assert read_uvarint(memoryview(b"\xaa" + wire + b"\xbb"), 1) == (value, 1 + len(wire))
    for bad in (b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80\x80\x01"):
        with pytest.raises(errors.InvalidRequestError):
            read_uvarint(memoryview(bad), 0)


# --- the blocking client's reads -------------------------------------------------------------------------------

def test_client_reads_a_frame_delivered_in_small_pieces_without_copying_it():
    """A response split over many small sends is read whole into one buffer; what is handed out is a view of
    it (no copy), and each read has its own buffer, so an earlier response's views stay intact."""
    import socket
    import threading

    from seglog.client import _recv_exactly

    first, second = bytes(range(256)) * 40, b"second response"
    a, b = socket.socketpair()

    def send_in_pieces():
        data = first + second
        for i in range(0, len(data), 7):
            a.sendall(data[i:i + 7])

    t = threading.Thread(target=send_in_pieces)
    t.start()
    try:
        b.settimeout(10)
        got = _recv_exactly(b, len(first))
        again = _recv_exactly(b, len(second))
    finally:
        t.join(10)
    assert isinstance(got, memoryview) and got == first and again == second
    assert got.obj is not again.obj
    a.close()
    with pytest.raises(ConnectionResetError):
        _recv_exactly(b, 1)
    b.close()
