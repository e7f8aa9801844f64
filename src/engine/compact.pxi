# Log compaction per batch (cleaner.py's steps 2 and 4): the offset map's keys, and the filter that keeps,
# copies, re-encodes or drops each batch, over whole batches in memory, without a Python object per record
# (only each keyed record's key, to look it up in the map). The rules are the module docstring of cleaner.py.

cdef struct RecordSpan:
    const unsigned char *start        # the record's length varint
    const unsigned char *fields       # just after offsetDelta: keyLength varint .. the end of the headers
    const unsigned char *end
    int64_t ts_delta
    int64_t off_delta
    const unsigned char *key
    int64_t klen                      # -1: null
    int64_t vlen                      # -1: null (a tombstone)


cdef const unsigned char *parse_record(const unsigned char *rp, const unsigned char *rend,
                                       RecordSpan *r) noexcept nogil:
    """Parse one record at rp (checking every length, as decode_batch does); the position after it, or NULL if
    it does not parse."""
    cdef int64_t length, hcount, hklen, hvlen, j
    r.start = rp
    rp = get_varint(rp, rend, &length)
    if rp == NULL or length < 6 or length > rend - rp:
        return NULL
    r.end = rp + length
    rp += 1                                        # record attributes (unused, always 0)
    rp = get_varlong(rp, r.end, &r.ts_delta)
    if rp != NULL:
        rp = get_varint(rp, r.end, &r.off_delta)
    if rp == NULL:
        return NULL
    r.fields = rp
    rp = get_varint(rp, r.end, &r.klen)
    if rp == NULL or r.klen < -1 or r.klen > r.end - rp:
        return NULL
    r.key = rp
    if r.klen > 0:
        rp += r.klen
    rp = get_varint(rp, r.end, &r.vlen)
    if rp == NULL or r.vlen < -1 or r.vlen > r.end - rp:
        return NULL
    if r.vlen > 0:
        rp += r.vlen
    rp = get_varint(rp, r.end, &hcount)
    if rp == NULL or hcount < 0 or hcount > r.end - rp:
        return NULL
    for j in range(hcount):
        rp = get_varint(rp, r.end, &hklen)
        if rp == NULL or hklen < 0 or hklen > r.end - rp:
            return NULL
        rp += hklen
        rp = get_varint(rp, r.end, &hvlen)
        if rp == NULL or hvlen < -1 or hvlen > r.end - rp:
            return NULL
        if hvlen > 0:
            rp += hvlen
    if rp != r.end:
        return NULL
    return rp


cdef class _Records:
    """The records section of one batch (inflated when compressed; `owner` holds the bytes)."""
    cdef const unsigned char *p
    cdef const unsigned char *end
    cdef object owner


cdef _Records _records_of(const unsigned char *p, BatchHeader *h, Py_ssize_t max_inflated):
    cdef _Records rs = _Records.__new__(_Records)
    cdef int codec = h.attributes & ATTR_CODEC_MASK
    cdef int64_t size = LOG_OVERHEAD + <int64_t>h.length
    cdef Inflated inflated
    if codec != CODEC_NONE:
        inflated = inflate(codec, p + BATCH_HEADER_SIZE, size - BATCH_HEADER_SIZE, max_inflated)
        rs.owner = inflated
        rs.p = inflated.ptr
        rs.end = rs.p + inflated.size
    else:
        rs.p = p + BATCH_HEADER_SIZE
        rs.end = p + size
    return rs


def compaction_map_keys(data, int64_t min_offset, dict offset_map, path=None,
                        Py_ssize_t max_inflated_bytes=MAX_INFLATED_BYTES):
    """Cleaner step 2 over the whole batches in ``data``: offset_map[key] = offset for every keyed record at or
    after ``min_offset`` (control batches and keyless records skipped; later records win). CorruptRecordError for records that do not parse (CRCs are not checked here: the
    segment reads that produced ``data`` check them)."""
    cdef Py_buffer buf
    cdef const unsigned char *p
    cdef const unsigned char *rp
    cdef int64_t pos = 0, n, stop, offset
    cdef BatchHeader h
    cdef BatchCheck c
    cdef RecordSpan r
    cdef _Records rs
    cdef int32_t i
    take_bytes(data, &buf, "batch data")
    try:
        p = <const unsigned char *>buf.buf
        n = buf.len
        while True:
            stop = scan_batches(p, n, pos, False, &c)
            if c != CHECK_OK and c != CHECK_SHORT_HEADER and c != CHECK_INCOMPLETE:
                raise_check(c, path, stop, p + stop, n - stop)
            while pos < stop:
                read_header(p + pos, &h)
                if not (h.attributes & ATTR_CONTROL) and h.base_offset + h.last_offset_delta >= min_offset:
                    rs = _records_of(p + pos, &h, max_inflated_bytes)
                    rp = rs.p
                    for i in range(h.records_count):
                        rp = parse_record(rp, rs.end, &r)
                        if rp == NULL:
                            raise _corrupt_records(&h, path, "a record does not parse")
                        offset = h.base_offset + r.off_delta
                        if r.klen >= 0 and offset >= min_offset:
                            offset_map[PyBytes_FromStringAndSize(<const char *>r.key, r.klen)] = offset
                    if rp != rs.end:
                        raise _corrupt_records(&h, path, "bytes left after the last record")
                pos += LOG_OVERHEAD + h.length
            if c != CHECK_OK or pos >= n:
                break
    finally:
        PyBuffer_Release(&buf)


