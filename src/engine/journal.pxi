# The append journal: what Log.append() has returned survives kill -9 of the process before it is written
# to a segment.
#
# Log.append() encodes records into a BatchWriter and writes them to the segment a batch (~16 KiB) at a time.
# The journal mirrors the writer's unwritten bytes, at every append, into `.append-journal` in the partition
# directory through a shared writable mapping: the bytes are in the page cache as soon as the store is done,
# so they outlive the process (not a power loss: that needs flush()). After its first commit the writer encodes
# straight into the mapping's data area (AppendJournal._attach), so mirroring copies nothing but the open
# batch's fixed header fields, and a log's pending records occupy one buffer, not two (with many logs open, the
# second buffer's cache misses were most of what an append cost more than with one). Space is reserved with
# fallocate before anything is stored through the mapping, so a full disk fails the reservation (StorageError
# from append(), the record taken back) instead of faulting a store.
#
# Why a side file and stores through a mapping: a batch growing in place in the segment would have to be
# placed before its size is known (segment.bytes, roll by time, index room are decided per whole batch) and
# would change under readers in other processes who already read its shorter form; a journal keeps the segment
# format and its readers as they are. Stores cost ~30 ns per append (journal.add against BatchWriter.add,
# 100-byte records); a pwrite of each record plus one of the commit word costs two system calls, ~3 us.
#
# File layout:
#     0   magic "SGJ1"
#     8   generation (u64): +1 at every reset; a reader in another process checks it did not change while it read
#     16  commit word (u64): finished << 32 | open records, stored last, in one aligned 8-byte store
#     64  data: the writer's buffer as of the commit: `finished` bytes of whole batches (valid CRCs), then the
#         open batch: its header's fixed fields (base offset, epoch, magic, attributes, base timestamp,
#         producer fields) and its records, `open records` of them complete.
#
# Invariant: every byte the commit word covers was stored before it, and is not changed again until a reset
# (rewriting a finished batch's header only fills in fields the open batch header leaves to the repair). So
# after kill -9 at any instruction, journal_batches() finds whole batches: the finished ones, then the open
# one repaired (length, lastOffsetDelta, maxTimestamp, recordsCount and CRC computed from its complete
# records). Log opens replay them after the segments' recovery when they continue the log; readers in other
# processes read them as the log's tail (read_journal). Readers never see a batch with a wrong CRC: the
# repair makes a valid copy, and nothing else of the journal is ever served.

cdef extern from *:
    """
    #include <stdint.h>
    static inline void seglog_store64(unsigned char *p, uint64_t v) { __atomic_store_n((uint64_t *)p, v, __ATOMIC_RELEASE); }
    static inline uint64_t seglog_load64(const unsigned char *p) { return __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE); }
    """
    void store64 "seglog_store64"(unsigned char *p, uint64_t v) noexcept nogil
    uint64_t load64 "seglog_load64"(const unsigned char *p) noexcept nogil

cdef extern from "<errno.h>":
    int EOPNOTSUPP

cdef enum:
    J_GENERATION = 8
    J_COMMIT = 16
    J_DATA = 64
    J_MIN_BYTES = 65536              # the file's size at creation; it grows in steps of this, doubling

JOURNAL_MAGIC = b"SGJ1"


