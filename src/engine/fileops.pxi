# The engine's file calls, through one table: the fault-injection seam.
#
# Every call that changes or maps a file (open, pwrite, write, fdatasync, fsync, ftruncate, fallocate, rename,
# unlink, mmap) goes through `fops`, a pointer to a FileOps table of function pointers: `real_ops` calls the
# system directly (the cost is one indirect call). The Python-level file calls of the log layer (checkpoints,
# segment renames and deletions, markers) use the file_* functions below, which go through the same table.
#
# set_fault_handler(handler) switches `fops` to `fault_ops`, whose entries first ask
# handler(op, path, nbytes, dst) (with the GIL; dst is the new name for rename, else None) what to do: None runs it; an int fails it with that errno (nothing happens);
# ("short", n) lets a pwrite/write move at most n bytes; ("delay", seconds) sleeps, then runs it. `path` is the
# file's name (calls on an fd name it through /proc/self/fd). seglog.faults.FaultPlan builds handlers from
# rules ("the 3rd pwrite on *.log fails with ENOSPC"); set_fault_handler(None) restores the real table.

cdef extern from "<fcntl.h>" nogil:
    int fallocate(int fd, int mode, off_t offset, off_t length)

cdef extern from "<stdio.h>" nogil:
    int rename "rename"(const char *src, const char *dst)

cdef extern from "<unistd.h>" nogil:
    int unlink(const char *path)
    ssize_t write(int fd, const void *buf, size_t n)

cdef extern from *:
    """
    #include <errno.h>
    static void seglog_set_errno(int e) { errno = e; }
    """
    void set_errno "seglog_set_errno"(int e) noexcept nogil

ctypedef struct FileOps:
    int (*open)(const char *path, int flags, int mode) noexcept nogil
    ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t at) noexcept nogil
    ssize_t (*write)(int fd, const void *buf, size_t n) noexcept nogil
    int (*fdatasync)(int fd) noexcept nogil
    int (*fsync)(int fd) noexcept nogil
    int (*ftruncate)(int fd, off_t length) noexcept nogil
    int (*fallocate)(int fd, off_t at, off_t length) noexcept nogil
    int (*rename)(const char *src, const char *dst) noexcept nogil
    int (*unlink)(const char *path) noexcept nogil
    void *(*mmap)(size_t length, int prot, int fd) noexcept nogil     # MAP_SHARED from offset 0


cdef int _real_open(const char *path, int flags, int mode) noexcept nogil:
    return open_c(path, flags, mode)

cdef ssize_t _real_pwrite(int fd, const void *buf, size_t n, off_t at) noexcept nogil:
    return pwrite(fd, buf, n, at)

cdef ssize_t _real_write(int fd, const void *buf, size_t n) noexcept nogil:
    return write(fd, buf, n)

cdef int _real_fdatasync(int fd) noexcept nogil:
    return fdatasync(fd)

cdef int _real_fsync(int fd) noexcept nogil:
    return fsync(fd)

cdef int _real_ftruncate(int fd, off_t length) noexcept nogil:
    return ftruncate(fd, length)

cdef int _real_fallocate(int fd, off_t at, off_t length) noexcept nogil:
    return fallocate(fd, 0, at, length)

cdef int _real_rename(const char *src, const char *dst) noexcept nogil:
    return rename(src, dst)

cdef int _real_unlink(const char *path) noexcept nogil:
    return unlink(path)

cdef void *_real_mmap(size_t length, int prot, int fd) noexcept nogil:
    return mmap(NULL, length, prot, MAP_SHARED, fd, 0)


import time as _time
import warnings as _warnings

cdef FileOps real_ops
real_ops.open = _real_open
real_ops.pwrite = _real_pwrite
real_ops.write = _real_write
real_ops.fdatasync = _real_fdatasync
real_ops.fsync = _real_fsync
real_ops.ftruncate = _real_ftruncate
real_ops.fallocate = _real_fallocate
real_ops.rename = _real_rename
real_ops.unlink = _real_unlink
real_ops.mmap = _real_mmap

cdef FileOps *fops = &real_ops


# -- the fault table ------------------------------------------------------------------------------------------

cdef object _fault_handler = None


cdef int64_t _consult(str op, int fd, const char *path, int64_t n, const char *dst=NULL) noexcept with gil:
    """Ask the fault handler about one call: -errno to fail it, else how many bytes it may move (n when it
    runs whole; a delay has been slept already). A handler that raises is reported (RuntimeWarning) and the
    call runs."""
    handler = _fault_handler
    if handler is None:
        return n
    try:
        return _decide(handler, op, fd, path, n, dst)
    except BaseException as e:
        _warnings.warn(f"fault handler {handler!r} failed on {op}: {e!r}", RuntimeWarning)
        return n


cdef int64_t _decide(object handler, str op, int fd, const char *path, int64_t n, const char *dst) except? -1:
    if path != NULL:
        name = os.fsdecode(<bytes>path)
    else:
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = f"fd {fd}"
    decision = handler(op, name, n, os.fsdecode(<bytes>dst) if dst != NULL else None)
    if decision is None:
        return n
    if isinstance(decision, int):
        return -<int64_t>decision if decision > 0 else n
    kind, amount = decision
    if kind == "short":
        return max(min(<int64_t>amount, n), 0)
    if kind == "delay":
        _time.sleep(amount)
        return n
    raise ValueError(f"unknown fault decision {decision!r}")


cdef int _fault_open(const char *path, int flags, int mode) noexcept nogil:
    cdef int64_t r = _consult("open", -1, path, 0)
    if r < 0:
        set_errno(<int>-r)
        return -1
    return open_c(path, flags, mode)

