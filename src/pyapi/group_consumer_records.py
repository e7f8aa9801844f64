"""A KIP-848 consumer group as records of ``__consumer_offsets``, so a coordinator that loads the group's
offsets partition (a restart, a failover) gets its members back with their epochs and assignments.

seglog's own record types, in the compacted topic next to Kafka's offset and group metadata records (Kafka
keeps consumer groups there too, as key versions 3-8 with topic ids; seglog uses key versions 1000 and 1001,
which Kafka's loader skips as unknown record types):

* group record, key v1000 (group): value v0 = group_epoch int32, target_epoch int32, assignor string,
  subscribed topic metadata [topic string, partitions int32] (what the target was computed from).
* member record, key v1001 (group, member_id): value v0 = instance_id string?, rack_id string?, client_id
  string, client_host string, rebalance_timeout_ms int32, subscribed_names [string], subscribed_regex string?,
  server_assignor string?, member_epoch int32, previous_epoch int32, state string (MemberState value),
  assigned, revoking, target (each an assignment: [topic string, [partition int32]]).

Strings and arrays as in offsets_format (int16 / int32 lengths, -1 = null). A member that leaves gets a
tombstone for its key; a deleted group gets one for every key. Each key holds a whole record, so a compacted
partition (latest value per key) replays to the same group as the full history. Session timers are not
stored: a loaded member's session starts when the group is loaded.
"""

from __future__ import annotations

from typing import Mapping

from .errors import InvalidRequestError, UnsupportedVersionError
from .group_consumer_state import Assignment, ConsumerGroup, ConsumerMember, MemberState
from .offsets_format import ConsumerGroupKey, Reader, Writer, decode_key, encode_consumer_key

__all__ = ["group_records", "restore_group"]

_VALUE_VERSION = 0


def _assignment(w: Writer, a: Mapping[str, frozenset[int]]) -> None:
    w.int32(len(a))
    for topic, parts in sorted(a.items()):
        w.string(topic).int32(len(parts))
        for p in sorted(parts):
            w.int32(p)


def _read_assignment(r: Reader) -> Assignment:
    out: Assignment = {}
    for _ in range(r.array_length()):
        topic = r.string()
        parts = frozenset(r.int32() for _ in range(r.array_length()))
        if parts:
            out[topic] = parts
    return out


def _group_value(group: ConsumerGroup) -> bytes:
    w = Writer().int16(_VALUE_VERSION).int32(group.group_epoch).int32(group.target_epoch).string(group.assignor)
    w.int32(len(group.subscribed_metadata))
    for topic, count in group.subscribed_metadata.items():
        w.string(topic).int32(count)
    return bytes(w)


def _member_value(m: ConsumerMember, target: Assignment) -> bytes:
    w = (Writer().int16(_VALUE_VERSION).string(m.instance_id).string(m.rack_id).string(m.client_id)
         .string(m.client_host).int32(m.rebalance_timeout_ms).int32(len(m.subscribed_names)))
    for name in m.subscribed_names:
        w.string(name)
    (w.string(m.subscribed_regex).string(m.server_assignor).int32(m.member_epoch).int32(m.previous_epoch)
     .string(m.state.value))
    for a in (m.assigned, m.revoking, target):
        _assignment(w, a)
    return bytes(w)


def group_records(group: ConsumerGroup) -> dict[bytes, bytes]:
    """Every record (key -> value) of the group as it stands."""
    gid = group.group_id
    out = {encode_consumer_key(gid): _group_value(group)}
    for m in group.members.values():
        out[encode_consumer_key(gid, m.member_id)] = _member_value(m, group.target.get(m.member_id, {}))
    return out


def _reader(value: bytes, what: str) -> Reader:
    r = Reader(value, what)
    version = r.int16()
    if version != _VALUE_VERSION:
        raise UnsupportedVersionError(f"{what} value version {version} is not {_VALUE_VERSION}")
    return r


def restore_group(group_id: str, records: Mapping[bytes, bytes]) -> ConsumerGroup | None:
    """The group the records (key -> value, tombstones already applied) describe; None without a group
    record (only orphan member records: the group was deleted). InvalidRequestError for a malformed record."""
    group: ConsumerGroup | None = None
    members: list[tuple[ConsumerMember, Assignment]] = []
    for key, value in records.items():
        k = decode_key(key)
        if not isinstance(k, ConsumerGroupKey) or k.group != group_id:
            raise InvalidRequestError(f"record of {k} is not a consumer group record of {group_id!r}")
        if k.member is None:
            r = _reader(value, "consumer group record")
            group = ConsumerGroup(group_id, r.int32(), r.int32())
            group.assignor = r.string()
            group.subscribed_metadata = {r.string(): r.int32() for _ in range(r.array_length())}
            continue
        r = _reader(value, "consumer group member record")
        m = ConsumerMember(k.member, r.nullable_string(), r.nullable_string(), r.string(), r.string(), r.int32())
        m.subscribed_names = tuple(r.string() for _ in range(r.array_length()))
        m.subscribed_regex, m.server_assignor = r.nullable_string(), r.nullable_string()
        m.member_epoch, m.previous_epoch = r.int32(), r.int32()
        try:
            m.state = MemberState(r.string())
        except ValueError as e:
            raise InvalidRequestError(f"consumer group member record: {e}") from None
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
