# Control batches: the COMMIT / ABORT markers that end a transaction in a partition (Kafka's
# EndTransactionMarker). A control batch has the control attribute bit (and the transactional bit), the
# producer's id and epoch, base sequence -1 and one record:
#   key   = version int16 (0) + type int16 (0 ABORT, 1 COMMIT)
#   value = version int16 (0) + coordinatorEpoch int32
# The record has no headers, attributes 0 and timestamp/offset deltas 0 (17 bytes after the 61-byte header),
# unless compaction gave the batch a delete horizon (KIP-534: the base timestamp, the delta relative to it).

cdef enum:
    CONTROL_ABORT = 0
    CONTROL_COMMIT = 1


def control_batch(int64_t producer_id, int16_t producer_epoch, bint commit, int32_t coordinator_epoch,
                  int64_t timestamp, int64_t base_offset=0, int32_t leader_epoch=0, int64_t delete_horizon=-1):
    """One COMMIT (commit true) or ABORT marker batch of a producer's transaction, as bytes (78 of them without
    a delete horizon). ``delete_horizon`` >= 0 sets the delete-horizon attribute with it as the base timestamp
    (the cleaner's KIP-534 horizon, the record's timestamp delta then relative to it), as compaction rewrites
    a marker it may later remove."""
    if producer_id < 0 or producer_epoch < 0:
        raise _errors.InvalidArgumentError(
            f"a transaction marker needs a producer id and epoch, not {producer_id}/{producer_epoch}")
    cdef int64_t base_ts = delete_horizon if delete_horizon >= 0 else timestamp
    cdef int64_t ts_delta = timestamp - base_ts
    cdef int64_t body = 15 + varint_size(ts_delta)          # attributes .. headers count
    cdef int64_t size = BATCH_HEADER_SIZE + varint_size(body) + body
    cdef int16_t attributes = ATTR_TRANSACTIONAL | ATTR_CONTROL
    if delete_horizon >= 0:
        attributes |= ATTR_DELETE_HORIZON
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef unsigned char *p = <unsigned char *>PyBytes_AS_STRING(out)
    cdef unsigned char *r = p + BATCH_HEADER_SIZE
    put_be64(p + OFF_BASE_OFFSET, <uint64_t>base_offset)
    put_be32(p + OFF_LENGTH, <uint32_t>(size - LOG_OVERHEAD))
    put_be32(p + OFF_LEADER_EPOCH, <uint32_t>leader_epoch)
    p[OFF_MAGIC] = 2
    put_be16(p + OFF_ATTRIBUTES, <uint16_t>attributes)
    put_be32(p + OFF_LAST_OFFSET_DELTA, 0)
    put_be64(p + OFF_BASE_TIMESTAMP, <uint64_t>base_ts)
    put_be64(p + OFF_MAX_TIMESTAMP, <uint64_t>timestamp)
    put_be64(p + OFF_PRODUCER_ID, <uint64_t>producer_id)
    put_be16(p + OFF_PRODUCER_EPOCH, <uint16_t>producer_epoch)
    put_be32(p + OFF_BASE_SEQUENCE, <uint32_t>0xffffffff)
    put_be32(p + OFF_RECORDS_COUNT, 1)
    r = put_varint(r, body)
    r[0] = 0                                  # record attributes
    r = put_varint(r + 1, ts_delta)           # timestamp delta
    r = put_varint(r, 0)                      # offset delta
    r = put_varint(r, 4)                      # key: version, type
    put_be16(r, 0)
    put_be16(r + 2, CONTROL_COMMIT if commit else CONTROL_ABORT)
    r = put_varint(r + 4, 6)                  # value: version, coordinator epoch
    put_be16(r, 0)
    put_be32(r + 2, <uint32_t>coordinator_epoch)
    r = put_varint(r + 6, 0)                  # no headers
    put_be32(p + OFF_CRC, crc32c_buf(p + CRC_START, size - CRC_START))
    return out


def control_marker(data, Py_ssize_t position=0):
    """The marker of the control batch at ``position`` in ``data``: (commit, coordinator epoch); commit is
    None for a control record of another type (Kafka reserves other types; readers skip them).
    CorruptRecordError if the batch is not a control batch or its first record does not parse."""
    cdef Py_buffer buf
    cdef const unsigned char *p
    cdef const unsigned char *end
    cdef int64_t length, v, klen, vlen
    cdef int16_t kind
    cdef int32_t coordinator_epoch = -1
    take_bytes(data, &buf, "control batch")
    try:
        p = <const unsigned char *>buf.buf + position
        end = <const unsigned char *>buf.buf + buf.len
        if position < 0 or end - p < BATCH_HEADER_SIZE or not (get_be16(p + OFF_ATTRIBUTES) & ATTR_CONTROL) \
                or (get_be16(p + OFF_ATTRIBUTES) & ATTR_CODEC_MASK):
            raise _errors.CorruptRecordError("not an uncompressed control batch")
        if <int64_t>(end - p) > LOG_OVERHEAD + <int64_t>get_be32(p + OFF_LENGTH):
            end = p + LOG_OVERHEAD + get_be32(p + OFF_LENGTH)
        p += BATCH_HEADER_SIZE
        p = get_varint(p, end, &length)
        if p == NULL or length < 1 or end - p < length:
            raise _errors.CorruptRecordError("control record cut short")
        end = p + length
        p = get_varlong(p + 1, end, &v)                            # attributes, timestamp delta
        if p != NULL:
            p = get_varint(p, end, &v)                              # offset delta
        if p != NULL:
            p = get_varint(p, end, &klen)
        if p == NULL or klen < 4 or end - p < klen:
            raise _errors.CorruptRecordError("control record key does not parse")
        kind = <int16_t>get_be16(p + 2)
        p = get_varint(p + klen, end, &vlen)
        if p != NULL and vlen >= 6 and end - p >= vlen:
            coordinator_epoch = <int32_t>get_be32(p + 2)
    finally:
        PyBuffer_Release(&buf)
    if kind == CONTROL_COMMIT:
        return True, coordinator_epoch
    if kind == CONTROL_ABORT:
        return False, coordinator_epoch
    return None, coordinator_epoch
