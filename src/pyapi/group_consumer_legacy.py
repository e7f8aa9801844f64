"""Consumer group records of seglog's first KIP-848 format (key versions 1000 and 1001), read so that a group
written by that version is loaded once; the coordinator then writes it in Kafka's format
(group_consumer_records) with tombstones for these keys. Nothing writes this format any more.

* key 1000 (group): value v0 = group_epoch int32, target_epoch int32, assignor string, subscribed topic
  metadata [topic string, partitions int32].
* key 1001 (group, member_id): value v0 = instance_id string?, rack_id string?, client_id string, client_host
  string, rebalance_timeout_ms int32, subscribed_names [string], subscribed_regex string?, server_assignor
  string?, member_epoch int32, previous_epoch int32, state string (MemberState value), assigned, revoking,
  target (each an assignment: [topic string, [partition int32]]).

Strings and arrays as in offsets_format (int16 / int32 lengths, -1 = null); topics by name.
"""

from __future__ import annotations

from typing import Mapping

from .errors import InvalidRequestError, UnsupportedVersionError
from .group_consumer_state import Assignment, ConsumerGroup, ConsumerMember, MemberState
from .offsets_format import LEGACY_CONSUMER_GROUP_KEY_VERSION, Reader, decode_key

__all__ = ["restore_legacy_group"]


def _read_assignment(r: Reader) -> Assignment:
    out: Assignment = {}
    for _ in range(r.array_length()):
        topic = r.string()
        parts = frozenset(r.int32() for _ in range(r.array_length()))
        if parts:
            out[topic] = parts
    return out


def _reader(value: bytes, what: str) -> Reader:
    r = Reader(value, what)
    version = r.int16()
    if version != 0:
        raise UnsupportedVersionError(f"{what} value version {version} is not 0")
    return r


def restore_legacy_group(group_id: str, records: Mapping[bytes, bytes]) -> ConsumerGroup | None:
    """The group that records of the first format describe (None without a group record: it was deleted).
    InvalidRequestError for a malformed record."""
    group: ConsumerGroup | None = None
    members: list[tuple[ConsumerMember, Assignment]] = []
    for key, value in records.items():
        k = decode_key(key)
        if k.record_type == LEGACY_CONSUMER_GROUP_KEY_VERSION:
            r = _reader(value, "legacy consumer group record")
            group = ConsumerGroup(group_id, r.int32(), r.int32())
            group.assignor = r.string()
            group.subscribed_metadata = {r.string(): r.int32() for _ in range(r.array_length())}
            continue
        r = _reader(value, "legacy consumer group member record")
        m = ConsumerMember(k.member, r.nullable_string(), r.nullable_string(), r.string(), r.string(), r.int32())
        m.subscribed_names = tuple(r.string() for _ in range(r.array_length()))
        m.subscribed_regex, m.server_assignor = r.nullable_string(), r.nullable_string()
        m.member_epoch, m.previous_epoch = r.int32(), r.int32()
        try:
            m.state = MemberState(r.string())
        except ValueError as e:
            raise InvalidRequestError(f"legacy consumer group member record: {e}") from None
        m.assigned, m.revoking = _read_assignment(r), _read_assignment(r)
        members.append((m, _read_assignment(r)))
    if group is None:
        return None
    for m, target in sorted(members, key=lambda e: e[0].member_id):
        group.members[m.member_id] = m
        group.target[m.member_id] = target
        if m.instance_id is not None:
            group.static_members[m.instance_id] = m.member_id
    return group
