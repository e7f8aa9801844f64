# Decoding v2 record batches straight into Apache Arrow column buffers (used by seglog.spark).
#
# arrow_columns() walks whole batches of a buffer (a Log.read() view, or a Kafka fetch response's records)
# and writes the records' fields into raw Arrow buffers built in C: int32 offsets + data for the binary
# and string columns, LSB-first validity bitmaps, little-endian int64 / int32 values. Every buffer is a
# scratch `bytes` object (scratch.pxi: pooled, so the pages a reader writes are the same batch after batch,
# not fresh memory the kernel must fault in and zero), sized once from the batch headers (arrow_presize) and
# regrown by doubling if that was short; it is returned as a memoryview of the prefix written, so handing it
# to `pyarrow.py_buffer()` and `pyarrow.Array.from_buffers()` copies nothing, and the pool reuses the object
# once the Arrow arrays over it are gone. pyarrow itself is never imported here: the core stays free of it,
# seglog.spark wraps the buffers.
#
# Columns (Spark's Kafka source schema): key binary, value binary, offset int64, timestamp int64 in
# microseconds (timestamp[us, UTC]), timestampType int32, and with include_headers the parts of
# headers list<struct<key: string, value: binary>> (a record without headers gets a null list, as Spark's
# Kafka source gives). Topic and partition are constants of a partition and left to the caller.
#
# Invariants:
# - Records keep log order; only records with min_offset <= offset < max_offset are emitted. Control batches
#   (transaction markers) are skipped; batches whose maxTimestamp < min_timestamp are skipped whole (a
#   conservative prune: no record of such a batch can have a timestamp >= min_timestamp).
# - Decoding stops at a batch boundary: before the first batch when the output already holds at least
#   max_output_bytes of data (so one call never builds arrays past the int32 offset range), at the first
#   batch starting at or after max_offset (`done`), or at a final batch cut short (as fetch responses end).
#   `consumed` says how many input bytes were used, so the caller continues with data[consumed:].
# - Header keys are UTF-8 (Arrow strings must be): bytes that are not valid UTF-8 are replaced as
#   records.pxi decodes them (U+FFFD), so the Arrow rows equal what Log.records() returns.
# - Errors: CorruptRecordError for a malformed batch or records section (CRCs are checked only with
#   verify_crc: Log.read() has already checked them) or batch offsets out of order (as decode_records checks
#   them), UnsupportedCompressionTypeError for an unknown codec.

from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_AsUTF8String
from libc.string cimport memset

cdef enum:
    ARROW_MIN_CAPACITY = 256            # never below 2: tiny bytes objects may be shared singletons
    ARROW_DEFAULT_MAX_OUTPUT = 256 << 20


ctypedef struct ArrowBuf:
    PyObject *obj                      # an owned reference to a scratch bytes object, NULL before the first use
    unsigned char *data
    Py_ssize_t size                    # bytes written
    Py_ssize_t cap                     # bytes allocated


ctypedef struct ArrowBinary:
    ArrowBuf offsets                   # int32, one per row + 1
    ArrowBuf data
    ArrowBuf validity                  # allocated at the first null only
    Py_ssize_t nulls


ctypedef struct ArrowOut:
    Py_ssize_t rows
    Py_ssize_t row_cap                 # rows the fixed-width buffers have room for
    ArrowBuf offset                    # int64
    ArrowBuf timestamp                 # int64 microseconds
    ArrowBuf timestamp_type            # int32
    ArrowBinary key
    ArrowBinary value
    bint headers
    ArrowBuf list_offsets              # int32, one per row + 1: where each record's headers start
    ArrowBuf list_validity             # null list for records without headers
    Py_ssize_t list_nulls
    Py_ssize_t header_rows
    Py_ssize_t header_cap
    ArrowBinary header_key             # string; never null
    ArrowBinary header_value


cdef int abuf_reserve(ArrowBuf *b, Py_ssize_t need) except -1:
    """Room for `need` more bytes in b: a scratch object of at least twice the capacity, the bytes so far
    copied over."""
    cdef Py_ssize_t want = b.size + need, cap
    cdef object fresh
    if want <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else ARROW_MIN_CAPACITY
    if cap < want:
        cap = want
    fresh = scratch_bytes(cap)
    if b.size:
        memcpy(PyBytes_AS_STRING(fresh), b.data, <size_t>b.size)
    Py_XDECREF(b.obj)
    Py_INCREF(fresh)
    b.obj = <PyObject *>fresh
    b.data = <unsigned char *>PyBytes_AS_STRING(fresh)
    b.cap = PyBytes_GET_SIZE(fresh)
    return 0


