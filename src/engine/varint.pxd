# Zigzag base-128 varints (protobuf style), as Kafka's record fields use them. Included by _engine.pxd.
#
# A "varint" holds an int32 (at most 5 bytes), a "varlong" an int64 (at most 10 bytes). Decoders return NULL
# on truncated input, on an encoding longer than the maximum, and on a varint whose value overflows int32.

cdef inline uint64_t zigzag(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)

cdef inline int64_t unzigzag(uint64_t u) noexcept nogil:
    return <int64_t>(u >> 1) ^ -<int64_t>(u & 1)

cdef inline int varint_size(int64_t v) noexcept nogil:
    cdef uint64_t u = zigzag(v)
    cdef int n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n

cdef inline unsigned char *put_varint(unsigned char *p, int64_t v) noexcept nogil:
    cdef uint64_t u = zigzag(v)
    while u >= 0x80:
        p[0] = <unsigned char>(u | 0x80)
        u >>= 7
        p += 1
    p[0] = <unsigned char>u
    return p + 1

cdef inline const unsigned char *get_uvarint(const unsigned char *p, const unsigned char *end, int max_shift,
                                              uint64_t *out) noexcept nogil:
    """The raw base-128 value at p, at most max_shift / 7 + 1 bytes; NULL on truncation or a longer encoding."""
    if p < end and not (p[0] & 0x80):              # fast path: one byte
        out[0] = p[0]
        return p + 1
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char b
    while True:
        if p >= end or shift > max_shift:
            return NULL
        b = p[0]
        p += 1
        result |= <uint64_t>(b & 0x7f) << shift
        if not (b & 0x80):
            break
        shift += 7
    out[0] = result
    return p

cdef inline const unsigned char *get_varlong(const unsigned char *p, const unsigned char *end,
                                              int64_t *out) noexcept nogil:
    cdef uint64_t u
    p = get_uvarint(p, end, 63, &u)
    if p != NULL:
        out[0] = unzigzag(u)
    return p

cdef inline const unsigned char *get_varint(const unsigned char *p, const unsigned char *end,
                                             int64_t *out) noexcept nogil:
    cdef uint64_t u
    p = get_uvarint(p, end, 28, &u)
    if p == NULL or u > 0xFFFFFFFFu:
        return NULL
    out[0] = unzigzag(u)
    return p
