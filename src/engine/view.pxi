# Zero-copy views over mapped segment files.
#
# A MappedFile is one read-only MAP_SHARED mapping of [0, length) of a file. A SegmentView exports a slice of
# it through the buffer protocol and holds a reference to it, so the mapping outlives every view: closing,
# truncating or deleting a segment never unmaps memory a reader still sees (the mapping goes when its last
# reference does).
#
# Shrinking a file under a live view would turn reads of the cut pages into SIGBUS, and one file can have
# several mappings at once: a segment maps its file anew when it outgrows the old mapping, and a Log closes
# segments (open-segment cache, close()) and reopens them while views of the old Segment object live on. So
# live views are counted per file, not per mapping: `_file_views` maps (st_dev, st_ino) to the number of live
# SegmentViews over any mapping of that file in this process. Before cutting a file, a segment asks
# file_has_views(fd); if true it copies the kept prefix to a new file that takes the old one's name instead (see
# Segment.truncate_to_position), and the old inode lives on, never shrunk, until its last mapping goes. A key
# cannot be reused by another file while counted: the mappings keep the inode allocated until after the count
# drops to zero. (Other processes read segments with pread, never through a mapping: see segment.pxi.)
#
# The mapping may be longer than the file (the active segment is mapped at its maximum size once, so a
# growing file needs no remap); only bytes below the file's written size are ever exported.

cdef dict _file_views = {}


cdef bint file_has_views(int fd, str path) except -1:
    """True while a view of the file open as fd, through any mapping, is alive. Raises StorageError."""
    cdef stat_t st
    if fstat(fd, &st) != 0:
        raise_storage_error("cannot stat", path)
    return (<uint64_t>st.st_dev, <uint64_t>st.st_ino) in _file_views


cdef class MappedFile:

    def __cinit__(self):
        self.addr = NULL
        self.length = 0

    def __dealloc__(self):
        cdef void *addr = self.addr
        cdef size_t length = self.length
        if addr == NULL:
            return
        self.addr = NULL
        if length >= NOGIL_BYTES:                 # tearing down a large mapping's page tables takes a while
            with nogil:
                munmap(addr, length)
        else:
            munmap(addr, length)

    @staticmethod
    cdef MappedFile map_fd(int fd, size_t length, str path):
        """Map [0, length) of fd read-only; length 0 gives an empty mapping. Raises StorageError."""
        cdef MappedFile m = MappedFile.__new__(MappedFile)
        cdef void *addr
        cdef stat_t st
        m.path = path
        if fstat(fd, &st) != 0:
            raise_storage_error("cannot stat", path)
        m.inode = st.st_ino
        m.device = st.st_dev
        m.key = (m.device, m.inode)
        if length == 0:
            return m
        addr = fops.mmap(length, PROT_READ, fd)
        if addr == MAP_FAILED:
            raise_storage_error("cannot map", path)
        m.addr = <unsigned char *>addr
        m.length = length
        return m

    @property
    def address(self):
        """Address of the first mapped byte (0 when empty): views of this mapping point inside it."""
        return <size_t>self.addr

    cdef object view(self, size_t start, size_t stop):
        """A read-only memoryview of [start, stop) that keeps this mapping alive."""
        cdef SegmentView v
        if stop <= start:
            return memoryview(b"")
        if stop > self.length:
            raise ValueError("view past the end of the mapping")
        v = SegmentView.__new__(SegmentView)
        v.owner = self
        v.ptr = self.addr + start
        v.size = <Py_ssize_t>(stop - start)
        _file_views[self.key] = _file_views.get(self.key, 0) + 1
        return memoryview(v)


cdef class SegmentView:
    """Buffer exporter for one slice of a MappedFile (wrapped in a memoryview by MappedFile.view)."""

    def __dealloc__(self):
        cdef Py_ssize_t n
        if self.owner is None or _file_views is None:      # None: the module is being torn down
            return
        n = _file_views.get(self.owner.key, 1) - 1
        if n:
            _file_views[self.owner.key] = n
        else:
            _file_views.pop(self.owner.key, None)

    def __getbuffer__(self, Py_buffer *buf, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("segment views are read-only")
        PyBuffer_FillInfo(buf, self, <void *>self.ptr, self.size, 1, flags)

    def __releasebuffer__(self, Py_buffer *buf):
        pass


def file_range(obj):
    """For a view returned by a mapped read: (path, device, inode, position, length) of its bytes in the
    segment file, so a server can sendfile them instead of copying; None for any other buffer. The caller
    must check the file it opens is still that device/inode (a truncation may have replaced it)."""
    cdef SegmentView sv
    if not isinstance(obj, memoryview) or not isinstance(obj.obj, SegmentView):
        return None
    sv = <SegmentView>obj.obj
    return (sv.owner.path, sv.owner.device, sv.owner.inode,
            <Py_ssize_t>(<size_t>view_address(obj) - <size_t>sv.owner.addr), obj.nbytes)


def view_address(obj):
    """Address of the first byte of a buffer: shows that a read returned memory of the mapping, not a copy."""
    cdef Py_buffer b
    PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE)
    try:
        return <size_t>b.buf
    finally:
        PyBuffer_Release(&b)
