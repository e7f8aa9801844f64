# Reusable bytes objects for large, short-lived outputs: the pread copies of read-only segments (read()) and
# the Arrow column buffers (arrow.pxi).
#
# A fresh multi-MiB allocation is new memory to the process: every 4 KiB page of it faults and is zeroed by the
# kernel on first write, which cost readers more than decoding the records into it (a Spark task reads GiBs
# through a few buffers of 8-16 MiB each). scratch_bytes() hands out a bytes object from a process-wide pool
# instead when one is free, so the same pages are written over and over.
#
# Invariants:
# - A pooled object is free when the pool holds its only reference (refcount 1). Whoever it was handed to
#   (a memoryview, an Arrow buffer, a Python variable) keeps it busy for as long as it references it, so its
#   bytes never change under a reader. The check and the taking of a reference run under the GIL without
#   releasing it: two threads never get the same object.
# - Its contents are undefined (the last user's bytes): callers write before they read, and expose only the
#   prefix they wrote (a slice), since the object may be larger than asked for.
# - The pool holds at most SCRATCH_SLOTS objects of SCRATCH_MIN..SCRATCH_MAX bytes and SCRATCH_TOTAL bytes in
#   all; smaller and larger requests, and requests when it is full of busy objects, get plain new objects.

cdef enum:
    SCRATCH_SLOTS = 16
    SCRATCH_MIN = 65536                 # below this, malloc's free lists already reuse memory cheaply
    SCRATCH_MAX = 64 << 20
    SCRATCH_TOTAL = 128 << 20

cdef list _scratch = []                 # pooled bytes objects
cdef Py_ssize_t _scratch_bytes = 0      # their total size


cdef inline Py_ssize_t scratch_round(Py_ssize_t n) noexcept:
    """n rounded up to 1/8 of its highest power of two (later requests of about the same size fit too)."""
    cdef Py_ssize_t step = 1
    while step * 16 <= n:
        step <<= 1
    return (n + step - 1) & ~(step - 1)


cdef object scratch_bytes(Py_ssize_t n):
    """A bytes object of at least n bytes that nothing else references, its contents undefined (see above)."""
    global _scratch_bytes
    cdef Py_ssize_t i, size, best = -1, best_size = 0, victim = -1, count
    cdef PyObject *o
    cdef object out
    if n < SCRATCH_MIN or n > SCRATCH_MAX:
        return PyBytes_FromStringAndSize(NULL, n)
    count = PyList_GET_SIZE(_scratch)
    for i in range(count):
        o = list_item_borrowed(_scratch, i)
        if scratch_refcount(o) != 1:
            continue
        size = bytes_size_borrowed(o)
        if size >= n:
            if best < 0 or size < best_size:
                best, best_size = i, size
        elif victim < 0 or size < bytes_size_borrowed(list_item_borrowed(_scratch, victim)):
            victim = i
    if best >= 0:
        return <object>list_item_borrowed(_scratch, best)
    size = scratch_round(n)
    out = PyBytes_FromStringAndSize(NULL, size)
    if victim >= 0 and (count >= SCRATCH_SLOTS or _scratch_bytes + size > SCRATCH_TOTAL):
        _scratch_bytes -= bytes_size_borrowed(list_item_borrowed(_scratch, victim))
        del _scratch[victim]                # free and too small: the new object takes its place
        count -= 1
    if count < SCRATCH_SLOTS and _scratch_bytes + size <= SCRATCH_TOTAL:
        _scratch.append(out)
        _scratch_bytes += size
    return out


def scratch_pool():
    """(objects, bytes, free objects) of the scratch pool: for tests and memory accounting."""
    cdef Py_ssize_t i, free = 0
    for i in range(PyList_GET_SIZE(_scratch)):
        if scratch_refcount(list_item_borrowed(_scratch, i)) == 1:
            free += 1
    return PyList_GET_SIZE(_scratch), _scratch_bytes, free