cdef inline int abuf_put(ArrowBuf *b, const unsigned char *src, Py_ssize_t n) except -1:
    if b.size + n > b.cap:
        abuf_reserve(b, n)
    if n > 0:
        memcpy(b.data + b.size, src, <size_t>n)
        b.size += n
    return 0


cdef object abuf_take(ArrowBuf *b):
    """A memoryview of the bytes written (its object may be longer: see scratch.pxi); b is left empty."""
    cdef object out
    if b.obj == NULL:
        return memoryview(b"")
    out = memoryview(<object>b.obj)[:b.size]
    abuf_free(b)
    return out


cdef void abuf_free(ArrowBuf *b) noexcept:
    Py_XDECREF(b.obj)
    b.obj = NULL
    b.data = NULL
    b.size = b.cap = 0


cdef inline void bit_set(unsigned char *bits, Py_ssize_t i, bint on) noexcept nogil:
    if on:
        bits[i >> 3] |= <unsigned char>(1 << (i & 7))
    else:
        bits[i >> 3] &= <unsigned char>~(1 << (i & 7))


cdef int validity_reserve(ArrowBuf *bits, Py_ssize_t slots) except -1:
    """Bitmap bytes for `slots` entries; new bytes are zeroed (bits are written as rows are added)."""
    cdef Py_ssize_t need = (slots + 7) >> 3, old = bits.size
    if need > old:
        abuf_reserve(bits, need - old)
        memset(bits.data + old, 0, <size_t>(need - old))
        bits.size = need
    return 0


cdef int validity_start(ArrowBuf *bits, Py_ssize_t i, Py_ssize_t cap) except -1:
    """Create the bitmap at the first null, entry i: every earlier entry marked valid, i and later ones null
    until marked."""
    cdef Py_ssize_t j
    validity_reserve(bits, cap)
    memset(bits.data, 0xFF, <size_t>(i >> 3))
    for j in range(i & ~(<Py_ssize_t>7), i):
        bit_set(bits.data, j, True)
    return 0


cdef inline int validity_mark(ArrowBuf *bits, Py_ssize_t *nulls, Py_ssize_t i, Py_ssize_t cap,
                              bint valid) except -1:
    """Record entry i as valid or null. The bitmap is created at the first null, with every earlier entry
    marked valid; while no entry is null there is no bitmap at all (Arrow's null_count 0 case)."""
    if bits.obj == NULL:
        if valid:
            return 0
        validity_start(bits, i, cap)
    if not valid:
        nulls[0] += 1
    bit_set(bits.data, i, valid)
    return 0


cdef int arrow_grow_rows(ArrowOut *o, Py_ssize_t rows) except -1:
    """Room for `rows` more rows in every per-row buffer (and the bitmaps that exist)."""
    cdef Py_ssize_t cap = o.row_cap
    if o.rows + rows <= cap:
        return 0
    cap = max(cap * 2, o.rows + rows, 1024)
    abuf_reserve(&o.offset, (cap - o.rows) * 8)
    abuf_reserve(&o.timestamp, (cap - o.rows) * 8)
    abuf_reserve(&o.timestamp_type, (cap - o.rows) * 4)
    abuf_reserve(&o.key.offsets, (cap - o.rows) * 4)
    abuf_reserve(&o.value.offsets, (cap - o.rows) * 4)
    if o.key.validity.obj != NULL:
        validity_reserve(&o.key.validity, cap)
    if o.value.validity.obj != NULL:
        validity_reserve(&o.value.validity, cap)
    if o.headers:
        abuf_reserve(&o.list_offsets, (cap - o.rows) * 4)
        if o.list_validity.obj != NULL:
            validity_reserve(&o.list_validity, cap)
    o.row_cap = cap
    return 0


