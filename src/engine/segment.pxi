# One segment: `<base offset>.log` plus its `.index` and `.timeindex`.
#
# The .log is a sequence of whole record batches; `size` is the length of the trusted prefix (appended by
# this process, recovered, or found whole on open). Bytes are written with pwrite at `size` and only then
# published by growing `size`, so readers never see a partial batch; a failed write is cut off again before
# the error is raised. Every WRITEBACK_BYTES appended, the disk is asked to start writing the new pages
# (_start_writeback), so flush() waits for the last few MiB instead of all that was appended since the last one.
# An index entry is added for a batch when more than index.interval.bytes were appended
# since the last entry (the batch's last offset -> its position), as Kafka does, so Kafka's indexes and ours
# are interchangeable. Reads map the file (MappedFile) and export views; a read-only segment (another
# process's log) reads with pread instead, so the writer truncating the file can never fault this process:
# batch headers HEADER_WINDOW bytes at a time, and read() takes its whole range in one pread (into a scratch
# object, scratch.pxi, so a reader's pages are reused read after read) and walks it in memory.
#
# Offsets: every walk over the .log (reads, lookups, recovery, scan_tail) checks each batch's offsets with
# check_offsets (batch.pxd): after the batch before it (the first at or after base_offset) and below _limit(),
# the next segment's base offset as the owning Log sets it in `offset_limit`. baseOffset is outside the CRC,
# so this is what keeps a damaged one from hiding or renumbering records: such a batch is never returned.
#
# Locking: a Segment is not thread-safe. The owning Log serializes every call that writes or truncates;
# reads may run concurrently with appends because appends only add bytes past `size` before publishing it.

cdef enum:
    MAP_ALIGN = 2097152              # active segments are mapped in 2 MiB steps of virtual space
    WRITEBACK_BYTES = 4194304        # append() starts the disk writing the .log's pages every this many bytes
    HEADER_WINDOW = 65536            # read-only segments read batch headers this many bytes at a time
    SCAN_CHUNK = 1048576             # ... and scan_tail() checks this many bytes at a time
    WALK_ENTRIES = 65536             # recover() writes index entries in steps of at most this many
    WALK_OK = 0                      # Walk.reason: 1-5 are BatchCheck failures, then:
    WALK_BAD_ORDER = 6


# State of recover()'s validating walk over a mapped .log, resumed chunk by chunk.
ctypedef struct Walk:
    const unsigned char *base        # byte 0 of the file
    int64_t size
    int64_t base_offset
    int64_t interval                 # index.interval.bytes
    int64_t limit                    # offsets stay below it (Segment._limit())
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


cdef extern from "<fcntl.h>" nogil:
    int SYNC_FILE_RANGE_WRITE
    int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags)


