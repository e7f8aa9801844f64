# Record batch v2: encoding (BatchWriter), header inspection (BatchInfo) and validation of batches that
# clients send. The byte layout and the exact CRC coverage are written at the top of batch.pxd.

cdef int raise_check(BatchCheck c, object path, int64_t position, const unsigned char *p,
                     int64_t avail) except -1:
    """Raise the CorruptRecordError that describes a failed check_batch() at `position`."""
    cdef object offset = <int64_t>get_be64(p) if avail >= 8 else None
    if c == CHECK_SHORT_HEADER:
        why = f"only {avail} bytes where a batch header of {BATCH_HEADER_SIZE} bytes should start"
    elif c == CHECK_BAD_LENGTH:
        why = f"batch length {<int32_t>get_be32(p + OFF_LENGTH)} is smaller than a batch header"
    elif c == CHECK_INCOMPLETE:
        why = f"batch of {batch_size_at(p)} bytes runs past the end of the data ({avail} bytes left)"
    elif c == CHECK_BAD_MAGIC:
        why = f"magic byte is {<int8_t>p[OFF_MAGIC]}, expected 2"
    else:
        why = (f"CRC-32C mismatch: stored {get_be32(p + OFF_CRC):#010x}, computed "
               f"{seglog_crc32c(0, p + CRC_START, <size_t>(batch_size_at(p) - CRC_START)):#010x}")
    raise _errors.CorruptRecordError(why, path=path, offset=offset, position=position)


cdef str offsets_reason(OffsetCheck c, const unsigned char *p, int64_t prev_last, int64_t limit):
    """What a failed check_offsets() found wrong with the batch at p."""
    cdef int64_t first = <int64_t>get_be64(p + OFF_BASE_OFFSET)
    cdef int32_t delta = <int32_t>get_be32(p + OFF_LAST_OFFSET_DELTA)
    if c == OFFSETS_BAD_DELTA:
        return f"batch offsets out of order: lastOffsetDelta {delta} is negative"
    if c == OFFSETS_NOT_AFTER:
        return f"batch offsets out of order: base offset {first} is not after offset {prev_last}"
    return f"batch offsets out of order: offsets {first}..{<object>first + delta} do not end below {limit}"


cdef int raise_offsets(OffsetCheck c, object path, int64_t position, const unsigned char *p, int64_t prev_last,
                       int64_t limit) except -1:
    """Raise the CorruptRecordError that describes a failed check_offsets() at `position`."""
    raise _errors.CorruptRecordError(offsets_reason(c, p, prev_last, limit), path=path,
                                     offset=<int64_t>get_be64(p + OFF_BASE_OFFSET), position=position)


def batch_offsets_error(data, int64_t prev_last=-1, int64_t limit=INT64_MAX):
    """Why the batch at the start of ``data`` breaks the offset rules every reader applies (batch.pxd,
    check_offsets) when it follows offset ``prev_last`` and must end below ``limit``; None if it does not.
    Raises CorruptRecordError when ``data`` is shorter than a batch header."""
    cdef Py_buffer buf
    cdef OffsetCheck c
    take_bytes(data, &buf, "batch data")
    try:
        if buf.len < BATCH_HEADER_SIZE:
            raise _errors.CorruptRecordError(f"only {buf.len} bytes: shorter than a batch header")
        c = check_offsets(<const unsigned char *>buf.buf, prev_last, limit)
        return None if c == OFFSETS_OK else offsets_reason(c, <const unsigned char *>buf.buf, prev_last, limit)
    finally:
        PyBuffer_Release(&buf)


