# Big-endian loads and stores (Kafka's byte order) on unaligned pointers. Included by _engine.pxd.

cdef extern from *:
    """
    #include <string.h>
    static inline void seglog_put_be16(unsigned char *p, uint16_t v) { v = __builtin_bswap16(v); memcpy(p, &v, 2); }
    static inline void seglog_put_be32(unsigned char *p, uint32_t v) { v = __builtin_bswap32(v); memcpy(p, &v, 4); }
    static inline void seglog_put_be64(unsigned char *p, uint64_t v) { v = __builtin_bswap64(v); memcpy(p, &v, 8); }
    static inline uint16_t seglog_get_be16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return __builtin_bswap16(v); }
    static inline uint32_t seglog_get_be32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return __builtin_bswap32(v); }
    static inline uint64_t seglog_get_be64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return __builtin_bswap64(v); }
    """
    void put_be16 "seglog_put_be16"(unsigned char *p, uint16_t v) nogil
    void put_be32 "seglog_put_be32"(unsigned char *p, uint32_t v) nogil
    void put_be64 "seglog_put_be64"(unsigned char *p, uint64_t v) nogil
    uint16_t get_be16 "seglog_get_be16"(const unsigned char *p) nogil
    uint32_t get_be32 "seglog_get_be32"(const unsigned char *p) nogil
    uint64_t get_be64 "seglog_get_be64"(const unsigned char *p) nogil
