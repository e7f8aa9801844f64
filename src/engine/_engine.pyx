# cython: language_level=3
"""seglog's Cython core: CRC-32C, varints, record batch v2 codec, indexes, segments and zero-copy views.

One extension module assembled from the topic files below (declarations in _engine.pxd). It imports no
other part of seglog except the leaf module `seglog.errors`, so every error it raises is one of seglog's.
"""

cimport cython
from cpython.buffer cimport (PyBUF_READ, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_FillInfo, PyBuffer_Release,
                             PyObject_GetBuffer)
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_Check, PyBytes_CheckExact, PyBytes_FromStringAndSize,
                            PyBytes_GET_SIZE)
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_CheckExact
from cpython.mem cimport PyMem_Calloc, PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.number cimport PyIndex_Check, PyNumber_Index
from cpython.tuple cimport PyTuple_CheckExact
from cpython.unicode cimport PyUnicode_Check, PyUnicode_DecodeUTF8
from libc.errno cimport EINTR, ENOENT, ENOSPC, errno
from libc.string cimport memcmp, memcpy, memmove, memset
from posix.fcntl cimport O_CREAT, O_RDONLY, O_RDWR, O_TRUNC
from posix.fcntl cimport open as open_c
from posix.mman cimport MAP_FAILED, MAP_SHARED, PROT_READ, PROT_WRITE, mmap, munmap
from posix.stat cimport fstat, struct_stat as stat_t
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec
from posix.types cimport off_t
from posix.unistd cimport close, fdatasync, fsync, ftruncate, pread, pwrite

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    # borrowed references, for loops that only read a list's items (no reference count traffic)
    ctypedef struct PyObject
    PyObject *list_item_borrowed "PyList_GET_ITEM"(object lst, Py_ssize_t i)
    bint bytes_check_borrowed "PyBytes_CheckExact"(PyObject *o)
    char *bytes_data_borrowed "PyBytes_AS_STRING"(PyObject *o)
    Py_ssize_t bytes_size_borrowed "PyBytes_GET_SIZE"(PyObject *o)
    PyObject *none_borrowed "Py_None"
    Py_ssize_t scratch_refcount "Py_REFCNT"(PyObject *o)

cdef extern from "<fcntl.h>":
    int O_CLOEXEC
    int O_DIRECTORY

cdef extern from "<unistd.h>" nogil:
    ctypedef long long loff_t
    ssize_t copy_file_range(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                            unsigned int flags)

import os

from seglog import errors as _errors

seglog_crc32c_init()


class CorruptIndexError(_errors.CorruptRecordError):
    """An index file failed its sanity check; the segment rebuilds it from the .log."""


cdef int raise_storage_error(str what, str path) except -1:
    cdef int e = errno
    raise _errors.StorageError(f"{what}: {os.strerror(e)}", path, e)


cdef ssize_t pread_big(int fd, void *buf, size_t n, off_t at) noexcept:
    """pread, without the GIL for NOGIL_BYTES and more."""
    cdef ssize_t r
    if n >= NOGIL_BYTES:
        with nogil:
            r = pread(fd, buf, n, at)
        return r
    return pread(fd, buf, n, at)


cdef bytes _read_whole(int fd, str path):
    """The file's bytes up to where a read meets its end: a snapshot of an index another process may be
    resizing meanwhile (a trim at a roll shrinks it, activation grows it). The size fstat reports only sizes
    the first read; a file that shrank after it is not an error (the read ends early), nor one that grew.
    Raises StorageError when a read fails."""
    cdef stat_t st
    cdef bytes out
    cdef ssize_t got
    if fstat(fd, &st) != 0:
        raise_storage_error("cannot stat", path)
    out = PyBytes_FromStringAndSize(NULL, st.st_size)
    got = pread_big(fd, PyBytes_AS_STRING(out), st.st_size, 0) if st.st_size else 0
    if got < 0:
        raise_storage_error("cannot read", path)
    return out if got == st.st_size else out[:got]


include "fileops.pxi"
include "buffers.pxi"
include "scratch.pxi"
include "crc32c.pxi"
include "varint.pxi"
include "codecs.pxi"
include "view.pxi"
include "records.pxi"
include "batch.pxi"
include "index.pxi"
include "segment.pxi"
include "journal.pxi"
include "hash.pxi"
include "producer.pxi"
include "arrow.pxi"
include "compact.pxi"
include "point.pxi"
include "control.pxi"