cdef class AppendJournal:
    """The append journal of one writable log (see the top of journal.pxi). Not thread-safe: the Log's lock
    serializes it with the writer it mirrors."""
    cdef int fd
    cdef unsigned char *addr
    cdef size_t cap                  # bytes mapped (= the file's size)
    cdef readonly str path
    cdef size_t s_used               # the writer's finished bytes as of the last commit
    cdef size_t s_pos                # ... the end of its bytes
    cdef int32_t s_count             # ... the open batch's records (0: none)
    cdef BatchWriter attached        # the writer whose buffer is this mapping's data area (see _attach), or None

    def __cinit__(self, *args, **kwargs):
        self.fd = -1
        self.addr = NULL
        self.cap = 0

    def __init__(self, str path):
        """Open (creating it) the journal at path. Its content stays as found until reset(): read it first
        with batches(). Raises StorageError."""
        cdef stat_t st
        self.path = path
        self.fd = fops.open(os.fsencode(path), O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        if self.fd < 0:
            raise_storage_error("cannot open append journal", path)
        try:
            if fstat(self.fd, &st) != 0:
                raise_storage_error("cannot stat append journal", path)
            self._map(max(<size_t>st.st_size, <size_t>J_MIN_BYTES), <size_t>st.st_size)
            if st.st_size < J_DATA or memcmp(self.addr, <const char *>JOURNAL_MAGIC, 4) != 0:
                memset(self.addr, 0, J_DATA)
                memcpy(self.addr, <const char *>JOURNAL_MAGIC, 4)
        except BaseException:
            self.close()
            raise

    def __dealloc__(self):
        if self.addr != NULL:
            munmap(self.addr, self.cap)
        if self.fd >= 0:
            close(self.fd)

    def close(self):
        """Unmap and close the file (its content stays); a writer encoding into the mapping gets its bytes
        back in memory of its own first."""
        self._detach()
        if self.addr != NULL:
            munmap(self.addr, self.cap)
            self.addr = NULL
            self.cap = 0
        if self.fd >= 0:
            close(self.fd)
            self.fd = -1

    cdef int _map(self, size_t cap, size_t file_size) except -1:
        """Reserve [file_size, cap) of the file (fallocate; written zeros where the file system has no
        fallocate) and map [0, cap) writable. The old mapping stays if this fails (StorageError)."""
        cdef void *a
        cdef bytes zeros
        cdef size_t at
        cdef ssize_t w
        if cap > file_size:
            if fops.fallocate(self.fd, <off_t>file_size, <off_t>(cap - file_size)) != 0:
                if errno != EOPNOTSUPP:
                    raise_storage_error("cannot reserve append journal space", self.path)
                zeros = bytes(min(cap - file_size, <size_t>J_MIN_BYTES))
                at = file_size
                while at < cap:
                    w = fops.pwrite(self.fd, PyBytes_AS_STRING(zeros), min(<size_t>len(zeros), cap - at), at)
                    if w <= 0:
                        if w == 0:
                            set_errno(ENOSPC)
                        raise_storage_error("cannot reserve append journal space", self.path)
                    at += w
        a = fops.mmap(cap, PROT_READ | PROT_WRITE, self.fd)
        if a == MAP_FAILED:
            raise_storage_error("cannot map append journal", self.path)
        if self.addr != NULL:
            try:
                self._detach()
            except BaseException:
                munmap(a, cap)
                raise
            munmap(self.addr, self.cap)
        self.addr = <unsigned char *>a
        self.cap = cap
        return 0

    def add(self, BatchWriter w, value, key=None, headers=None, timestamp=None):
        """w.add(value, key, headers, timestamp), then mirror w's unwritten bytes here and commit them; returns
        the record's offset. If the journal cannot take them (StorageError: disk full), w is put back as it
        was before the call, so the record is neither returned nor buffered. w must be uncompressed."""
        cdef size_t used = w.used, pos = w.pos
        cdef bint is_open = w.is_open, full = w.full
        cdef int32_t count = w.count, next_sequence = w.next_sequence
        cdef int64_t next_offset = w.next_offset, base_ts = w.base_ts, max_ts = w.max_ts
        cdef int batches = w.batches
        cdef int64_t offset
        if w.codec != CODEC_NONE:
            raise _errors.InvalidArgumentError("the append journal mirrors uncompressed writers only")
        offset = w.add(value, key, headers, timestamp)
        try:
            self._stage(w)
        except BaseException:
            w.used, w.pos, w.is_open, w.full, w.count = used, pos, is_open, full, count
            w.next_sequence, w.next_offset, w.base_ts, w.max_ts, w.batches = (next_sequence, next_offset,
                                                                              base_ts, max_ts, batches)
            raise
        return offset

    cdef int _detach(self) except -1:
        """The attached writer, if its buffer is still this mapping's data area, takes its bytes into memory
        of its own (BatchWriter._own_buffer); the mapping may then go."""
        cdef BatchWriter w = self.attached
        if w is not None:
            if w.buf_borrowed and w.buf == self.addr + J_DATA:
                w._own_buffer(w.cap)
            self.attached = None
        return 0

    cdef int _attach(self, BatchWriter w) except -1:
        """Make the data area w's buffer, right after a commit that left it holding w's bytes [0, pos) (but the
        open batch's header, which w only writes when it finishes the batch): w then encodes its records straight
        into the mapping and _stage has nothing to copy, so an append touches one buffer, not two. w's own
        memory is freed; w moves back to memory of its own when it needs more room than the mapping has
        (_reserve), and when the mapping goes (_detach). Only a writer with no live export (nothing reads
        its old memory) and no compression (finish() compresses in place) is attached."""
        if w.exports > 0 or w.buf_borrowed or w.codec != CODEC_NONE:
            return 0
        self._detach()
        PyMem_Free(w.buf)
        w.buf = self.addr + J_DATA
        w.cap = self.cap - J_DATA
        w.buf_borrowed = True
        w.buf_owner = self
        self.attached = w
        return 0

    cdef int _stage(self, BatchWriter w) except -1:
        """Copy what changed in w since the last commit, then commit (see the invariant at the top). Nothing
        is copied when w encodes into the mapping itself (_attach), but the open batch header's fixed fields."""
        cdef size_t used = w.used, pos = w.pos, need = J_DATA + w.pos
        cdef unsigned char *d
        cdef unsigned char *h
        cdef int32_t count = w.count if w.is_open else 0
        cdef int16_t attributes
        cdef bint shared = w.buf_borrowed and w.buf == self.addr + J_DATA
        if need > self.cap:
            self._map(max(self.cap * 2, (need + J_MIN_BYTES - 1) // J_MIN_BYTES * J_MIN_BYTES), self.cap)
        d = self.addr + J_DATA
        if used != self.s_used or count < self.s_count:
            if not shared:                          # an attached writer's bytes are in the mapping already
                if used > self.s_used:              # batches finished since: their headers are final now
                    memcpy(d + self.s_used, w.buf + self.s_used, used - self.s_used)
                elif used < self.s_used:
                    memcpy(d, w.buf, used)
            self.s_count = 0
        if count:
            if self.s_count == 0:                   # a new open batch at `used`: its fixed header fields
                h = d + used
                attributes = <int16_t>w.codec
                if w.log_append_time:
                    attributes |= ATTR_LOG_APPEND_TIME
                memset(h, 0, BATCH_HEADER_SIZE)
                put_be64(h + OFF_BASE_OFFSET, <uint64_t>(w.next_offset - w.count))
                put_be32(h + OFF_LEADER_EPOCH, <uint32_t>w.leader_epoch)
                h[OFF_MAGIC] = 2
                put_be16(h + OFF_ATTRIBUTES, <uint16_t>attributes)
                put_be64(h + OFF_BASE_TIMESTAMP, <uint64_t>w.base_ts)
                put_be64(h + OFF_PRODUCER_ID, <uint64_t>w.producer_id)
                put_be16(h + OFF_PRODUCER_EPOCH, <uint16_t>w.producer_epoch)
                put_be32(h + OFF_BASE_SEQUENCE, <uint32_t>w.next_sequence)
                if not shared:
                    memcpy(h + BATCH_HEADER_SIZE, w.buf + used + BATCH_HEADER_SIZE, pos - used - BATCH_HEADER_SIZE)
            elif not shared:
                memcpy(d + self.s_pos, w.buf + self.s_pos, pos - self.s_pos)
            put_be64(d + used + OFF_MAX_TIMESTAMP, <uint64_t>(now_ms() if w.log_append_time else w.max_ts))
        store64(self.addr + J_COMMIT, (<uint64_t>used << 32) | <uint32_t>count)
        self.s_used = used
        self.s_pos = pos
        self.s_count = count
        if not shared and pos <= self.cap - J_DATA:
            self._attach(w)
        return 0

    def reset(self):
        """Forget everything (the writer's bytes are in the segment now): commit nothing, new generation."""
        if self.addr == NULL:
            return
        store64(self.addr + J_COMMIT, 0)
        store64(self.addr + J_GENERATION, load64(self.addr + J_GENERATION) + 1)
        self.s_used = 0
        self.s_pos = 0
        self.s_count = 0

    def batches(self):
        """The whole batches the journal holds (bytes; see journal_batches)."""
        if self.addr == NULL:
            return b""
        return journal_batches(PyMemoryView_FromMemory(<char *>self.addr, self.cap, PyBUF_READ), self.path)

    @property
    def committed(self):
        """(finished bytes, open records) of the last commit."""
        cdef uint64_t c = load64(self.addr + J_COMMIT) if self.addr != NULL else 0
        return <int64_t>(c >> 32), <int64_t>(c & 0xFFFFFFFF)


def journal_batches(data, path=None):
    """The batches a journal's bytes hold, as bytes of whole, CRC-valid batches with consecutive offsets: the
    finished ones, then the open one repaired from its committed records. A damaged part ends the result
    (what comes before it is kept); bytes that are not a journal give b""."""
    cdef Py_buffer b
    cdef const unsigned char *p
    cdef const unsigned char *end
    cdef const unsigned char *q
    cdef uint64_t commit
    cdef int64_t finished, nopen, pos, bsize, prev_last = -1, length, delta, ts_delta, max_delta = INT64_MIN
    cdef int64_t i, rec_end
    cdef unsigned char *o
    cdef bytearray out
    PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
    try:
        p = <const unsigned char *>b.buf
        if b.len < J_DATA or memcmp(p, <const char *>JOURNAL_MAGIC, 4) != 0:
            return b""
        commit = load64(p + J_COMMIT)
        finished = <int64_t>(commit >> 32)
        nopen = <int64_t>(commit & 0xFFFFFFFF)
        end = p + b.len
        p += J_DATA
        if finished > end - p:
            return b""
        pos = 0
        while pos < finished:
            if check_batch(p + pos, finished - pos, True) != CHECK_OK or (
                    prev_last >= 0 and <int64_t>get_be64(p + pos) != prev_last + 1):
                return bytes(PyMemoryView_FromMemory(<char *>p, pos, PyBUF_READ))
            prev_last = last_offset_at(p + pos)
            pos += batch_size_at(p + pos)
        if nopen == 0 or finished + BATCH_HEADER_SIZE > end - p:
            return bytes(PyMemoryView_FromMemory(<char *>p, finished, PyBUF_READ))
        q = p + finished + BATCH_HEADER_SIZE
        if prev_last >= 0 and <int64_t>get_be64(q - BATCH_HEADER_SIZE) != prev_last + 1:
            return bytes(PyMemoryView_FromMemory(<char *>p, finished, PyBUF_READ))
        for i in range(nopen):                   # the committed records' framing: length, then timestamp delta
            q = get_varint(q, end, &length)
            if q == NULL or length < 1 or length > end - q:
                return bytes(PyMemoryView_FromMemory(<char *>p, finished, PyBUF_READ))
            rec_end = <int64_t>(q - p) + length
            if get_varlong(q + 1, q + length, &ts_delta) == NULL:
                return bytes(PyMemoryView_FromMemory(<char *>p, finished, PyBUF_READ))
            if ts_delta > max_delta:
                max_delta = ts_delta
            q = p + rec_end
        out = bytearray(PyMemoryView_FromMemory(<char *>p, q - p, PyBUF_READ))
        o = <unsigned char *>PyByteArray_AS_STRING(out) + finished
        put_be32(o + OFF_LENGTH, <uint32_t>((q - p) - finished - LOG_OVERHEAD))
        put_be32(o + OFF_LAST_OFFSET_DELTA, <uint32_t>(nopen - 1))
        put_be32(o + OFF_RECORDS_COUNT, <uint32_t>nopen)
        if not (get_be16(o + OFF_ATTRIBUTES) & ATTR_LOG_APPEND_TIME):
            put_be64(o + OFF_MAX_TIMESTAMP, <uint64_t>(<int64_t>get_be64(o + OFF_BASE_TIMESTAMP) + max_delta))
        put_be32(o + OFF_CRC, crc32c_buf(o + CRC_START, (q - p) - finished - CRC_START))
    finally:
        PyBuffer_Release(&b)
    try:                                           # every committed record must decode, in offset order
        decode_records(memoryview(out)[finished:], path=path)
    except _errors.CorruptRecordError:
        return bytes(out[:finished])
    return bytes(out)


def read_journal(str path, int attempts=100):
    """The batches (bytes, see journal_batches) of the journal at path as another process is writing it: the
    file is read whole between two reads of its generation, again if a reset came between them. b"" when
    there is no journal. Raises StorageError."""
    cdef int fd = fops.open(os.fsencode(path), O_RDONLY | O_CLOEXEC, 0)
    cdef unsigned char gen1[16]
    cdef unsigned char gen2[16]
    if fd < 0:
        if errno == ENOENT:
            return b""
        raise_storage_error("cannot open append journal", path)
    try:
        for _ in range(attempts):
            if pread(fd, gen1, 16, 0) != 16:
                return b""
            data = _read_whole(fd, path)
            if pread(fd, gen2, 16, 0) != 16:
                return b""
            if memcmp(gen1 + J_GENERATION, gen2 + J_GENERATION, 8) == 0:
                return journal_batches(data, path)
        return b""
    finally:
        close(fd)
