"""A KIP-848 consumer group as records of ``__consumer_offsets``, in Kafka's format (key versions 3-8, as Kafka
3.7+ group coordinators write and load them), so a coordinator that loads the group's offsets partition (a
restart, a failover) gets its members back with their epochs and assignments, and Kafka reads the same records.

Keys (non-flexible: int16 record type, then strings, see offsets_format.encode_consumer_key); values (int16
version 0, then the flexible encoding of protocol.schema with tagged fields; unknown tags are skipped):

* 3 ConsumerGroupMetadata (group): epoch int32 (the group epoch).
* 4 ConsumerGroupPartitionMetadata (group): topics [topic_id uuid, topic_name, num_partitions int32,
  partition_metadata [partition int32, racks []string]] -- the subscribed topics the target was computed from.
* 5 ConsumerGroupMemberMetadata (group, member): instance_id?, rack_id?, client_id, client_host,
  subscribed_topic_names [], subscribed_topic_regex?, rebalance_timeout_ms int32, server_assignor?, and for a
  member using the classic protocol the tagged (0) classic_member_metadata {session_timeout_ms int32,
  supported_protocols [name, metadata bytes]}.
* 6 ConsumerGroupTargetAssignmentMetadata (group): assignment_epoch int32.
* 7 ConsumerGroupTargetAssignmentMember (group, member): topic_partitions [topic_id uuid, partitions []int32].
* 8 ConsumerGroupCurrentMemberAssignment (group, member): member_epoch, previous_member_epoch int32, state
  int8 (MemberState: 0 stable, 1 unrevoked, 2 unreleased), assigned_partitions, partitions_pending_revocation.

Topics are named by id: a topic with no id (it no longer exists) is left out when written; an id no topic has
(the topic was deleted) is dropped when loaded. Each key holds a whole record, so a compacted partition (latest
value per key) replays to the same group as the full history. :func:`changes` orders a write as Kafka does:
tombstones first, current assignment before target before subscription before group (8, 7, 6, 5, 4, 3, as
Kafka's loader needs a member to exist while its assignment is replayed), then new values as 5, 4, 3, 7, 6, 8.
The assignor name and session timers are not stored (Kafka keeps neither): a loaded group's assignor is
chosen again from its members, and every member's session starts when the group is loaded.

Records of seglog's earlier format (key versions 1000/1001, group_consumer_legacy) are loaded too; the
coordinator then writes the group in this format and tombstones them.
"""

from __future__ import annotations

import struct
import uuid
from enum import IntEnum
from typing import Mapping

from .errors import InvalidRequestError, UnsupportedVersionError
from .group_consumer_state import Assignment, ClassicProtocols, ConsumerGroup, ConsumerMember, MemberState
from .offsets_format import ConsumerGroupKey, decode_key, encode_consumer_key
from .protocol.compiler import compile_message
from .protocol.schema import array, field, struct as nested

__all__ = ["RecordType", "group_records", "restore_group", "changes", "encode_value", "decode_value",
           "tagged_fields"]


class RecordType(IntEnum):
    """Key versions of Kafka's consumer group records."""

    GROUP_EPOCH = 3
    PARTITION_METADATA = 4
    MEMBER_METADATA = 5
    TARGET_ASSIGNMENT_METADATA = 6
    TARGET_ASSIGNMENT_MEMBER = 7
    CURRENT_ASSIGNMENT = 8


_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {v: k for k, v in _STATE_CODES.items()}


def _topic_partitions(name: str):
    return array(name, field("topic_id", "uuid"), field("partitions", "[]int32"))


_VALUES = {
    RecordType.GROUP_EPOCH: (field("epoch", "int32"),),
    RecordType.PARTITION_METADATA: (
        array("topics", field("topic_id", "uuid"), field("topic_name", "string"), field("num_partitions", "int32"),
              array("partition_metadata", field("partition", "int32"), field("racks", "[]string"))),),
    RecordType.MEMBER_METADATA: (
        field("instance_id", "string", nullable="0+"), field("rack_id", "string", nullable="0+"),
        field("client_id", "string"), field("client_host", "string"), field("subscribed_topic_names", "[]string"),
        field("subscribed_topic_regex", "string", nullable="0+"), field("rebalance_timeout_ms", "int32", default=-1),
        field("server_assignor", "string", nullable="0+"),
        nested("classic_member_metadata", field("session_timeout_ms", "int32"),
               array("supported_protocols", field("name", "string"), field("metadata", "bytes")),
               nullable="0+", tag=0)),
    RecordType.TARGET_ASSIGNMENT_METADATA: (field("assignment_epoch", "int32"),),
    RecordType.TARGET_ASSIGNMENT_MEMBER: (_topic_partitions("topic_partitions"),),
    RecordType.CURRENT_ASSIGNMENT: (
        field("member_epoch", "int32"), field("previous_member_epoch", "int32"), field("state", "int8"),
        _topic_partitions("assigned_partitions"), _topic_partitions("partitions_pending_revocation")),
}
_VALUE_VERSION = 0
_CODECS = {t: compile_message(fields, _VALUE_VERSION, True, f"ConsumerGroupRecord{int(t)}Value")
           for t, fields in _VALUES.items()}