cdef ssize_t _fault_pwrite(int fd, const void *buf, size_t n, off_t at) noexcept nogil:
    cdef int64_t r = _consult("pwrite", fd, NULL, <int64_t>n)
    if r < 0:
        set_errno(<int>-r)
        return -1
    return pwrite(fd, buf, <size_t>r, at)

cdef ssize_t _fault_write(int fd, const void *buf, size_t n) noexcept nogil:
    cdef int64_t r = _consult("write", fd, NULL, <int64_t>n)
    if r < 0:
        set_errno(<int>-r)
        return -1
    return write(fd, buf, <size_t>r)

cdef int _fault_fdatasync(int fd) noexcept nogil:
    cdef int64_t r = _consult("fdatasync", fd, NULL, 0)
    if r < 0:
        set_errno(<int>-r)
        return -1
    return fdatasync(fd)

cdef int _fault_fsync(int fd) noexcept nogil:
    cdef int64_t r = _consult("fsync", fd, NULL, 0)
    if r < 0:
        set_errno(<int>-r)
        return -1
    return fsync(fd)

cdef int _fault_ftruncate(int fd, off_t length) noexcept nogil:
    cdef int64_t r = _consult("ftruncate", fd, NULL, <int64_t>length)
    if r < 0:
        set_errno(<int>-r)
        return -1
    return ftruncate(fd, length)

cdef int _fault_fallocate(int fd, off_t at, off_t length) noexcept nogil:
    cdef int64_t r = _consult("fallocate", fd, NULL, <int64_t>length)
    if r < 0:
        set_errno(<int>-r)
        return -1
    return fallocate(fd, 0, at, length)

cdef int _fault_rename(const char *src, const char *dst) noexcept nogil:
    cdef int64_t r = _consult("rename", -1, src, 0, dst)
    if r < 0:
        set_errno(<int>-r)
        return -1
    return rename(src, dst)

cdef int _fault_unlink(const char *path) noexcept nogil:
    cdef int64_t r = _consult("unlink", -1, path, 0)
    if r < 0:
        set_errno(<int>-r)
        return -1
    return unlink(path)

cdef void *_fault_mmap(size_t length, int prot, int fd) noexcept nogil:
    cdef int64_t r = _consult("mmap", fd, NULL, <int64_t>length)
    if r < 0:
        set_errno(<int>-r)
        return MAP_FAILED
    return mmap(NULL, length, prot, MAP_SHARED, fd, 0)


cdef FileOps fault_ops
fault_ops.open = _fault_open
fault_ops.pwrite = _fault_pwrite
fault_ops.write = _fault_write
fault_ops.fdatasync = _fault_fdatasync
fault_ops.fsync = _fault_fsync
fault_ops.ftruncate = _fault_ftruncate
fault_ops.fallocate = _fault_fallocate
fault_ops.rename = _fault_rename
fault_ops.unlink = _fault_unlink
fault_ops.mmap = _fault_mmap

FILE_OPS = ("open", "pwrite", "write", "fdatasync", "fsync", "ftruncate", "fallocate", "rename", "unlink", "mmap")


def set_fault_handler(handler):
    """Route the engine's file calls through handler(op, path, nbytes, dst) (see the top of fileops.pxi), or back
    to the system calls with None. Returns the handler it replaces. Process-wide; for tests and benchmarks."""
    global _fault_handler, fops
    old = _fault_handler
    if handler is not None and not callable(handler):
        raise _errors.InvalidArgumentError("the fault handler must be callable or None")
    _fault_handler = handler
    fops = &fault_ops if handler is not None else &real_ops
    return old


# -- the log layer's Python-level file calls, through the table (they raise OSError as the os module does) ------

cdef int _os_error(str path, str path2=None) except -1:
    cdef int e = errno
    if path2 is not None:
        raise OSError(e, os.strerror(e), path, None, path2)
    raise OSError(e, os.strerror(e), path)


def file_open(path, int flags, int mode=0o644):
    """os.open through the table; returns the fd. Raises OSError."""
    cdef bytes p = os.fsencode(path)
    cdef int fd = fops.open(p, flags | O_CLOEXEC, mode)
    if fd < 0:
        _os_error(os.fsdecode(path))
    return fd


def file_write_all(int fd, data, path=None):
    """Write all of data at the fd's position (a short write continues; one that moves nothing fails with
    ENOSPC). Raises OSError naming path."""
    cdef Py_buffer b
    cdef Py_ssize_t done = 0
    cdef ssize_t w
    name = os.fsdecode(path) if path is not None else f"fd {fd}"
    PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
    try:
        while done < b.len:
            w = fops.write(fd, <const char *>b.buf + done, <size_t>(b.len - done))
            if w < 0:
                if errno == EINTR:
                    continue
                _os_error(name)
            if w == 0:
                raise OSError(ENOSPC, os.strerror(ENOSPC), name)
            done += w
    finally:
        PyBuffer_Release(&b)


def file_fsync(int fd, path=None):
    """fsync through the table (without the GIL). Raises OSError naming path."""
    cdef int rc
    with nogil:
        rc = fops.fsync(fd)
    if rc != 0:
        _os_error(os.fsdecode(path) if path is not None else f"fd {fd}")


def file_rename(src, dst):
    """rename(2) through the table (os.replace's semantics: an existing dst is replaced). Raises OSError."""
    if fops.rename(os.fsencode(src), os.fsencode(dst)) != 0:
        _os_error(os.fsdecode(src), os.fsdecode(dst))


def file_unlink(path):
    """unlink(2) through the table. Raises OSError (FileNotFoundError for a missing file)."""
    if fops.unlink(os.fsencode(path)) != 0:
        _os_error(os.fsdecode(path))
