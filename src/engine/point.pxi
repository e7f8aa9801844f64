# Point reads (Log.get, Log.get_many): the record at one offset. The offset index and a walk over batch headers
# find its batch (Segment._find_position); the batch's records are then skipped by their length varints up to
# the one wanted, and only that one becomes a Python object. Every batch a point read takes a record from has
# passed its CRC check first, as reads do.

cdef enum:
    POINT_SLOTS = 16                 # batches whose records a BatchCache holds (decompressed, or copied) ...
    POINT_BYTES = 8388608            # ... at most this many bytes of records in all (a larger batch is not kept)
    POINT_BATCHES = 8192             # batches whose CRC check and skip table are remembered (then all forgotten)
    SKIP_STRIDE = 16                 # a skip table notes every SKIP_STRIDE-th record of a batch


@cython.final
cdef class _Held:
    """A batch's records section held in memory by a BatchCache (decompressed, or copied by a read-only
    segment's pread), with its skip table."""
    cdef Segment seg
    cdef int64_t position
    cdef BatchHeader h
    cdef object owner                # keeps ptr/size valid
    cdef const unsigned char *ptr
    cdef Py_ssize_t size
    cdef bytes skips


cdef bytes skip_table(const unsigned char *rp, const unsigned char *rend, BatchHeader *h, object path):
    """Walk every record of a batch's records section rp..rend (checking each length, and that they fill it
    exactly) and note, for every SKIP_STRIDE-th record, its offset delta and where it starts: int32 pairs
    (native order). Raises CorruptRecordError when the records do not parse."""
    cdef const unsigned char *start = rp
    cdef const unsigned char *q
    cdef const unsigned char *rec
    cdef int64_t length, ts_delta, off_delta
    cdef int32_t i, n = max(h.records_count, 0)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, ((n + SKIP_STRIDE - 1) // SKIP_STRIDE) * 8)
    cdef int32_t *t = <int32_t *>PyBytes_AS_STRING(out)
    for i in range(n):
        q = get_varint(rp, rend, &length)
        if q == NULL or length < 6 or length > rend - q:
            raise _corrupt_records(h, path, "bad record length")
        if i % SKIP_STRIDE == 0:
            rec = get_varlong(q + 1, q + length, &ts_delta)
            if rec != NULL:
                rec = get_varint(rec, q + length, &off_delta)
            if rec == NULL:
                raise _corrupt_records(h, path, "bad record timestamp or offset delta")
            t[(i // SKIP_STRIDE) * 2] = <int32_t>off_delta
            t[(i // SKIP_STRIDE) * 2 + 1] = <int32_t>(rp - start)
        rp = q + length
    if rp != rend:
        raise _corrupt_records(h, path, "bytes left after the last record")
    return out


@cython.final
cdef class BatchCache:
    """Recently read batches of one log, for point reads. For up to POINT_BATCHES batches: that their CRC was
    checked, and a skip table (skip_table: every SKIP_STRIDE-th record's offset delta and position, ~8 bytes
    per 16 records), so a batch read again is not checked again and at most SKIP_STRIDE records are walked
    to reach one; past POINT_BATCHES all are forgotten at once. And the records sections of the last
    POINT_SLOTS batches that had to be decompressed (compressed topics) or copied (read-only logs),
    POINT_BYTES at most in all. Entries name their Segment object. The owning Log calls clear() whenever bytes
    under a position may change: truncation, retention, a compaction swap, a read-only log's refresh(). Not
    thread-safe: the owning Log's lock guards it."""
    cdef list held                   # [_Held], most recently used last
    cdef int64_t held_bytes
    cdef dict checked                # Segment -> {position: skip table} of batches that passed their CRC check
    cdef Py_ssize_t nchecked

    def __cinit__(self):
        self.held = []
        self.checked = {}

    def clear(self):
        """Forget every batch."""
        self.held = []
        self.held_bytes = 0
        self.checked = {}
        self.nchecked = 0

    @property
    def held_bytes(self):
        """Bytes of records sections held (at most POINT_BYTES)."""
        return self.held_bytes

    @property
    def held_batches(self):
        """Number of batches whose records are held (at most POINT_SLOTS)."""
        return len(self.held)

    @property
    def checked_batches(self):
        """Number of batches remembered as CRC-checked (at most POINT_BATCHES)."""
        return self.nchecked

    cdef _Held _find(self, Segment seg, int64_t position):
        cdef Py_ssize_t i, n = len(self.held)
        cdef _Held e
        for i in range(n - 1, -1, -1):
            e = <_Held>self.held[i]
            if e.position == position and e.seg is seg:
                if i != n - 1:
                    del self.held[i]
                    self.held.append(e)
                return e
        return None

    cdef _Held _keep(self, Segment seg, int64_t position, BatchHeader *h, object owner,
                     const unsigned char *ptr, Py_ssize_t size):
        """Hold the records section ptr[0:size] (kept valid by owner) of the batch at position, evicting the
        least recently used batches past POINT_SLOTS or POINT_BYTES (one larger than POINT_BYTES is not kept)."""
        cdef _Held e = _Held.__new__(_Held)
        e.seg = seg
        e.position = position
        e.h = h[0]
        e.owner = owner
        e.ptr = ptr
        e.size = size
        e.skips = skip_table(ptr, ptr + size, h, seg.log_path)
        if size > POINT_BYTES:
            return e
        while self.held and (len(self.held) >= POINT_SLOTS or self.held_bytes + size > POINT_BYTES):
            self.held_bytes -= (<_Held>self.held[0]).size
            del self.held[0]
        self.held.append(e)
        self.held_bytes += size
        return e

    cdef bytes _check(self, Segment seg, int64_t position, const unsigned char *p, int64_t bsize, BatchHeader *h):
        """The skip table of the uncompressed batch at position (p: its bytes, bsize long; empty for a compressed
        one), after its CRC check unless it was checked before or lies in the segment's verified prefix.
        CorruptRecordError if it fails."""
        cdef BatchCheck c
        cdef dict known = self.checked.get(seg)
        cdef bytes skips
        if known is not None:
            skips = known.get(position)
            if skips is not None:
                return skips
        if position + bsize > seg.verified_end:
            if bsize >= NOGIL_BYTES:
                with nogil:
                    c = check_batch(p, bsize, True)
            else:
                c = check_batch(p, bsize, True)
            if c != CHECK_OK:
                raise_check(c, seg.log_path, position, p, bsize)
            if position == seg.verified_end:
                seg.verified_end = position + bsize
        if h.attributes & ATTR_CODEC_MASK or h.attributes & ATTR_CONTROL:
            skips = b""
        else:
            skips = skip_table(p + BATCH_HEADER_SIZE, p + bsize, h, seg.log_path)
        if self.nchecked >= POINT_BATCHES:
            self.checked = {}
            self.nchecked = 0
            known = None
        if known is None:
            known = self.checked[seg] = {}
        known[position] = skips
        self.nchecked += 1
        return skips

    cdef object _record(self, Segment seg, int64_t offset, object topic, int partition):
        """The Record at offset in seg, or None (see point_record)."""
        cdef int64_t pos = seg._find_position(offset), bsize
        cdef const unsigned char *p
        cdef BatchHeader h
        cdef _Held e
        cdef bytes skips
        cdef Inflated data, copy = None
        if pos < 0:
            return None
        e = self._find(seg, pos)
        if e is not None:
            return find_record(e.ptr, e.ptr + e.size, &e.h, offset, e.skips, topic, partition, seg.log_path)
        bsize = seg._batch_at(pos, &p)            # framing and magic checked (and its offsets, by the walk)
        read_header(p, &h)
        if offset < h.base_offset:
            return None                           # a gap: compaction removed the offset
        if seg.writable:
            skips = self._check(seg, pos, p, bsize, &h)
        else:                                     # another process's log: one pread of the batch, CRC-checked
            view = seg.read(pos, 0)[0]
            if len(view) != bsize:
                raise _errors.CorruptRecordError(f"batch at position {pos} cannot be read whole",
                                                 path=seg.log_path, position=pos)
            copy = _hold(view, bsize)
            p = copy.ptr
        if h.attributes & ATTR_CONTROL:
            return None                           # transaction markers hold no user record
        if h.attributes & ATTR_CODEC_MASK:
            data = inflate(h.attributes & ATTR_CODEC_MASK, p + BATCH_HEADER_SIZE, bsize - BATCH_HEADER_SIZE,
                           MAX_INFLATED_BYTES)
            e = self._keep(seg, pos, &h, data, data.ptr, data.size)
        elif copy is not None:
            e = self._keep(seg, pos, &h, copy, p + BATCH_HEADER_SIZE, bsize - BATCH_HEADER_SIZE)
        else:
            return find_record(p + BATCH_HEADER_SIZE, p + bsize, &h, offset, skips, topic, partition, seg.log_path)
        return find_record(e.ptr, e.ptr + e.size, &h, offset, e.skips, topic, partition, seg.log_path)


cdef object find_record(const unsigned char *rp, const unsigned char *rend, BatchHeader *h, int64_t offset,
                        bytes skips, object topic, int partition, object path):
    """The Record at offset among the records rp..rend of the batch h, None if none has it (a control batch, or
    a gap compaction left). The skip table (skip_table) says from which record to walk; records are skipped
    by their length up to the wanted one, none after it is read. Raises CorruptRecordError when a record on
    the way does not parse."""
    cdef int64_t length, ts_delta, off_delta, want = offset - h.base_offset
    cdef const unsigned char *rec_end
    cdef const unsigned char *q
    cdef const int32_t *t = <const int32_t *>PyBytes_AS_STRING(skips)
    cdef Py_ssize_t lo = 0, hi = PyBytes_GET_SIZE(skips) // 8 - 1, mid, best = -1
    cdef int32_t i, first = 0
    if h.attributes & ATTR_CONTROL or want < 0 or want > h.last_offset_delta:
        return None
    while lo <= hi:                               # the last noted record at or before the wanted offset
        mid = (lo + hi) // 2
        if t[mid * 2] <= want:
            best = mid
            lo = mid + 1
        else:
            hi = mid - 1
    if best >= 0:
        first = <int32_t>(best * SKIP_STRIDE)
        rp += t[best * 2 + 1]
    for i in range(first, h.records_count):
        rp = get_varint(rp, rend, &length)
        if rp == NULL or length < 6 or length > rend - rp:
            raise _corrupt_records(h, path, "bad record length")
        rec_end = rp + length
        q = get_varlong(rp + 1, rec_end, &ts_delta)         # after the record attributes
        if q != NULL:
            q = get_varint(q, rec_end, &off_delta)
        if q == NULL:
            raise _corrupt_records(h, path, "bad record timestamp or offset delta")
        if off_delta == want:
            return decode_record(q, rec_end, h, offset, ts_delta, 1 if h.attributes & ATTR_LOG_APPEND_TIME else 0,
                                 topic, partition, path)
        if off_delta > want:
            return None
        rp = rec_end
    return None


def point_record(Segment seg, int64_t offset, BatchCache cache, topic=None, int partition=-1):
    """The Record at `offset` in seg, or None when seg holds no record with that offset: past its data, in a gap
    compaction left, or a control record (a transaction marker). The batch holding it is found through the
    offset index, CRC-checked and walked once into a skip table unless `cache` remembers it, and decompressed
    once into `cache`; at most SKIP_STRIDE of its records are skipped to reach the one wanted. Raises
    CorruptRecordError (a damaged batch or record: framing, offsets, CRC, record lengths), RecordTooLargeError
    (a batch inflating past MAX_INFLATED_BYTES)."""
    return cache._record(seg, offset, topic, partition)
