"""`seglog dump-log --offsets-decoder`: the records of ``__consumer_offsets`` as kafka-dump-log.sh's
--offsets-decoder prints them (Kafka 4.0): the key as ``{"type":"<key version>","data":{...}}``, the value as
``{"version":"<value version>","data":{...}}`` or ``<DELETE>`` for a tombstone, compact JSON with Kafka's
camelCase field names. Offset commits (key types 0-1), classic group metadata (2, members' subscriptions and
assignments decoded when the protocol type is ``consumer``) and KIP-848 consumer group records (3-8) are
decoded; another record type is ``Unknown record type N at offset O, skipping.`` (seglog's earlier consumer
group key versions 1000/1001 included), a record that does not decode ``Error at offset O, skipping. <why>``.
"""

from __future__ import annotations

import base64
import json
import uuid

from ..assignors import Assignment, Subscription
from ..errors import SeglogError, UnsupportedVersionError
from ..group_consumer_records import RecordType, decode_value, tagged_fields
from ..offsets_format import (ConsumerGroupKey, GroupKey, OffsetKey, Reader, decode_group_value, decode_key,
                              decode_offset_value)

__all__ = ["key_and_payload"]


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _plain(value):
    """A decoded schema value as Kafka's JSON converters write it: camelCase names, uuids in Kafka's
    base64 form, bytes in base64."""
    if isinstance(value, dict):
        return {_camel(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    return value


def _key(k) -> dict:
    if isinstance(k, OffsetKey):
        return {"group": k.group, "topic": k.topic, "partition": k.partition}
    if isinstance(k, GroupKey):
        return {"group": k.group}
    return {"groupId": k.group} if k.member is None else {"groupId": k.group, "memberId": k.member}


def _version(value) -> int:
    return Reader(value, "__consumer_offsets value").int16()


def _offset_value(value, version: int) -> dict:
    om = decode_offset_value(value)
    out = {"offset": om.offset}
    if version >= 3:
        out["leaderEpoch"] = om.leader_epoch
    out |= {"metadata": om.metadata, "commitTimestamp": om.commit_timestamp}
    if version == 1:
        out["expireTimestamp"] = om.expire_timestamp
    return out


def _topic_partitions(partitions) -> list[dict]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def _subscription(data: bytes):
    """ConsumerProtocolSubscription as Kafka's JSON converter writes it at its version; the base64 bytes if
    it does not decode (as Kafka keeps them)."""
    try:
        version = min(_version(data), 3)
        sub = Subscription.decode(data)
    except SeglogError:
        return _plain(data)
    out = {"topics": sub.topics, "userData": _plain(sub.user_data) if sub.user_data is not None else None}
    if version >= 1:
        out["ownedPartitions"] = _topic_partitions(sub.owned_partitions)
    if version >= 2:
        out["generationId"] = sub.generation_id
    if version >= 3:
        out["rackId"] = sub.rack_id
    return out


def _assignment(data: bytes):
    try:
        _version(data)
        a = Assignment.decode(data)
    except SeglogError:
        return _plain(data)
    return {"assignedPartitions": _topic_partitions(a.partitions),
            "userData": _plain(a.user_data) if a.user_data is not None else None}


def _group_value(value, version: int) -> dict:
    g = decode_group_value(value)
    consumer = g.protocol_type == "consumer"
    out = {"protocolType": g.protocol_type, "generation": g.generation, "protocol": g.protocol, "leader": g.leader}
    if version >= 2:
        out["currentStateTimestamp"] = g.current_state_timestamp
    members = []
    for m in g.members:
        member = {"memberId": m.member_id}
        if version >= 3:
            member["groupInstanceId"] = m.group_instance_id
        member |= {"clientId": m.client_id, "clientHost": m.client_host}
        if version >= 1:
            member["rebalanceTimeout"] = m.rebalance_timeout_ms
        member |= {"sessionTimeout": m.session_timeout_ms,
                   "subscription": _subscription(m.subscription) if consumer else _plain(m.subscription),
                   "assignment": _assignment(m.assignment) if consumer else _plain(m.assignment)}
        members.append(member)
    out["members"] = members
    return out


def key_and_payload(key: bytes | None, value: bytes | None, offset: int) -> tuple[str, str | None]:
    """The ``key`` and ``payload`` texts of one record (payload None: nothing to print after the key)."""
    if key is None:
        return f"Error at offset {offset}, skipping. the record has no key", None
    try:
        k = decode_key(key)
        if isinstance(k, ConsumerGroupKey):
            RecordType(k.record_type)                      # ValueError: seglog's earlier 1000/1001
    except (UnsupportedVersionError, ValueError):
        return f"Unknown record type {int.from_bytes(key[:2], 'big', signed=True)} at offset {offset}, skipping.", None
    except SeglogError as e:
        return f"Error at offset {offset}, skipping. {e}", None
    key_text = _json({"type": str(int.from_bytes(key[:2], "big")), "data": _key(k)})
    if value is None:
        return key_text, "<DELETE>"
    try:
        version = _version(value)
        if isinstance(k, OffsetKey):
            data = _offset_value(value, version)
        elif isinstance(k, GroupKey):
            data = _group_value(value, version)
        else:
            body = decode_value(RecordType(k.record_type), value)
            tagged = tagged_fields(RecordType(k.record_type))
            data = _plain({f: v for f, v in body.items() if not (f in tagged and v is None)})
    except SeglogError as e:
        return f"Error at offset {offset}, skipping. {e}", None
    return key_text, _json({"version": str(version), "data": data})
