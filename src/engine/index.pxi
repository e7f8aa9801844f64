# Sparse indexes of one segment: OffsetIndex (.index) and TimeIndex (.timeindex).
#
# Entry formats (big-endian, as Kafka writes them):
#   .index       8 bytes: int32 offset - baseOffset, int32 file position of the batch
#   .timeindex  12 bytes: int64 timestamp, int32 offset - baseOffset
# Entries strictly increase (offsets and positions; time index timestamps too). The file of the active
# segment is extended to its maximum size (a sparse file: nothing is written through the mapping, entries go
# in with pwrite, so a full disk fails a write call instead of faulting a page) and trimmed to
# entries x size when the segment rolls or closes. An untrimmed file ends in zero entries; since no real entry
# after the first has relative offset 0 (and no offset entry has position 0), the count is found by binary
# search for the first such entry. Indexes are not checksummed: the segment rebuilds them from the .log
# when sanity_check() fails or the file is missing.
#
# A writable index maps its file read-only (lookups read the mapping). A read-only index (another process
# reading the log) copies the file into memory instead, so the writer trimming the file cannot fault it.

cdef class IndexFile:
    """Common file handling of the two index kinds. Not thread-safe: the owning segment serializes."""

    def __cinit__(self, *args, **kwargs):
        self.fd = -1
        self.addr = NULL
        self.map_len = 0
        self.entries = 0
        self.snapshot = None

    def __dealloc__(self):
        if self.addr != NULL and self.snapshot is None:
            munmap(<void *>self.addr, self.map_len)
        if self.fd >= 0:
            close(self.fd)

    cdef int _open(self, str path, int64_t base_offset, Py_ssize_t max_index_bytes, bint writable,
                   int entry_size) except -1:
        cdef bytes bpath = os.fsencode(path)
        self.path = path
        self.base_offset = base_offset
        self.entry_size = entry_size
        self.max_entries = max_index_bytes // entry_size
        self.writable = writable
        if writable:
            self.fd = fops.open(bpath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            if self.fd < 0:
                raise_storage_error("cannot open index", path)
            self._remap()
        else:
            self.fd = fops.open(bpath, O_RDONLY | O_CLOEXEC, 0)
            if self.fd < 0:
                if errno == ENOENT:
                    self.snapshot = b""
                    self.entries = 0
                    return 0
                raise_storage_error("cannot open index", path)
            self.reload()
        self.entries = self._count_entries()
        return 0

    cdef int _remap(self) except -1:
        """Map the file at its current size. The new mapping is made before the old one goes, so a failure
        (StorageError) leaves the old one in place for the entries it covers."""
        cdef stat_t st
        cdef void *a = NULL
        if fstat(self.fd, &st) != 0:
            raise_storage_error("cannot stat index", self.path)
        if st.st_size > 0:
            a = fops.mmap(<size_t>st.st_size, PROT_READ, self.fd)
            if a == MAP_FAILED:
                raise_storage_error("cannot map index", self.path)
        if self.addr != NULL:
            munmap(<void *>self.addr, self.map_len)
        self.addr = <const unsigned char *>a
        self.map_len = <size_t>st.st_size if a != NULL else 0
        return 0

    def reload(self):
        """Read-only indexes: re-read the file (the writer may have added entries, or created it)."""
        if self.writable:
            return
        if self.fd < 0:
            self.fd = fops.open(os.fsencode(self.path), O_RDONLY | O_CLOEXEC, 0)
            if self.fd < 0:
                if errno != ENOENT:
                    raise_storage_error("cannot open index", self.path)
                self.snapshot, self.addr, self.map_len, self.entries = b"", NULL, 0, 0
                return
        self.snapshot = _read_whole(self.fd, self.path)
        self.addr = <const unsigned char *>PyBytes_AS_STRING(self.snapshot)
        self.map_len = PyBytes_GET_SIZE(self.snapshot)
        self.entries = self._count_entries()

    cdef Py_ssize_t _count_entries(self):
        cdef Py_ssize_t n = <Py_ssize_t>(self.map_len // self.entry_size), lo, hi, mid
        if n == 0 or not self._is_blank(n - 1):
            return n
        if self._is_blank(0):
            return 0
        lo, hi = 1, n - 1             # entry lo-1 is real, entry hi is blank
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_blank(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    cdef bint _is_blank(self, Py_ssize_t i):
        """True for a zero entry (index 0) or an entry after the first with relative offset 0."""
        return False

    cdef int32_t _rel(self, Py_ssize_t i) noexcept nogil:
        return 0

    cdef int _write_entry(self, Py_ssize_t i, const unsigned char *entry) except -1:
        cdef size_t need = <size_t>(i + 1) * self.entry_size
        if need > self.map_len:
            self._resize(max(need, <size_t>self.max_entries * self.entry_size))
        if fops.pwrite(self.fd, entry, self.entry_size, <off_t>i * self.entry_size) != self.entry_size:
            raise_storage_error("cannot write index entry", self.path)
        return 0

    cdef int _append_entries(self, const unsigned char *data, Py_ssize_t n) except -1:
        """Write n encoded entries after the last one in one pwrite: Segment.recover() builds them in order,
        checked as append() / maybe_append() check, and within max_entries."""
        cdef size_t nbytes = <size_t>n * self.entry_size
        cdef size_t need = <size_t>(self.entries + n) * self.entry_size
        cdef off_t at = <off_t>self.entries * self.entry_size
        cdef ssize_t w
        if n == 0:
            return 0
        self._require_writable()
        if need > self.map_len:
            self._resize(need)
        if nbytes >= NOGIL_BYTES:
            with nogil:
                w = fops.pwrite(self.fd, data, nbytes, at)
        else:
            w = fops.pwrite(self.fd, data, nbytes, at)
        if w != <ssize_t>nbytes:
            raise_storage_error("cannot write index entries", self.path)
        self.entries += n
        return 0

    cdef int _resize(self, size_t nbytes) except -1:
        if fops.ftruncate(self.fd, <off_t>nbytes) != 0:
            raise_storage_error("cannot resize index", self.path)
        self._remap()
        return 0

    cdef int _require_writable(self) except -1:
        if not self.writable:
            raise _errors.ReadOnlyLogError(f"index {self.path} is open read-only")
        return 0

    def grow(self):
        """Extend the file to its maximum size (the segment became active). Sparse: costs no disk blocks."""
        self._require_writable()
        if self.map_len < <size_t>self.max_entries * self.entry_size:
            self._resize(<size_t>self.max_entries * self.entry_size)

    def trim(self):
        """Cut the file to exactly its entries (the segment rolled or closed)."""
        self._require_writable()
        if self.map_len != <size_t>self.entries * self.entry_size:
            self._resize(<size_t>self.entries * self.entry_size)

    cpdef int truncate_entries(self, Py_ssize_t n) except -1:
        """Keep the first n entries; the dropped ones are zeroed so an untrimmed file still counts right."""
        cdef bytes zeros
        self._require_writable()
        if n >= self.entries:
            return 0
        zeros = bytes((self.entries - n) * self.entry_size)
        if fops.pwrite(self.fd, PyBytes_AS_STRING(zeros), len(zeros), <off_t>n * self.entry_size) != len(zeros):
            raise_storage_error("cannot truncate index", self.path)
        self.entries = n
        return 0

    def reset(self):
        """Drop every entry (before a rebuild from the .log)."""
        self._require_writable()
        if fops.ftruncate(self.fd, 0) != 0:
            raise_storage_error("cannot reset index", self.path)
        self.entries = 0
        self._resize(<size_t>self.max_entries * self.entry_size)

    def flush(self):
        """fsync the file (without the GIL). Raises StorageError."""
        cdef int rc
        if self.writable and self.fd >= 0:
            with nogil:
                rc = fops.fsync(self.fd)
            if rc != 0:
                raise_storage_error("cannot fsync index", self.path)

    def close(self):
        if self.addr != NULL and self.snapshot is None:
            munmap(<void *>self.addr, self.map_len)
        self.addr = NULL
        self.map_len = 0
        self.snapshot = None
        if self.fd >= 0:
            close(self.fd)
            self.fd = -1

    cdef int _keep_entries(self, Py_ssize_t n) except -1:
        """Read-only indexes: use only the first n entries of the snapshot (the file is not touched)."""
        if self.writable:
            raise _errors.InvalidArgumentError("only read-only indexes drop entries unseen; writable ones truncate")
        if n < self.entries:
            self.entries = n
        return 0

    def discard(self):
        """Read-only indexes that failed their sanity check: forget the entries (lookups scan the .log)."""
        if self.writable:
            raise _errors.InvalidArgumentError("discard() is for read-only indexes; writable ones are rebuilt")
        self.entries = 0

    @property
    def is_full(self):
        return self.entries >= self.max_entries

    @property
    def file_bytes(self):
        return self.map_len

    cdef Py_ssize_t _first_rel_at_least(self, int64_t rel) noexcept nogil:
        """Number of entries whose relative offset is below rel (entries are sorted by offset)."""
        cdef Py_ssize_t lo = 0, hi = self.entries, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._rel(mid) < rel:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def truncate_to(self, int64_t offset):
        """Remove the entries for offsets >= offset."""
        cdef int64_t rel = offset - self.base_offset
        if rel < 0:
            rel = 0
        self.truncate_entries(self._first_rel_at_least(rel))


cdef class OffsetIndex(IndexFile):
    """Offset -> file position of a batch, one entry every index.interval.bytes (see the file comment)."""

    def __init__(self, str path, int64_t base_offset, Py_ssize_t max_index_bytes=10485760, bint writable=True):
        self._open(path, base_offset, max_index_bytes, writable, 8)

    cdef int32_t _rel(self, Py_ssize_t i) noexcept nogil:
        return <int32_t>get_be32(self.addr + i * 8)

    cdef inline int32_t _pos(self, Py_ssize_t i) noexcept nogil:
        return <int32_t>get_be32(self.addr + i * 8 + 4)

    cdef bint _is_blank(self, Py_ssize_t i):
        return self._pos(i) == 0

    cdef int64_t lookup_position(self, int64_t target, int64_t *entry_offset) noexcept nogil:
        """Position of the largest entry with offset <= target (0 and baseOffset if none)."""
        cdef Py_ssize_t lo = 0, hi = self.entries, mid
        cdef int64_t rel = target - self.base_offset
        if rel < 0 or self.entries == 0 or self._rel(0) > rel:
            entry_offset[0] = self.base_offset
            return 0
        while hi - lo > 1:                  # invariant: rel(lo) <= rel < rel(hi)
            mid = (lo + hi) >> 1
            if self._rel(mid) <= rel:
                lo = mid
            else:
                hi = mid
        entry_offset[0] = self.base_offset + self._rel(lo)
        return self._pos(lo)

    def lookup(self, int64_t target):
        """(offset, position) of the largest entry with offset <= target, or (base_offset, 0)."""
        cdef int64_t off
        cdef int64_t pos = self.lookup_position(target, &off)
        return off, pos

    def entry(self, Py_ssize_t i):
        if not 0 <= i < self.entries:
            raise IndexError(i)
        return self.base_offset + self._rel(i), self._pos(i)

    @property
    def last_entry(self):
        """(offset, position) of the last entry, or (base_offset, 0) when empty."""
        if self.entries == 0:
            return self.base_offset, 0
        return self.base_offset + self._rel(self.entries - 1), self._pos(self.entries - 1)

    cpdef int append(self, int64_t offset, int64_t position) except -1:
        """Add an entry; offset and position must exceed the last entry's, and the index must not be full."""
        cdef unsigned char e[8]
        cdef int64_t rel = offset - self.base_offset
        self._require_writable()
        if self.entries >= self.max_entries:
            raise _errors.StorageError(f"offset index is full ({self.entries} entries)", self.path)
        if rel < 0 or rel > INT32_MAX or position <= 0 or position > INT32_MAX:
            raise _errors.InvalidArgumentError(f"offset {offset} / position {position} do not fit index {self.path}")
        if self.entries and (rel <= self._rel(self.entries - 1) or position <= self._pos(self.entries - 1)):
            raise _errors.InvalidArgumentError(
                f"index entries must increase: ({offset}, {position}) after {self.last_entry} in {self.path}")
        put_be32(e, <uint32_t>rel)
        put_be32(e + 4, <uint32_t>position)
        self._write_entry(self.entries, e)
        self.entries += 1
        return 0

    def drop_past(self, int64_t log_size):
        """Read-only indexes: forget the entries at positions >= log_size. The writing process indexes a batch
        after writing it, so a snapshot read after the reader took the .log's size may hold entries of batches
        beyond it. Positions increase: a binary search finds the first such entry."""
        cdef Py_ssize_t lo = 0, hi = self.entries, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._pos(mid) < log_size:
                lo = mid + 1
            else:
                hi = mid
        self._keep_entries(lo)

    def sanity_check(self, int64_t log_size):
        """Raise CorruptIndexError unless entries strictly increase and point inside the log (log_size bytes)."""
        cdef Py_ssize_t i
        for i in range(self.entries):
            if self._rel(i) < 0 or self._pos(i) <= 0 or self._pos(i) >= log_size or (
                    i and (self._rel(i) <= self._rel(i - 1) or self._pos(i) <= self._pos(i - 1))):
                raise CorruptIndexError(f"offset index {self.path} is corrupt at entry {i} of {self.entries}")


cdef class TimeIndex(IndexFile):
    """Max timestamp so far -> offset of the batch holding it, appended only when the timestamp grows."""

    def __init__(self, str path, int64_t base_offset, Py_ssize_t max_index_bytes=10485760, bint writable=True):
        self._open(path, base_offset, max_index_bytes, writable, 12)

    cdef int32_t _rel(self, Py_ssize_t i) noexcept nogil:
        return <int32_t>get_be32(self.addr + i * 12 + 8)

    cdef inline int64_t _ts(self, Py_ssize_t i) noexcept nogil:
        return <int64_t>get_be64(self.addr + i * 12)

    cdef bint _is_blank(self, Py_ssize_t i):
        return self._rel(i) == 0 and (i > 0 or self._ts(0) == 0)

    def lookup(self, int64_t timestamp):
        """(timestamp, offset) of the largest entry with timestamp <= the target, or (-1, base_offset)."""
        cdef Py_ssize_t lo = 0, hi = self.entries, mid
        if self.entries == 0 or self._ts(0) > timestamp:
            return -1, self.base_offset
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if self._ts(mid) <= timestamp:
                lo = mid
            else:
                hi = mid
        return self._ts(lo), self.base_offset + self._rel(lo)

    def entry(self, Py_ssize_t i):
        if not 0 <= i < self.entries:
            raise IndexError(i)
        return self._ts(i), self.base_offset + self._rel(i)

    @property
    def last_entry(self):
        """(timestamp, offset) of the last entry, or (-1, base_offset) when empty."""
        if self.entries == 0:
            return -1, self.base_offset
        return self._ts(self.entries - 1), self.base_offset + self._rel(self.entries - 1)

    cpdef int maybe_append(self, int64_t timestamp, int64_t offset, bint skip_full_check=False) except -1:
        """Add (timestamp, offset) if timestamp exceeds the last entry's. When full, nothing is added unless
        skip_full_check (the final entry written as a segment becomes inactive may use the spare slot)."""
        cdef unsigned char e[12]
        cdef int64_t rel = offset - self.base_offset
        self._require_writable()
        if self.entries and timestamp <= self._ts(self.entries - 1):
            return 0
        if self.entries >= self.max_entries and not skip_full_check:
            return 0
        if rel < 0 or rel > INT32_MAX:
            raise _errors.InvalidArgumentError(f"offset {offset} does not fit time index {self.path}")
        if self.entries and rel < self._rel(self.entries - 1):
            raise _errors.InvalidArgumentError(f"time index offsets must not decrease in {self.path}")
        put_be64(e, <uint64_t>timestamp)
        put_be32(e + 8, <uint32_t>rel)
        self._write_entry(self.entries, e)
        self.entries += 1
        return 0

    def drop_from(self, int64_t next_offset):
        """Read-only indexes: forget the entries for offsets >= next_offset (batches the reader does not see
        yet, see OffsetIndex.drop_past)."""
        cdef int64_t rel = next_offset - self.base_offset
        self._keep_entries(self._first_rel_at_least(rel if rel > 0 else 0))

    def sanity_check(self, int64_t next_offset):
        """Raise CorruptIndexError unless timestamps and offsets never decrease and offsets < next_offset."""
        cdef Py_ssize_t i
        for i in range(self.entries):
            if self._rel(i) < 0 or self.base_offset + self._rel(i) >= next_offset or (
                    i and (self._rel(i) < self._rel(i - 1) or self._ts(i) < self._ts(i - 1))):
                raise CorruptIndexError(f"time index {self.path} is corrupt at entry {i} of {self.entries}")
