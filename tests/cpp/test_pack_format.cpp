// Packfile pieces: fixed-size encodings, the stats block, percentiles, JSON
// numbers and the seeded permutation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "base/error.hpp"
#include "pack/format.hpp"
#include "pack/json_number.hpp"
#include "pack/order.hpp"
#include "pack/stats.hpp"
#include "test_pack_util.hpp"

using namespace a2pack;
using namespace a2pack::pack;

TEST(PackFormat, HeaderEntryFooterBytes) {
  uint8_t h[kHeaderSize];
  encode_header(Header{1, 0, 0x0102030405060708ull}, h);
  EXPECT_EQ(0, std::memcmp(h, "A2PACK\0\0", 8));
  EXPECT_EQ(h[8], 1);
  EXPECT_EQ(h[16], 0x08);
  EXPECT_EQ(h[23], 0x01);
  uint32_t crc;
  std::memcpy(&crc, h + 24, 4);
  EXPECT_EQ(crc, crc32c::compute(h, 24));

  Entry e{0x1122334455667788ull, 0xAABBCCDD, 2, 1, 0xDEADBEEF, 77};
  uint8_t b[kEntrySize];
  std::memset(b, 0xFF, sizeof b);
  encode_entry(e, b);
  for (int k = 24; k < 32; ++k) EXPECT_EQ(b[k], 0) << k;
  Entry d = decode_entry(b);
  EXPECT_EQ(d.offset, e.offset);
  EXPECT_EQ(d.length, e.length);
  EXPECT_EQ(d.kind, 2);
  EXPECT_EQ(d.flags, 1);
  EXPECT_EQ(d.crc, e.crc);
  EXPECT_EQ(d.reserved, 77u);

  uint8_t f[kFooterSize];
  std::memset(f, 0xFF, sizeof f);
  encode_footer(Footer{10, 20, 0, 30}, f);
  std::memcpy(&crc, f + 24, 4);
  EXPECT_EQ(crc, crc32c::compute(f, 24));
  for (int k = 28; k < 32; ++k) EXPECT_EQ(f[k], 0);
}

TEST(PackFormat, StatsBlockIsPostcard) {
  StatsBlock s{3, 300, 1, 200, 100.0, 99, 200, 200};
  std::string b = encode_stats_block(s);
  // u32 length, then varints and a raw f64.
  std::string body;
  body += '\x03';
  body += "\xAC\x02";  // 300
  body += '\x01';
  body += "\xC8\x01";  // 200
  double mean = 100.0;
  body.append(reinterpret_cast<const char*>(&mean), 8);
  body += '\x63';
  body += "\xC8\x01";
  body += "\xC8\x01";
  std::string expect;
  a2test::put32(expect, static_cast<uint32_t>(body.size()));
  EXPECT_EQ(b, expect + body);
  StatsBlock d = decode_stats_block(reinterpret_cast<const uint8_t*>(b.data()) + 4, b.size() - 4, 0);
  EXPECT_EQ(d, s);
}

TEST(PackFormat, StatsBlockRejectsBadBytes) {
  std::string b = encode_stats_block(StatsBlock{1, 5, 5, 5, 5.0, 5, 5, 5});
  const auto* p = reinterpret_cast<const uint8_t*>(b.data()) + 4;
  const size_t n = b.size() - 4;
  for (size_t cut = 0; cut < n; ++cut) {
    try {
      decode_stats_block(p, cut, 100);
      FAIL() << "truncated at " << cut;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
      EXPECT_NE(std::string(e.what()).find("stats block"), std::string::npos);
    }
  }
  std::string longer(reinterpret_cast<const char*>(p), n);
  longer += '\0';
  EXPECT_THROW(decode_stats_block(reinterpret_cast<const uint8_t*>(longer.data()), longer.size(), 0),
               Error);
  // min_len is a u32: a 5-byte varint above 2^32 overflows.
  std::string over = "\x01\x05\xFF\xFF\xFF\xFF\x7F";
  EXPECT_THROW(decode_stats_block(reinterpret_cast<const uint8_t*>(over.data()), over.size(), 0),
               Error);
}

TEST(PackStats, PercentilesFollowTheRoundingRule) {
  std::vector<uint32_t> none;
  EXPECT_EQ(summarize_lengths(none), StatsBlock{});
  std::vector<uint32_t> one{7};
  StatsBlock s1 = summarize_lengths(one);
  EXPECT_EQ(s1.count, 1u);
  EXPECT_EQ(s1.p50, 7u);
  EXPECT_EQ(s1.p99, 7u);
  // n = 4: p50 index round(1.5) = 2 (halves away from zero), p90 round(2.7) = 3.
  std::vector<uint32_t> four{40, 10, 30, 20};
  StatsBlock s = summarize_lengths(four);
  EXPECT_EQ(s.min_len, 10u);
  EXPECT_EQ(s.max_len, 40u);
  EXPECT_EQ(s.total_steps, 100u);
  EXPECT_DOUBLE_EQ(s.mean_len, 25.0);
  EXPECT_EQ(s.p50, 30u);
  EXPECT_EQ(s.p90, 40u);
  EXPECT_EQ(s.p99, 40u);
  // n = 101: exact indices 50, 90, 99.
  std::vector<uint32_t> many;
  for (uint32_t i = 0; i <= 100; ++i) many.push_back(1000 - i);
  StatsBlock m = summarize_lengths(many);
  EXPECT_EQ(m.p50, 950u);
  EXPECT_EQ(m.p90, 990u);
  EXPECT_EQ(m.p99, 999u);
}

