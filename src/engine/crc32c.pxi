# Python-visible CRC-32C (see crc32c_impl.h for the C side).

def crc32c(data, uint32_t value=0):
    """CRC-32C of a bytes-like object, continuing from ``value`` (0 to start). The GIL is released for
    buffers of NOGIL_BYTES (64 KiB) and more. crc32c(b"123456789") == 0xE3069283."""
    cdef Py_buffer b
    cdef uint32_t c
    take_bytes(data, &b, "data")
    try:
        if b.len >= NOGIL_BYTES:
            with nogil:
                c = seglog_crc32c(value, b.buf, <size_t>b.len)
            return c
        return seglog_crc32c(value, b.buf, <size_t>b.len)
    finally:
        PyBuffer_Release(&b)


def crc32c_table(data, uint32_t value=0):
    """CRC-32C by the portable table path only (to test it against the hardware path)."""
    cdef Py_buffer b
    take_bytes(data, &b, "data")
    try:
        return seglog_crc32c_sw(value, b.buf, <size_t>b.len)
    finally:
        PyBuffer_Release(&b)


def crc32c_hardware():
    """True when the CPU's CRC-32C instruction is in use (SSE4.2 on x86-64, the CRC extension on aarch64)."""
    return bool(seglog_crc32c_hw_available())
