# One segment: `<base offset>.log` plus its `.index` and `.timeindex`.
#
# The .log is a sequence of whole record batches; `size` is the length of the trusted prefix (appended by
# this process, recovered, or found whole on open). Bytes are written with pwrite at `size` and only then
# published by growing `size`, so readers never see a partial batch; a failed write is cut off again before
# the error is raised. An index entry is added for a batch when more than index.interval.bytes were appended
# since the last entry (the batch's last offset -> its position), as Kafka does, so Kafka's indexes and ours
# are interchangeable. Reads map the file (MappedFile) and export views; a read-only segment (another
# process's log) reads with pread instead, so the writer truncating the file can never fault this process.
#
# Locking: a Segment is not thread-safe. The owning Log serializes every call that writes or truncates;
# reads may run concurrently with appends because appends only add bytes past `size` before publishing it.

cdef enum:
    MAP_ALIGN = 2097152              # active segments are mapped in 2 MiB steps of virtual space
    WALK_ENTRIES = 65536             # recover() writes index entries in steps of at most this many
    WALK_OK = 0                      # Walk.reason: 1-5 are BatchCheck failures, then:
    WALK_BAD_ORDER = 6


# State of recover()'s validating walk over a mapped .log, resumed chunk by chunk.
ctypedef struct Walk:
    const unsigned char *base        # byte 0 of the file
    int64_t size
    int64_t base_offset
    int64_t interval                 # index.interval.bytes
    int64_t pos                      # where the walk goes on: the end of the valid batches so far
    int64_t next_offset              # last offset + 1 of the valid batches so far
    int64_t max_ts                   # largest maxTimestamp so far (-1 none) and the last offset of its batch
    int64_t max_ts_offset
    int64_t rolling_ts               # maxTimestamp of the first batch (-1 none)
    int64_t since_index              # bytes since the last index point
    bint has_time_entry              # the time index holds an entry (last_time_ts is its timestamp)
    int64_t last_time_ts
    int reason                       # WALK_OK, or why the batch at pos is invalid
    unsigned char *oentries          # offset index entries made by this chunk (8 bytes each) ...
    unsigned char *tentries          # ... and time index entries (12 bytes each)
    Py_ssize_t on, tn, cap           # entries made, buffer capacity
    Py_ssize_t olimit, tlimit        # room left in each index (<= cap): a full index takes no more entries


cdef void _walk_log(Walk *w) noexcept nogil:
    """Validate batches from w.pos as Segment.recover() documents, making index entries as Segment.append
    does, until the end of the file, the first invalid batch (w.reason) or a full entry buffer (w.cap)."""
    cdef const unsigned char *p
    cdef int64_t bsize, first, last, ts
    cdef BatchCheck c
    while w.pos < w.size and w.on < w.cap and w.tn < w.cap:
        p = w.base + w.pos
        c = check_batch(p, w.size - w.pos, True)
        if c != CHECK_OK:
            w.reason = <int>c
            return
        bsize = batch_size_at(p)
        first = <int64_t>get_be64(p)
        last = last_offset_at(p)
        if first < w.next_offset or last < first or last - w.base_offset > INT32_MAX:
            w.reason = WALK_BAD_ORDER
            return
        ts = <int64_t>get_be64(p + OFF_MAX_TIMESTAMP)
        if ts > w.max_ts:
            w.max_ts = ts
            w.max_ts_offset = last
        if w.rolling_ts < 0:
            w.rolling_ts = ts
        if w.since_index > w.interval:
            if w.on < w.olimit and w.pos <= INT32_MAX:
                put_be32(w.oentries + w.on * 8, <uint32_t>(last - w.base_offset))
                put_be32(w.oentries + w.on * 8 + 4, <uint32_t>w.pos)
                w.on += 1
            if w.tn < w.tlimit and (not w.has_time_entry or w.max_ts > w.last_time_ts):
                put_be64(w.tentries + w.tn * 12, <uint64_t>w.max_ts)
                put_be32(w.tentries + w.tn * 12 + 8, <uint32_t>(w.max_ts_offset - w.base_offset))
                w.tn += 1
                w.has_time_entry = True
                w.last_time_ts = w.max_ts
            w.since_index = 0
        w.since_index += bsize
        w.next_offset = last + 1
        w.pos += bsize