cdef int arrow_grow_headers(ArrowOut *o, Py_ssize_t n) except -1:
    cdef Py_ssize_t cap = o.header_cap
    if o.header_rows + n <= cap:
        return 0
    cap = max(cap * 2, o.header_rows + n, 256)
    abuf_reserve(&o.header_key.offsets, (cap - o.header_rows) * 4)
    abuf_reserve(&o.header_value.offsets, (cap - o.header_rows) * 4)
    if o.header_value.validity.obj != NULL:
        validity_reserve(&o.header_value.validity, cap)
    o.header_cap = cap
    return 0


cdef inline int32_t offset32(Py_ssize_t size, BatchHeader *h, object path) except? -1:
    if size > INT32_MAX:
        raise _errors.CorruptRecordError("a single batch decodes to more than 2 GiB of Arrow data",
                                         path=path, offset=h.base_offset)
    return <int32_t>size


cdef inline void put_i32(ArrowBuf *b, int32_t v) noexcept:
    memcpy(b.data + b.size, &v, 4)         # Arrow buffers are little-endian, like every host seglog builds on
    b.size += 4


cdef inline void put_i64(ArrowBuf *b, int64_t v) noexcept:
    memcpy(b.data + b.size, &v, 8)
    b.size += 8


cdef inline int arrow_put_binary(ArrowBinary *col, const unsigned char *p, int64_t n, Py_ssize_t row,
                                 Py_ssize_t cap, BatchHeader *h, object path) except -1:
    """Append one binary value (n < 0: null) as entry `row` of col, whose offsets already hold `row` + 1 entries."""
    if n < 0:
        validity_mark(&col.validity, &col.nulls, row, cap, False)
    else:
        if col.validity.obj != NULL:
            validity_mark(&col.validity, &col.nulls, row, cap, True)
        abuf_put(&col.data, p, <Py_ssize_t>n)
    put_i32(&col.offsets, offset32(col.data.size, h, path))
    return 0


cdef int arrow_put_header_key(ArrowOut *o, const unsigned char *p, int64_t n, BatchHeader *h,
                              object path) except -1:
    """Header keys become Arrow UTF-8: ASCII is copied as is, anything else goes through a strict UTF-8 check
    and, if invalid, the replacement decoding records.pxi applies."""
    cdef int64_t i
    cdef bytes fixed
    for i in range(n):
        if p[i] & 0x80:
            fixed = PyUnicode_AsUTF8String(PyUnicode_DecodeUTF8(<const char *>p, <Py_ssize_t>n, "replace"))
            abuf_put(&o.header_key.data, <const unsigned char *>PyBytes_AS_STRING(fixed), PyBytes_GET_SIZE(fixed))
            break
    else:
        abuf_put(&o.header_key.data, p, <Py_ssize_t>n)
    put_i32(&o.header_key.offsets, offset32(o.header_key.data.size, h, path))
    return 0


