"""Cross-check seglog.protocol against kafka-python 3.0, an independent implementation of the same protocol.

For every API/version both speak, in both directions: random bodies encoded by seglog decode in kafka-python
to the same values, kafka-python's encoding of the same values is byte-for-byte seglog's, and seglog decodes
it back. kafka-python ships two codecs: the JSON-schema ``ApiMessage`` classes and the older hand-written
per-version ``kafka.protocol.old`` structs; both are checked.
"""

import importlib
import io
import inspect
import pkgutil
import random

import pytest
from test_protocol import ALL_VERSIONS, complete, ids, plain, request_frame, sample_struct, schema

from seglog.protocol import (SUPPORTED_VERSIONS, RequestHeader, api_versions_fallback, decode_request,
                             decode_response, encode_response)
from seglog.protocol.registry import api

kafka_protocol = pytest.importorskip("kafka.protocol")
api_message = pytest.importorskip("kafka.protocol.api_message", reason="kafka-python >= 3.0 needed")


def _kafka_python_messages():
    found = {}
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or "schemas" in info.name or "generate_stubs" in info.name:
            continue
        for obj in vars(importlib.import_module(info.name)).values():
            if (inspect.isclass(obj) and issubclass(obj, api_message.ApiMessage)
                    and getattr(obj, "_json", None) is not None):
                found[(obj.API_KEY, obj.type == "response")] = obj
    return found


KP = _kafka_python_messages()
SHARED = [(k, v) for k, v in ALL_VERSIONS if (k, False) in KP and v <= KP[(k, False)].max_version]


def test_kafka_python_has_every_api_seglog_speaks():
    # but the delegation-token APIs (test_protocol checks their layouts) and KIP-848's ConsumerGroupHeartbeat and
    # ConsumerGroupDescribe, which kafka-python does not implement (tests/integration/test_consumer_group_protocol.py
    # checks them against librdkafka)
    assert sorted(set(ALL_VERSIONS) - set(SHARED)) == [(k, v) for k, hi in ((38, 3), (39, 2), (40, 2), (41, 3))
                                                       for v in range(hi + 1)] + [(68, 0), (68, 1), (69, 0), (69, 1)]


# kafka-python renames Kafka's *_authorized_operations fields and presents them as sets of bit positions
RENAMES = {"cluster_authorized_operations": "authorized_operations",
           "topic_authorized_operations": "authorized_operations"}


def bit_positions(value):
    bits = {i for i in range(32) if value & (1 << i)}
    return None if bits == {31} else bits


def unsent_tags_as_none(fields, body):
    """kafka-python reports a tagged struct that was not on the wire (seglog leaves out tagged fields at their
    default) as None, where seglog's decoders give the struct of defaults."""
    out = dict(body)
    for f in fields:
        value = body.get(f.name)
        if value is None:
            continue
        if f.tag is not None and f.type == "{}" and value == f.default_value():
            out[f.name] = None
        elif f.type == "{}":
            out[f.name] = unsent_tags_as_none(f.fields, value)
        elif f.type == "[]":
            out[f.name] = [unsent_tags_as_none(f.fields, item) for item in value]
    return out


def kafka_python_values(cls, body):
    """A body as kafka-python names and types its values (structs stay dicts)."""
    out = {}
    for name, value in body.items():
        name = RENAMES.get(name, name)
        f = cls._struct.fields[name]
        if value is not None and f.is_struct_array():
            value = [kafka_python_values(f.data_class, item) for item in value]
        elif value is not None and f.is_struct():
            value = kafka_python_values(f.data_class, value)
        elif f.type_str == "bitfield":
            value = bit_positions(value)
        out[name] = value
    return out


def to_kafka_python(cls, values, version=None):
    """Build kafka-python's object from :func:`kafka_python_values` (nested dicts become its data classes)."""
    kwargs = {}
    for name, value in values.items():
        f = cls._struct.fields[name]
        if value is not None and f.is_struct_array():
            value = [to_kafka_python(f.data_class, item) for item in value]
        elif value is not None and f.is_struct():
            value = to_kafka_python(f.data_class, value)
        kwargs[name] = value
    return cls(**kwargs) if version is None else cls[version](**kwargs)


def kafka_python_dict(obj):
    return plain(obj.to_dict(json=False))


@pytest.mark.parametrize("api_version", SHARED, ids=ids)
def test_requests_match_kafka_python(api_version):
    api_key, version = api_version
    cls, fields = KP[(api_key, False)], schema(api_key, False)
    for seed in range(8):
        body = sample_struct(fields, version, random.Random(seed))
        ours = request_frame(api_key, version, body, correlation_id=seed, client_id="x" * seed)
        theirs = cls.decode(ours, version=version, header=True)
        assert (theirs.header.request_api_key, theirs.header.request_api_version, theirs.header.correlation_id,
                theirs.header.client_id) == (api_key, version, seed, "x" * seed)
        values = kafka_python_values(cls, unsent_tags_as_none(fields, body))
        assert kafka_python_dict(theirs) == values
        message = to_kafka_python(cls, values, version)
        message.with_header(correlation_id=seed, client_id="x" * seed)
        encoded = bytes(message.encode(header=True))
        assert encoded == ours
        header, decoded = decode_request(encoded)
        assert header == RequestHeader(api_key, version, seed, "x" * seed)
        assert plain(decoded) == complete(fields, version, body)