cdef inline void _put_header(unsigned char *b, BatchHeader *h, int64_t size, int16_t attributes,
                             int64_t base_ts, int64_t max_ts, int32_t count) noexcept nogil:
    """A v2 batch header for the `size`-byte batch at b with h's identity (base offset, lastOffsetDelta,
    leader epoch, producer fields) and the given attributes, timestamps and count; the CRC over b[21:size]."""
    put_be64(b + OFF_BASE_OFFSET, <uint64_t>h.base_offset)
    put_be32(b + OFF_LENGTH, <uint32_t>(size - LOG_OVERHEAD))
    put_be32(b + OFF_LEADER_EPOCH, <uint32_t>h.leader_epoch)
    b[OFF_MAGIC] = 2
    put_be16(b + OFF_ATTRIBUTES, <uint16_t>attributes)
    put_be32(b + OFF_LAST_OFFSET_DELTA, <uint32_t>h.last_offset_delta)
    put_be64(b + OFF_BASE_TIMESTAMP, <uint64_t>base_ts)
    put_be64(b + OFF_MAX_TIMESTAMP, <uint64_t>max_ts)
    put_be64(b + OFF_PRODUCER_ID, <uint64_t>h.producer_id)
    put_be16(b + OFF_PRODUCER_EPOCH, <uint16_t>h.producer_epoch)
    put_be32(b + OFF_BASE_SEQUENCE, <uint32_t>h.base_sequence)
    put_be32(b + OFF_RECORDS_COUNT, <uint32_t>count)
    put_be32(b + OFF_CRC, seglog_crc32c(0, b + CRC_START, <size_t>(size - CRC_START)))


cdef bytes _reencoded(BatchHeader *h, _Records rs, const unsigned char **kept, int32_t nkept, int64_t horizon,
                      bint has_horizon):
    """The batch of the kept records (their RecordSpans' starts in `kept`), re-encoded as cleaner.py's module
    docstring (step 4) says: timestamps relative to the delete horizon (when set) or the first kept record,
    offset deltas kept, key/value/headers copied byte for byte, recompressed with the batch's codec."""
    cdef bint lat = (h.attributes & ATTR_LOG_APPEND_TIME) != 0
    cdef int codec = h.attributes & ATTR_CODEC_MASK
    cdef RecordSpan r
    cdef int64_t ts, base_ts, max_ts = INT64_MIN, body, total = 0
    cdef int32_t i
    cdef unsigned char *w
    cdef int16_t attributes
    cdef bytearray records
    cdef bytes out, payload
    parse_record(kept[0], rs.end, &r)
    base_ts = horizon if has_horizon else (h.max_timestamp if lat else h.base_timestamp + r.ts_delta)
    for i in range(nkept):                          # sizes first: one buffer, written once
        parse_record(kept[i], rs.end, &r)
        ts = h.max_timestamp if lat else h.base_timestamp + r.ts_delta
        if ts > max_ts:
            max_ts = ts
        body = 1 + varint_size(ts - base_ts) + varint_size(r.off_delta) + (r.end - r.fields)
        total += varint_size(body) + body
    if lat:
        max_ts = h.max_timestamp
    records = bytearray(BATCH_HEADER_SIZE + total)
    w = <unsigned char *>PyByteArray_AS_STRING(records) + BATCH_HEADER_SIZE
    for i in range(nkept):
        parse_record(kept[i], rs.end, &r)
        ts = h.max_timestamp if lat else h.base_timestamp + r.ts_delta
        body = 1 + varint_size(ts - base_ts) + varint_size(r.off_delta) + (r.end - r.fields)
        w = put_varint(w, body)
        w[0] = 0
        w = put_varint(w + 1, ts - base_ts)
        w = put_varint(w, r.off_delta)
        memcpy(w, r.fields, <size_t>(r.end - r.fields))
        w += r.end - r.fields
    attributes = h.attributes & ~ATTR_DELETE_HORIZON
    if has_horizon:
        attributes |= ATTR_DELETE_HORIZON
    if codec != CODEC_NONE:
        payload = compress(codec, memoryview(records)[BATCH_HEADER_SIZE:])
        out = PyBytes_FromStringAndSize(NULL, BATCH_HEADER_SIZE + len(payload))
        memcpy(PyBytes_AS_STRING(out) + BATCH_HEADER_SIZE, PyBytes_AS_STRING(payload), len(payload))
    else:
        out = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(records), BATCH_HEADER_SIZE + total)
    _put_header(<unsigned char *>PyBytes_AS_STRING(out), h, len(out), attributes, base_ts, max_ts, nkept)
    return out


