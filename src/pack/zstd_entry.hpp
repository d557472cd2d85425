// Per-entry zstd compression of packfile payloads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace a2pack::pack {

// Compress one payload into a single zstd frame that records its content
// size. Thread-safe (each thread reuses its own compression context).
std::string zstd_compress(const uint8_t* data, size_t len, int level);

// Decompress one entry's frame into `out` (resized), which must come to
// exactly `expected` bytes (the index entry's reserved field). Throws
// Error(CORRUPT) when the frame is malformed, declares another size, or
// `expected` exceeds kMaxDecompressed.
void zstd_decompress(const uint8_t* data, size_t len, uint32_t expected, std::vector<uint8_t>& out);
// The same into `out`, which holds `expected` bytes (checked first).
void zstd_decompress_into(const uint8_t* data, size_t len, uint32_t expected, uint8_t* out);

}  // namespace a2pack::pack