cdef inline int64_t now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef class BatchWriter:
    """Encodes records into complete v2 batches laid one after another in a single growable buffer.

    add() appends a record to the open batch (opening one at ``next_offset``); finish() closes it:
    compression, header, CRC. Finished batches are exported through the buffer protocol, ``[0, finished)``;
    while an export is alive the writer refuses to grow, clear or rewrite its memory (BufferError), so a
    consumer of the bytes never sees them move. ``full`` turns true once the open batch reaches
    ``batch_bytes`` (uncompressed) or ``batch_records``, or a batch was finished because the next record
    would not fit in ``batch_bytes`` (a batch exceeds it only when a single record does). ``require_keys``
    refuses records without a key (InvalidRecordError), as a compacted topic must. Record timestamps given to
    add() are checked by check_timestamps' rules: ``timestamp_before_max_ms`` / ``timestamp_after_max_ms``
    bound them around now unless ``log_append_time`` (the batch then carries the append time instead);
    ``accept_no_timestamp`` lets -1 (NO_TIMESTAMP) through, for re-encoding records of a client batch.
    ``transactional`` sets the transactional attribute of the batches (a transactional producer's). Not
    thread-safe: its owner serializes use.
    """

    def __cinit__(self, int64_t next_offset=0, compression=None, bint log_append_time=False,
                  Py_ssize_t batch_bytes=16384, int32_t batch_records=INT32_MAX,
                  Py_ssize_t max_record_bytes=1048576, int32_t leader_epoch=0, int64_t producer_id=-1,
                  int16_t producer_epoch=-1, int32_t next_sequence=-1, bint require_keys=False,
                  int64_t timestamp_before_max_ms=INT64_MAX, int64_t timestamp_after_max_ms=INT64_MAX,
                  bint accept_no_timestamp=False, bint transactional=False):
        if batch_bytes < 1 or batch_records < 1:
            raise _errors.InvalidArgumentError("batch_bytes and batch_records must be positive")
        _check_next_offset(next_offset)
        self.buf = NULL
        self.cap = 0
        self.used = 0
        self.pos = 0
        self.exports = 0
        self.is_open = False
        self.count = 0
        self.next_offset = next_offset
        self.codec = codec_id(compression)
        self.log_append_time = log_append_time
        self.timestamp_before_max_ms = timestamp_before_max_ms
        self.timestamp_after_max_ms = timestamp_after_max_ms
        self.accept_no_timestamp = accept_no_timestamp
        self.batch_bytes = batch_bytes
        self.batch_records = batch_records
        self.max_record_bytes = max_record_bytes
        self.leader_epoch = leader_epoch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = next_sequence
        self.transactional = transactional
        self.limit_name = "max.message.bytes"
        self.require_keys = require_keys
        self.full = False
        self.batches = 0
        self.keep_from = SIZE_MAX
        self._reserve(4096)

    def __dealloc__(self):
        if self.buf != NULL and not self.buf_borrowed:     # (a cycle's clearing may have dropped buf_owner)
            PyMem_Free(self.buf)

    def __getbuffer__(self, Py_buffer *b, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("BatchWriter exports read-only views")
        PyBuffer_FillInfo(b, self, <void *>self.buf, <Py_ssize_t>self.used, 1, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *b):
        self.exports -= 1

    @property
    def finished(self):
        """Bytes of finished batches, ready to be appended."""
        return self.used

    @property
    def open_bytes(self):
        """Bytes of the open batch so far (header included, before compression)."""
        return self.pos - self.used if self.is_open else 0

    cdef int _reserve(self, size_t need) except -1:
        cdef size_t cap
        cdef unsigned char *nb
        if need <= self.cap:
            return 0
        if self.exports > 0:
            raise BufferError("cannot grow a BatchWriter while views of its bytes are alive")
        cap = self.cap if self.cap else 4096
        while cap < need:
            cap *= 2
        if self.buf_borrowed:
            return self._own_buffer(cap)
        nb = <unsigned char *>PyMem_Realloc(self.buf, cap)
        if nb == NULL:
            raise MemoryError()
        self.buf = nb
        self.cap = cap
        return 0

    cdef int _own_buffer(self, size_t cap) except -1:
        """Move the bytes [0, pos) from the memory of buf_owner (the append journal's mapping) to memory of the
        writer's own of cap bytes, leaving that memory as it was. Raises BufferError while exported."""
        cdef unsigned char *nb
        if self.exports > 0:
            raise BufferError("cannot move a BatchWriter's bytes while views of them are alive")
        nb = <unsigned char *>PyMem_Malloc(max(cap, self.pos, <size_t>1))
        if nb == NULL:
            raise MemoryError()
        memcpy(nb, self.buf, self.pos)
        self.buf = nb
        self.cap = max(cap, self.pos, <size_t>1)
        self.buf_borrowed = False
        self.buf_owner = None
        return 0

    cdef int _open(self) except -1:
        self._reserve(self.used + BATCH_HEADER_SIZE)
        self.pos = self.used + BATCH_HEADER_SIZE
        self.count = 0
        self.is_open = True
        return 0

    cdef int64_t add_record(self, RecordIn *r, int64_t timestamp) except? -1:
        """Encode one taken record (buffers.pxi: sizes and bytes come from the same spans) at the end of the
        open batch; returns its offset (any int64: hence `except? -1`, an error is told apart by the exception
        set). Checks that can refuse the record all run before the writer changes."""
        cdef int64_t klen = r.key.n, vlen = r.value.n, hcount = r.hcount, hsize = r.hsize
        cdef int64_t body, total, ts_delta
        cdef unsigned char *w
        if klen < 0 and self.require_keys:
            raise _errors.InvalidRecordError("a compacted topic (cleanup.policy=compact) cannot accept a record "
                                             "without a key")
        ts_delta = timestamp - self.base_ts if self.is_open and self.count else 0
        body = (1 + varint_size(ts_delta) + varint_size(self.count if self.is_open else 0) + varint_size(klen)
                + (klen if klen > 0 else 0) + varint_size(vlen) + (vlen if vlen > 0 else 0) + varint_size(hcount)
                + hsize)
        total = varint_size(body) + body
        if total + BATCH_HEADER_SIZE > self.max_record_bytes or body > INT32_MAX:
            raise _errors.RecordTooLargeError(size=total + BATCH_HEADER_SIZE, limit=self.max_record_bytes,
                                              what="record", setting=self.limit_name)
        if not self.is_open:
            self._open()
        if self.count > 0 and (self.count >= self.batch_records
                               or <Py_ssize_t>(self.pos - self.used) - BATCH_HEADER_SIZE + total > self.batch_bytes):
            self.finish()                       # the batch is at its record budget, or this record would pass its byte budget
            self._open()
            ts_delta = 0
            body = (1 + 1 + 1 + varint_size(klen) + (klen if klen > 0 else 0)
                    + varint_size(vlen) + (vlen if vlen > 0 else 0) + varint_size(hcount) + hsize)
            total = varint_size(body) + body
        if self.count == 0:
            self.base_ts = timestamp
            self.max_ts = timestamp
        elif timestamp > self.max_ts:
            self.max_ts = timestamp
        self._reserve(self.pos + total)
        w = self.buf + self.pos
        w = put_varint(w, body)
        w[0] = 0
        w += 1
        w = put_varint(w, ts_delta)
        w = put_varint(w, self.count)
        w = put_varint(w, klen)
        if klen > 0:
            memcpy(w, r.key.p, klen)
            w += klen
        w = put_varint(w, vlen)
        if vlen > 0:
            memcpy(w, r.value.p, vlen)
            w += vlen
        w = put_varint(w, hcount)
        if hcount:
            w = write_headers(w, r)
        self.pos += total
        self.count += 1
        self.next_offset += 1
        if self.count >= self.batch_records or <Py_ssize_t>(self.pos - self.used) - BATCH_HEADER_SIZE >= self.batch_bytes \
                or self.used > 0:
            self.full = True
        return self.next_offset - 1

    cdef int64_t _record_timestamp(self, object timestamp) except? -1:
        """A timestamp argument of add(), checked (see the class docstring)."""
        cdef int64_t ts = _timestamp_arg(timestamp)
        if ts == -1 and self.accept_no_timestamp:
            return ts
        if self.log_append_time or (self.timestamp_before_max_ms == INT64_MAX
                                    and self.timestamp_after_max_ms == INT64_MAX):
            _check_timestamps(ts, ts, 0, INT64_MAX, INT64_MAX)
        else:
            _check_timestamps(ts, ts, now_ms(), self.timestamp_before_max_ms, self.timestamp_after_max_ms)
        return ts

    cpdef int64_t add(self, object value, object key=None, object headers=None, object timestamp=None) except? -1:
        """Append one record to the open batch; returns the offset it will have. value, key and header
        values: any buffer, taken once as its bytes (buffers.pxi), or None. Nothing changes unless the record
        is added, except that a batch it would overflow is finished first. Raises TypeError for a value, key
        or header that is not bytes-like or None (str included; or a timestamp that is not an int: a float is
        refused, not truncated), RecordTooLargeError for a record over max_record_bytes, InvalidTimestampError for a
        timestamp check_timestamps refuses (negative, outside int64 or the before/after window),
        InvalidRecordError for a record without a key when require_keys."""
        cdef RecordIn r
        cdef int64_t ts = now_ms() if timestamp is None else self._record_timestamp(timestamp)
        memset(&r, 0, sizeof(RecordIn))
        try:
            take_record(value, key, headers, &r)
            return self.add_record(&r, ts)
        finally:
            release_record(&r)

    def add_many(self, values, keys=None, headers=None, timestamps=None, Py_ssize_t start=0,
                 Py_ssize_t stop_bytes=0):
        """Append values[start:] (with keys/headers/timestamps from parallel sequences, each may be None) into
        batches of at most ``batch_bytes``/``batch_records``. With stop_bytes > 0, stop once the finished
        batches reach stop_bytes and return the index of the next record to add; at the end the last batch is
        finished and len(values) is returned. All or nothing per call: if a record is rejected (type, size)
        the writer is left exactly as it was before the call, bytes included (a batch that was open and got
        finished, compressed in place, has its records put back)."""
        cdef Py_ssize_t n = len(values), i
        cdef int64_t ts
        cdef size_t used0 = self.used, pos0 = self.pos
        cdef bint open0 = self.is_open, full0 = self.full
        cdef int32_t count0 = self.count, seq0 = self.next_sequence
        cdef int64_t next0 = self.next_offset, base_ts0 = self.base_ts, max_ts0 = self.max_ts
        cdef int batches0 = self.batches
        cdef object k = None, h = None, t = None
        if n == 0:
            raise _errors.InvalidArgumentError("append_batch needs at least one record")
        if not 0 <= start < n:
            raise _errors.InvalidArgumentError(f"start {start} outside 0..{n - 1}")
        for seq, name in ((keys, "keys"), (headers, "headers"), (timestamps, "timestamps")):
            if seq is not None and len(seq) != n:
                raise _errors.InvalidArgumentError(f"{name} has {len(seq)} items for {n} values")
        if self.exports > 0:
            raise BufferError("cannot add to a BatchWriter while views of its bytes are alive")
        ts = now_ms()
        if open0 and self.count and self.codec != CODEC_NONE:
            self.keep_from = used0              # finish() compresses in place: it keeps the records first
        try:
            i = start
            if keys is None and headers is None and timestamps is None and PyList_CheckExact(values):
                i = self._add_values(<list>values, start, stop_bytes, ts)
                if stop_bytes and self.used >= <size_t>stop_bytes:
                    return i
            while i < n:
                if keys is not None:
                    k = keys[i]
                if headers is not None:
                    h = headers[i]
                t = ts if timestamps is None else timestamps[i]
                self.add(values[i], k, h, t)
                i += 1
                if stop_bytes and self.used >= <size_t>stop_bytes:
                    return i
            self.finish()
            return n
        except BaseException:
            if self.kept_raw is not None:       # the open batch it found was finished: put its records back
                memcpy(self.buf + used0 + BATCH_HEADER_SIZE, PyBytes_AS_STRING(self.kept_raw),
                       PyBytes_GET_SIZE(self.kept_raw))
            self.used, self.pos, self.is_open, self.full = used0, pos0, open0, full0
            self.count, self.next_sequence, self.next_offset = count0, seq0, next0
            self.base_ts, self.max_ts, self.batches = base_ts0, max_ts0, batches0
            raise
        finally:
            self.keep_from = SIZE_MAX
            self.kept_raw = None

    cdef Py_ssize_t _add_values(self, list values, Py_ssize_t i, Py_ssize_t stop_bytes, int64_t ts) except -1:
        """add_many's loop for a list of values alone: bytes and None encoded without boxing or dispatch. Stops
        at the first other value (the generic loop takes it from there) or as add_many's stop_bytes says;
        returns the index of the next record. The list is only read, and no Python code runs in the loop but a
        codec's in add_record (which holds a reference to the value meanwhile). A record
        that fits the open batch as it is (no key, no headers: its size is known at once) is written here; the
        others (the first of a batch, one that must finish it, one too large) go through add_record."""
        cdef Py_ssize_t n = PyList_GET_SIZE(values)
        cdef PyObject *v
        cdef object held
        cdef RecordIn r
        cdef int64_t vlen, body, total
        cdef unsigned char *w
        memset(&r, 0, sizeof(RecordIn))          # nothing is held: the list keeps the values it holds alive
        r.key.n = -1
        while i < n:
            v = list_item_borrowed(values, i)
            if v == none_borrowed:
                r.value.p = NULL
                r.value.n = -1
            elif bytes_check_borrowed(v):
                r.value.p = <const unsigned char *>bytes_data_borrowed(v)
                r.value.n = bytes_size_borrowed(v)
            else:
                return i
            vlen = r.value.n
            if self.count > 0 and not self.require_keys and self.count < self.batch_records:
                # attributes, timestamp delta, offset delta, key length -1, value length, value, 0 headers
                body = (3 + varint_size(ts - self.base_ts) + varint_size(self.count) + varint_size(vlen)
                        + (vlen if vlen > 0 else 0))
                total = varint_size(body) + body
                if (total + BATCH_HEADER_SIZE <= self.max_record_bytes and self.pos + total <= self.cap
                        and <Py_ssize_t>(self.pos - self.used) - BATCH_HEADER_SIZE + total <= self.batch_bytes):
                    w = put_varint(self.buf + self.pos, body)
                    w[0] = 0
                    w = put_varint(put_varint(w + 1, ts - self.base_ts), self.count)
                    w[0] = 1                     # zigzag(-1): no key
                    w = put_varint(w + 1, vlen)
                    if vlen > 0:
                        memcpy(w, r.value.p, vlen)
                        w += vlen
                    w[0] = 0                     # no headers
                    self.pos += total
                    self.count += 1
                    self.next_offset += 1
                    if ts > self.max_ts:
                        self.max_ts = ts
                    if (self.count >= self.batch_records or self.used > 0
                            or <Py_ssize_t>(self.pos - self.used) - BATCH_HEADER_SIZE >= self.batch_bytes):
                        self.full = True
                    i += 1
                    continue
            held = <object>v                     # add_record may run Python code (a codec): keep the value
            self.add_record(&r, ts)
            held = None
            i += 1
            if stop_bytes and self.used >= <size_t>stop_bytes:
                return i
        return i

    cpdef int finish(self) except -1:
        """Close the open batch (no-op when none is open or it is empty)."""
        cdef bytes packed
        cdef Py_ssize_t raw_len, clen, start
        cdef unsigned char *p
        cdef int16_t attributes
        if not self.is_open or self.count == 0:
            self.is_open = False
            self.pos = self.used
            self.full = False
            return 0
        if self.exports > 0:
            raise BufferError("cannot finish a batch while views of the writer are alive")
        start = self.used
        if self.codec != CODEC_NONE:
            raw_len = self.pos - start - BATCH_HEADER_SIZE
            if <size_t>start == self.keep_from:
                self.kept_raw = PyBytes_FromStringAndSize(<const char *>(self.buf + start + BATCH_HEADER_SIZE),
                                                          raw_len)
            packed = compress(self.codec, PyMemoryView_FromMemory(<char *>(self.buf + start + BATCH_HEADER_SIZE),
                                                                  raw_len, PyBUF_READ))
            clen = PyBytes_GET_SIZE(packed)
            self._reserve(start + BATCH_HEADER_SIZE + clen)
            memcpy(self.buf + start + BATCH_HEADER_SIZE, PyBytes_AS_STRING(packed), clen)
            self.pos = start + BATCH_HEADER_SIZE + clen
        attributes = <int16_t>self.codec
        if self.log_append_time:
            attributes |= ATTR_LOG_APPEND_TIME
            self.max_ts = now_ms()
        if self.transactional:
            attributes |= ATTR_TRANSACTIONAL
        p = self.buf + start
        put_be64(p + OFF_BASE_OFFSET, <uint64_t>(self.next_offset - self.count))
        put_be32(p + OFF_LENGTH, <uint32_t>(self.pos - start - LOG_OVERHEAD))
        put_be32(p + OFF_LEADER_EPOCH, <uint32_t>self.leader_epoch)
        p[OFF_MAGIC] = 2
        put_be16(p + OFF_ATTRIBUTES, <uint16_t>attributes)
        put_be32(p + OFF_LAST_OFFSET_DELTA, <uint32_t>(self.count - 1))
        put_be64(p + OFF_BASE_TIMESTAMP, <uint64_t>self.base_ts)
        put_be64(p + OFF_MAX_TIMESTAMP, <uint64_t>self.max_ts)
        put_be64(p + OFF_PRODUCER_ID, <uint64_t>self.producer_id)
        put_be16(p + OFF_PRODUCER_EPOCH, <uint16_t>self.producer_epoch)
        put_be32(p + OFF_BASE_SEQUENCE, <uint32_t>self.next_sequence)
        put_be32(p + OFF_RECORDS_COUNT, <uint32_t>self.count)
        put_be32(p + OFF_CRC, crc32c_buf(p + CRC_START, self.pos - start - CRC_START))
        if self.next_sequence >= 0:
            self.next_sequence = <int32_t>((<int64_t>self.next_sequence + self.count) % (<int64_t>INT32_MAX + 1))
        self.used = self.pos
        self.is_open = False
        self.full = False
        self.count = 0
        self.batches += 1
        return 0

    cpdef int clear(self) except -1:
        """Drop the finished batches (the open batch, if any, stays). Raises BufferError while exported."""
        cdef size_t open_len
        if self.exports > 0:
            raise BufferError("cannot clear a BatchWriter while views of its bytes are alive")
        if self.is_open:
            open_len = self.pos - self.used
            memmove(self.buf, self.buf + self.used, open_len)
            self.pos = open_len
        else:
            self.pos = 0
        self.used = 0
        self.batches = 0
        return 0

    cpdef int reset(self, int64_t next_offset) except -1:
        """Discard everything (finished and open) and continue numbering at next_offset (>= 0)."""
        if self.exports > 0:
            raise BufferError("cannot reset a BatchWriter while views of its bytes are alive")
        _check_next_offset(next_offset)
        self.used = 0
        self.pos = 0
        self.is_open = False
        self.count = 0
        self.full = False
        self.batches = 0
        self.next_offset = next_offset
        return 0

    def take(self):
        """The finished batches as bytes, then clear them."""
        out = PyBytes_FromStringAndSize(<const char *>self.buf, <Py_ssize_t>self.used)
        self.clear()
        return out


cdef int _check_next_offset(int64_t next_offset) except -1:
    if next_offset < 0:
        raise _errors.InvalidArgumentError(f"offsets are never negative: next_offset {next_offset}")
    return 0


cdef int64_t _timestamp_arg(object timestamp) except? -1:
    """A timestamp argument (ms) as int64: an int or integer-like object (numpy.int64), never bool or float
    (TypeError: a float would be truncated); InvalidTimestampError when it does not fit in int64."""
    if not PyLong_CheckExact(timestamp):
        if isinstance(timestamp, bool) or not PyIndex_Check(timestamp):
            raise TypeError(f"timestamp must be an int (milliseconds since the epoch) or None, not "
                            f"{type(timestamp).__name__} {timestamp!r}")
        timestamp = PyNumber_Index(timestamp)
    try:
        return timestamp
    except OverflowError:
        raise _errors.InvalidTimestampError(
            f"timestamp {timestamp} does not fit in a record (int64 milliseconds since the epoch)") from None


cdef int _check_timestamps(int64_t min_ts, int64_t max_ts, int64_t now, int64_t before_max_ms,
                           int64_t after_max_ms) except -1:
    """check_timestamps without the argument conversions."""
    if min_ts > max_ts:
        return 0
    if min_ts < 0:
        raise _errors.InvalidTimestampError(
            f"timestamp {min_ts} is negative: record timestamps are milliseconds since the epoch, >= 0 (-1, "
            "NO_TIMESTAMP, only comes from old formats)")
    if before_max_ms != INT64_MAX and now - min_ts > before_max_ms:
        raise _errors.InvalidTimestampError(
            f"timestamp {min_ts} is more than message.timestamp.before.max.ms={before_max_ms} before now ({now})")
    if after_max_ms != INT64_MAX and max_ts - now > after_max_ms:
        raise _errors.InvalidTimestampError(
            f"timestamp {max_ts} is more than message.timestamp.after.max.ms={after_max_ms} after now ({now})")
    return 0


def check_timestamps(int64_t min_ts, int64_t max_ts, int64_t now_ms, int64_t before_max_ms=INT64_MAX,
                     int64_t after_max_ms=INT64_MAX):
    """Kafka's record timestamp rules, the one implementation behind Log.append, append_batch (through
    BatchWriter.add) and append_raw (so the Producer and the broker): the timestamps min_ts..max_ts are
    milliseconds since the epoch, >= 0, and (CreateTime; callers skip this for LogAppendTime) within
    [now_ms - before_max_ms, now_ms + after_max_ms] (message.timestamp.before/after.max.ms, Kafka 3.6+;
    INT64_MAX: unbounded). min_ts > max_ts (nothing to check: every record NO_TIMESTAMP) passes. Raises
    InvalidTimestampError."""
    _check_timestamps(min_ts, max_ts, now_ms, before_max_ms, after_max_ms)


cdef class BatchInfo:
    """The header fields of one batch (see batch.pxd), plus where it ends: ``next_offset`` = last + 1."""

    @property
    def compression(self):
        return CODEC_NAMES[self.codec] if self.codec < 5 else f"unknown({self.codec})"

    @property
    def last_offset(self):
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_control(self):
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self):
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def timestamp_type(self):
        return 1 if self.attributes & ATTR_LOG_APPEND_TIME else 0

    def __repr__(self):
        return (f"BatchInfo(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.records_count}, size={self.size}, compression={self.compression}, "
                f"max_timestamp={self.max_timestamp}, producer_id={self.producer_id}, "
                f"base_sequence={self.base_sequence}, leader_epoch={self.leader_epoch}, crc={self.crc:#010x})")


