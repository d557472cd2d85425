// Per-entry LZ4 compression of packfile payloads: one LZ4 frame per entry
// (lz4frame.h), recording its content size and a checksum of the content.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace a2pack::pack {

// Levels a writer accepts: LZ4F's compressionLevel, 0 = LZ4's fast default,
// negative = faster (acceleration 1 - level), higher = LZ4 HC up to 12.
inline constexpr int kLz4MinLevel = -65536;
inline constexpr int kLz4MaxLevel = 12;

// Compress one payload into a single LZ4 frame that records its content size
// and the XXH32 checksum of its content. Thread-safe (each thread reuses its
// own compression context).
std::string lz4_compress(const uint8_t* data, size_t len, int level);

// Decompress one entry's frame into `out` (resized), which must come to
// exactly `expected` bytes (the index entry's reserved field). Throws
// Error(CORRUPT) when the frame is malformed or cut short, declares another
// size, decompresses to another size, fails its content checksum, is
// followed by other bytes, or `expected` exceeds kMaxDecompressed.
void lz4_decompress(const uint8_t* data, size_t len, uint32_t expected, std::vector<uint8_t>& out);
// The same into `out`, which holds `expected` bytes (checked first).
void lz4_decompress_into(const uint8_t* data, size_t len, uint32_t expected, uint8_t* out);

}  // namespace a2pack::pack