cdef int arrow_decode_batch(ArrowOut *o, const unsigned char *p, BatchHeader *h, int64_t min_offset,
                            int64_t max_offset, object path) except -1:
    """Append the records of one structurally valid, non-control batch with offsets in [min_offset,
    max_offset) to o. Raises CorruptRecordError when the records do not parse into records_count records."""
    cdef int codec = h.attributes & ATTR_CODEC_MASK
    cdef int64_t size = LOG_OVERHEAD + <int64_t>h.length
    cdef Inflated inflated
    cdef const unsigned char *rp
    cdef const unsigned char *rend
    cdef const unsigned char *rec_end
    cdef int64_t length, ts_delta, off_delta, klen, vlen, hcount, hklen, hvlen
    cdef int64_t offset, j, ts
    cdef int32_t i, ts_type = 1 if h.attributes & ATTR_LOG_APPEND_TIME else 0
    cdef Py_ssize_t row
    if codec != CODEC_NONE:
        inflated = inflate(codec, p + BATCH_HEADER_SIZE, size - BATCH_HEADER_SIZE, MAX_INFLATED_BYTES)
        rp = inflated.ptr
        rend = rp + inflated.size
    else:
        rp = p + BATCH_HEADER_SIZE
        rend = p + size
    if h.records_count > 0:
        # every record takes at least 7 bytes: a corrupt count cannot make us reserve more than the data holds
        arrow_grow_rows(o, min(<int64_t>h.records_count, (rend - rp) // 7 + 1))
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
        if o.rows == o.row_cap:
            arrow_grow_rows(o, 1)
        row = o.rows
        rp = get_varint(rp, rec_end, &klen)
        if rp == NULL or klen < -1 or klen > rec_end - rp:
            raise _corrupt_records(h, path, "bad key length")
        arrow_put_binary(&o.key, rp, klen, row, o.row_cap, h, path)
        if klen > 0:
            rp += klen
        rp = get_varint(rp, rec_end, &vlen)
        if rp == NULL or vlen < -1 or vlen > rec_end - rp:
            raise _corrupt_records(h, path, "bad value length")
        arrow_put_binary(&o.value, rp, vlen, row, o.row_cap, h, path)
        if vlen > 0:
            rp += vlen
        rp = get_varint(rp, rec_end, &hcount)
        if rp == NULL or hcount < 0 or hcount > rec_end - rp:
            raise _corrupt_records(h, path, "bad header count")
        if o.headers:
            if hcount == 0:
                validity_mark(&o.list_validity, &o.list_nulls, row, o.row_cap, False)
            else:
                if o.list_validity.obj != NULL:
                    validity_mark(&o.list_validity, &o.list_nulls, row, o.row_cap, True)
                arrow_grow_headers(o, hcount)
        for j in range(hcount):
            rp = get_varint(rp, rec_end, &hklen)
            if rp == NULL or hklen < 0 or hklen > rec_end - rp:
                raise _corrupt_records(h, path, "bad header key")
            if o.headers:
                arrow_put_header_key(o, rp, hklen, h, path)
            rp += hklen
            rp = get_varint(rp, rec_end, &hvlen)
            if rp == NULL or hvlen < -1 or hvlen > rec_end - rp:
                raise _corrupt_records(h, path, "bad header value")
            if o.headers:
                arrow_put_binary(&o.header_value, rp, hvlen, o.header_rows, o.header_cap, h, path)
                o.header_rows += 1
            if hvlen > 0:
                rp += hvlen
        if rp != rec_end:
            raise _corrupt_records(h, path, "record length does not match its fields")
        if o.headers:
            put_i32(&o.list_offsets, offset32(o.header_rows, h, path))
        ts = h.max_timestamp if ts_type else h.base_timestamp + ts_delta
        put_i64(&o.offset, offset)
        put_i64(&o.timestamp, ts * 1000)
        put_i32(&o.timestamp_type, ts_type)
        o.rows += 1
    if rp != rend:
        raise _corrupt_records(h, path, "bytes left after the last record")
    return 0


cdef tuple arrow_take_binary(ArrowBinary *col):
    return (abuf_take(&col.validity) if col.validity.obj != NULL else None, abuf_take(&col.offsets),
            abuf_take(&col.data), col.nulls)


cdef void arrow_free_binary(ArrowBinary *col) noexcept:
    abuf_free(&col.offsets)
    abuf_free(&col.data)
    abuf_free(&col.validity)


cdef void arrow_free(ArrowOut *o) noexcept:
    """Release whatever buffers were not taken (all of them when decoding failed)."""
    abuf_free(&o.offset)
    abuf_free(&o.timestamp)
    abuf_free(&o.timestamp_type)
    abuf_free(&o.list_offsets)
    abuf_free(&o.list_validity)
    arrow_free_binary(&o.key)
    arrow_free_binary(&o.value)
    arrow_free_binary(&o.header_key)
    arrow_free_binary(&o.header_value)


cdef int arrow_presize(ArrowOut *o, const unsigned char *p, int64_t n, Py_ssize_t max_output_bytes) except -1:
    """Reserve the buffers once from a walk over the batch headers: rows for every record of the batches a
    call can decode, and as many value bytes as those batches hold (an upper bound for uncompressed ones;
    compressed ones grow past it). Growing by doubling instead copies the data several times over and touches
    fresh pages at every step, which costs more than the decoding itself. The walk stops once it covered
    max_output_bytes, as decoding does."""
    cdef int64_t pos = 0, rows = 0, size
    while pos + BATCH_HEADER_SIZE <= n and pos < max_output_bytes:
        size = batch_size_at(p + pos)
        if size < BATCH_HEADER_SIZE or pos + size > n:
            break
        rows += max(<int32_t>get_be32(p + pos + OFF_RECORDS_COUNT), 0)
        pos += size
    if rows > 0:
        arrow_grow_rows(o, min(rows, pos // 7 + 1))
        abuf_reserve(&o.value.data, <Py_ssize_t>pos)
    return 0


def arrow_columns(data, int64_t min_offset=-1, int64_t max_offset=INT64_MAX, bint include_headers=False,
                  int64_t min_timestamp=INT64_MIN, Py_ssize_t max_output_bytes=ARROW_DEFAULT_MAX_OUTPUT,
                  bint verify_crc=False, path=None):
    """Decode the whole batches in ``data`` into Arrow buffers (see the comment at the top of arrow.pxi).

    Returns a dict: ``rows``; ``consumed`` (input bytes used: whole batches); ``next_offset`` (last offset + 1
    of the last consumed batch, -1 if none); ``done`` (a batch at or past max_offset was reached: nothing
    later in the log is wanted); ``offset``, ``timestamp`` (int64, microseconds), ``timestamp_type`` (int32)
    value buffers; every buffer is a read-only memoryview; ``key`` and ``value`` as (validity or None, int32 offsets, data, null_count); ``headers``
    None unless include_headers, else (list validity or None, list int32 offsets, list null_count,
    key (None, offsets, data, 0), value (validity or None, offsets, data, null_count)).
    """
    cdef Py_buffer buf
    cdef ArrowOut o
    cdef const unsigned char *p
    cdef int64_t pos = 0, n, next_offset = -1, prev_last = -1
    cdef BatchHeader h
    cdef BatchCheck c
    cdef OffsetCheck oc
    cdef bint done = False
    cdef int32_t zero = 0
    cdef object result
    if max_output_bytes < 1:
        raise _errors.InvalidArgumentError("max_output_bytes must be positive")
    memset(&o, 0, sizeof(ArrowOut))
    o.headers = include_headers
    take_bytes(data, &buf, "batch data")
    try:
        abuf_put(&o.key.offsets, <const unsigned char *>&zero, 4)
        abuf_put(&o.value.offsets, <const unsigned char *>&zero, 4)
        if include_headers:
            abuf_put(&o.list_offsets, <const unsigned char *>&zero, 4)
            abuf_put(&o.header_key.offsets, <const unsigned char *>&zero, 4)
            abuf_put(&o.header_value.offsets, <const unsigned char *>&zero, 4)
        p = <const unsigned char *>buf.buf
        n = buf.len
        arrow_presize(&o, p, n, max_output_bytes)
        while pos < n:
            c = check_batch(p + pos, n - pos, verify_crc)
            if c == CHECK_SHORT_HEADER or c == CHECK_INCOMPLETE:
                break
            if c != CHECK_OK:
                raise_check(c, path, pos, p + pos, n - pos)
            oc = check_offsets(p + pos, prev_last, INT64_MAX)
            if oc != OFFSETS_OK:
                raise_offsets(oc, path, pos, p + pos, prev_last, INT64_MAX)
            read_header(p + pos, &h)
            prev_last = h.base_offset + h.last_offset_delta
            if h.base_offset >= max_offset:
                done = True
                break
            if o.rows and (o.key.data.size + o.value.data.size + o.header_key.data.size
                           + o.header_value.data.size >= max_output_bytes):
                break
            if not (h.attributes & ATTR_CONTROL) and h.base_offset + h.last_offset_delta >= min_offset \
                    and h.max_timestamp >= min_timestamp:
                arrow_decode_batch(&o, p + pos, &h, min_offset, max_offset, path)
            pos += LOG_OVERHEAD + h.length
            next_offset = h.base_offset + h.last_offset_delta + 1
            if next_offset >= max_offset:
                done = True
                break
        result = {
            "rows": o.rows, "consumed": pos, "next_offset": next_offset, "done": done,
            "offset": abuf_take(&o.offset), "timestamp": abuf_take(&o.timestamp),
            "timestamp_type": abuf_take(&o.timestamp_type),
            "key": arrow_take_binary(&o.key), "value": arrow_take_binary(&o.value), "headers": None,
        }
        if include_headers:
            result["headers"] = (abuf_take(&o.list_validity) if o.list_validity.obj != NULL else None,
                                 abuf_take(&o.list_offsets), o.list_nulls,
                                 arrow_take_binary(&o.header_key), arrow_take_binary(&o.header_value))
        return result
    finally:
        arrow_free(&o)
        PyBuffer_Release(&buf)