cdef BatchInfo make_info(BatchHeader *h, int64_t position):
    cdef BatchInfo b = BatchInfo.__new__(BatchInfo)
    b.base_offset = h.base_offset
    b.size = LOG_OVERHEAD + <int64_t>h.length
    b.leader_epoch = h.leader_epoch
    b.magic = h.magic
    b.crc = h.crc
    b.attributes = h.attributes
    b.codec = h.attributes & ATTR_CODEC_MASK
    b.last_offset_delta = h.last_offset_delta
    b.base_timestamp = h.base_timestamp
    b.max_timestamp = h.max_timestamp
    b.producer_id = h.producer_id
    b.producer_epoch = h.producer_epoch
    b.base_sequence = h.base_sequence
    b.records_count = h.records_count
    b.position = position
    return b


def batches(data, bint verify_crc=True, path=None):
    """BatchInfo of every whole batch in ``data`` (a final batch cut short is ignored).

    Raises CorruptRecordError at the first batch that fails the structural or CRC check.
    """
    cdef Py_buffer buf
    cdef list out = []
    cdef const unsigned char *p
    cdef int64_t pos = 0, n, stop
    cdef BatchHeader h
    cdef BatchCheck c
    take_bytes(data, &buf, "batch data")
    try:
        p = <const unsigned char *>buf.buf
        n = buf.len
        while True:
            stop = scan_batches_gil(p, n, pos, verify_crc, &c)
            if c != CHECK_OK and c != CHECK_SHORT_HEADER and c != CHECK_INCOMPLETE:
                raise_check(c, path, stop, p + stop, n - stop)
            while pos < stop:
                read_header(p + pos, &h)
                out.append(make_info(&h, pos))
                pos += LOG_OVERHEAD + h.length
            if c != CHECK_OK or pos >= n:
                break
    finally:
        PyBuffer_Release(&buf)
    return out