cdef class Segment:

    def __cinit__(self, *args, **kwargs):
        self.fd = -1
        self.size = 0
        self._next_offset = -1
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.rolling_ts = -1
        self.bytes_since_index = 0
        self.verified_end = 0
        self.map_hint = 0

    def __init__(self, str directory, int64_t base_offset, *, Py_ssize_t index_interval_bytes=4096,
                 Py_ssize_t max_index_bytes=10485760, bint writable=True, bint create=False):
        """Open (lazily) or, with create=True, create the segment files of base_offset in directory.

        Raises StorageError if the .log cannot be opened or created."""
        name = segment_name(base_offset)
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = os.path.join(directory, name + ".log")
        self.index_path = os.path.join(directory, name + ".index")
        self.timeindex_path = os.path.join(directory, name + ".timeindex")
        self.index_interval_bytes = index_interval_bytes
        self.max_index_bytes = max_index_bytes
        self.writable = writable
        self.created_ms = now_ms()
        if create:
            if not writable:
                raise _errors.ReadOnlyLogError("cannot create a segment in a read-only log")
            self._open_log(True)
            if self.size:
                raise _errors.StorageError(f"segment file already exists with {self.size} bytes", self.log_path)
            self._next_offset = base_offset
            self.open_indexes()
        else:
            self._open_log(False)

    def __repr__(self):
        return f"Segment({self.log_path!r}, size={self.size})"

    # -- files --------------------------------------------------------------------------------------------------

    cdef int _open_log(self, bint create) except -1:
        cdef stat_t st
        cdef int flags = (O_RDWR if self.writable else O_RDONLY) | O_CLOEXEC
        if create:
            flags |= O_CREAT
        self.fd = open_c(os.fsencode(self.log_path), flags, 0o644)
        if self.fd < 0:
            raise_storage_error("cannot open segment", self.log_path)
        if fstat(self.fd, &st) != 0:
            raise_storage_error("cannot stat segment", self.log_path)
        self.size = st.st_size
        return 0

    def open_indexes(self):
        """Open the index files (created empty if missing and writable). Idempotent."""
        if self.oindex is None:
            self.oindex = OffsetIndex(self.index_path, self.base_offset, self.max_index_bytes, self.writable)
            self.tindex = TimeIndex(self.timeindex_path, self.base_offset, self.max_index_bytes, self.writable)

    @property
    def offset_index(self):
        self.open_indexes()
        return self.oindex

    @property
    def time_index(self):
        self.open_indexes()
        return self.tindex

    @property
    def is_open(self):
        return self.fd >= 0

    def close(self):
        """Close files. Views already handed out stay valid (they hold the mapping)."""
        if self.oindex is not None:
            self.oindex.close()
            self.tindex.close()
            self.oindex = None
            self.tindex = None
        self.mapping = None
        if self.fd >= 0:
            close(self.fd)
            self.fd = -1

    def flush(self):
        """fdatasync the .log and fsync the indexes. Raises StorageError."""
        if not self.writable:
            return
        if self.fd >= 0:
            with nogil:
                rc = fdatasync(self.fd)
            if rc != 0:
                raise_storage_error("cannot fsync segment", self.log_path)
        if self.oindex is not None:
            self.oindex.flush()
            self.tindex.flush()

    # -- state ----------------------------------------------------------------------------------------------------

    @property
    def next_offset(self):
        """Last offset + 1 (base_offset when empty); found by reading the batches after the last index entry."""
        if self._next_offset < 0:
            self._load_tail()
        return self._next_offset

    @property
    def largest_timestamp(self):
        """Largest batch maxTimestamp in the segment: from memory when loaded, else the time index's last
        entry, else the file's modification time (as Kafka does for segments without timestamps)."""
        cdef stat_t st
        if self.max_timestamp >= 0:
            return self.max_timestamp
        if self._next_offset < 0:
            self.open_indexes()
            ts = self.tindex.last_entry[0]
            if ts >= 0:
                return ts
        if fstat(self.fd, &st) != 0:
            raise_storage_error("cannot stat segment", self.log_path)
        return <int64_t>st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec // 1000000

    cdef int _load_tail(self) except -1:
        """Find next_offset and the max timestamp by walking the batches after the last index entry. Raises
        CorruptIndexError when that walk does not end exactly at the file's end on whole batches (a torn tail,
        or an index entry that does not point at a batch): the owner rebuilds the segment (recover())."""
        cdef int64_t pos, ts, last, entry_offset
        cdef const unsigned char *p
        self.open_indexes()
        entry_offset, pos = self.oindex.last_entry
        ts, last = self.tindex.last_entry
        self.max_timestamp = ts
        self.offset_of_max_timestamp = last if ts >= 0 else -1
        self._next_offset = self.base_offset
        try:
            if self.size > 0:
                self._batch_at(0, &p)
                self.rolling_ts = <int64_t>get_be64(p + OFF_MAX_TIMESTAMP)
            if pos > 0 and (pos >= self.size or last_offset_at(self._header(pos)) != entry_offset):
                raise _errors.CorruptRecordError("the last index entry does not point at its batch",
                                                 path=self.index_path, position=pos)
            while pos < self.size:
                pos += self._batch_at(pos, &p)
                last = last_offset_at(p)
                ts = <int64_t>get_be64(p + OFF_MAX_TIMESTAMP)
                if ts > self.max_timestamp:
                    self.max_timestamp = ts
                    self.offset_of_max_timestamp = last
                self._next_offset = last + 1
        except _errors.CorruptRecordError as e:
            self._next_offset = -1
            raise CorruptIndexError(f"segment does not walk to its end: {e}", path=self.log_path) from None
        return 0

    def activate(self, int64_t map_bytes):
        """Make this the active segment: indexes extended to full size, reads mapped up to map_bytes."""
        self.open_indexes()
        self.oindex.grow()
        self.tindex.grow()
        self.map_hint = map_bytes
        if self._next_offset < 0:
            self._load_tail()

    def seal(self, bint sync=True):
        """The segment stops being active: final time index entry, indexes trimmed, and (sync) everything
        fsynced. sync=False is for a segment nothing was written to since it was opened."""
        self.open_indexes()
        if self._next_offset < 0:
            self._load_tail()
        if self.max_timestamp >= 0:
            self.tindex.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, True)
        self.oindex.trim()
        self.tindex.trim()
        self.map_hint = 0
        if sync:
            self.flush()

    # -- raw access -------------------------------------------------------------------------------------------

    cdef MappedFile _mapping(self, int64_t end):
        """A mapping covering [0, end) of the .log (remapped larger when the file outgrew the old one)."""
        cdef int64_t length
        if self.mapping is None or <int64_t>self.mapping.length < end:
            length = max(end, self.map_hint, self.size)
            length = (length + MAP_ALIGN - 1) // MAP_ALIGN * MAP_ALIGN if self.map_hint else length
            self.mapping = MappedFile.map_fd(self.fd, <size_t>length, self.log_path)
        return self.mapping

    cdef const unsigned char *_header(self, int64_t pos) except NULL:
        """Pointer to the batch header at pos (< size); raises CorruptRecordError if it does not fit."""
        if pos < 0 or pos + BATCH_HEADER_SIZE > self.size:
            raise _errors.CorruptRecordError(f"batch header at position {pos} runs past the end of the segment",
                                             path=self.log_path, position=pos)
        if self.writable:
            return self._mapping(self.size).addr + pos
        if pread(self.fd, self.scratch, BATCH_HEADER_SIZE, pos) != BATCH_HEADER_SIZE:
            raise_storage_error("cannot read segment", self.log_path)
        return self.scratch

    cdef int64_t _batch_at(self, int64_t pos, const unsigned char **header) except -1:
        """Size of the batch at pos after checking its header fits, its length is sane and it ends inside the
        trusted size (magic 2); `header` gets a pointer to it. CorruptRecordError otherwise: a walk never
        follows a length it has not checked."""
        cdef const unsigned char *p = self._header(pos)
        cdef int64_t bsize = batch_size_at(p)
        if bsize < BATCH_HEADER_SIZE or pos + bsize > self.size or p[OFF_MAGIC] != 2:
            raise _errors.CorruptRecordError(f"no whole batch at position {pos} (length {bsize}, magic "
                                             f"{<int8_t>p[OFF_MAGIC]})", path=self.log_path, position=pos)
        header[0] = p
        return bsize

    # -- append -------------------------------------------------------------------------------------------------

    def fits(self, data, Py_ssize_t start, int64_t segment_bytes, int64_t roll_ms):
        """How far data[start:] (whole batches) can go into this segment before it must roll: the end index of
        the batches that fit. Returns start when the first batch must go to a new segment; an empty segment
        always takes at least one batch. Roll reasons, as Kafka's: size would pass segment_bytes, a batch's
        max timestamp is more than roll_ms past the first batch's, an index is full, a relative offset would
        not fit in int32."""
        cdef Py_buffer b
        cdef const unsigned char *p
        cdef int64_t pos = start, size = self.size, first_ts, ts, bsize, since
        cdef Py_ssize_t entries, tentries
        if self._next_offset < 0:
            self._load_tail()
        self.open_indexes()
        first_ts = self.rolling_ts
        since = self.bytes_since_index
        entries = self.oindex.entries
        tentries = self.tindex.entries
        PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
        try:
            p = <const unsigned char *>b.buf
            while pos + BATCH_HEADER_SIZE <= b.len:
                bsize = batch_size_at(p + pos)
                ts = <int64_t>get_be64(p + pos + OFF_MAX_TIMESTAMP)
                if size > 0:
                    if size + bsize > segment_bytes:
                        break
                    if first_ts >= 0 and ts - first_ts > roll_ms:
                        break
                    if since > self.index_interval_bytes and (
                            entries >= self.oindex.max_entries or tentries >= self.tindex.max_entries):
                        break
                    if last_offset_at(p + pos) - self.base_offset > INT32_MAX:
                        break
                if first_ts < 0:
                    first_ts = ts
                if since > self.index_interval_bytes:
                    entries += 1
                    tentries += 1
                    since = 0
                since += bsize
                size += bsize
                pos += bsize
            return pos
        finally:
            PyBuffer_Release(&b)

    def append(self, data, Py_ssize_t start=0, Py_ssize_t stop=-1, bint verified=True):
        """Write data[start:stop] (whole batches with their final offsets) at the end of the .log, update the
        indexes, then publish the new size. On a write error the partial bytes are cut off and StorageError
        is raised: nothing of the call is visible. ``verified`` says the caller checked the CRCs."""
        cdef Py_buffer b
        cdef const unsigned char *p
        cdef int64_t n, done = 0, pos, bsize, last, ts, base_pos = self.size
        cdef ssize_t w
        cdef int err = 0
        if not self.writable:
            raise _errors.ReadOnlyLogError(f"segment {self.log_path} is read-only")
        self.open_indexes()
        if self._next_offset < 0:
            self._load_tail()
        PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
        try:
            if stop < 0:
                stop = b.len
            if start < 0 or stop > b.len or start > stop:
                raise _errors.InvalidArgumentError("append range outside the buffer")
            p = <const unsigned char *>b.buf + start
            n = stop - start
            with nogil:
                while done < n:
                    w = pwrite(self.fd, p + done, <size_t>(n - done), base_pos + done)
                    if w < 0:
                        if errno == EINTR:
                            continue
                        err = errno
                        break
                    if w == 0:
                        err = ENOSPC
                        break
                    done += w
            if err:
                ftruncate(self.fd, base_pos)
                raise _errors.StorageError(f"cannot append to segment: {os.strerror(err)}", self.log_path, err)
            saved = (self._next_offset, self.max_timestamp, self.offset_of_max_timestamp, self.rolling_ts,
                     self.bytes_since_index, self.oindex.entries, self.tindex.entries)
            try:
                pos = 0
                while pos < n:
                    bsize = batch_size_at(p + pos)
                    last = last_offset_at(p + pos)
                    ts = <int64_t>get_be64(p + pos + OFF_MAX_TIMESTAMP)
                    if ts > self.max_timestamp:
                        self.max_timestamp = ts
                        self.offset_of_max_timestamp = last
                    if self.rolling_ts < 0:
                        self.rolling_ts = ts
                    if self.bytes_since_index > self.index_interval_bytes:
                        self.oindex.append(last, base_pos + pos)
                        self.tindex.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                        self.bytes_since_index = 0
                    self.bytes_since_index += bsize
                    self._next_offset = last + 1
                    pos += bsize
            except BaseException:            # an index write failed (disk full): take the whole call back
                (self._next_offset, self.max_timestamp, self.offset_of_max_timestamp, self.rolling_ts,
                 self.bytes_since_index) = saved[:5]
                self.oindex.truncate_entries(saved[5])
                self.tindex.truncate_entries(saved[6])
                ftruncate(self.fd, base_pos)
                raise
            if verified and self.verified_end == base_pos:
                self.verified_end = base_pos + n
            self.size = base_pos + n
            return self.size
        finally:
            PyBuffer_Release(&b)

    # -- read ---------------------------------------------------------------------------------------------------

    def find_position(self, int64_t offset):
        """Position of the first batch whose last offset is >= offset, or -1 if there is none. Raises
        CorruptRecordError if the walk meets a batch whose length does not hold."""
        cdef int64_t entry_offset, pos, bsize
        cdef const unsigned char *p
        self.open_indexes()
        pos = self.oindex.lookup_position(offset, &entry_offset)
        if pos > 0 and (pos + BATCH_HEADER_SIZE > self.size or last_offset_at(self._header(pos)) != entry_offset):
            pos = 0                     # an entry past the trusted end, or not at its batch: scan instead
        while pos < self.size:
            bsize = self._batch_at(pos, &p)
            if last_offset_at(p) >= offset:
                return pos
            pos += bsize
        return -1

    def read(self, int64_t position, int64_t max_bytes, int64_t max_offset=INT64_MAX, bint min_one=True):
        """Whole batches from position: as many as fit in max_bytes (but at least one when min_one), none
        holding an offset >= max_offset. Returns (view, next_position, next_offset), next_offset being the
        last returned offset + 1 (-1 when nothing is returned). The view is zero-copy from the mapping, or a
        copy for read-only segments. Batches past the verified prefix are CRC-checked first: a corrupt one is
        never returned (CorruptRecordError if it would be the first)."""
        cdef int64_t end = position, bsize, next_offset = -1, last
        cdef const unsigned char *p
        cdef MappedFile m
        cdef bytes copy
        if position < 0 or position > self.size:
            raise _errors.InvalidArgumentError(f"position {position} outside segment of {self.size} bytes")
        while end < self.size:
            try:
                bsize = self._batch_at(end, &p)
            except _errors.CorruptRecordError:
                if end > position:
                    break                # serve the whole batches before the damage; the next read raises
                raise
            last = last_offset_at(p)
            if last >= max_offset:
                break
            if end - position + bsize > max_bytes and (end > position or not min_one):
                break
            end += bsize
            next_offset = last + 1
        if end == position:
            return memoryview(b""), position, -1
        if self.writable:
            m = self._mapping(end)
            good = self._verify(m.addr, position, end)
            if good < end:
                end, next_offset = good, last_offset_at(m.addr + self._last_batch_before(m.addr, position, good)) + 1
            return m.view(position, end), end, next_offset
        copy = PyBytes_FromStringAndSize(NULL, end - position)
        if pread_big(self.fd, PyBytes_AS_STRING(copy), end - position, position) != end - position:
            raise_storage_error("cannot read segment", self.log_path)
        base = <const unsigned char *>PyBytes_AS_STRING(copy) - position
        good = self._verify(base, position, end)
        if good < end:
            end, next_offset = good, last_offset_at(base + self._last_batch_before(base, position, good)) + 1
        return memoryview(copy)[:end - position], end, next_offset

    cdef int64_t _last_batch_before(self, const unsigned char *base, int64_t start, int64_t stop) noexcept:
        """Position of the last batch that starts in [start, stop) (batches tile the range from start)."""
        cdef int64_t pos = start, last = start
        while pos < stop:
            last = pos
            pos += batch_size_at(base + pos)
        return last

    cdef int64_t _verify(self, const unsigned char *base, int64_t start, int64_t end) except -1:
        """CRC-check the batches of [start, end) that lie past the verified prefix (base = byte 0 of the file),
        without the GIL for NOGIL_BYTES and more. Returns where the first invalid batch starts (end if none);
        raises CorruptRecordError if it is the first batch of the range, so a read returns the good batches
        before a corrupt one and never it."""
        cdef int64_t bad, verified = self.verified_end
        cdef BatchCheck c = CHECK_OK
        if end <= verified:
            return end
        if end - max(start, verified) >= NOGIL_BYTES:
            with nogil:
                bad = _check_range(base, start, end, &verified, &c)
        else:
            bad = _check_range(base, start, end, &verified, &c)
        self.verified_end = verified
        if bad == start and bad < end:
            raise_check(c, self.log_path, bad, base + bad, end - bad)
        return bad

    def find_offset_by_timestamp(self, int64_t timestamp, int64_t start_offset):
        """(offset, timestamp) of the first record at or after start_offset whose timestamp is >= timestamp,
        or None if this segment has none."""
        cdef int64_t entry_ts, entry_offset, pos, bsize
        cdef const unsigned char *p
        cdef BatchHeader h
        self.open_indexes()
        entry_ts, entry_offset = self.tindex.lookup(timestamp)
        pos = self.find_position(max(entry_offset, start_offset))
        if pos < 0:
            return None
        while pos < self.size:
            bsize = self._batch_at(pos, &p)
            if <int64_t>get_be64(p + OFF_MAX_TIMESTAMP) >= timestamp and not (get_be16(p + OFF_ATTRIBUTES) & ATTR_CONTROL):
                view = self.read(pos, bsize)[0]
                for r in decode_records(view, start_offset, INT64_MAX, None, -1, False, self.log_path):
                    if r.timestamp >= timestamp:
                        return r.offset, r.timestamp
            pos += bsize
        return None

    # -- recovery and truncation ---------------------------------------------------------------------------------

    def recover(self):
        """Rescan the whole .log: validate every batch (length, magic, CRC, offsets increasing), rebuild both
        indexes from scratch, and cut the file at the first invalid batch (views of the cut bytes stay valid, see
        truncate_to_position). Returns (truncated_bytes, reason), reason None when the file was whole.

        Each index takes entries until it is full (segment.index.bytes may have been lowered since the segment
        was written): lookups past the last entry scan the .log from there, and an active segment with a full
        index rolls at its next append. The walk runs without the GIL (_walk_log) for segments of NOGIL_BYTES
        and more, taking it back only to write index entries every WALK_ENTRIES of them."""
        cdef Walk w
        cdef MappedFile m
        cdef int64_t size = self.size
        cdef Py_ssize_t cap
        if not self.writable:
            raise _errors.ReadOnlyLogError(f"segment {self.log_path} is read-only")
        self.open_indexes()
        self.oindex.reset()
        self.tindex.reset()
        self.mapping = None
        m = self._mapping(size)
        w.base = m.addr
        w.size = size
        w.base_offset = self.base_offset
        w.interval = self.index_interval_bytes
        w.pos = 0
        w.next_offset = self.base_offset
        w.max_ts = -1
        w.max_ts_offset = -1
        w.rolling_ts = -1
        w.since_index = 0
        w.has_time_entry = False
        w.last_time_ts = 0
        w.reason = WALK_OK
        cap = <Py_ssize_t>min(<int64_t>WALK_ENTRIES, size // max(<int64_t>w.interval, <int64_t>BATCH_HEADER_SIZE) + 1)
        w.oentries = <unsigned char *>PyMem_Malloc(cap * 8)
        w.tentries = <unsigned char *>PyMem_Malloc(cap * 12)
        try:
            if w.oentries == NULL or w.tentries == NULL:
                raise MemoryError()
            while True:
                w.on = 0
                w.tn = 0
                w.cap = cap
                w.olimit = min(cap, self.oindex.max_entries - self.oindex.entries)
                w.tlimit = min(cap, self.tindex.max_entries - self.tindex.entries)
                if size - w.pos >= NOGIL_BYTES:
                    with nogil:
                        _walk_log(&w)
                else:
                    _walk_log(&w)
                self.oindex._append_entries(w.oentries, w.on)
                self.tindex._append_entries(w.tentries, w.tn)
                if w.pos >= size or w.reason != WALK_OK:
                    break
        finally:
            PyMem_Free(w.oentries)
            PyMem_Free(w.tentries)
        m = None
        self.mapping = None
        self.max_timestamp = w.max_ts
        self.offset_of_max_timestamp = w.max_ts_offset
        self.rolling_ts = w.rolling_ts
        self.bytes_since_index = w.since_index
        self._next_offset = w.next_offset
        truncated = size - w.pos
        if truncated:
            self.truncate_to_position(w.pos)
        self.verified_end = w.pos
        return truncated, (None if w.reason == WALK_OK else _check_reason(w.reason))

    def truncate_to(self, int64_t offset):
        """Remove every batch holding an offset >= offset (a batch straddling offset goes whole). Returns the
        bytes removed. Views of removed bytes stay valid: if any view is alive the kept prefix is copied to a
        new file that replaces this one, so the mapped old file is never shrunk under a reader."""
        cdef int64_t pos = self.find_position(offset)
        if pos < 0:
            return 0
        removed = self.size - pos
        self.truncate_to_position(pos)
        self.oindex.truncate_to(offset)
        self.tindex.truncate_to(offset)
        self.max_timestamp = -1
        self._next_offset = -1
        self._load_tail()
        if self.size == 0:
            self.rolling_ts = -1
        self.bytes_since_index = 0
        return removed

    cdef int truncate_to_position(self, int64_t pos) except -1:
        """Cut the .log to pos bytes. In place (ftruncate) unless a view of the file is alive through any
        mapping in the process (view.pxi): then the kept prefix is copied to `<name>.log.trunc`, fsynced and
        renamed over the .log, so the old inode stays whole for its views."""
        cdef int newfd
        if file_has_views(self.fd, self.log_path):
            tmp = self.log_path + ".trunc"
            newfd = open_c(os.fsencode(tmp), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            if newfd < 0:
                raise_storage_error("cannot create truncation copy", tmp)
            try:
                copy_prefix(self.fd, newfd, pos, tmp)
                if fdatasync(newfd) != 0:
                    raise_storage_error("cannot sync truncation copy", tmp)
                os.rename(tmp, self.log_path)
            except BaseException:
                close(newfd)
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
            close(self.fd)
            self.fd = newfd
            self.mapping = None
        elif ftruncate(self.fd, pos) != 0:
            raise_storage_error("cannot truncate segment", self.log_path)
        self.size = pos
        if self.verified_end > pos:
            self.verified_end = pos
        return 0

    def check_indexes(self):
        """Sanity-check both indexes against the .log (Kafka's checks plus ordering); CorruptIndexError if not."""
        self.open_indexes()
        self.oindex.sanity_check(self.size)
        self.tindex.sanity_check(self.next_offset)

    def scan_tail(self):
        """Read-only segments: set `size` to the end of the whole, CRC-valid batches now in the file (another
        process is appending) and stop at the first incomplete or invalid one. Scans from the verified prefix,
        or from the last offset index entry (batches before it were complete when it was written). Returns
        the new size."""
        cdef stat_t st
        cdef int64_t pos, file_size, bsize
        cdef bytes buf
        cdef BatchCheck c
        if fstat(self.fd, &st) != 0:
            raise_storage_error("cannot stat segment", self.log_path)
        file_size = st.st_size
        self.open_indexes()
        if self.verified_end > file_size:          # the writer truncated: start over from its index
            self.oindex.reload()
            self.tindex.reload()
            self.verified_end = 0
        pos = self.verified_end
        if pos == 0:
            pos = self.oindex.last_entry[1]
            if pos > file_size:
                pos = 0
        while pos + BATCH_HEADER_SIZE <= file_size:
            if pread(self.fd, self.scratch, BATCH_HEADER_SIZE, pos) != BATCH_HEADER_SIZE:
                break
            bsize = batch_size_at(self.scratch)
            if bsize < BATCH_HEADER_SIZE or pos + bsize > file_size:
                break
            buf = PyBytes_FromStringAndSize(NULL, bsize)
            if pread_big(self.fd, PyBytes_AS_STRING(buf), bsize, pos) != bsize:
                break
            scan_batches_gil(<const unsigned char *>PyBytes_AS_STRING(buf), bsize, 0, True, &c)
            if c != CHECK_OK:
                break
            pos += bsize
            self.verified_end = pos
        self.size = pos
        self._next_offset = -1
        self.max_timestamp = -1
        return pos


cdef int64_t _check_range(const unsigned char *base, int64_t start, int64_t end, int64_t *verified,
                          BatchCheck *c) noexcept nogil:
    """Segment._verify's walk: the batches tiling [start, end) that start at or past *verified are checked
    (CRC included). Returns where the first invalid one starts (end if none, *c its check); *verified grows
    over the valid batches that continue it."""
    cdef int64_t pos = start
    while pos < end:
        if pos >= verified[0]:
            c[0] = check_batch(base + pos, end - pos, True)
            if c[0] != CHECK_OK:
                return pos
            if pos == verified[0]:
                verified[0] = pos + batch_size_at(base + pos)
        pos += batch_size_at(base + pos)
    return end


cdef int copy_prefix(int src, int dst, int64_t n, str path) except -1:
    """Copy the first n bytes of src to dst in the kernel (copy_file_range), or through a buffer where the
    file system cannot; without the GIL."""
    cdef loff_t inoff = 0, outoff = 0
    cdef ssize_t r = 0
    cdef char *buf
    with nogil:
        while inoff < n:
            r = copy_file_range(src, &inoff, dst, &outoff, <size_t>(n - inoff), 0)
            if r <= 0:
                break
    if inoff >= n:
        return 0
    buf = <char *>PyMem_Malloc(1 << 20)
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            while inoff < n:
                r = pread(src, buf, <size_t>min(<int64_t>(1 << 20), n - inoff), inoff)
                if r <= 0 or pwrite(dst, buf, <size_t>r, inoff) != r:
                    r = -1
                    break
                inoff += r
        if r < 0:
            raise_storage_error("cannot copy segment prefix", path)
    finally:
        PyMem_Free(buf)
    return 0


cdef str _check_reason(int c):
    """Why a batch is invalid: a BatchCheck failure or WALK_BAD_ORDER."""
    return ("", "truncated batch header", "invalid batch length", "batch runs past the end of the file",
            "invalid magic byte", "CRC-32C mismatch", "batch offsets out of order")[c]


def segment_name(int64_t base_offset):
    """The 20-digit file name stem of a segment (Kafka's zero-padded base offset)."""
    return "%020d" % base_offset
