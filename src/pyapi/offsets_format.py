"""Records of the compacted topic ``__consumer_offsets``, in Kafka's binary key/value format.

Every key starts with an int16 version that names the record type: 0 or 1 = an offset commit
(group, topic, partition), 2 = a group's metadata (group). Values start with their own int16 version.
seglog writes offset commit key v1 + value v3 and group metadata key v2 + value v3, as Kafka 2.1+ brokers
do, and reads values v0-v4 (v4 is the first flexible version: compact strings and tagged fields).
A null value is a tombstone (the offset or the group was deleted); the caller handles it, not this module.

Layouts (big-endian; string = int16 length + UTF-8, -1 for null; bytes = int32 length, -1 for null):

* offset commit value v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
  (v0 and v2 lack leader_epoch; v1 lacks it and ends with expire_timestamp int64).
* KIP-848 consumer group records (key versions 3-8, see group_consumer_records): key version, group string,
  then member_id string for the per-member types 5, 7 and 8. Versions 1000 (group) and 1001 (group, member)
  are seglog's earlier format of them (group_consumer_legacy), read to be converted.
* group metadata value v3: protocol_type string, generation int32, protocol string?, leader string?,
  current_state_timestamp int64 (v2+), members [member_id string, group_instance_id string? (v3+),
  client_id string, client_host string, rebalance_timeout int32 (v1+), session_timeout int32,
  subscription bytes, assignment bytes].

:class:`Reader` and :class:`Writer` are the primitive codec the ConsumerProtocol (``assignors.py``) shares.
Malformed input raises :class:`seglog.errors.InvalidRequestError`; an unknown key version raises
:class:`seglog.errors.UnsupportedVersionError` (newer Kafka writes other record types there; skip them).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from .errors import InvalidRequestError, UnsupportedVersionError

__all__ = ["OFFSETS_TOPIC", "TopicPartition", "OffsetAndMetadata", "MemberMetadata", "GroupMetadata", "OffsetKey", "GroupKey",
           "ConsumerGroupKey", "encode_consumer_key",
           "Reader", "Writer", "encode_offset_key", "encode_offset_value", "encode_group_key",
           "encode_group_value", "decode_key", "decode_offset_value", "decode_group_value"]

OFFSETS_TOPIC = "__consumer_offsets"
"""The internal topic these records live in."""

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TopicPartition(NamedTuple):
    """A (topic, partition) pair; equal to the plain tuple, so either may be used as a key."""

    topic: str
    partition: int


def partitions_by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """{topic: [partition, ...]} in first-appearance order of topics, partitions in given order (the nesting of
    Kafka's requests and records)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return by_topic


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset: the next offset to consume, the leader epoch of the record before it (-1 unknown),
    the client's metadata string, when it was committed (ms since the epoch, -1 unknown) and the explicit
    expiry of value v1 commits (-1 = none; not written by v3)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True)
class MemberMetadata:
    """One member as stored in a group metadata value (subscription/assignment are ConsumerProtocol bytes)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadata:
    """A group's last completed generation: what a coordinator reloads after a restart."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = ()


@dataclass(frozen=True)
class OffsetKey:
    """Key of an offset commit record."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    """Key of a group metadata record."""

    group: str


@dataclass(frozen=True)
class ConsumerGroupKey:
    """Key of a KIP-848 consumer group record: its type (the key version) and group, and for a member's
    record (``record_type`` in MEMBER_KEY_VERSIONS) the member id."""

    record_type: int
    group: str
    member: str | None = None


class Writer:
    """Appends Kafka primitives (non-flexible encoding) to a bytearray; ``bytes()`` gives the result."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> "Writer":
        self.buf += _I8.pack(v)
        return self

    def int16(self, v: int) -> "Writer":
        self.buf += _I16.pack(v)
        return self

    def int32(self, v: int) -> "Writer":
        self.buf += _I32.pack(v)
        return self

    def int64(self, v: int) -> "Writer":
        self.buf += _I64.pack(v)
        return self

    def string(self, s: str | None) -> "Writer":
        """A string; None writes the null string (length -1)."""
        if s is None:
            return self.int16(-1)
        raw = s.encode()
        if len(raw) > 0x7fff:
            raise InvalidRequestError(f"string of {len(raw)} bytes is longer than 32767 bytes")
        self.buf += _I16.pack(len(raw)) + raw
        return self

    def bytes_(self, b: bytes | None) -> "Writer":
        """A byte string; None writes null bytes (length -1)."""
        if b is None:
            return self.int32(-1)
        self.buf += _I32.pack(len(b))
        self.buf += b
        return self

    def __bytes__(self) -> bytes:
        return bytes(self.buf)


class Reader:
    """Reads Kafka primitives from a buffer, non-flexible or (``flexible=True``) compact with tagged fields.

    Every read past the end raises InvalidRequestError naming ``what`` (the structure being decoded).
    """

    def __init__(self, data, what: str, flexible: bool = False) -> None:
        self.data = memoryview(data).cast("B")
        self.pos = 0
        self.what = what
        self.flexible = flexible

    def _take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise InvalidRequestError(f"malformed {self.what}: needs {n} bytes at position {self.pos}, "
                                      f"{len(self.data) - self.pos} left")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def int8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7f) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise InvalidRequestError(f"malformed {self.what}: varint longer than 5 bytes")

    def _length(self, wide: bool) -> int:
        """A length prefix: -1 means null."""
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        n = self._length(False)
        if n < -1:
            raise InvalidRequestError(f"malformed {self.what}: string length {n}")
        return None if n == -1 else str(self._take(n), "utf-8")

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise InvalidRequestError(f"malformed {self.what}: null where a string is required")
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self._length(True)
        if n < -1:
            raise InvalidRequestError(f"malformed {self.what}: bytes length {n}")
        return None if n == -1 else bytes(self._take(n))

    def array_length(self) -> int:
        """The element count of an array (null arrays read as empty)."""
        n = self._length(True)
        if n < -1 or n > len(self.data) - self.pos:      # every element takes at least one byte
            raise InvalidRequestError(f"malformed {self.what}: array length {n}")
        return max(n, 0)

    def skip_tagged_fields(self) -> None:
        """Skip a tagged-field section (flexible versions only; a no-op otherwise)."""
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


