"""__consumer_offsets key/value records: exact bytes against an independent struct-based encoder (Kafka's
schemas written out by hand), decoding of every value version 0-4, round trips, malformed input."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import InvalidRequestError, UnsupportedVersionError
from seglog.offsets_format import (ConsumerGroupKey, GroupKey, GroupMetadata, MemberMetadata, OffsetAndMetadata, OffsetKey,
                                   decode_group_value, decode_key, decode_offset_value, encode_group_key,
                                   encode_group_value, encode_offset_key, encode_offset_value)


def s16(text):
    """Kafka string: int16 length + UTF-8 (None -> -1)."""
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(data):
    return struct.pack(">i", len(data)) + data


def compact(text):
    """Flexible-version compact string: unsigned varint (length + 1) + UTF-8 (None -> 0)."""
    if text is None:
        return b"\x00"
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


MEMBER = MemberMetadata("consumer-1-1b2c", "instance-a", "consumer-1", "/10.0.0.7", 300000, 45000,
                        b"\x00\x03sub", b"\x00\x03asg")


def test_offset_key_v1_bytes():
    assert encode_offset_key("grp", "topic", 7) == struct.pack(">h", 1) + s16("grp") + s16("topic") + struct.pack(">i", 7)


def test_group_key_v2_bytes():
    assert encode_group_key("grp") == struct.pack(">h", 2) + s16("grp")


def test_offset_value_v3_bytes():
    om = OffsetAndMetadata(1234567890123, 5, "meta", 1700000000000)
    assert encode_offset_value(om) == (struct.pack(">hqi", 3, 1234567890123, 5) + s16("meta")
                                       + struct.pack(">q", 1700000000000))


def test_group_value_v3_bytes():
    group = GroupMetadata("consumer", 4, "range", "consumer-1-1b2c", 1700000000001, (MEMBER,))
    expected = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 4) + s16("range") + s16("consumer-1-1b2c")
                + struct.pack(">q", 1700000000001) + struct.pack(">i", 1)
                + s16("consumer-1-1b2c") + s16("instance-a") + s16("consumer-1") + s16("/10.0.0.7")
                + struct.pack(">ii", 300000, 45000) + b32(b"\x00\x03sub") + b32(b"\x00\x03asg"))
    assert encode_group_value(group) == expected
    assert decode_group_value(expected) == group


def test_empty_group_value_has_null_protocol_and_leader():
    group = GroupMetadata("", 3, None, None, -1, ())
    data = encode_group_value(group)
    assert data == struct.pack(">h", 3) + s16("") + struct.pack(">i", 3) + s16(None) + s16(None) + struct.pack(">qi", -1, 0)
    assert decode_group_value(data) == group


def test_decode_keys():
    assert decode_key(encode_offset_key("g", "t", 3)) == OffsetKey("g", "t", 3)
    assert decode_key(struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 3)) == OffsetKey("g", "t", 3)
    assert decode_key(encode_group_key("g")) == GroupKey("g")
    assert decode_key(struct.pack(">h", 3) + s16("g")) == ConsumerGroupKey(3, "g")          # KIP-848 groups
    assert decode_key(struct.pack(">h", 8) + s16("g") + s16("m")) == ConsumerGroupKey(8, "g", "m")
    with pytest.raises(UnsupportedVersionError):
        decode_key(struct.pack(">h", 9) + s16("g"))         # share groups: not a record type seglog keeps
    with pytest.raises(InvalidRequestError):
        decode_key(struct.pack(">h", 1) + s16("g") + s16("t"))          # partition missing


def test_decode_old_offset_values():
    v0 = struct.pack(">hq", 0, 42) + s16("m") + struct.pack(">q", 1000)
    v1 = struct.pack(">hq", 1, 42) + s16("m") + struct.pack(">qq", 1000, 2000)
    v2 = struct.pack(">hq", 2, 42) + s16("m") + struct.pack(">q", 1000)
    assert decode_offset_value(v0) == OffsetAndMetadata(42, -1, "m", 1000)
    assert decode_offset_value(v1) == OffsetAndMetadata(42, -1, "m", 1000, 2000)
    assert decode_offset_value(v2) == OffsetAndMetadata(42, -1, "m", 1000)


def test_decode_flexible_offset_value_v4():
    tagged = uvarint(1) + uvarint(9) + uvarint(2) + b"zz"      # one unknown tagged field, skipped
    v4 = struct.pack(">hqi", 4, 42, 7) + compact("m") + struct.pack(">q", 1000) + tagged
    assert decode_offset_value(v4) == OffsetAndMetadata(42, 7, "m", 1000)


def test_decode_old_group_values():
    member_v0 = s16("m1") + s16("c1") + s16("/h") + struct.pack(">i", 10000) + b32(b"S") + b32(b"A")
    v0 = struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 2) + s16("range") + s16("m1") + struct.pack(">i", 1) + member_v0
    assert decode_group_value(v0) == GroupMetadata("consumer", 2, "range", "m1", -1,
                                                   (MemberMetadata("m1", None, "c1", "/h", 10000, 10000, b"S", b"A"),))
    member_v1 = s16("m1") + s16("c1") + s16("/h") + struct.pack(">ii", 60000, 10000) + b32(b"S") + b32(b"A")
    v2 = (struct.pack(">h", 2) + s16("consumer") + struct.pack(">i", 2) + s16("range") + s16("m1")
          + struct.pack(">qi", 123, 1) + member_v1)
    assert decode_group_value(v2) == GroupMetadata("consumer", 2, "range", "m1", 123,
                                                   (MemberMetadata("m1", None, "c1", "/h", 60000, 10000, b"S", b"A"),))


def test_decode_flexible_group_value_v4():
    member = (compact("m1") + compact(None) + compact("c1") + compact("/h") + struct.pack(">ii", 60000, 10000)
              + uvarint(2) + b"S" + uvarint(2) + b"A" + uvarint(0))
    v4 = (struct.pack(">h", 4) + compact("consumer") + struct.pack(">i", 9) + compact("range") + compact(None)
          + struct.pack(">q", 5) + uvarint(2) + member + uvarint(0))
    assert decode_group_value(v4) == GroupMetadata("consumer", 9, "range", None, 5,
                                                   (MemberMetadata("m1", None, "c1", "/h", 60000, 10000, b"S", b"A"),))


@pytest.mark.parametrize("data", [
    b"", struct.pack(">h", 3), struct.pack(">hq", 3, 1), struct.pack(">hqi", 3, 1, 1) + struct.pack(">h", 50) + b"short",
])
def test_truncated_offset_values_are_rejected(data):
    with pytest.raises(InvalidRequestError):
        decode_offset_value(data)


def test_unknown_value_versions_are_rejected():
    with pytest.raises(UnsupportedVersionError):
        decode_offset_value(struct.pack(">hqi", 5, 1, 1) + s16("") + struct.pack(">q", 0))
    with pytest.raises(UnsupportedVersionError):
        decode_group_value(struct.pack(">h", -1))


def test_absurd_member_count_is_rejected():
    data = struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 1) + s16(None) + s16(None) + struct.pack(">qi", 0, 10**9)
    with pytest.raises(InvalidRequestError):
        decode_group_value(data)


names = st.text(max_size=20)
int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)


@given(names, names, int32)
def test_offset_key_round_trip(group, topic, partition):
    assert decode_key(encode_offset_key(group, topic, partition)) == OffsetKey(group, topic, partition)


@given(int64, int32, names, int64)
def test_offset_value_round_trip(offset, epoch, metadata, stamp):
    om = OffsetAndMetadata(offset, epoch, metadata, stamp)
    assert decode_offset_value(encode_offset_value(om)) == om


members = st.builds(MemberMetadata, names, st.none() | names, names, names, int32, int32, st.binary(max_size=40),
                    st.binary(max_size=40))


@given(st.builds(GroupMetadata, names, int32, st.none() | names, st.none() | names, int64,
                 st.lists(members, max_size=4).map(tuple)))
def test_group_value_round_trip(group):
    assert decode_group_value(encode_group_value(group)) == group
