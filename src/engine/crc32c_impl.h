/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of Kafka record batch v2.
 *
 * seglog_crc32c(crc, buf, len) continues a CRC: pass 0 to start, pass the previous result to extend it,
 * so crc32c(crc32c(0, a), b) == crc32c(0, a + b). Check value: crc32c(0, "123456789", 9) == 0xE3069283.
 * The hardware path (SSE4.2 crc32q on x86-64, ARMv8 crc32cx on aarch64) is chosen once at init when the CPU
 * has it; seglog_crc32c_sw is the portable slicing-by-8 table path. Both are pure functions of their input,
 * safe to call without the GIL from any thread once seglog_crc32c_init() has run.
 */
#ifndef SEGLOG_CRC32C_IMPL_H
#define SEGLOG_CRC32C_IMPL_H

#include <stddef.h>
#include <stdint.h>

void seglog_crc32c_init(void);
uint32_t seglog_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t seglog_crc32c_sw(uint32_t crc, const void *buf, size_t len);
int seglog_crc32c_hw_available(void);

#endif
