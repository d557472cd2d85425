// The bytes of an A2PACK v1 packfile (docs/pack.md):
//
//   [header 28 B][index: count x 32 B][zero pad][entries, each aligned]
//   [stats block][footer 32 B]
//
// This file only encodes and decodes the fixed-size pieces; reader.cpp and
// writer.cpp decide where they go and what to check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace a2pack::pack {

inline constexpr uint8_t kMagic[8] = {'A', '2', 'P', 'A', 'C', 'K', 0, 0};
inline constexpr uint32_t kVersion = 1;
// Header version 2: the same layout as version 1, written when at least one
// entry is compressed (zstd or lz4). Upstream's reader (ai-2048) checks only
// the header version at open and ignores entry flags, so it would hand a
// compressed payload to its run decoder; version 2 makes it refuse the pack
// at open ("unsupported version") instead. Packs of stored entries stay
// version 1, byte-identical to upstream's. Readers here accept both, and
// compressed entries under version 1 (zstd entries are what a2pack wrote
// before version 2 existed).
inline constexpr uint32_t kVersionCompressed = 2;
inline constexpr size_t kHeaderSize = 28;
inline constexpr size_t kEntrySize = 32;
inline constexpr size_t kFooterSize = 32;

// Index entry `kind`: the run format of the payload (after decompression).
inline constexpr uint16_t kKindV1 = 1;
inline constexpr uint16_t kKindV2 = 2;

// Index entry `flags`: 0 = stored verbatim, 1 = one zstd frame, 2 = one LZ4
// frame (lz4frame format, content size and content checksum recorded). For a
// compressed entry the `reserved` field holds the decompressed length (an
// a2pack extension: upstream writes 0 there and never compresses).
inline constexpr uint16_t kEntryStored = 0;
inline constexpr uint16_t kEntryZstd = 1;
inline constexpr uint16_t kEntryLz4 = 2;

// Whether entry flags name a compressed payload this build reads.
inline bool entry_compressed(uint16_t flags) { return flags == kEntryZstd || flags == kEntryLz4; }

// Largest run a compressed entry may decompress to; the reader refuses to
// allocate more for one entry whatever the file claims.
inline constexpr uint32_t kMaxDecompressed = 1u << 30;

struct Header {
  uint32_t version = kVersion;
  uint32_t flags = 0;
  uint64_t count = 0;
};

struct Entry {
  uint64_t offset = 0;  // absolute file offset of the stored payload
  uint32_t length = 0;  // stored bytes
  uint16_t kind = 0;
  uint16_t flags = 0;
  uint32_t crc = 0;       // CRC32C of the stored bytes, 0 = none
  uint32_t reserved = 0;  // compressed entries: decompressed length
  uint64_t end() const { return offset + length; }
};

struct Footer {
  uint64_t data_end = 0;
  uint32_t index_crc = 0;
  uint32_t data_crc = 0;
  uint64_t stats_offset = 0;
};

// The postcard stats block (after its u32 length prefix).
struct StatsBlock {
  uint64_t count = 0;
  uint64_t total_steps = 0;
  uint32_t min_len = 0;
  uint32_t max_len = 0;
  double mean_len = 0;
  uint32_t p50 = 0;
  uint32_t p90 = 0;
  uint32_t p99 = 0;
  bool operator==(const StatsBlock&) const = default;
};

// Encoders write exactly kHeaderSize / kEntrySize / kFooterSize bytes,
// CRCs included (the header and footer CRCs are computed here).
void encode_header(const Header& h, uint8_t* out);
void encode_entry(const Entry& e, uint8_t* out);
void encode_footer(const Footer& f, uint8_t* out);

// Decoders read fixed-size pieces. They check nothing but the layout of the
// bytes; CRCs and bounds are the reader's business.
Entry decode_entry(const uint8_t* in);

// Stats block: the u32 length prefix followed by the postcard bytes.
std::string encode_stats_block(const StatsBlock& s);
// Parse the postcard part (`len` bytes). Throws Error(CORRUPT) naming
// `offset` (where the postcard bytes begin in the file) when a varint is bad
// or the bytes are not consumed exactly.
StatsBlock decode_stats_block(const uint8_t* data, size_t len, uint64_t offset);

// Round `v` up to a multiple of `align` (a power of two).
inline uint64_t align_up(uint64_t v, uint64_t align) { return (v + align - 1) & ~(align - 1); }

}  // namespace a2pack::pack