@pytest.mark.parametrize("api_version", SHARED, ids=ids)
def test_responses_match_kafka_python(api_version):
    api_key, version = api_version
    cls, fields = KP[(api_key, True)], schema(api_key, True)
    for seed in range(8):
        body = sample_struct(fields, version, random.Random(seed))
        if api_key == 18:                  # kafka-python reads any ApiVersions error response as v0; Kafka only 35
            body["error_code"] = 0
        header = RequestHeader(api_key, version, 5000 + seed)
        ours = encode_response(header, body)[0][4:]
        theirs = cls.decode(ours, version=version, header=True)
        assert theirs.header.correlation_id == 5000 + seed
        values = kafka_python_values(cls, unsent_tags_as_none(fields, body))
        assert kafka_python_dict(theirs) == values
        message = to_kafka_python(cls, values, version)
        message.with_header(correlation_id=5000 + seed)
        encoded = bytes(message.encode(header=True))
        assert encoded == ours
        assert plain(decode_response(header, encoded)) == complete(fields, version, body)


def test_kafka_python_reads_our_api_versions_fallback():
    fallback = api_versions_fallback(RequestHeader(18, 4, 77, "c"))[0][4:]
    theirs = KP[(18, True)].decode(fallback, version=3, header=True)
    assert theirs.header.correlation_id == 77 and theirs.error_code == 35
    assert {(a.api_key, a.min_version, a.max_version) for a in theirs.api_keys} == {
        (k, lo, hi) for k, (lo, hi) in SUPPORTED_VERSIONS.items()}


# --- kafka.protocol.old: hand-written per-version structs, compared body by body in wire order -----------------

def _old_messages():
    from kafka.protocol.old.api import Request, Response
    found = {}
    for info in pkgutil.iter_modules(importlib.import_module("kafka.protocol.old").__path__):
        for obj in vars(importlib.import_module("kafka.protocol.old." + info.name)).values():
            if (isinstance(obj, list) and obj and all(inspect.isclass(c) for c in obj)
                    and issubclass(obj[0], (Request, Response))):
                found[(obj[0].API_KEY, issubclass(obj[0], Response))] = obj
    return found


OLD = _old_messages()

def _old_struct_fits(api_key: int, version: int, response: bool) -> bool:
    """kafka.protocol.old has a struct of the right direction for this version (its AlterConfigsResponse list
    holds AlterConfigsRequest_v1 as the v1 response, and its DescribeLogDirsRequest_v0 has one int32 where
    Kafka has an array of partitions; its DescribeAcls v2 structs are not flexible, Kafka's are from v2: slips
    there, not wire formats to compare with)."""
    from kafka.protocol.old.api import Response
    if (api_key, response) == (35, False) or (api_key == 29 and version >= 2):
        return False
    structs = OLD.get((api_key, response), ())
    return version < len(structs) and issubclass(structs[version], Response) == response


OLD_SHARED = [(k, v, r) for k, v in ALL_VERSIONS for r in (False, True) if _old_struct_fits(k, v, r)]


def leaves(value):
    """A nested value as its wire-order sequence of leaves and array lengths, whatever the nesting shape.

    The old structs group and nest fields differently (a one-field struct array is a list of values, some
    fields sit in sub-structs); the wire order of values and lengths is what both must agree on.
    """
    if hasattr(value, "SCHEMA"):
        value = tuple(getattr(value, name) for name in value.SCHEMA.names)
    if isinstance(value, dict):                       # the old structs' tag dict, or one of our struct dicts
        value = tuple(value.values()) if not all(isinstance(k, int) for k in value) else ()
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in leaves(item)]
    if isinstance(value, list):
        return [("length", len(value))] + [leaf for item in value for leaf in leaves(item)]
    return [value]


def in_wire_order(fields, version, body):
    """Our body with fields ordered as on the wire at ``version`` (a dict per struct), bit fields as sets."""
    out = {}
    for f in fields:
        if f.present(version) and f.tag is None:
            value = body[f.name]
            if value is not None and f.type == "[]":
                value = [in_wire_order(f.fields, version, item) for item in value]
            elif f.type == "int32" and f.name.endswith("authorized_operations"):
                value = bit_positions(value)
            out[f.name] = value
    return out


def test_old_kafka_python_structs_cover_most_versions():
    # the old structs stop at the last non-flexible version of each API; only these few are missing there
    missing = {(k, v) for k, v in ALL_VERSIONS if v < api(k).flexible} - {(k, v) for k, v, _ in OLD_SHARED}
    assert missing == {(15, 4), (19, 4), (21, 1), (27, 0), (32, 3), (34, 0), (34, 1), (35, 1), (38, 0), (38, 1),
                       (39, 0), (39, 1), (40, 0), (40, 1), (41, 0), (41, 1), (44, 0), (47, 0), (49, 0)}


@pytest.mark.parametrize("api_version_direction", OLD_SHARED,
                         ids=lambda p: f"{ids(p[:2])}-{'response' if p[2] else 'request'}")
def test_bodies_match_old_kafka_python_structs(api_version_direction):
    api_key, version, response = api_version_direction
    fields, old_cls = schema(api_key, response), OLD[(api_key, response)][version]
    flexible = version >= api(api_key).flexible
    tagged = {f.name for f in fields if f.tag is not None}         # the old structs know no tagged fields
    for seed in range(8):
        body = {name: value for name, value in sample_struct(fields, version, random.Random(seed)).items()
                if name not in tagged}
        if api_key == 18 and response:     # the old structs too read any ApiVersions error response as v0
            body["error_code"] = 0
        header = RequestHeader(api_key, version, seed, "cid")
        if response:
            frame = encode_response(header, body)[0]
            ours = frame[8 + (flexible and api_key != 18):]
        else:
            ours = request_frame(api_key, version, body, seed, "cid")[13 + flexible:]
        decoded = old_cls.decode(io.BytesIO(ours))
        assert leaves(decoded) == leaves(in_wire_order(fields, version, body))
        assert decoded.encode() == ours
