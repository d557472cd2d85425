// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of run
// files v1, packfiles and datasets.
//
// Written here rather than taken from a library: Debian ships no CRC32C
// library, and the SSE4.2 `crc32` instruction (8 bytes per instruction, three
// interleaved streams) is what makes checking multi-GB files cheap. A
// slicing-by-8 table version is the fallback on CPUs without SSE4.2 and the
// reference the hardware path is tested against.
#pragma once

#include <cstddef>
#include <cstdint>

namespace a2pack::crc32c {

// Continue a CRC: pass the previous return value as `crc` (0 to start).
uint32_t extend(uint32_t crc, const void* data, size_t len);
inline uint32_t compute(const void* data, size_t len) { return extend(0, data, len); }

// CRC of A||B from crc(A), crc(B) and len(B): lets parallel workers checksum
// chunks independently.
uint32_t combine(uint32_t crc1, uint32_t crc2, uint64_t len2);

// The two implementations, exposed for tests and benchmarks.
uint32_t extend_table(uint32_t crc, const void* data, size_t len);
uint32_t extend_hardware(uint32_t crc, const void* data, size_t len);  // requires SSE4.2
bool hardware_available();

}  // namespace a2pack::crc32c