TEST(PackStats, HistogramsDoNotDependOnMergeOrder) {
  HistogramBuilder a, b, all;
  std::vector<std::pair<uint32_t, std::optional<std::string>>> facts = {
      {2048, std::nullopt}, {1024, "x"}, {2048, "x"}, {4096, ""}, {1024, std::nullopt}};
  for (size_t i = 0; i < facts.size(); ++i) {
    (i % 2 ? a : b).add(facts[i].first, facts[i].second);
    all.add(facts[i].first, facts[i].second);
  }
  HistogramBuilder ab = a, ba = b;
  ab.merge(b);
  ba.merge(a);
  EXPECT_EQ(ab.finish(), all.finish());
  EXPECT_EQ(ba.finish(), all.finish());
  Histograms h = all.finish();
  ASSERT_EQ(h.tiles.size(), 3u);
  EXPECT_EQ(h.tiles[0].value, 1024u);
  EXPECT_EQ(h.tiles[0].count, 2u);
  ASSERT_EQ(h.engines.size(), 3u);
  EXPECT_FALSE(h.engines[0].name.has_value());
  EXPECT_EQ(h.engines[0].count, 2u);
  EXPECT_EQ(*h.engines[1].name, "");
  EXPECT_EQ(*h.engines[2].name, "x");
}

namespace {
std::string f32s(float f) {
  char buf[32];
  return std::string(buf, json::write_f32(buf, f));
}
std::string u64s(uint64_t v) {
  char buf[32];
  return std::string(buf, json::write_u64(buf, v));
}
}  // namespace

TEST(PackJsonNumbers, IntegersAsDecimal) {
  EXPECT_EQ(u64s(0), "0");
  EXPECT_EQ(u64s(9), "9");
  EXPECT_EQ(u64s(10), "10");
  EXPECT_EQ(u64s(99), "99");
  EXPECT_EQ(u64s(100), "100");
  EXPECT_EQ(u64s(1234567), "1234567");
  EXPECT_EQ(u64s(UINT64_MAX), "18446744073709551615");
}

TEST(PackJsonNumbers, FloatsAsSerdeJsonWritesF32) {
  // Expected strings are what serde_json (ryu) prints for these f32 values.
  EXPECT_EQ(f32s(1.0f), "1.0");
  EXPECT_EQ(f32s(0.0f), "0.0");
  EXPECT_EQ(f32s(-0.0f), "-0.0");
  EXPECT_EQ(f32s(0.5f), "0.5");
  EXPECT_EQ(f32s(0.1f), "0.1");
  EXPECT_EQ(f32s(-2.25f), "-2.25");
  EXPECT_EQ(f32s(15.259485f), "15.259485");
  EXPECT_EQ(f32s(1.0f - std::numeric_limits<float>::epsilon()), "0.9999999");
  EXPECT_EQ(f32s(std::nextafter(1.0f, 0.0f)), "0.99999994");
  EXPECT_EQ(f32s(std::numeric_limits<float>::epsilon()), "1.1920929e-7");
  EXPECT_EQ(f32s(1e-6f), "0.000001");
  EXPECT_EQ(f32s(1.5e-6f), "0.0000015");
  EXPECT_EQ(f32s(1e-7f), "1e-7");
  EXPECT_EQ(f32s(0.00012f), "0.00012");
  EXPECT_EQ(f32s(123456790.0f), "123456790.0");
  EXPECT_EQ(f32s(1e12f), "1000000000000.0");
  EXPECT_EQ(f32s(1e13f), "1e13");
  EXPECT_EQ(f32s(1.5e20f), "1.5e20");
  EXPECT_EQ(f32s(std::numeric_limits<float>::max()), "3.4028235e38");
  EXPECT_EQ(f32s(std::numeric_limits<float>::denorm_min()), "1e-45");
  EXPECT_EQ(f32s(std::nanf("")), "null");
  EXPECT_EQ(f32s(std::numeric_limits<float>::infinity()), "null");
}

TEST(PackJsonNumbers, FloatsRoundTrip) {
  uint32_t bits = 0x3F800000;
  for (int i = 0; i < 20000; ++i) {
    bits = bits * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isfinite(f)) continue;
    std::string s = f32s(f);
    EXPECT_EQ(std::strtof(s.c_str(), nullptr), f) << s;
  }
}

TEST(PackOrder, PermutationIsSeededAndComplete) {
  auto id = permutation(10, false, 123);
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(id[i], i);
  auto a = permutation(1000, true, 42);
  auto b = permutation(1000, true, 42);
  auto c = permutation(1000, true, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::set<uint64_t> seen(a.begin(), a.end());
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_EQ(*seen.rbegin(), 999u);
  EXPECT_TRUE(permutation(0, true, 1).empty());
  // Pinned: the order must never change between versions or platforms.
  EXPECT_EQ(permutation(8, true, 7), (std::vector<uint64_t>{7, 4, 6, 1, 2, 5, 0, 3}));
}
