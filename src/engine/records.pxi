# Decoding records of v2 batches into Python objects (see batch.pxd for the byte layout).

@cython.freelist(1024)
@cython.no_gc          # fields are str, bytes, None and tuples of them, read-only: no cycles possible
cdef class Record:
    """One record as read back: offset, timestamp, key, value, headers (a tuple of (str, bytes|None) pairs).

    ``timestamp_type`` is 0 for CreateTime, 1 for LogAppendTime (then ``timestamp`` is the batch's append
    time). ``topic``/``partition`` are set when the record came through a topic partition (None/-1 otherwise).
    """

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        cdef Record o = <Record>other
        return (self.offset == o.offset and self.timestamp == o.timestamp and self.key == o.key
                and self.value == o.value and self.headers == o.headers and self.topic == o.topic
                and self.partition == o.partition and self.timestamp_type == o.timestamp_type)

    def __hash__(self):
        return hash((self.topic, self.partition, self.offset))

    def __reduce__(self):
        return (_make_record, (self.topic, self.partition, self.offset, self.timestamp, self.timestamp_type,
                               self.key, self.value, self.headers))


def _make_record(topic, partition, offset, timestamp, timestamp_type, key, value, headers):
    cdef Record r = Record.__new__(Record)
    r.topic = topic
    r.partition = partition
    r.offset = offset
    r.timestamp = timestamp
    r.timestamp_type = timestamp_type
    r.key = key
    r.value = value
    r.headers = headers
    return r


cdef inline object _bytes_or_none(const unsigned char *p, int64_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char *>p, <Py_ssize_t>n)


cdef inline Record decode_record(const unsigned char *rp, const unsigned char *rec_end, BatchHeader *h, int64_t offset,
                                 int64_t ts_delta, int ts_type, object topic, int partition, object path):
    """The Record whose key length starts at rp (its length, attributes, timestamp and offset deltas read) and
    which ends at rec_end. Raises CorruptRecordError when its fields do not fill it exactly."""
    cdef int64_t klen, vlen, hcount, hklen, hvlen, j
    cdef Record r
    cdef object key, value, hkey
    cdef tuple headers
    cdef list hl
    rp = get_varint(rp, rec_end, &klen)
    if rp == NULL or klen < -1 or klen > rec_end - rp:
        raise _corrupt_records(h, path, "bad key length")
    key = _bytes_or_none(rp, klen)
    if klen > 0:
        rp += klen
    rp = get_varint(rp, rec_end, &vlen)
    if rp == NULL or vlen < -1 or vlen > rec_end - rp:
        raise _corrupt_records(h, path, "bad value length")
    value = _bytes_or_none(rp, vlen)
    if vlen > 0:
        rp += vlen
    rp = get_varint(rp, rec_end, &hcount)
    if rp == NULL or hcount < 0 or hcount > rec_end - rp:
        raise _corrupt_records(h, path, "bad header count")
    if hcount == 0:
        headers = ()
    else:
        hl = []
        for j in range(hcount):
            rp = get_varint(rp, rec_end, &hklen)
            if rp == NULL or hklen < 0 or hklen > rec_end - rp:
                raise _corrupt_records(h, path, "bad header key")
            hkey = PyUnicode_DecodeUTF8(<const char *>rp, <Py_ssize_t>hklen, "replace")
            rp += hklen
            rp = get_varint(rp, rec_end, &hvlen)
            if rp == NULL or hvlen < -1 or hvlen > rec_end - rp:
                raise _corrupt_records(h, path, "bad header value")
            hl.append((hkey, _bytes_or_none(rp, hvlen)))
            if hvlen > 0:
                rp += hvlen
        headers = tuple(hl)
    if rp != rec_end:
        raise _corrupt_records(h, path, "record length does not match its fields")
    r = Record.__new__(Record)
    r.topic = topic
    r.partition = partition
    r.offset = offset
    r.timestamp = h.max_timestamp if ts_type else h.base_timestamp + ts_delta
    r.timestamp_type = ts_type
    r.key = key
    r.value = value
    r.headers = headers
    return r