cdef bytes _empty_batch(BatchHeader *h):
    """Kafka's DefaultRecordBatch.writeEmptyHeader: the batch's identity without its records."""
    cdef bytes out = PyBytes_FromStringAndSize(NULL, BATCH_HEADER_SIZE)
    cdef int16_t attributes = h.attributes & (ATTR_LOG_APPEND_TIME | ATTR_TRANSACTIONAL | ATTR_CONTROL)
    _put_header(<unsigned char *>PyBytes_AS_STRING(out), h, BATCH_HEADER_SIZE, attributes, -1, h.max_timestamp, 0)
    return out


def compaction_filter(data, bytearray out, dict offset_map, int64_t map_end, int64_t now, int64_t new_horizon,
                      dict producers, path=None, Py_ssize_t max_inflated_bytes=MAX_INFLATED_BYTES):
    """Cleaner step 4 over the whole batches in ``data``, appending what stays to ``out``: control batches are
    copied; in other batches a record below ``map_end`` stays only if it has a key, is the latest for it in
    ``offset_map`` (or its key is not mapped), and is not a tombstone past its batch's delete horizon; a batch
    keeping every record and needing no new horizon is copied byte for byte, one losing records (or getting
    the horizon ``new_horizon`` for its first kept tombstones) is re-encoded, an emptied one is dropped unless
    it holds the last offset of a producer in ``producers`` (id -> last offset): then its header stays.
    Returns (records read, records kept, keyless dropped, tombstones dropped, empty batches kept).
    CorruptRecordError for records that do not parse."""
    cdef Py_buffer buf
    cdef const unsigned char *p
    cdef const unsigned char *rp
    cdef const unsigned char **kept = NULL
    cdef int64_t pos = 0, n, stop, offset, horizon, latest, size
    cdef int64_t read = 0, kept_total = 0, keyless = 0, tombs_dropped = 0, empties = 0
    cdef int32_t i, nkept, cap = 0
    cdef bint has_horizon, tombstones
    cdef BatchHeader h
    cdef BatchCheck c
    cdef RecordSpan r
    cdef _Records rs
    cdef object got
    take_bytes(data, &buf, "batch data")
    try:
        p = <const unsigned char *>buf.buf
        n = buf.len
        while True:
            stop = scan_batches(p, n, pos, False, &c)
            if c != CHECK_OK and c != CHECK_SHORT_HEADER and c != CHECK_INCOMPLETE:
                raise_check(c, path, stop, p + stop, n - stop)
            while pos < stop:
                read_header(p + pos, &h)
                size = LOG_OVERHEAD + <int64_t>h.length
                if h.attributes & ATTR_CONTROL:
                    out += PyMemoryView_FromMemory(<char *>(p + pos), size, PyBUF_READ)
                    pos += size
                    continue
                if h.records_count > cap:
                    PyMem_Free(kept)
                    kept = NULL
                    cap = max(h.records_count, 1024)
                    kept = <const unsigned char **>PyMem_Malloc(cap * sizeof(const unsigned char *))
                    if kept == NULL:
                        raise MemoryError()
                rs = _records_of(p + pos, &h, max_inflated_bytes)
                has_horizon = (h.attributes & ATTR_DELETE_HORIZON) != 0
                horizon = h.base_timestamp if has_horizon else 0
                read += h.records_count
                nkept = 0
                tombstones = False
                rp = rs.p
                for i in range(h.records_count):
                    rp = parse_record(rp, rs.end, &r)
                    if rp == NULL:
                        raise _corrupt_records(&h, path, "a record does not parse")
                    offset = h.base_offset + r.off_delta
                    if offset < map_end:
                        if r.klen < 0:
                            keyless += 1
                            continue                       # invalid in a compacted log
                        got = offset_map.get(PyBytes_FromStringAndSize(<const char *>r.key, r.klen))
                        if got is not None and offset < <int64_t>got:
                            continue                       # a later record has this key
                        if r.vlen < 0 and has_horizon and now >= horizon:
                            tombs_dropped += 1
                            continue                       # tombstone past its delete horizon
                    kept[nkept] = r.start
                    nkept += 1
                    if r.vlen < 0:
                        tombstones = True
                if rp != rs.end:
                    raise _corrupt_records(&h, path, "bytes left after the last record")
                kept_total += nkept
                if nkept == 0:
                    if h.producer_id >= 0:
                        got = producers.get(h.producer_id)
                        if got is not None and <int64_t>got == h.base_offset + h.last_offset_delta:
                            out += _empty_batch(&h)        # the producer's last sequence stays known
                            empties += 1
                elif nkept == h.records_count and not (tombstones and not has_horizon):
                    out += PyMemoryView_FromMemory(<char *>(p + pos), size, PyBUF_READ)
                elif tombstones and not has_horizon:
                    out += _reencoded(&h, rs, kept, nkept, new_horizon, True)
                else:
                    out += _reencoded(&h, rs, kept, nkept, horizon, has_horizon)
                pos += size
            if c != CHECK_OK or pos >= n:
                break
    finally:
        PyMem_Free(kept)
        PyBuffer_Release(&buf)
    return read, kept_total, keyless, tombs_dropped, empties
