"""Fuzz the decoders: garbage, and valid frames truncated or mutated, must decode or raise only
InvalidRequestError / UnsupportedVersionError (never IndexError, struct.error, MemoryError, UnicodeDecodeError,
RecursionError ...). Whatever decodes must survive re-encoding unchanged.
"""

import random
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_protocol import ALL_VERSIONS, plain, request_frame, sample_struct, schema

from seglog import errors
from seglog.protocol import RequestHeader, decode_request, decode_response, encode_request, encode_response

def fuzz(max_examples):
    return settings(max_examples=max_examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
DECODE_ERRORS = (errors.InvalidRequestError, errors.UnsupportedVersionError)
INTERESTING_INT32 = (-2, -1, 0, 1, 0x7F, 0x80, 0x7FFF, 0xFFFF, 0x7FFFFFFF, -0x80000000, 100 * 1024 * 1024)


def check_request(frame):
    try:
        header, body = decode_request(frame)
    except DECODE_ERRORS as e:
        assert type(e) in (errors.InvalidRequestError, errors.UnsupportedVersionError), type(e)
        assert e.header is None or isinstance(e.header, RequestHeader)
        return
    again = decode_request(b"".join(encode_request(header, body))[4:])
    assert again[0] == header and plain(again[1]) == plain(body)


def check_response(header, frame):
    try:
        body = decode_response(header, frame)
    except DECODE_ERRORS as e:
        assert type(e) in (errors.InvalidRequestError, errors.UnsupportedVersionError), type(e)
        return
    encode_response(header, body)


def valid_frame(api_version, seed, response):
    api_key, version = api_version
    body = sample_struct(schema(api_key, response), version, random.Random(seed))
    if response:
        return encode_response(RequestHeader(api_key, version, seed), body)[0][4:]
    return request_frame(api_key, version, body, correlation_id=seed)


@st.composite
def mutated(draw, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(("truncate", "byte", "int32", "int16", "insert", "delete")))
        if kind == "truncate":
            del data[at:]
        elif kind == "byte" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "int32":
            data[at:at + 4] = struct.pack(">i", draw(st.sampled_from(INTERESTING_INT32)))
        elif kind == "int16":
            data[at:at + 2] = struct.pack(">h", draw(st.sampled_from(INTERESTING_INT32[:5])))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[at:at + draw(st.integers(1, 8))]
    return bytes(data)


@fuzz(500)
@given(st.binary(max_size=300))
def test_garbage_requests(frame):
    check_request(frame)


@fuzz(2000)
@given(st.sampled_from(ALL_VERSIONS), st.binary(max_size=300))
def test_supported_header_with_garbage_body(api_version, body):
    check_request(struct.pack(">hhih", *api_version, 1, -1) + body)


@fuzz(4000)
@given(st.sampled_from(ALL_VERSIONS), st.integers(0, 1 << 16), st.data())
def test_mutated_requests(api_version, seed, data):
    check_request(data.draw(mutated(valid_frame(api_version, seed, response=False))))


@fuzz(1500)
@given(st.sampled_from(ALL_VERSIONS), st.integers(0, 1 << 16), st.data())
def test_mutated_responses(api_version, seed, data):
    frame = data.draw(mutated(valid_frame(api_version, seed, response=True)))
    check_response(RequestHeader(*api_version, seed), frame)
