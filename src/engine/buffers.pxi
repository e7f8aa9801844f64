# Taking bytes from Python objects: the one way the engine reads an argument that holds bytes.
#
# take_bytes() acquires any bytes-like object (bytes, bytearray, memoryview, mmap, array.array of every
# typecode, numpy arrays ...) as ONE C-contiguous, read-only span of its BYTES: Py_buffer.len is the byte
# length (what memoryview.nbytes says), never the item count that len() and len(memoryview) give for items
# wider than a byte. A buffer that is not C-contiguous (a strided memoryview, a transposed array) is copied in
# C order: the bytes bytes(memoryview(obj)) holds, as Kafka clients treat any buffer as its bytes. str is
# refused with TypeError (encode it first), as is anything without the buffer protocol.
#
# While a span is held its exporter keeps the memory in place (a bytearray refuses to resize: BufferError), so
# the length a caller sizes with is the length it copies. Callers take each argument once, size and write from
# the same span, and release it last; nothing re-reads the Python object in between.
#
# A record's key, value and headers are taken together (take_record) before the writer changes anything:
# a record that fails to be taken (a wrong type anywhere) leaves no trace.


cdef int take_bytes(object obj, Py_buffer *b, str what) except -1:
    """Acquire obj's bytes into b (see the file comment); release with PyBuffer_Release unless this raised.
    Raises TypeError for str and objects without the buffer protocol."""
    cdef object copy
    if PyBytes_CheckExact(obj):             # the common case, without the buffer protocol's call
        PyBuffer_FillInfo(b, obj, <void *>PyBytes_AS_STRING(obj), PyBytes_GET_SIZE(obj), 1, PyBUF_SIMPLE)
        return 0
    if PyUnicode_Check(obj):
        raise TypeError(f"{what} must be bytes-like, not str (encode it first)")
    try:
        PyObject_GetBuffer(obj, b, PyBUF_SIMPLE)
        return 0
    except TypeError:
        raise TypeError(f"{what} must be bytes-like, not {type(obj).__name__}") from None
    except (BufferError, ValueError):       # refused as one simple span: not C-contiguous
        pass
    copy = memoryview(obj).tobytes()        # raises again (ValueError for a released view) if it is not that
    PyObject_GetBuffer(copy, b, PyBUF_SIMPLE)
    return 0


cdef int take_span(object obj, Span *s, str what) except -1:
    """obj taken as s: None is a null (n = -1, nothing held), anything else goes through take_bytes."""
    s.held = False
    if obj is None:
        s.p = NULL
        s.n = -1
        return 0
    take_bytes(obj, &s.buf, what)
    s.held = True
    s.p = <const unsigned char *>s.buf.buf
    s.n = s.buf.len
    return 0


cdef int take_arg(object obj, Span *s, str what) except -1:
    """take_span for an argument of the running call (the caller's reference keeps it alive): bytes are read
    in place without holding them."""
    if PyBytes_CheckExact(obj):
        s.held = False
        s.p = <const unsigned char *>PyBytes_AS_STRING(obj)
        s.n = PyBytes_GET_SIZE(obj)
        return 0
    return take_span(obj, s, what)


cdef inline void release_span(Span *s) noexcept:
    if s.held:
        s.held = False
        PyBuffer_Release(&s.buf)


cdef int _take_header_key(object k, Span *s) except -1:
    cdef const char *p
    cdef Py_ssize_t n
    s.held = False
    if PyUnicode_Check(k):
        p = PyUnicode_AsUTF8AndSize(k, &n)          # cached in the str, which the span holds
        PyBuffer_FillInfo(&s.buf, k, <void *>p, n, 1, PyBUF_SIMPLE)
    elif PyBytes_Check(k):
        take_bytes(k, &s.buf, "header key")
    else:
        raise TypeError(f"header key must be str or bytes, not {type(k).__name__}")
    s.held = True
    s.p = <const unsigned char *>s.buf.buf
    s.n = s.buf.len
    return 0


cdef int take_record(object value, object key, object headers, RecordIn *r) except -1:
    """Take a record's value, key (arguments of the caller's running call: take_arg) (bytes-like or None) and headers (a sequence of (key: str | bytes, value:
    bytes-like | None) pairs, or None) into r and compute the headers' encoded size. r must be zeroed
    beforehand and released with release_record() whatever this returns. Raises TypeError for a wrong type."""
    cdef tuple items
    cdef Py_ssize_t i, n
    take_arg(value, &r.value, "record value")
    take_arg(key, &r.key, "record key")
    if headers is None:
        return 0
    if isinstance(headers, (str, bytes)):
        raise TypeError(f"headers must be a sequence of (key, value) pairs, not {type(headers).__name__}")
    try:
        items = headers if PyTuple_CheckExact(headers) else tuple(headers)     # iterated once
    except TypeError:
        raise TypeError(f"headers must be a sequence of (key, value) pairs, not {type(headers).__name__}") \
            from None
    n = len(items)
    if n == 0:
        return 0
    r.hspans = <Span *>PyMem_Calloc(<size_t>n * 2, sizeof(Span))
    if r.hspans == NULL:
        raise MemoryError()
    r.hcount = n                         # spans are zeroed (nothing held): release_record covers a partial take
    for i in range(n):
        item = items[i]
        try:
            k, v = item
        except (TypeError, ValueError):
            raise TypeError(f"each header must be a (key, value) pair, not {item!r}") from None
        _take_header_key(k, &r.hspans[2 * i])
        take_span(v, &r.hspans[2 * i + 1], "header value")
        r.hsize += (varint_size(r.hspans[2 * i].n) + r.hspans[2 * i].n + varint_size(r.hspans[2 * i + 1].n)
                    + (r.hspans[2 * i + 1].n if r.hspans[2 * i + 1].n > 0 else 0))
    return 0


cdef void release_record(RecordIn *r) noexcept:
    """Release everything take_record() took (safe on a zeroed or partly taken r)."""
    cdef Py_ssize_t i
    release_span(&r.value)
    release_span(&r.key)
    if r.hspans != NULL:
        for i in range(2 * r.hcount):
            release_span(&r.hspans[i])
        PyMem_Free(r.hspans)
        r.hspans = NULL
    r.hcount = 0


cdef unsigned char *write_headers(unsigned char *w, RecordIn *r) noexcept:
    """Write the taken headers at w (room for r.hsize bytes); returns the end."""
    cdef Py_ssize_t i
    cdef Span *s
    for i in range(2 * r.hcount):
        s = &r.hspans[i]
        w = put_varint(w, s.n)
        if s.n > 0:
            memcpy(w, s.p, <size_t>s.n)
            w += s.n
    return w
