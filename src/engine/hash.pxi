# Kafka's key hash: murmur2 exactly as org.apache.kafka.common.utils.Utils.murmur2 (seed 0x9747b28c,
# little-endian 4-byte words, 32-bit wrapping arithmetic), so seglog puts a key on the partition a Java
# producer would: partition = (murmur2(key) & 0x7fffffff) % num_partitions.
#
# Included by _engine.pyx. Python-visible: murmur2(key) -> signed int32 (Java's int result) and
# partitions_for_keys(keys, num_partitions, null_first=-1, null_step=0) -> list[int] for a whole list in one
# call. Keys are bytes or any buffer, hashed as its bytes (buffers.pxi, take_bytes); str is refused (hash
# the serialized key, never the text).

from libc.stdint cimport int32_t, uint32_t
from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF


cdef enum:
    MURMUR2_M = 0x5bd1e995      # the mixing constant; the seed 0x9747b28c is written inline (it needs 32 bits)


cdef inline uint32_t murmur2_raw(const unsigned char *data, Py_ssize_t length) noexcept nogil:
    """murmur2 of data[0:length] as an unsigned 32-bit value (Java's int, reinterpreted)."""
    cdef uint32_t h = <uint32_t>0x9747b28c ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i
    cdef Py_ssize_t whole = length & ~(<Py_ssize_t>3)
    for i in range(0, whole, 4):
        k = (<uint32_t>data[i] | (<uint32_t>data[i + 1] << 8) | (<uint32_t>data[i + 2] << 16)
             | (<uint32_t>data[i + 3] << 24))
        k *= MURMUR2_M
        k ^= k >> 24
        k *= MURMUR2_M
        h *= MURMUR2_M
        h ^= k
    cdef Py_ssize_t tail = length & 3
    if tail == 3:
        h ^= <uint32_t>data[whole + 2] << 16
    if tail >= 2:
        h ^= <uint32_t>data[whole + 1] << 8
    if tail >= 1:
        h ^= <uint32_t>data[whole]
        h *= MURMUR2_M
    h ^= h >> 13
    h *= MURMUR2_M
    h ^= h >> 15
    return h


cdef inline uint32_t murmur2_object(object key) except? 0xffffffff:
    """murmur2 of a bytes-like object's bytes (buffers.pxi, take_bytes); TypeError for str or non-buffers."""
    cdef Py_buffer view
    cdef uint32_t h
    if PyBytes_CheckExact(key):
        return murmur2_raw(<const unsigned char *>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
    take_bytes(key, &view, "key")
    try:
        h = murmur2_raw(<const unsigned char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return h


def murmur2(key):
    """Java's Utils.murmur2(key) as a signed 32-bit int. ``key``: bytes-like (not str); TypeError otherwise."""
    return <int32_t>murmur2_object(key)


def partitions_for_keys(keys, Py_ssize_t num_partitions, Py_ssize_t null_first=-1, Py_ssize_t null_step=0):
    """The default partition of each key: ``(murmur2(key) & 0x7fffffff) % num_partitions``.

    ``keys`` is a list (or any sequence) of bytes-like keys or None. The j-th None key (counting only None
    keys, from 0) gets ``(null_first + j * null_step) % num_partitions``, or -1 when ``null_first`` is
    negative: pass a sticky partition with step 0, a round-robin counter with step 1. Raises ValueError when
    ``num_partitions`` < 1, TypeError for a key that is not bytes-like.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    if null_step < 0:
        raise ValueError(f"null_step must not be negative, got {null_step}")
    cdef list seq = keys if type(keys) is list else list(keys)
    cdef Py_ssize_t n = len(seq), i
    cdef Py_ssize_t nulls = 0
    cdef object key, part
    cdef list out = PyList_New(n)
    for i in range(n):
        key = seq[i]
        if key is None:
            if null_first < 0:
                part = -1
            else:
                part = (null_first + nulls * null_step) % num_partitions
            nulls += 1
        else:
            part = <Py_ssize_t>(murmur2_object(key) & 0x7fffffff) % num_partitions
        Py_INCREF(part)
        PyList_SET_ITEM(out, i, part)
    return out