_VERSION = _VALUE_VERSION.to_bytes(2, "big")


def encode_value(record_type: RecordType, body: Mapping) -> bytes:
    """The value of a record of ``record_type``: version 0, then ``body`` (missing fields take defaults)."""
    out = [_VERSION]
    _CODECS[record_type].encode(body, out)
    return b"".join(out)


def tagged_fields(record_type: RecordType) -> frozenset[str]:
    """The names of the tagged fields of a value of ``record_type`` (Kafka's JSON leaves them out at their
    default)."""
    return frozenset(f.name for f in _VALUES[record_type] if f.tag is not None)


def decode_value(record_type: RecordType, value) -> dict:
    """The body of a value of ``record_type``. InvalidRequestError when malformed (trailing bytes included),
    UnsupportedVersionError for a value version other than 0."""
    view = memoryview(value).cast("B")
    if len(view) < 2:
        raise InvalidRequestError(f"malformed consumer group record {record_type.name}: no value version")
    version = int.from_bytes(view[:2], "big")
    if version != _VALUE_VERSION:
        raise UnsupportedVersionError(f"consumer group record {record_type.name} value version {version} is not 0")
    try:
        body, pos = _CODECS[record_type].decode(view, 2)
    except (struct.error, UnicodeDecodeError) as e:
        raise InvalidRequestError(f"malformed consumer group record {record_type.name}: {e}") from None
    if pos != len(view):
        raise InvalidRequestError(f"malformed consumer group record {record_type.name}: {len(view) - pos} "
                                  f"bytes after the value")
    return body


def _by_id(a: Mapping[str, frozenset[int]], topic_ids: Mapping[str, uuid.UUID]) -> list[dict]:
    return [{"topic_id": topic_ids[t], "partitions": sorted(ps)} for t, ps in sorted(a.items()) if t in topic_ids]


def _by_name(entries, topic_names: Mapping[uuid.UUID, str]) -> Assignment:
    out: Assignment = {}
    for e in entries:
        name = topic_names.get(e["topic_id"])
        if name is not None and e["partitions"]:
            out[name] = out.get(name, frozenset()) | frozenset(e["partitions"])
    return out


def group_records(group: ConsumerGroup, topic_ids: Mapping[str, uuid.UUID]) -> dict[bytes, bytes]:
    """Every record (key -> value) of the group as it stands, in Kafka's write order (5, 4, 3, 7, 6, 8)."""
    gid, members = group.group_id, sorted(group.members.values(), key=lambda m: m.member_id)
    out: dict[bytes, bytes] = {}
    for m in members:
        out[encode_consumer_key(RecordType.MEMBER_METADATA, gid, m.member_id)] = encode_value(
            RecordType.MEMBER_METADATA,
            {"instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
             "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed_names),
             "subscribed_topic_regex": m.subscribed_regex, "rebalance_timeout_ms": m.rebalance_timeout_ms,
             "server_assignor": m.server_assignor,
             "classic_member_metadata": None if m.classic is None else {
                 "session_timeout_ms": m.classic.session_timeout_ms,
                 "supported_protocols": [{"name": n, "metadata": d} for n, d in m.classic.protocols]}})
    out[encode_consumer_key(RecordType.PARTITION_METADATA, gid)] = encode_value(RecordType.PARTITION_METADATA, {
        "topics": [{"topic_id": topic_ids[t], "topic_name": t, "num_partitions": n}
                   for t, n in sorted(group.subscribed_metadata.items()) if t in topic_ids]})
    out[encode_consumer_key(RecordType.GROUP_EPOCH, gid)] = encode_value(RecordType.GROUP_EPOCH,
                                                                         {"epoch": group.group_epoch})
    for m in members:
        out[encode_consumer_key(RecordType.TARGET_ASSIGNMENT_MEMBER, gid, m.member_id)] = encode_value(
            RecordType.TARGET_ASSIGNMENT_MEMBER,
            {"topic_partitions": _by_id(group.target.get(m.member_id, {}), topic_ids)})
    out[encode_consumer_key(RecordType.TARGET_ASSIGNMENT_METADATA, gid)] = encode_value(
        RecordType.TARGET_ASSIGNMENT_METADATA, {"assignment_epoch": group.target_epoch})
    for m in members:
        out[encode_consumer_key(RecordType.CURRENT_ASSIGNMENT, gid, m.member_id)] = encode_value(
            RecordType.CURRENT_ASSIGNMENT,
            {"member_epoch": m.member_epoch, "previous_member_epoch": m.previous_epoch,
             "state": _STATE_CODES[m.state], "assigned_partitions": _by_id(m.assigned, topic_ids),
             "partitions_pending_revocation": _by_id(m.revoking, topic_ids)})
    return out


