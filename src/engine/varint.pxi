# Python-visible varint helpers (the inline encoders and decoders are in varint.pxd).

def encode_varint(int64_t value):
    """Zigzag base-128 encoding of a signed 64-bit integer, as Kafka's record fields use."""
    cdef unsigned char out[10]
    cdef unsigned char *end = put_varint(out, value)
    return PyBytes_FromStringAndSize(<const char *>out, end - out)


def decode_varint(data, Py_ssize_t pos=0, bint long=False):
    """Decode one varint (int32; ``long=True`` for a varlong, int64) at ``pos``: returns (value, next_pos).

    Raises CorruptRecordError for a truncated or over-long encoding or an int32 overflow."""
    cdef Py_buffer b
    cdef int64_t v
    cdef const unsigned char *p
    cdef const unsigned char *q
    take_bytes(data, &b, "data")
    try:
        if pos < 0 or pos > b.len:
            raise _errors.InvalidArgumentError(f"position {pos} outside the buffer")
        p = <const unsigned char *>b.buf
        if long:
            q = get_varlong(p + pos, p + b.len, &v)
        else:
            q = get_varint(p + pos, p + b.len, &v)
        if q == NULL:
            raise _errors.CorruptRecordError(f"invalid {'varlong' if long else 'varint'} at position {pos}")
        return v, q - p
    finally:
        PyBuffer_Release(&b)


def varint_length(int64_t value):
    """Bytes the zigzag varint encoding of value takes."""
    return varint_size(value)
