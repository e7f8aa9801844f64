"""Zigzag varints as Kafka records use them."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog import _engine
from seglog.errors import CorruptRecordError


@pytest.mark.parametrize("value, encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"), (63, b"\x7e"), (-64, b"\x7f"),
    (64, b"\x80\x01"), (150, b"\xac\x02"), (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-2**31, b"\xff\xff\xff\xff\x0f"),
])
def test_known_encodings(value, encoded):
    assert _engine.encode_varint(value) == encoded
    assert _engine.decode_varint(encoded) == (value, len(encoded))
    assert _engine.varint_length(value) == len(encoded)


@given(st.integers(-2**63, 2**63 - 1))
def test_varlong_round_trip(v):
    enc = _engine.encode_varint(v)
    assert _engine.decode_varint(b"xx" + enc + b"yy", 2, long=True) == (v, 2 + len(enc))
    assert len(enc) <= 10


@given(st.integers(-2**31, 2**31 - 1))
def test_varint_round_trip_matches_kafka_python(v):
    from kafka.record.util import decode_varint, encode_varint
    out = bytearray()
    encode_varint(v, out.append)
    assert _engine.encode_varint(v) == bytes(out)
    assert decode_varint(_engine.encode_varint(v), 0)[0] == v


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff\xff\xff\xff\x01", b"\x80" * 11])
def test_truncated_or_overlong_is_corrupt(data):
    with pytest.raises(CorruptRecordError):
        _engine.decode_varint(data)


def test_int32_overflow_rejected_for_varint_only():
    big = _engine.encode_varint(2**31)
    with pytest.raises(CorruptRecordError):
        _engine.decode_varint(big)
    assert _engine.decode_varint(big, long=True)[0] == 2**31