def changes(stored: Mapping[bytes, bytes], records: Mapping[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """What to write to go from ``stored`` to ``records`` (key -> value): tombstones for keys gone, by record
    type from 8 down to 3 (earlier formats' keys first), then changed values in ``records``' order."""
    gone = sorted((k for k in stored if k not in records), key=lambda k: -int.from_bytes(k[:2], "big"))
    return [(k, None) for k in gone] + [(k, v) for k, v in records.items() if stored.get(k) != v]


def restore_group(group_id: str, records: Mapping[bytes, bytes],
                  topic_names: Mapping[uuid.UUID, str]) -> ConsumerGroup | None:
    """The group the records (key -> value, tombstones already applied) describe; None without a group epoch
    record (what is left of a deleted group). ``topic_names``: the name of each topic id that exists.
    Records of the earlier format (1000/1001) are read by group_consumer_legacy. InvalidRequestError for a
    malformed record or one of another group, UnsupportedVersionError for an unknown value version."""
    by_type: dict[int, dict[str | None, dict]] = {}
    legacy: dict[bytes, bytes] = {}
    for key, value in records.items():
        k = decode_key(key)
        if not isinstance(k, ConsumerGroupKey) or k.group != group_id:
            raise InvalidRequestError(f"record of {k} is not a consumer group record of {group_id!r}")
        if k.record_type not in _VALUES:
            legacy[key] = value
            continue
        by_type.setdefault(k.record_type, {})[k.member] = decode_value(RecordType(k.record_type), value)
    if legacy and not by_type:
        from .group_consumer_legacy import restore_legacy_group
        return restore_legacy_group(group_id, legacy)
    if legacy:
        raise InvalidRequestError(f"consumer group {group_id!r} has records of both formats")
    epoch = by_type.get(RecordType.GROUP_EPOCH, {}).get(None)
    if epoch is None:
        return None
    target_meta = by_type.get(RecordType.TARGET_ASSIGNMENT_METADATA, {}).get(None)
    group = ConsumerGroup(group_id, epoch["epoch"], 0 if target_meta is None else target_meta["assignment_epoch"])
    metadata = by_type.get(RecordType.PARTITION_METADATA, {}).get(None)
    if metadata is not None:
        group.subscribed_metadata = {t["topic_name"]: t["num_partitions"] for t in metadata["topics"]
                                     if topic_names.get(t["topic_id"]) == t["topic_name"]}
    current = by_type.get(RecordType.CURRENT_ASSIGNMENT, {})
    targets = by_type.get(RecordType.TARGET_ASSIGNMENT_MEMBER, {})
    for member_id, meta in sorted(by_type.get(RecordType.MEMBER_METADATA, {}).items()):
        m = ConsumerMember(member_id, meta["instance_id"], meta["rack_id"], meta["client_id"], meta["client_host"],
                           meta["rebalance_timeout_ms"], tuple(sorted(set(meta["subscribed_topic_names"]))),
                           meta["subscribed_topic_regex"] or None, meta["server_assignor"])
        classic = meta["classic_member_metadata"]
        if classic is not None:
            m.classic = ClassicProtocols(classic["session_timeout_ms"], tuple(
                (p["name"], p["metadata"]) for p in classic["supported_protocols"]))
        cur = current.get(member_id)
        if cur is not None:
            state = _STATES.get(cur["state"])
            if state is None:
                raise InvalidRequestError(f"consumer group {group_id!r} member {member_id}: unknown member state "
                                          f"{cur['state']}")
            m.member_epoch, m.previous_epoch, m.state = cur["member_epoch"], cur["previous_member_epoch"], state
            m.assigned = _by_name(cur["assigned_partitions"], topic_names)
            m.revoking = _by_name(cur["partitions_pending_revocation"], topic_names)
        group.members[member_id] = m
        target = targets.get(member_id)
        group.target[member_id] = {} if target is None else _by_name(target["topic_partitions"], topic_names)
        if m.instance_id is not None:
            group.static_members[m.instance_id] = member_id
    return group