OFFSET_KEY_VERSION = 1
OFFSET_VALUE_VERSION = 3
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
CONSUMER_GROUP_KEY_VERSIONS = frozenset({3, 4, 6})     # ConsumerGroup{,Partition,TargetAssignment}Metadata
CONSUMER_MEMBER_KEY_VERSIONS = frozenset({5, 7, 8})    # MemberMetadata, TargetAssignmentMember, CurrentMemberAssignment
LEGACY_CONSUMER_GROUP_KEY_VERSION = 1000
LEGACY_CONSUMER_MEMBER_KEY_VERSION = 1001
_GROUP_KEYS = CONSUMER_GROUP_KEY_VERSIONS | {LEGACY_CONSUMER_GROUP_KEY_VERSION}
_MEMBER_KEYS = CONSUMER_MEMBER_KEY_VERSIONS | {LEGACY_CONSUMER_MEMBER_KEY_VERSION}


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    """Offset commit key v1: version int16, group, topic, partition int32."""
    return bytes(Writer().int16(OFFSET_KEY_VERSION).string(group).string(topic).int32(partition))


def encode_group_key(group: str) -> bytes:
    """Group metadata key v2: version int16, group."""
    return bytes(Writer().int16(GROUP_KEY_VERSION).string(group))


def encode_consumer_key(record_type: int, group: str, member: str | None = None) -> bytes:
    """Consumer group record key: version ``record_type`` (3-8), group, and the member id of a member's record
    (types 5, 7, 8; None for the others). ValueError for another type or a member id that does not fit it."""
    if record_type not in CONSUMER_GROUP_KEY_VERSIONS | CONSUMER_MEMBER_KEY_VERSIONS:
        raise ValueError(f"{record_type} is not a consumer group record type (3-8)")
    if (member is None) != (record_type in CONSUMER_GROUP_KEY_VERSIONS):
        raise ValueError(f"consumer group record type {record_type} {'needs' if member is None else 'has no'} "
                         f"member id")
    w = Writer().int16(record_type).string(group)
    return bytes(w if member is None else w.string(member))


def decode_key(data) -> OffsetKey | GroupKey | ConsumerGroupKey:
    """An ``__consumer_offsets`` key. UnsupportedVersionError for record types other than 0-8, 1000, 1001
    (share and streams groups, regular expressions: other Kafka record types)."""
    r = Reader(data, "__consumer_offsets key")
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupKey(r.string())
    if version in _GROUP_KEYS:
        return ConsumerGroupKey(version, r.string())
    if version in _MEMBER_KEYS:
        return ConsumerGroupKey(version, r.string(), r.string())
    raise UnsupportedVersionError(f"__consumer_offsets key version {version} is not an offset commit (0, 1), "
                                  f"group metadata (2) or consumer group (3-8) key")


def encode_offset_value(om: OffsetAndMetadata) -> bytes:
    """Offset commit value v3 (``expire_timestamp`` is not part of v3 and is dropped)."""
    return bytes(Writer().int16(OFFSET_VALUE_VERSION).int64(om.offset).int32(om.leader_epoch)
                 .string(om.metadata).int64(om.commit_timestamp))


def decode_offset_value(data) -> OffsetAndMetadata:
    """An offset commit value v0-v4. UnsupportedVersionError for other versions."""
    version = Reader(data, "offset commit value").int16()
    if not 0 <= version <= 4:
        raise UnsupportedVersionError(f"offset commit value version {version} is not 0-4")
    r = Reader(data, f"offset commit value v{version}", flexible=version >= 4)
    r.pos = 2
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.skip_tagged_fields()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def encode_group_value(group: GroupMetadata) -> bytes:
    """Group metadata value v3."""
    w = (Writer().int16(GROUP_VALUE_VERSION).string(group.protocol_type).int32(group.generation)
         .string(group.protocol).string(group.leader).int64(group.current_state_timestamp)
         .int32(len(group.members)))
    for m in group.members:
        (w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
         .int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment))
    return bytes(w)


def decode_group_value(data) -> GroupMetadata:
    """A group metadata value v0-v4. UnsupportedVersionError for other versions. Versions without a field
    give its default: no instance id (v0-2), rebalance timeout = session timeout (v0), timestamp -1 (v0-1)."""
    version = Reader(data, "group metadata value").int16()
    if not 0 <= version <= 4:
        raise UnsupportedVersionError(f"group metadata value version {version} is not 0-4")
    r = Reader(data, f"group metadata value v{version}", flexible=version >= 4)
    r.pos = 2
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        subscription = r.nullable_bytes() or b""
        assignment = r.nullable_bytes() or b""
        r.skip_tagged_fields()
        members.append(MemberMetadata(member_id, instance_id, client_id, client_host,
                                      session_timeout if rebalance_timeout is None else rebalance_timeout,
                                      session_timeout, subscription, assignment))
    r.skip_tagged_fields()
    return GroupMetadata(protocol_type, generation, protocol, leader, timestamp, tuple(members))
