// Helpers for the packfile tests: synthetic runs and packs laid out by hand
// exactly as the upstream tool writes them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "run/codec.hpp"

namespace a2test {

// A deterministic synthetic run: `n` steps, branches on every other step
// when `branches`, an engine string when `engine` is not empty.
inline a2pack::run::Run synthetic_run(uint64_t seed, size_t n, bool branches,
                                      const std::string& engine = "") {
  a2pack::run::Run r;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  r.meta.steps = static_cast<uint32_t>(n);
  r.meta.start_unix_s = 1755000000 + seed;
  r.meta.elapsed_s = 0.25f * static_cast<float>(seed % 17) + 0.125f;
  r.meta.max_score = 1000 + seed * 7;
  r.meta.highest_tile = 1u << (7 + seed % 5);
  if (!engine.empty()) r.meta.engine = engine;
  r.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r.boards[i] = next();
    r.moves[i] = static_cast<uint8_t>(next() % 4);
    if (branches && i % 2 == 0) {
      r.present[i] = 1;
      uint8_t mask = static_cast<uint8_t>((next() % 15) + 1) | static_cast<uint8_t>(1u << r.moves[i]);
      r.legal[i] = mask;
      for (int k = 0; k < 4; ++k)
        r.values[4 * i + k] = (mask >> k & 1) ? static_cast<float>(next() % 1000) / 997.0f : 0.0f;
    }
  }
  r.final_board = next();
  return r;
}

// Encoded run files: even seeds v2 (with branches), odd seeds v1.
inline std::string synthetic_bytes(uint64_t seed, size_t n) {
  if (seed % 2) return a2pack::run::encode_v1(synthetic_run(seed, n, false), false);
  return a2pack::run::encode_v2(synthetic_run(seed, n, true, seed % 4 ? "" : "expectimax-d2"));
}

// A v1 run with very regular boards: zstd shrinks it a lot.
inline std::string encode_like_fixture_v1(size_t n) {
  a2pack::run::Run r;
  r.meta.steps = static_cast<uint32_t>(n);
  r.meta.highest_tile = 256;
  r.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r.boards[i] = 0x1000000000000000ull + i;
    r.moves[i] = static_cast<uint8_t>(i % 4);
  }
  r.final_board = n;
  return a2pack::run::encode_v1(r, false);
}

inline void put32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
inline void put64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
inline void put16(std::string& s, uint16_t v) { s.append(reinterpret_cast<const char*>(&v), 2); }

// A pack laid out as upstream's `a2pack pack` writes it (docs/pack.md),
// written independently of the library's writer. `stats` appends upstream's
// postcard stats block built from `stats_block` bytes (may be empty: none).
inline std::string upstream_pack(const std::vector<std::string>& payloads, uint64_t align,
                                 bool entry_crc, const std::string& stats_block) {
  const uint64_t count = payloads.size();
  std::string f;
  f.append("A2PACK\0\0", 8);
  put32(f, 1);
  put32(f, 0);
  put64(f, count);
  put32(f, a2pack::crc32c::compute(f.data(), 24));
  uint64_t cur = 28 + 32 * count;
  if (cur % align) cur += align - cur % align;
  std::vector<uint64_t> offsets;
  for (auto& p : payloads) {
    if (cur % align) cur += align - cur % align;
    offsets.push_back(cur);
    cur += p.size();
  }
  const uint64_t data_end = count ? cur : 0;
  std::string index;
  for (size_t i = 0; i < count; ++i) {
    const auto* d = reinterpret_cast<const uint8_t*>(payloads[i].data());
    put64(index, offsets[i]);
    put32(index, static_cast<uint32_t>(payloads[i].size()));
    put16(index, a2pack::run::detect_kind(d, payloads[i].size()) == a2pack::run::Kind::v1 ? 1 : 2);
    put16(index, 0);
    put32(index, entry_crc ? a2pack::crc32c::compute(d, payloads[i].size()) : 0);
    put32(index, 0);
    put64(index, 0);
  }
  f += index;
  if (f.size() % align) f.append(align - f.size() % align, '\0');
  for (size_t i = 0; i < count; ++i) {
    f.append(offsets[i] - f.size(), '\0');
    f += payloads[i];
  }
  uint64_t stats_offset = 0;
  if (!stats_block.empty()) {
    stats_offset = f.size();
    f += stats_block;
  }
  std::string footer;
  put64(footer, data_end);
  put32(footer, a2pack::crc32c::compute(index.data(), index.size()));
  put32(footer, 0);
  put64(footer, stats_offset);
  put32(footer, a2pack::crc32c::compute(footer.data(), 24));
  put32(footer, 0);
  return f + footer;
}

// The library error `f` throws; a test failure (and an A2PACK_OK error) when
// it throws none.
template <typename F>
a2pack::Error expect_error(F&& f) {
  try {
    f();
  } catch (const a2pack::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return a2pack::Error(A2PACK_OK, "");
}

}  // namespace a2test