cdef int decode_batch(const unsigned char *p, BatchHeader *h, list out, int64_t min_offset, int64_t max_offset,
                      object topic, int partition, object path, Py_ssize_t max_inflated) except -1:
    """Append the records of one structurally valid batch at p with offsets in [min_offset, max_offset) to out.

    Control batches (transaction markers) hold no user records and are skipped. Raises CorruptRecordError
    when the records section does not parse exactly into records_count records.
    """
    cdef int codec = h.attributes & ATTR_CODEC_MASK
    cdef int64_t size = LOG_OVERHEAD + <int64_t>h.length
    cdef Inflated inflated
    cdef const unsigned char *rp
    cdef const unsigned char *rend
    cdef const unsigned char *rec_end
    cdef int64_t length, ts_delta, off_delta, offset
    cdef int32_t i
    cdef int ts_type = 1 if h.attributes & ATTR_LOG_APPEND_TIME else 0
    if h.attributes & ATTR_CONTROL:
        return 0
    if h.base_offset + h.last_offset_delta < min_offset or h.base_offset >= max_offset:
        return 0
    if codec != CODEC_NONE:
        inflated = inflate(codec, p + BATCH_HEADER_SIZE, size - BATCH_HEADER_SIZE, max_inflated)
        rp = inflated.ptr
        rend = rp + inflated.size
    else:
        rp = p + BATCH_HEADER_SIZE
        rend = p + size
    for i in range(h.records_count):
        rp = get_varint(rp, rend, &length)
        if rp == NULL or length < 6 or length > rend - rp:
            raise _corrupt_records(h, path, "bad record length")
        rec_end = rp + length
        rp += 1                                    # record attributes (unused, always 0)
        rp = get_varlong(rp, rec_end, &ts_delta)
        if rp != NULL:
            rp = get_varint(rp, rec_end, &off_delta)
        if rp == NULL:
            raise _corrupt_records(h, path, "bad record timestamp or offset delta")
        offset = h.base_offset + off_delta
        if offset < min_offset or offset >= max_offset:
            rp = rec_end
            continue
        out.append(decode_record(rp, rec_end, h, offset, ts_delta, ts_type, topic, partition, path))
        rp = rec_end
    if rp != rend:
        raise _corrupt_records(h, path, "bytes left after the last record")
    return 0


cdef object _corrupt_records(BatchHeader *h, object path, str why):
    """The error for records that do not parse; callers `raise` it themselves, so the C compiler sees that
    control never continues past the failed check (a helper raising on its own leaves every variable the check
    guards "maybe uninitialized" on the path where it would return)."""
    return _errors.CorruptRecordError(f"corrupt records in batch: {why}", path=path, offset=h.base_offset)


def decode_records(data, int64_t min_offset=-1, int64_t max_offset=INT64_MAX, topic=None, int partition=-1,
                   bint verify_crc=True, path=None, Py_ssize_t max_inflated_bytes=MAX_INFLATED_BYTES):
    """Records of the whole batches in ``data`` with offsets in [min_offset, max_offset), as a list.

    A final batch cut short (as fetch responses end) is ignored; any other malformed or corrupt batch raises
    CorruptRecordError (its position in ``data``), as does a batch whose offsets are out of order: negative,
    not after the previous batch's, or a negative lastOffsetDelta (baseOffset is outside the CRC: this check is
    what stops a damaged one from hiding or renumbering records). Control batches are skipped. CRCs are checked
    unless ``verify_crc`` is False. A compressed batch whose records inflate past ``max_inflated_bytes`` raises
    RecordTooLargeError (see codecs.pxi).
    """
    cdef Py_buffer buf
    cdef list out = []
    cdef const unsigned char *p
    cdef int64_t pos = 0, n, stop, prev_last = -1
    cdef BatchHeader h
    cdef BatchCheck c
    cdef OffsetCheck oc
    take_bytes(data, &buf, "batch data")
    try:
        p = <const unsigned char *>buf.buf
        n = buf.len
        while True:
            stop = scan_batches_gil(p, n, pos, verify_crc, &c)
            if c != CHECK_OK and c != CHECK_SHORT_HEADER and c != CHECK_INCOMPLETE:
                raise_check(c, path, stop, p + stop, n - stop)
            while pos < stop:
                oc = check_offsets(p + pos, prev_last, INT64_MAX)
                if oc != OFFSETS_OK:
                    raise_offsets(oc, path, pos, p + pos, prev_last, INT64_MAX)
                read_header(p + pos, &h)
                prev_last = h.base_offset + h.last_offset_delta
                decode_batch(p + pos, &h, out, min_offset, max_offset, topic, partition, path,
                             max_inflated_bytes)
                pos += LOG_OVERHEAD + h.length
            if c != CHECK_OK or pos >= n:
                break
    finally:
        PyBuffer_Release(&buf)
    return out