cdef void _walk_log(Walk *w) noexcept nogil:
    """Validate batches from w.pos as Segment.recover() documents, making index entries as Segment.append
    does, until the end of the file, the first invalid batch (w.reason) or a full entry buffer (w.cap)."""
    cdef const unsigned char *p
    cdef int64_t bsize, last, ts
    cdef BatchCheck c
    while w.pos < w.size and w.on < w.cap and w.tn < w.cap:
        p = w.base + w.pos
        c = check_batch(p, w.size - w.pos, True)
        if c != CHECK_OK:
            w.reason = <int>c
            return
        if check_offsets(p, w.next_offset - 1, w.limit) != OFFSETS_OK:
            w.reason = WALK_BAD_ORDER
            return
        bsize = batch_size_at(p)
        last = last_offset_at(p)
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
        self.offset_limit = INT64_MAX
        self.window_len = 0

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
        if create and not writable:
            raise _errors.ReadOnlyLogError("cannot create a segment in a read-only log")
        try:
            self._open_log(create)
            if create:
                if self.size:
                    raise _errors.StorageError(f"segment file already exists with {self.size} bytes",
                                               self.log_path)
                self._next_offset = base_offset
                self.open_indexes()
                if self.oindex.entries or self.tindex.entries:   # left by a deletion that failed halfway
                    self.oindex.reset()
                    self.tindex.reset()
        except BaseException:
            self.close()                         # a failed open keeps no descriptor
            raise

    def __dealloc__(self):
        if self.fd >= 0:                         # dropped without close(): the descriptor goes with it
            close(self.fd)

    def __repr__(self):
        return f"Segment({self.log_path!r}, size={self.size})"

    # -- files --------------------------------------------------------------------------------------------------

    cdef int _open_log(self, bint create) except -1:
        cdef stat_t st
        cdef int flags = (O_RDWR if self.writable else O_RDONLY) | O_CLOEXEC
        if create:
            flags |= O_CREAT
        self.fd = fops.open(os.fsencode(self.log_path), flags, 0o644)
        if self.fd < 0:
            raise_storage_error("cannot open segment", self.log_path)
        if fstat(self.fd, &st) != 0:
            raise_storage_error("cannot stat segment", self.log_path)
        self.size = st.st_size
        self.writeback_from = self.size & ~4095
        return 0

    def open_indexes(self):
        """Open the index files (created empty if missing and writable; empty if missing and read-only: the
        writer creates them just after the .log). Idempotent. A read-only segment's offset index keeps only
        the entries inside its size: the writer may have indexed batches appended after that size was taken
        (time index entries past the next offset are dropped as _load_tail finds it)."""
        if self.oindex is None:
            oindex = OffsetIndex(self.index_path, self.base_offset, self.max_index_bytes, self.writable)
            self.tindex = TimeIndex(self.timeindex_path, self.base_offset, self.max_index_bytes, self.writable)
            self.oindex = oindex                 # both or neither: close() and this test oindex alone
            if not self.writable:
                self.oindex.drop_past(self.size)

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
                rc = fops.fdatasync(self.fd)
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
        CorruptIndexError when the last index entry does not point at a batch ending at its offset (the owner
        rebuilds the indexes: recover()), CorruptRecordError when the walk does not end exactly at the file's
        end on whole batches with offsets in order (a torn tail, a damaged header: the owner decides whether
        to cut it, recover(), or to let reads report it). Read-only segments first drop the index entries past
        the size they trust (see open_indexes): the writer may have indexed batches appended since."""
        cdef int64_t pos, ts, last, entry_offset, prev_last = self.base_offset - 1, limit = self._limit()
        cdef int64_t walk_ts = -1, walk_offset = -1
        cdef const unsigned char *p
        self.open_indexes()
        self.window_len = 0
        if not self.writable:
            self.oindex.drop_past(self.size)
        entry_offset, pos = self.oindex.last_entry
        self._next_offset = self.base_offset
        try:
            if pos > 0 and (pos + BATCH_HEADER_SIZE > self.size or last_offset_at(self._header(pos)) != entry_offset):
                raise CorruptIndexError("the last index entry does not point at its batch", path=self.index_path,
                                        position=pos)
            if self.size > 0:
                self._batch_at(0, &p)
                self.rolling_ts = <int64_t>get_be64(p + OFF_MAX_TIMESTAMP)
            while pos < self.size:
                pos += self._walk_batch(pos, &prev_last, limit, &p)
                ts = <int64_t>get_be64(p + OFF_MAX_TIMESTAMP)
                if ts > walk_ts:
                    walk_ts = ts
                    walk_offset = prev_last
                self._next_offset = prev_last + 1
        except _errors.CorruptRecordError:
            self._next_offset = -1
            raise
        if not self.writable:
            self.tindex.drop_from(self._next_offset)
        ts, last = self.tindex.last_entry
        self.max_timestamp = ts
        self.offset_of_max_timestamp = last if ts >= 0 else -1
        if walk_ts > self.max_timestamp:
            self.max_timestamp = walk_ts
            self.offset_of_max_timestamp = walk_offset
        return 0

    def activate(self, int64_t map_bytes):
        """Make this the active segment: indexes extended to full size, reads mapped up to map_bytes, no
        offset_limit (the last segment's offsets may grow)."""
        self.offset_limit = INT64_MAX
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

    cdef int64_t _limit(self) noexcept:
        """Offsets of this segment stay below this: offset_limit, and base_offset + 2**31 (relative offsets are
        int32 in the indexes)."""
        if self.base_offset > INT64_MAX - INT32_MAX - 1:
            return self.offset_limit
        return min(self.offset_limit, self.base_offset + INT32_MAX + 1)

    cdef const unsigned char *_header(self, int64_t pos) except NULL:
        """Pointer to the batch header at pos (< size); raises CorruptRecordError if it does not fit. Read-only
        segments pread HEADER_WINDOW bytes from pos into `window` and serve later headers inside it from there;
        the methods that start a walk empty it first (window_len = 0), so no call sees bytes an earlier call
        read (the writing process may have truncated and rewritten them since)."""
        cdef int64_t n
        cdef ssize_t got
        if pos < 0 or pos + BATCH_HEADER_SIZE > self.size:
            raise _errors.CorruptRecordError(f"batch header at position {pos} runs past the end of the segment",
                                             path=self.log_path, position=pos)
        if self.writable:
            return self._mapping(self.size).addr + pos
        if pos < self.window_pos or pos + BATCH_HEADER_SIZE > self.window_pos + self.window_len:
            if self.window is None:
                self.window = PyBytes_FromStringAndSize(NULL, HEADER_WINDOW)
            n = min(<int64_t>HEADER_WINDOW, self.size - pos)
            self.window_len = 0
            got = pread_big(self.fd, PyBytes_AS_STRING(self.window), <size_t>n, pos)
            if got < BATCH_HEADER_SIZE:
                raise_storage_error("cannot read segment", self.log_path)
            self.window_pos = pos
            self.window_len = got
        return <const unsigned char *>PyBytes_AS_STRING(self.window) + (pos - self.window_pos)

    cdef int64_t _batch_at(self, int64_t pos, const unsigned char **header) except -1:
        """Size of the batch at pos after checking its header fits, its length is sane and it ends inside the
        trusted size (magic 2); `header` gets a pointer to it. CorruptRecordError otherwise: a walk never
        follows a length it has not checked."""
        cdef const unsigned char *p = self._header(pos)
        why = self._frame_error(pos, p)
        if why is not None:
            raise _errors.CorruptRecordError(why, path=self.log_path, position=pos)
        header[0] = p
        return batch_size_at(p)

    cdef object _frame_error(self, int64_t pos, const unsigned char *p):
        """Why the header p read at pos does not frame a whole batch inside the trusted size, or None."""
        cdef int64_t bsize = batch_size_at(p)
        if bsize < BATCH_HEADER_SIZE or pos + bsize > self.size or p[OFF_MAGIC] != 2:
            return f"no whole batch at position {pos} (length {bsize}, magic {<int8_t>p[OFF_MAGIC]})"
        return None

    cdef int64_t _walk_batch(self, int64_t pos, int64_t *prev_last, int64_t limit,
                             const unsigned char **header) except -1:
        """_batch_at, then check_offsets: the batch must follow offset *prev_last (which becomes its last offset)
        and end below limit. CorruptRecordError (path, offset, position) when it does not."""
        cdef int64_t bsize = self._batch_at(pos, header)
        cdef OffsetCheck c = check_offsets(header[0], prev_last[0], limit)
        if c != OFFSETS_OK:
            raise_offsets(c, self.log_path, pos, header[0], prev_last[0], limit)
        prev_last[0] = last_offset_at(header[0])
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
                    w = fops.pwrite(self.fd, p + done, <size_t>(n - done), base_pos + done)
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
                fops.ftruncate(self.fd, base_pos)
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
                fops.ftruncate(self.fd, base_pos)
                raise
            if verified and self.verified_end == base_pos:
                self.verified_end = base_pos + n
            self.size = base_pos + n
            if self.size - self.writeback_from >= WRITEBACK_BYTES:
                self._start_writeback()
            return self.size
        finally:
            PyBuffer_Release(&b)

    cdef void _start_writeback(self) noexcept:
        """Start the disk writing the whole pages appended since the last call (sync_file_range WRITE: queued,
        not waited for), so a later flush() finds most of them written: the disk works while the caller encodes
        the next records, instead of after. Advisory: durability still comes from flush()'s fdatasync, which
        also reports any write error; a failure here changes nothing."""
        cdef int64_t end = self.size & ~4095
        if end > self.writeback_from:
            with nogil:
                sync_file_range(self.fd, self.writeback_from, end - self.writeback_from, SYNC_FILE_RANGE_WRITE)
            self.writeback_from = end

    # -- read ---------------------------------------------------------------------------------------------------

    def find_position(self, int64_t offset):
        """Position of the first batch whose last offset is >= offset, or -1 if there is none. Walks from the
        offset index entry below offset. Raises CorruptRecordError if the walk meets a batch whose length does
        not hold or whose offsets are out of order (from the walk's first batch on, which must start at or
        after base_offset)."""
        return self._find_position(offset)

    cdef int64_t _find_position(self, int64_t offset) except -2:
        """find_position() for C callers."""
        cdef int64_t entry_offset, pos, bsize, prev_last = self.base_offset - 1, limit = self._limit()
        cdef const unsigned char *p
        self.open_indexes()
        self.window_len = 0
        pos = self.oindex.lookup_position(offset, &entry_offset)
        if pos > 0 and (pos + BATCH_HEADER_SIZE > self.size or last_offset_at(self._header(pos)) != entry_offset):
            pos = 0                     # an entry past the trusted end, or not at its batch: scan instead
        while pos < self.size:
            bsize = self._walk_batch(pos, &prev_last, limit, &p)
            if prev_last >= offset:
                return pos
            pos += bsize
        return -1

    def read(self, int64_t position, int64_t max_bytes, int64_t max_offset=INT64_MAX, bint min_one=True,
             bint verify=True):
        """Whole batches from position: as many as fit in max_bytes (>= 0; but at least one when min_one), none
        holding an offset >= max_offset. Returns (view, next_position, next_offset), next_offset being the
        last returned offset + 1 (-1 when nothing is returned). The view is zero-copy from the mapping, or, for
        read-only segments, a slice of one pread of the range (and the header after it).

        Every batch is checked before it is returned: framing and offsets on the walk (check_offsets: the
        first at or after base_offset, each after the one before, all below _limit()), the CRC when it lies
        past the verified prefix. The walk also checks the header after the last batch it returns: a batch
        whose base offset is not after its predecessor's last offset makes both suspect (either may carry the
        damaged baseOffset), so neither is returned, unless its base offset is below base_offset (then it alone
        is damaged). A batch failing a check is never returned:
        CorruptRecordError (path, position; offset for offsets out of order) if nothing before it can be, else
        the read ends before it (the next read, starting there, raises).
        With verify=False the CRCs are left to verify_read(), which the caller runs on the result (a Log does
        that after releasing its lock, so readers of a partition do not wait for each other's CRC checks)."""
        cdef int64_t end, next_offset = -1, avail, want, bsize
        cdef const unsigned char *base
        cdef MappedFile m = None
        cdef bytes copy = None
        if position < 0 or position > self.size:
            raise _errors.InvalidArgumentError(f"position {position} outside segment of {self.size} bytes")
        if max_bytes < 0:
            raise _errors.InvalidArgumentError(f"max_bytes must not be negative: {max_bytes}")
        if position == self.size:
            return memoryview(b""), position, -1
        if self.writable:
            m = self._mapping(self.size)
            base = m.addr
            avail = self.size
        else:
            # max_bytes of batches, and room for the header after them (the walk checks it)
            want = min(self.size - position, max(max_bytes, <int64_t>BATCH_HEADER_SIZE) + BATCH_HEADER_SIZE)
            copy = self._pread(position, want)
            if min_one and want >= BATCH_HEADER_SIZE:
                bsize = batch_size_at(<const unsigned char *>PyBytes_AS_STRING(copy))
                if max_bytes < bsize <= self.size - position:      # one batch larger than max_bytes
                    want = min(self.size - position, bsize + BATCH_HEADER_SIZE)
                    copy = self._pread(position, want)
            base = <const unsigned char *>PyBytes_AS_STRING(copy) - position
            avail = position + want
        end = self._read_extent(base, position, avail, max_bytes, max_offset, min_one, &next_offset)
        if end == position:
            return memoryview(b""), position, -1
        if not verify:
            good = end
        else:
            good = self._verify(base, position, end)
        if good < end:
            end, next_offset = good, last_offset_at(base + self._last_batch_before(base, position, good)) + 1
        if m is not None:
            return m.view(position, end), end, next_offset
        return memoryview(copy)[:end - position], end, next_offset

    cdef bytes _pread(self, int64_t position, int64_t n):
        """n bytes of the .log from position (StorageError when fewer are there) at the start of a scratch
        object (scratch.pxi: it may be longer; only this prefix is meaningful)."""
        cdef bytes out = scratch_bytes(n)
        if pread_big(self.fd, PyBytes_AS_STRING(out), <size_t>n, position) != n:
            raise_storage_error("cannot read segment", self.log_path)
        return out

    cdef int64_t _read_extent(self, const unsigned char *base, int64_t position, int64_t avail, int64_t max_bytes,
                              int64_t max_offset, bint min_one, int64_t *next_offset) except -1:
        """read()'s walk: the end of the batches it returns from position. base + pos is byte pos of the file for
        pos < avail (avail = size for the mapping, the end of read()'s pread otherwise: a batch past it ends
        the walk as max_bytes does). *next_offset gets the last returned offset + 1. Header checks as read()
        describes: each batch's header is checked before the walk decides whether to return it, so the walk
        checks one batch more than it returns, except at the end of the segment."""
        cdef int64_t end = position, bsize = 0, fail, last
        cdef int64_t prev_pos = -1, prev_last = self.base_offset - 1, kept_next = -1, limit = self._limit()
        cdef const unsigned char *p = NULL
        cdef OffsetCheck oc
        cdef object why
        while end < self.size:
            why = None
            oc = OFFSETS_OK
            if end + BATCH_HEADER_SIZE > self.size:
                why = f"batch header at position {end} runs past the end of the segment"
            elif end + BATCH_HEADER_SIZE > avail:
                break
            else:
                p = base + end
                bsize = batch_size_at(p)
                why = self._frame_error(end, p)
                if why is None:
                    oc = check_offsets(p, prev_last, limit)
            if why is not None or oc != OFFSETS_OK:
                fail = end
                if oc == OFFSETS_NOT_AFTER and prev_pos >= 0 and <int64_t>get_be64(p) >= self.base_offset:
                    end = prev_pos           # the batch before is as suspect: either baseOffset may be the damaged one
                    next_offset[0] = kept_next
                if end > position:
                    break                    # serve the whole batches before the damage; the next read raises
                if why is not None:
                    raise _errors.CorruptRecordError(why, path=self.log_path, position=fail)
                raise_offsets(oc, self.log_path, fail, base + fail, prev_last, limit)
            last = last_offset_at(p)
            if last >= max_offset:
                break
            if end - position + bsize > max_bytes and (end > position or not min_one):
                break
            if end + bsize > avail:
                break
            kept_next = next_offset[0]
            prev_pos = end
            prev_last = last
            end += bsize
            next_offset[0] = last + 1
        return end

    def verify_read(self, view, int64_t position, int64_t next_offset):
        """The CRC checks of read(position, ..., verify=False), on its result: (view, next_offset) cut before the
        first batch failing its CRC, CorruptRecordError if that is the first one (as read() does). Needs no lock
        against appends or truncations: the view keeps its bytes (a truncation leaves viewed bytes in place)."""
        cdef Py_buffer b
        cdef int64_t end, good
        cdef const unsigned char *base
        PyObject_GetBuffer(view, &b, PyBUF_SIMPLE)
        try:
            end = position + b.len
            if end <= self.verified_end:
                return view, next_offset
            base = <const unsigned char *>b.buf - position
            good = self._verify(base, position, end)
            if good == end:
                return view, next_offset
            return view[:good - position], last_offset_at(base + self._last_batch_before(base, position, good)) + 1
        finally:
            PyBuffer_Release(&b)

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
        if verified > self.verified_end and verified <= self.size:   # (verify_read may run beside a truncation)
            self.verified_end = verified
        if bad == start and bad < end:
            raise_check(c, self.log_path, bad, base + bad, end - bad)
        return bad

    def find_offset_by_timestamp(self, int64_t timestamp, int64_t start_offset):
        """(offset, timestamp) of the first record at or after start_offset whose timestamp is >= timestamp,
        or None if this segment has none."""
        cdef int64_t entry_ts, entry_offset, pos, bsize, prev_last = self.base_offset - 1, limit = self._limit()
        cdef const unsigned char *p
        self.open_indexes()
        entry_ts, entry_offset = self.tindex.lookup(timestamp)
        pos = self.find_position(max(entry_offset, start_offset))
        if pos < 0:
            return None
        while pos < self.size:
            bsize = self._walk_batch(pos, &prev_last, limit, &p)
            if <int64_t>get_be64(p + OFF_MAX_TIMESTAMP) >= timestamp and not (get_be16(p + OFF_ATTRIBUTES) & ATTR_CONTROL):
                view = self.read(pos, bsize)[0]
                for r in decode_records(view, start_offset, INT64_MAX, None, -1, False, self.log_path):
                    if r.timestamp >= timestamp:
                        return r.offset, r.timestamp
            pos += bsize
        return None

    # -- recovery and truncation ---------------------------------------------------------------------------------

    def recover(self, bint truncate=True):
        """Rescan the whole .log: validate every batch (length, magic, CRC, offsets: check_offsets from
        base_offset on, below _limit()), rebuild both indexes from scratch, and cut the file at the first invalid
        batch (views of the cut bytes stay valid, see truncate_to_position). Returns (truncated_bytes, reason),
        reason None when the file was whole. With truncate=False the file keeps every byte: the indexes and
        next_offset cover the valid prefix, and reads report the invalid batch when they reach it.

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
        w.limit = self._limit()
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
        truncated = size - w.pos if truncate else 0
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
        """Cut the .log to pos bytes, durably: in place (ftruncate, then fdatasync, which covers the new size)
        unless a view of the file is alive through any mapping in the process (view.pxi): then the kept prefix
        is copied to `<name>.log.trunc`, fsynced and renamed over the .log, and the directory is fsynced, so
        the old inode stays whole for its views and a crash finds the truncated file under the name."""
        cdef int newfd
        if file_has_views(self.fd, self.log_path):
            tmp = self.log_path + ".trunc"
            newfd = fops.open(os.fsencode(tmp), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            if newfd < 0:
                raise_storage_error("cannot create truncation copy", tmp)
            try:
                copy_prefix(self.fd, newfd, pos, tmp)
                if fops.fdatasync(newfd) != 0:
                    raise_storage_error("cannot sync truncation copy", tmp)
                if fops.rename(os.fsencode(tmp), os.fsencode(self.log_path)) != 0:
                    raise_storage_error("cannot rename truncation copy", self.log_path)
            except BaseException:
                close(newfd)
                fops.unlink(os.fsencode(tmp))
                raise
            close(self.fd)
            self.fd = newfd
            self.mapping = None
            sync_dir(self.directory)
        else:
            if fops.ftruncate(self.fd, pos) != 0:
                raise_storage_error("cannot truncate segment", self.log_path)
            if fops.fdatasync(self.fd) != 0:
                raise_storage_error("cannot sync truncated segment", self.log_path)
        self.size = pos
        if self.verified_end > pos:
            self.verified_end = pos
        if self.writeback_from > pos:
            self.writeback_from = pos & ~4095
        return 0

    def check_indexes(self):
        """Sanity-check both indexes against the .log (Kafka's checks plus ordering); CorruptIndexError if not."""
        self.open_indexes()
        self.oindex.sanity_check(self.size)
        self.tindex.sanity_check(self.next_offset)

    def scan_tail(self):
        """Read-only segments: set `size` to the end of the whole, CRC-valid batches in offset order now in the
        file (another process is appending) and stop at the first incomplete or invalid one. Scans from the
        verified prefix, or from the last offset index entry (batches before it were complete when it was
        written), SCAN_CHUNK bytes per pread, checked without the GIL (_valid_run). Returns the new size."""
        cdef stat_t st
        cdef int64_t pos, file_size, n, bsize, used, prev_last = self.base_offset - 1, limit = self._limit()
        cdef ssize_t got
        cdef bytes buf = None
        cdef const unsigned char *q
        cdef BatchCheck c
        cdef OffsetCheck oc
        if fstat(self.fd, &st) != 0:
            raise_storage_error("cannot stat segment", self.log_path)
        file_size = st.st_size
        self.open_indexes()
        self.window_len = 0
        if self.verified_end > file_size:          # the writer truncated: start over from its index
            self.oindex.reload()
            self.tindex.reload()
            self.verified_end = 0
        self.oindex.drop_past(file_size)           # entries of batches appended after the fstat
        pos = self.verified_end
        if pos == 0:
            pos = self.oindex.last_entry[1]
        while pos + BATCH_HEADER_SIZE <= file_size:
            n = min(<int64_t>SCAN_CHUNK, file_size - pos)
            if buf is None or PyBytes_GET_SIZE(buf) < n:
                buf = PyBytes_FromStringAndSize(NULL, n)
            q = <const unsigned char *>PyBytes_AS_STRING(buf)
            got = pread_big(self.fd, <void *>q, <size_t>n, pos)
            if got < BATCH_HEADER_SIZE:
                break
            bsize = batch_size_at(q)
            if got < bsize <= file_size - pos:           # one batch larger than the chunk: read it whole
                buf = PyBytes_FromStringAndSize(NULL, bsize)
                q = <const unsigned char *>PyBytes_AS_STRING(buf)
                got = pread_big(self.fd, <void *>q, <size_t>bsize, pos)
            if got >= NOGIL_BYTES:
                with nogil:
                    used = _valid_run(q, got, &prev_last, limit, &c, &oc)
            else:
                used = _valid_run(q, got, &prev_last, limit, &c, &oc)
            pos += used
            self.verified_end = pos
            if used == 0 or oc != OFFSETS_OK or (c != CHECK_OK and c != CHECK_INCOMPLETE
                                                 and c != CHECK_SHORT_HEADER):
                break
        self.size = pos
        self.oindex.drop_past(pos)                 # ... or of a batch the scan found incomplete
        self._next_offset = -1
        self.max_timestamp = -1
        return pos


cdef int64_t _valid_run(const unsigned char *p, int64_t n, int64_t *prev_last, int64_t limit, BatchCheck *c,
                        OffsetCheck *oc) noexcept nogil:
    """Length of the run of whole batches at the start of p[0:n] that pass check_batch (CRC included) and
    check_offsets after *prev_last (left at the run's last offset). *c and *oc say why the run stopped (both OK
    when it reached n; CHECK_INCOMPLETE / CHECK_SHORT_HEADER for a batch cut short by n)."""
    cdef int64_t pos = 0
    c[0] = CHECK_OK
    oc[0] = OFFSETS_OK
    while pos < n:
        c[0] = check_batch(p + pos, n - pos, True)
        if c[0] != CHECK_OK:
            return pos
        oc[0] = check_offsets(p + pos, prev_last[0], limit)
        if oc[0] != OFFSETS_OK:
            return pos
        prev_last[0] = last_offset_at(p + pos)
        pos += batch_size_at(p + pos)
    return pos


cdef int sync_dir(str path) except -1:
    """fsync a directory, so a rename inside it is durable. Raises StorageError."""
    cdef int fd = fops.open(os.fsencode(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
    if fd < 0:
        raise_storage_error("cannot open directory", path)
    try:
        if fops.fsync(fd) != 0:
            raise_storage_error("cannot fsync directory", path)
    finally:
        close(fd)
    return 0


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
                if r <= 0 or fops.pwrite(dst, buf, <size_t>r, inoff) != r:
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