cdef int _scan_records(const unsigned char *rp, const unsigned char *rend, BatchHeader *h,
                       int64_t *min_ts, int64_t *max_ts, bint require_keys) noexcept nogil:
    """Walk the records of a batch checking lengths and offset deltas 0..n-1 (and with require_keys, that
    every record has a key); 0 if well-formed, 2 for a bad offset delta, 3 for a missing key, 1 otherwise.
    min_ts/max_ts take the smallest and largest record timestamp other than -1 (NO_TIMESTAMP)."""
    cdef int64_t length, ts_delta, off_delta, klen, vlen, hcount, hk, hv, j, ts
    cdef const unsigned char *rec_end
    cdef int32_t i
    for i in range(h.records_count):
        rp = get_varint(rp, rend, &length)
        if rp == NULL or length < 6 or length > rend - rp:
            return 1
        rec_end = rp + length
        rp += 1
        rp = get_varlong(rp, rec_end, &ts_delta)
        if rp == NULL:
            return 1
        rp = get_varint(rp, rec_end, &off_delta)
        if rp == NULL or off_delta != i:
            return 2
        rp = get_varint(rp, rec_end, &klen)
        if rp == NULL or klen < -1 or klen > rec_end - rp:
            return 1
        if klen < 0 and require_keys:
            return 3
        if klen > 0:
            rp += klen
        rp = get_varint(rp, rec_end, &vlen)
        if rp == NULL or vlen < -1 or vlen > rec_end - rp:
            return 1
        if vlen > 0:
            rp += vlen
        rp = get_varint(rp, rec_end, &hcount)
        if rp == NULL or hcount < 0 or hcount > rec_end - rp:
            return 1
        for j in range(hcount):
            rp = get_varint(rp, rec_end, &hk)
            if rp == NULL or hk < 0 or hk > rec_end - rp:
                return 1
            rp += hk
            rp = get_varint(rp, rec_end, &hv)
            if rp == NULL or hv < -1 or hv > rec_end - rp:
                return 1
            if hv > 0:
                rp += hv
        if rp != rec_end:
            return 1
        ts = <int64_t>(<uint64_t>h.base_timestamp + <uint64_t>ts_delta)     # wraps, never undefined
        if ts != -1:
            if ts < min_ts[0]:
                min_ts[0] = ts
            if ts > max_ts[0]:
                max_ts[0] = ts
    if rp != rend:
        return 1
    return 0


