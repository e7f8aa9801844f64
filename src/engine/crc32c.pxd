# CRC-32C declarations (C implementation in crc32c_impl.c). Included by _engine.pxd.

cdef extern from "crc32c_impl.h" nogil:
    void seglog_crc32c_init()
    uint32_t seglog_crc32c(uint32_t crc, const void *buf, size_t len)
    uint32_t seglog_crc32c_sw(uint32_t crc, const void *buf, size_t len)
    int seglog_crc32c_hw_available()

cdef inline uint32_t crc32c_buf(const unsigned char *p, size_t n) noexcept:
    """CRC-32C of p[0:n]; releases the GIL for NOGIL_BYTES and more (the caller must hold it)."""
    cdef uint32_t c
    if n >= NOGIL_BYTES:
        with nogil:
            c = seglog_crc32c(0, p, n)
        return c
    return seglog_crc32c(0, p, n)
