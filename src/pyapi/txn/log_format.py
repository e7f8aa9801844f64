"""Records of the compacted topic ``__transaction_state``, in Kafka's key/value format (TransactionLogKey and
TransactionLogValue), so Kafka's tools read what seglog writes and the other way round.

Key v0: version int16 (0), transactional_id string. Value: version int16, then producer_id int64,
producer_epoch int16, transaction_timeout_ms int32, transaction_status int8, transaction_partitions (nullable
array of [topic string, partition_ids [int32]]), transaction_last_update_timestamp_ms int64,
transaction_start_timestamp_ms int64. Value v0 is the classic encoding, v1 the flexible one (compact strings and
arrays, tagged fields); seglog writes v0 (as Kafka does before its metadata version 3.2) and reads both. A null
value is a tombstone: the transactional id expired (state Dead).

A transactional id lives in partition ``abs(javaHashCode(id)) % transaction.state.log.num.partitions``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedVersionError
from ..offsets_format import Reader, Writer, partitions_by_topic
from ..offsets_store import partition_for_group

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnLogValue", "encode_key", "decode_key", "encode_value", "decode_value",
           "partition_for_transactional_id"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0


@dataclass(frozen=True)
class TxnLogValue:
    """One transactional id's stored state. ``status`` is Kafka's TransactionState id (seglog.txn.metadata);
    ``partitions`` the (topic, partition) pairs of the transaction, empty for the states that have none."""
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: frozenset
    last_update_ms: int
    start_ms: int


def partition_for_transactional_id(transactional_id: str, partitions: int) -> int:
    """Kafka's placement: Utils.abs(transactionalId.hashCode) % partitions (the offsets topic's rule)."""
    return partition_for_group(transactional_id, partitions)


def encode_key(transactional_id: str) -> bytes:
    return bytes(Writer().int16(KEY_VERSION).string(transactional_id))


def decode_key(data) -> str:
    """The transactional id of a key; UnsupportedVersionError for a key version other than 0."""
    r = Reader(data, "__transaction_state key")
    version = r.int16()
    if version != KEY_VERSION:
        raise UnsupportedVersionError(f"__transaction_state key version {version} is not 0")
    return r.string()


def encode_value(v: TxnLogValue, *, empty_state: bool) -> bytes:
    """Value v0. ``empty_state`` (state Empty) writes a null partition list, as Kafka does."""
    w = Writer().int16(VALUE_VERSION).int64(v.producer_id).int16(v.producer_epoch).int32(v.timeout_ms).int8(v.status)
    if empty_state:
        w.int32(-1)
    else:
        by_topic = partitions_by_topic(sorted(v.partitions))
        w.int32(len(by_topic))
        for topic, ps in by_topic.items():
            w.string(topic).int32(len(ps))
            for p in ps:
                w.int32(p)
    return bytes(w.int64(v.last_update_ms).int64(v.start_ms))


def decode_value(data) -> TxnLogValue:
    """A value v0 or v1; UnsupportedVersionError for other versions, InvalidRequestError if malformed."""
    version = Reader(data, "__transaction_state value").int16()
    if version not in (0, 1):
        raise UnsupportedVersionError(f"__transaction_state value version {version} is not 0 or 1")
    r = Reader(data, f"__transaction_state value v{version}", flexible=version >= 1)
    r.pos = 2
    pid, epoch, timeout, status = r.int64(), r.int16(), r.int32(), r.int8()
    partitions = set()
    for _ in range(r.array_length()):
        topic = r.string()
        for _ in range(r.array_length()):
            partitions.add((topic, r.int32()))
        r.skip_tagged_fields()
    last_update, start = r.int64(), r.int64()
    r.skip_tagged_fields()
    return TxnLogValue(pid, epoch, timeout, status, frozenset(partitions), last_update, start)