def validate_client_batch(data, Py_ssize_t max_message_bytes=1048588, bint verify_records=True,
                          bint require_keys=False, Py_ssize_t max_inflated_bytes=-1):
    """Validate one record batch as a Kafka client sends it (a produce request's records for one partition).

    Checks, as Kafka's broker does: exactly one whole batch, size <= max_message_bytes, magic 2, CRC-32C,
    not a control batch, recordsCount == lastOffsetDelta + 1 > 0, a producer id implies a base sequence,
    known codec and, with ``verify_records``, that the records parse with offset deltas 0..n-1 (decompressing
    if needed); with ``require_keys`` (a compacted topic), that every record has a key (the records are then
    parsed whatever verify_records says). Returns the BatchInfo plus the smallest and largest record
    timestamps other than -1 (NO_TIMESTAMP) as (info, min_ts, max_ts), min_ts > max_ts when there are none;
    without parsing the records they come from the header (baseTimestamp, maxTimestamp).
    A compressed batch is inflated to at most ``max_inflated_bytes`` (by default INFLATE_RATIO x
    max_message_bytes, see codecs.pxi): past it, RecordTooLargeError, whatever the batch's compressed size.
    Raises CorruptRecordError, InvalidRecordError, RecordTooLargeError, UnsupportedForMessageFormatError or
    UnsupportedCompressionTypeError.
    """
    cdef Py_buffer buf
    cdef const unsigned char *p
    cdef int64_t n, min_ts = INT64_MAX, max_ts = INT64_MIN
    cdef BatchHeader h
    cdef BatchCheck c
    cdef int codec, bad
    cdef Inflated inflated
    if max_inflated_bytes < 0:
        max_inflated_bytes = inflate_limit(max_message_bytes)
    take_bytes(data, &buf, "batch data")
    try:
        p = <const unsigned char *>buf.buf
        n = buf.len
        if n > max_message_bytes:
            raise _errors.RecordTooLargeError(size=n, limit=max_message_bytes, what="record batch")
        if n >= OFF_MAGIC + 1 and p[OFF_MAGIC] != 2:
            raise _errors.UnsupportedForMessageFormatError(
                f"record batch magic {<int8_t>p[OFF_MAGIC]} is not supported: only magic 2 (Kafka 0.11+)")
        if n >= NOGIL_BYTES:
            with nogil:
                c = check_batch(p, n, True)
        else:
            c = check_batch(p, n, True)
        if c != CHECK_OK:
            raise_check(c, None, 0, p, n)
        read_header(p, &h)
        if LOG_OVERHEAD + <int64_t>h.length != n:
            raise _errors.InvalidRecordError("a produce request must carry exactly one record batch per partition")
        if h.attributes & ATTR_CONTROL:
            raise _errors.InvalidRecordError("clients may not send control batches")
        if h.records_count <= 0 or h.last_offset_delta != h.records_count - 1:
            raise _errors.InvalidRecordError(
                f"records count {h.records_count} does not match last offset delta {h.last_offset_delta}")
        if h.producer_id >= 0 and h.base_sequence < 0:
            raise _errors.InvalidRecordError("an idempotent batch (producer id set) needs a base sequence")
        codec = h.attributes & ATTR_CODEC_MASK
        if codec > CODEC_ZSTD:
            raise _errors.UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")
        if verify_records or require_keys:
            if codec == CODEC_NONE:
                with nogil:
                    bad = _scan_records(p + BATCH_HEADER_SIZE, p + n, &h, &min_ts, &max_ts, require_keys)
            else:
                inflated = inflate(codec, p + BATCH_HEADER_SIZE, n - BATCH_HEADER_SIZE, max_inflated_bytes)
                bad = _scan_records(inflated.ptr, inflated.ptr + inflated.size, &h, &min_ts, &max_ts, require_keys)
            if bad == 2:
                raise _errors.InvalidRecordError("record offset deltas must be 0, 1, ... recordsCount - 1")
            if bad == 3:
                raise _errors.InvalidRecordError("a compacted topic cannot accept a record without a key")
            if bad:
                raise _errors.CorruptRecordError("records do not parse as recordsCount well-formed records",
                                                 offset=h.base_offset)
        elif h.max_timestamp != -1:
            min_ts = h.max_timestamp if h.base_timestamp == -1 else h.base_timestamp
            max_ts = h.max_timestamp
        return make_info(&h, 0), min_ts, max_ts
    finally:
        PyBuffer_Release(&buf)


def stamp_batch(data, int64_t base_offset, int32_t leader_epoch, int64_t log_append_time=-1):
    """Write base offset and leader epoch into a batch in place (a writable buffer). With log_append_time
    >= 0, also set the LogAppendTime attribute and maxTimestamp and recompute the CRC, as Kafka does."""
    cdef Py_buffer buf
    cdef unsigned char *p
    PyObject_GetBuffer(data, &buf, PyBUF_WRITABLE)
    try:
        if buf.len < BATCH_HEADER_SIZE:
            raise _errors.CorruptRecordError("batch shorter than its header")
        p = <unsigned char *>buf.buf
        put_be64(p + OFF_BASE_OFFSET, <uint64_t>base_offset)
        put_be32(p + OFF_LEADER_EPOCH, <uint32_t>leader_epoch)
        if log_append_time >= 0:
            put_be16(p + OFF_ATTRIBUTES, get_be16(p + OFF_ATTRIBUTES) | ATTR_LOG_APPEND_TIME)
            put_be64(p + OFF_MAX_TIMESTAMP, <uint64_t>log_append_time)
            put_be32(p + OFF_CRC, crc32c_buf(p + CRC_START, buf.len - CRC_START))
    finally:
        PyBuffer_Release(&buf)
