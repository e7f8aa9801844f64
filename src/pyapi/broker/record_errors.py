"""Per-record produce errors (KIP-467, Produce v8+): which records of a refused batch broke a record-level rule.

The log refuses a client batch whole. When the reason is one of Kafka's record-level rules (a record without a
key on a compacted topic: INVALID_RECORD; a CreateTime timestamp outside message.timestamp.before/after.max.ms
or negative: INVALID_TIMESTAMP), Kafka's LogValidator also names each offending record by its index in the
batch, with a message, and sums them up in the partition's error_message. :func:`record_errors` finds them the
same way, after the fact (only refused batches pay for it).
"""

from __future__ import annotations

from .. import _engine
from ..errors import InvalidRecordError, InvalidTimestampError, SeglogError

__all__ = ["record_errors"]


def record_errors(batch, config, now_ms: int, topic: str, partition: int, error: SeglogError
                  ) -> tuple[int, list[dict], str] | None:
    """``(error_code, record_errors, error_message)`` for a batch ``error`` refused for record-level reasons, as
    Kafka's Produce response carries them (``[{"batch_index", "batch_index_error_message"}]``; the code is
    INVALID_TIMESTAMP if any record's timestamp is refused, else INVALID_RECORD); None when the reason
    is not about particular records (a malformed batch, a size limit...). ``config`` is the topic's LogConfig,
    ``now_ms`` the time the append was tried at."""
    if not isinstance(error, (InvalidRecordError, InvalidTimestampError)):
        return None
    try:
        records = _engine.decode_records(batch)
    except SeglogError:
        return None
    if not records:
        return None
    first = records[0].offset
    found, timestamps = [], False
    for r in records:
        index = r.offset - first
        if config.compact and r.key is None:
            found.append((index, f"Compacted topic cannot accept message without key in topic partition "
                                 f"{topic}-{partition}."))
        elif not config.log_append_time and r.timestamp != -1:
            try:
                _engine.check_timestamps(r.timestamp, r.timestamp, now_ms, config.message_timestamp_before_max_ms,
                                         config.message_timestamp_after_max_ms)
            except InvalidTimestampError:
                timestamps = True
                found.append((index, f"Timestamp {r.timestamp} of message with offset {r.offset} is out of range. "
                                     f"The timestamp should be within [{now_ms - config.message_timestamp_before_max_ms}"
                                     f", {now_ms + config.message_timestamp_after_max_ms}]"))
    if not found:
        return None
    if timestamps:
        code, summary = InvalidTimestampError.code, "One or more records have been rejected due to invalid timestamp"
    else:
        code = InvalidRecordError.code
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in found[:3])
        summary = (f"One or more records have been rejected due to {len(found)} record errors in total, and only "
                   f"showing the first three errors at most: [{shown}]")
    return code, [{"batch_index": i, "batch_index_error_message": m} for i, m in found], summary

