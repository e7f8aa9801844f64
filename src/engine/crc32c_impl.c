/* CRC-32C: hardware instruction where the CPU has it, slicing-by-8 tables otherwise. See crc32c_impl.h.
 *
 * Large buffers run three independent CRC streams over three adjacent blocks (the crc instruction has a
 * latency of 3 cycles and a throughput of 1, so three streams keep it busy), then merge them with
 * "shift" tables: the CRC register of block A followed by n bytes equals M_n(regA) ^ reg(B) where M_n is
 * the linear map "multiply by x^(8n) mod P", precomputed for the two block lengths used.
 */
#include "crc32c_impl.h"

#include <string.h>

#define POLY 0x82F63B78u
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256

static uint32_t table8[8][256];          /* slicing-by-8 tables */
static uint32_t shift_long[4][256];      /* M_LONG_BLOCK applied bytewise */
static uint32_t shift_short[4][256];     /* M_SHORT_BLOCK applied bytewise */
static int hw_available = 0;
static int initialized = 0;

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- portable path ----------------------------------------------------------------------------------- */

static uint32_t sw_update(uint32_t reg, const unsigned char *p, size_t len) {
    while (len && ((uintptr_t)p & 7)) {
        reg = (reg >> 8) ^ table8[0][(reg ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint64_t v = load64(p) ^ reg;    /* little-endian hosts; see the big-endian guard below */
        reg = table8[7][v & 0xff] ^ table8[6][(v >> 8) & 0xff] ^ table8[5][(v >> 16) & 0xff] ^
              table8[4][(v >> 24) & 0xff] ^ table8[3][(v >> 32) & 0xff] ^ table8[2][(v >> 40) & 0xff] ^
              table8[1][(v >> 48) & 0xff] ^ table8[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) reg = (reg >> 8) ^ table8[0][(reg ^ *p++) & 0xff];
    return reg;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "seglog's CRC-32C slicing tables assume a little-endian host"
#endif

/* Advance a CRC register over n zero bytes (used only to build the shift tables). */
static uint32_t zeros(uint32_t reg, size_t n) {
    while (n--) reg = (reg >> 8) ^ table8[0][reg & 0xff];
    return reg;
}

static void build_shift(uint32_t t[4][256], size_t n) {
    uint32_t basis[32];
    for (int i = 0; i < 32; i++) basis[i] = zeros(1u << i, n);
    for (int k = 0; k < 4; k++) {
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int bit = 0; bit < 8; bit++)
                if (b & (1 << bit)) v ^= basis[8 * k + bit];
            t[k][b] = v;
        }
    }
}

static inline uint32_t apply_shift(uint32_t t[4][256], uint32_t reg) {
    return t[0][reg & 0xff] ^ t[1][(reg >> 8) & 0xff] ^ t[2][(reg >> 16) & 0xff] ^ t[3][reg >> 24];
}

/* ---- hardware paths ------------------------------------------------------------------------------------ */

#if defined(__x86_64__)
#include <cpuid.h>
#define HW_TARGET __attribute__((target("sse4.2")))
static inline HW_TARGET uint64_t hw8(uint64_t reg, uint64_t v) { return __builtin_ia32_crc32di(reg, v); }
static inline HW_TARGET uint32_t hw1(uint32_t reg, unsigned char v) { return __builtin_ia32_crc32qi(reg, v); }
static int detect_hw(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & bit_SSE4_2) != 0;
}
#define HAVE_HW_PATH 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#define HW_TARGET __attribute__((target("+crc")))
static inline HW_TARGET uint64_t hw8(uint64_t reg, uint64_t v) { return __builtin_aarch64_crc32cx((uint32_t)reg, v); }
static inline HW_TARGET uint32_t hw1(uint32_t reg, unsigned char v) { return __builtin_aarch64_crc32cb(reg, v); }
static int detect_hw(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#define HAVE_HW_PATH 1
#endif

#ifdef HAVE_HW_PATH
static HW_TARGET uint32_t hw_stream(uint32_t reg, const unsigned char *p, size_t len) {
    uint64_t r = reg;
    while (len && ((uintptr_t)p & 7)) { r = hw1((uint32_t)r, *p++); len--; }
    while (len >= 8) { r = hw8(r, load64(p)); p += 8; len -= 8; }
    while (len--) r = hw1((uint32_t)r, *p++);
    return (uint32_t)r;
}

/* Three streams over three adjacent blocks of `block` bytes each, merged with the shift tables. */
static HW_TARGET uint32_t hw_triples(uint32_t reg, const unsigned char **pp, size_t *lenp, size_t block,
                                     uint32_t t[4][256]) {
    const unsigned char *p = *pp;
    size_t len = *lenp;
    while (len >= 3 * block) {
        uint64_t r0 = reg, r1 = 0, r2 = 0;
        const unsigned char *end = p + block;
        while (p < end) {
            r0 = hw8(r0, load64(p));
            r1 = hw8(r1, load64(p + block));
            r2 = hw8(r2, load64(p + 2 * block));
            p += 8;
        }
        reg = apply_shift(t, (uint32_t)r0) ^ (uint32_t)r1;
        reg = apply_shift(t, reg) ^ (uint32_t)r2;
        p += 2 * block;
        len -= 3 * block;
    }
    *pp = p;
    *lenp = len;
    return reg;
}

static HW_TARGET uint32_t hw_update(uint32_t reg, const unsigned char *p, size_t len) {
    while (len && ((uintptr_t)p & 7)) { reg = hw1(reg, *p++); len--; }
    if (len >= 3 * LONG_BLOCK) reg = hw_triples(reg, &p, &len, LONG_BLOCK, shift_long);
    if (len >= 3 * SHORT_BLOCK) reg = hw_triples(reg, &p, &len, SHORT_BLOCK, shift_short);
    return hw_stream(reg, p, len);
}
#endif

/* ---- public ---------------------------------------------------------------------------------------------- */

void seglog_crc32c_init(void) {
    if (initialized) return;
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table8[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table8[0][n];
        for (int k = 1; k < 8; k++) {
            c = table8[0][c & 0xff] ^ (c >> 8);
            table8[k][n] = c;
        }
    }
    build_shift(shift_long, LONG_BLOCK);
    build_shift(shift_short, SHORT_BLOCK);
#ifdef HAVE_HW_PATH
    hw_available = detect_hw();
#endif
    initialized = 1;
}

int seglog_crc32c_hw_available(void) { return hw_available; }

uint32_t seglog_crc32c_sw(uint32_t crc, const void *buf, size_t len) {
    return ~sw_update(~crc, (const unsigned char *)buf, len);
}

uint32_t seglog_crc32c(uint32_t crc, const void *buf, size_t len) {
#ifdef HAVE_HW_PATH
    if (hw_available) return ~hw_update(~crc, (const unsigned char *)buf, len);
#endif
    return ~sw_update(~crc, (const unsigned char *)buf, len);
}
