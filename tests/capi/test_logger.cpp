// The logger section of the C API, used as a C/C++ host would: only a2pack.h.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "a2pack.h"

namespace {

struct Dir {
  std::string path;
  Dir() {
    char tmpl[] = "/tmp/a2pack-capi-logger-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

a2pack_logger* open_logger(const std::string& dir, a2pack_logger_options* o = nullptr) {
  a2pack_logger* lg = nullptr;
  EXPECT_EQ(a2pack_logger_open(dir.c_str(), o, &lg), A2PACK_OK) << a2pack_last_error();
  return lg;
}

a2pack_logger_data* decode(const std::string& dir, uint32_t strict = 0) {
  a2pack_logger_decode_options o;
  a2pack_logger_decode_options_init(&o);
  o.strict = strict;
  a2pack_logger_data* d = nullptr;
  EXPECT_EQ(a2pack_logger_decode(dir.c_str(), &o, &d), A2PACK_OK) << a2pack_last_error();
  return d;
}

a2pack_logger_columns columns(const a2pack_logger_data* d) {
  a2pack_logger_columns c;
  c.size = sizeof c;
  EXPECT_EQ(a2pack_logger_data_columns(d, &c), A2PACK_OK);
  return c;
}

a2pack_logger_summary summary(const a2pack_logger_data* d) {
  a2pack_logger_summary s;
  s.size = sizeof s;
  EXPECT_EQ(a2pack_logger_data_summary(d, &s), A2PACK_OK);
  return s;
}

}  // namespace

TEST(CapiLogger, RecordBatchFlushDecode) {
  Dir dir;
  a2pack_logger* lg = open_logger(dir.path);
  ASSERT_NE(lg, nullptr);
  uint32_t a = 99, b = 99;
  ASSERT_EQ(a2pack_logger_register_stream(lg, "{\"entity\":\"cell-1\",\"measure\":\"rate\"}", 0.5,
                                          0.01, 0, &a),
            A2PACK_OK);
  ASSERT_EQ(a2pack_logger_register_stream(lg, nullptr, 1.0, 1.0, A2PACK_LOGGER_SORT, &b),
            A2PACK_OK);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  uint32_t idx[] = {2, 7, 40};
  double val[] = {0.25, -1.5, 3.125};
  ASSERT_EQ(a2pack_logger_record(lg, a, 1.0, idx, val, 3), A2PACK_OK);
  ASSERT_EQ(a2pack_logger_record(lg, a, 1.5, nullptr, nullptr, 0), A2PACK_OK);
  // A batch over both streams; the second record is unsorted (stream b sorts).
  uint32_t sids[] = {a, b};
  double epochs[] = {2.0, 3.0};
  uint64_t offsets[] = {0, 1, 3};
  uint32_t bidx[] = {5, 9, 4};
  double bval[] = {1.0, 2.0, 3.0};
  size_t done = 0;
  ASSERT_EQ(a2pack_logger_record_batch(lg, 2, sids, epochs, offsets, bidx, bval, &done), A2PACK_OK);
  EXPECT_EQ(done, 2u);
  ASSERT_EQ(a2pack_logger_flush(lg), A2PACK_OK);

  a2pack_logger_stats st;
  st.size = sizeof st;
  ASSERT_EQ(a2pack_logger_stats_get(lg, &st), A2PACK_OK);
  EXPECT_EQ(st.records, 4u);
  EXPECT_EQ(st.values, 6u);
  EXPECT_GE(st.flushes, 1u);

  // Decoding while the logger is still open sees everything flushed.
  a2pack_logger_data* d = decode(dir.path);
  a2pack_logger_columns c = columns(d);
  ASSERT_EQ(c.n_records, 4u);
  ASSERT_EQ(c.n_values, 6u);
  EXPECT_EQ(c.stream_ids[0], a);
  EXPECT_EQ(c.epochs[0], 1.0);
  EXPECT_EQ(c.epochs[1], 1.5);
  EXPECT_EQ(c.offsets[0], 0u);
  EXPECT_EQ(c.offsets[1], 3u);
  EXPECT_EQ(c.offsets[2], 3u);
  EXPECT_EQ(c.offsets[4], 6u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.indices[i], idx[i]);
    EXPECT_LE(std::fabs(c.values[i] - val[i]), 0.005);
  }
  EXPECT_EQ(c.indices[4], 4u);  // sorted
  EXPECT_EQ(c.indices[5], 9u);
  EXPECT_EQ(c.values[4], 3.0);
  a2pack_logger_summary s = summary(d);
  EXPECT_EQ(s.streams, 2u);
  EXPECT_EQ(s.problems, 0u);
  EXPECT_EQ(s.segments, 1u);
  EXPECT_GE(s.frames, 1u);
  a2pack_logger_stream_info si;
  si.size = sizeof si;
  ASSERT_EQ(a2pack_logger_data_stream(d, 0, &si), A2PACK_OK);
  EXPECT_EQ(si.stream_id, 0u);
  EXPECT_EQ(si.epoch_scale, 0.5);
  EXPECT_EQ(si.value_scale, 0.01);
  EXPECT_STREQ(si.labels_json, "{\"entity\":\"cell-1\",\"measure\":\"rate\"}");
  ASSERT_EQ(a2pack_logger_data_stream(d, 1, &si), A2PACK_OK);
  EXPECT_EQ(si.flags, static_cast<uint32_t>(A2PACK_LOGGER_SORT));
  EXPECT_STREQ(si.labels_json, "{}");
  EXPECT_EQ(a2pack_logger_data_stream(d, 2, &si), A2PACK_E_OUT_OF_RANGE);
  a2pack_logger_data_close(d);

  EXPECT_EQ(a2pack_logger_finish(lg), A2PACK_OK);
  EXPECT_EQ(a2pack_logger_finish(lg), A2PACK_OK);  // idempotent
  EXPECT_EQ(a2pack_logger_record(lg, a, 9.0, idx, val, 3), A2PACK_E_CLOSED);
  EXPECT_EQ(a2pack_logger_flush(lg), A2PACK_E_CLOSED);
  EXPECT_EQ(a2pack_logger_close(lg), A2PACK_OK);
  EXPECT_EQ(a2pack_logger_close(nullptr), A2PACK_OK);
}

TEST(CapiLogger, BadInputNamesTheProblem) {
  Dir dir;
  a2pack_logger* lg = open_logger(dir.path);
  uint32_t s;
  EXPECT_EQ(a2pack_logger_register_stream(lg, "{}", 0.0, 1.0, 0, &s), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("epoch_scale"), std::string::npos);
  EXPECT_EQ(a2pack_logger_register_stream(lg, "{}", 1.0, NAN, 0, &s), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_logger_register_stream(lg, "not json", 1.0, 1.0, 0, &s),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_logger_register_stream(lg, "{}", 1.0, 1.0, 0, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  ASSERT_EQ(a2pack_logger_register_stream(lg, "{}", 1.0, 1e-3, 0, &s), A2PACK_OK);
  uint32_t idx[] = {1, 2};
  double nanv[] = {1.0, NAN};
  double big[] = {1.0, 1e300};
  uint32_t rev[] = {2, 1};
  double ok[] = {1.0, 2.0};
  EXPECT_EQ(a2pack_logger_record(lg, s, 0, idx, nanv, 2), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("values[1] is NaN"), std::string::npos)
      << a2pack_last_error();
  EXPECT_EQ(a2pack_logger_record(lg, s, 0, idx, big, 2), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(a2pack_logger_record(lg, s, 0, rev, ok, 2), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("strictly increasing"), std::string::npos);
  EXPECT_EQ(a2pack_logger_record(lg, 42, 0, idx, ok, 2), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("stream 42 is not registered"), std::string::npos);
  EXPECT_EQ(a2pack_logger_record(lg, s, INFINITY, idx, ok, 2), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_logger_record(nullptr, s, 0, idx, ok, 2), A2PACK_E_INVALID_ARGUMENT);
  // A batch stops at the bad record: the one before it is kept.
  uint32_t sids[] = {s, s, s};
  double ep[] = {1, 2, 3};
  uint64_t off[] = {0, 2, 4, 6};
  uint32_t bi[] = {1, 2, 2, 1, 1, 2};
  double bv[] = {1, 2, 3, 4, 5, 6};
  size_t done = 7;
  EXPECT_EQ(a2pack_logger_record_batch(lg, 3, sids, ep, off, bi, bv, &done),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(done, 1u);
  EXPECT_NE(std::string(a2pack_last_error()).find("record 1 of the batch"), std::string::npos);
  EXPECT_EQ(a2pack_logger_close(lg), A2PACK_OK);

  a2pack_logger_data* d = decode(dir.path);
  EXPECT_EQ(columns(d).n_records, 1u);
  a2pack_logger_data_close(d);

  a2pack_logger_options o;
  a2pack_logger_options_init(&o);
  o.frame_bytes = 10;
  a2pack_logger* bad = nullptr;
  EXPECT_EQ(a2pack_logger_open(dir.path.c_str(), &o, &bad), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  a2pack_logger_options_init(&o);
  o.when_full = 7;
  EXPECT_EQ(a2pack_logger_open(dir.path.c_str(), &o, &bad), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_logger_open(nullptr, nullptr, &bad), A2PACK_E_INVALID_ARGUMENT);
  a2pack_logger_data* none = nullptr;
  EXPECT_EQ(a2pack_logger_decode((dir.path + "/missing").c_str(), nullptr, &none),
            A2PACK_E_NOT_FOUND);
}

TEST(CapiLogger, TornTailIsReportedWithFileAndOffset) {
  Dir dir;
  a2pack_logger_options o;
  a2pack_logger_options_init(&o);
  o.frame_bytes = 4096;
  a2pack_logger* lg = open_logger(dir.path, &o);
  uint32_t s;
  ASSERT_EQ(a2pack_logger_register_stream(lg, "{}", 1.0, 1.0, 0, &s), A2PACK_OK);
  std::vector<uint32_t> idx(30);
  std::vector<double> val(30);
  for (int r = 0; r < 2000; ++r) {
    for (int k = 0; k < 30; ++k) {
      idx[k] = static_cast<uint32_t>(k * 7 + r % 3);
      val[k] = r * 31 + k;
    }
    ASSERT_EQ(a2pack_logger_record(lg, s, r, idx.data(), val.data(), 30), A2PACK_OK);
  }
  ASSERT_EQ(a2pack_logger_close(lg), A2PACK_OK);
  std::string seg = dir.path + "/segments/00000.seg.zst";
  auto size = std::filesystem::file_size(seg);
  std::filesystem::resize_file(seg, size - 100);  // tear the last frame
  a2pack_logger_data* d = decode(dir.path);
  a2pack_logger_summary sum = summary(d);
  ASSERT_EQ(sum.problems, 1u);
  EXPECT_LT(sum.records, 2000u);
  EXPECT_GT(sum.records, 1000u);
  a2pack_logger_problem p;
  p.size = sizeof p;
  ASSERT_EQ(a2pack_logger_data_problem(d, 0, &p), A2PACK_OK);
  EXPECT_EQ(std::string(p.path), seg);
  EXPECT_GT(p.offset, 0u);
  EXPECT_NE(std::string(p.message).find("truncated"), std::string::npos) << p.message;
  EXPECT_EQ(a2pack_logger_data_problem(d, 1, &p), A2PACK_E_OUT_OF_RANGE);
  // Every record that decoded is intact.
  a2pack_logger_columns c = columns(d);
  for (size_t r = 0; r < c.n_records; ++r) {
    EXPECT_EQ(c.epochs[r], static_cast<double>(r));
    EXPECT_EQ(c.values[c.offsets[r]], static_cast<double>(r * 31));
  }
  a2pack_logger_data_close(d);
  a2pack_logger_data* strict = nullptr;
  a2pack_logger_decode_options so;
  a2pack_logger_decode_options_init(&so);
  so.strict = 1;
  EXPECT_EQ(a2pack_logger_decode(dir.path.c_str(), &so, &strict), A2PACK_E_CORRUPT);
  EXPECT_NE(std::string(a2pack_last_error()).find(seg), std::string::npos);
}

TEST(CapiLogger, FullModeAndManyThreads) {
  Dir dir;
  a2pack_logger_options o;
  a2pack_logger_options_init(&o);
  o.frame_bytes = 4096;
  o.ring_bytes = 8192;
  o.zstd_level = 19;
  o.when_full = A2PACK_LOGGER_RETURN_FULL;
  a2pack_logger* lg = open_logger(dir.path, &o);
  uint32_t s;
  ASSERT_EQ(a2pack_logger_register_stream(lg, "{}", 1.0, 1e-6, 0, &s), A2PACK_OK);
  const int kThreads = 4, kPer = 3000;
  std::vector<std::thread> th;
  std::vector<int> fulls(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    th.emplace_back([&, t] {
      uint32_t idx[8];
      double val[8];
      for (int i = 0; i < kPer; ++i) {
        for (int k = 0; k < 8; ++k) {
          idx[k] = static_cast<uint32_t>(k * 100 + (i * 7 + t) % 97);
          val[k] = std::sin(i * 0.1 + k + t);
        }
        for (;;) {
          a2pack_status st = a2pack_logger_record(lg, s, t * kPer + i, idx, val, 8);
          if (st == A2PACK_OK) break;
          ASSERT_EQ(st, A2PACK_E_FULL) << a2pack_last_error();
          ++fulls[t];
          std::this_thread::yield();
        }
      }
    });
  for (auto& x : th) x.join();
  ASSERT_EQ(a2pack_logger_close(lg), A2PACK_OK);
  a2pack_logger_data* d = decode(dir.path);
  EXPECT_EQ(columns(d).n_records, static_cast<size_t>(kThreads * kPer));
  a2pack_logger_data_close(d);
}

TEST(CapiLogger, ApiTableHasTheLoggerSection) {
  const a2pack_api_table* api = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(api, nullptr);
  ASSERT_NE(api->logger, nullptr);
  EXPECT_EQ(api->logger->size, sizeof(a2pack_logger_api));
  EXPECT_EQ(api->logger->open, &a2pack_logger_open);
  EXPECT_EQ(api->logger->record_batch, &a2pack_logger_record_batch);
  EXPECT_EQ(api->logger->data_close, &a2pack_logger_data_close);
}

namespace {

// The Literals_Block_Type (RFC 8878 §3.1.1.3.1.1: 0 raw, 1 RLE, 2 Huffman,
// 3 treeless Huffman) of every compressed zstd block in a segment, read by
// walking the segment's block headers (8 bytes + the skippable frame's
// content size; markers have no zstd frame) and each zstd frame's block headers.
std::vector<int> literal_block_types(const std::string& segment) {
  std::vector<uint8_t> b;
  if (FILE* f = std::fopen(segment.c_str(), "rb")) {
    int c;
    while ((c = std::fgetc(f)) != EOF) b.push_back(static_cast<uint8_t>(c));
    std::fclose(f);
  }
  auto u32 = [&](size_t at) {
    return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8 | uint32_t(b[at + 2]) << 16 |
           uint32_t(b[at + 3]) << 24;
  };
  std::vector<int> types;
  for (size_t at = 0; at + 40 <= b.size();) {
    const size_t hs = 8 + u32(at + 4);
    const size_t len = u32(at + 16), end = at + hs + len;
    if (len == 0) {  // a marker: a header alone
      at = end;
      continue;
    }
    size_t p = at + hs + 4;  // past the zstd magic
    const uint8_t fhd = b[p++];
    const int fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, dict = fhd & 3;
    p += single ? 0 : 1;
    p += dict == 0 ? 0 : dict == 1 ? 1 : dict == 2 ? 2 : 4;
    p += fcs_flag == 0 ? (single ? 1 : 0) : fcs_flag == 1 ? 2 : fcs_flag == 2 ? 4 : 8;
    for (bool last = false; !last && p + 3 <= end;) {
      const uint32_t h = uint32_t(b[p]) | uint32_t(b[p + 1]) << 8 | uint32_t(b[p + 2]) << 16;
      last = h & 1;
      const uint32_t type = (h >> 1) & 3, size = h >> 3;
      p += 3;
      if (type == 2) types.push_back(b[p] & 3);
      p += type == 1 ? 1 : size;
    }
    at = end;
  }
  return types;
}

// Record values from a skewed alphabet that Huffman coding shrinks but that
// repeat too rarely for zstd's matches, into a fresh logger with `opts`.
std::vector<int> literals_written(a2pack_logger_options* opts, uint64_t* file_bytes) {
  Dir dir;
  a2pack_logger* lg = open_logger(dir.path, opts);
  uint32_t sid = 0;
  EXPECT_EQ(a2pack_logger_register_stream(lg, nullptr, 1.0, 1.0, 0, &sid), A2PACK_OK);
  uint64_t x = 12345;
  std::vector<uint32_t> idx(32);
  std::vector<double> val(32);
  for (int r = 0; r < 4000; ++r) {
    for (uint32_t i = 0; i < 32; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      idx[i] = i * 3;
      val[i] = static_cast<double>((x >> 33) % 7 == 0 ? (x >> 40) % 5000 : (x >> 40) % 40);
    }
    EXPECT_EQ(a2pack_logger_record(lg, sid, r, idx.data(), val.data(), idx.size()), A2PACK_OK);
  }
  a2pack_logger_stats st;
  st.size = sizeof st;
  EXPECT_EQ(a2pack_logger_close(lg), A2PACK_OK) << a2pack_last_error();
  a2pack_logger_data* d = decode(dir.path);
  EXPECT_EQ(columns(d).n_records, 4000u);
  a2pack_logger_data_close(d);
  *file_bytes = std::filesystem::file_size(dir.path + "/segments/00000.seg.zst");
  return literal_block_types(dir.path + "/segments/00000.seg.zst");
}

}  // namespace

TEST(CapiLogger, LiteralsAreStoredRawUnlessAskedToCompress) {
  a2pack_logger_options o;
  a2pack_logger_options_init(&o);
  EXPECT_EQ(o.compress_literals, 0u);
  uint64_t raw_bytes = 0, huff_bytes = 0;
  std::vector<int> raw = literals_written(&o, &raw_bytes);
  ASSERT_FALSE(raw.empty());
  for (int t : raw) EXPECT_LE(t, 1) << "a Huffman literals section in a default frame";

  o.compress_literals = 1;
  std::vector<int> huff = literals_written(&o, &huff_bytes);
  ASSERT_FALSE(huff.empty());
  size_t huffman = 0;
  for (int t : huff) huffman += t >= 2;
  EXPECT_GT(huffman, 0u);
  EXPECT_LT(huff_bytes, raw_bytes);  // what the option buys

  o.compress_literals = 2;
  a2pack_logger* lg = nullptr;
  Dir dir;
  EXPECT_EQ(a2pack_logger_open(dir.path.c_str(), &o, &lg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("compress_literals"), std::string::npos);
  EXPECT_EQ(lg, nullptr);
}

// Decode limits through the option struct (old callers' smaller
// structs keep the defaults), notes and missing segments through the
// problem struct.
TEST(CapiLogger, LimitsNotesAndMissingSegments) {
  Dir dir;
  a2pack_logger_options lo;
  a2pack_logger_options_init(&lo);
  lo.frame_bytes = 4096;
  lo.rotate_bytes = 8192;
  a2pack_logger* lg = open_logger(dir.path, &lo);
  uint32_t sid = 0;
  ASSERT_EQ(a2pack_logger_register_stream(lg, "{}", 1.0, 0.5, 0, &sid), A2PACK_OK);
  for (uint32_t i = 0; i < 4000; ++i) {
    uint32_t idx[2] = {i % 9, 100 + i};
    double val[2] = {0.5 * i, -1.0 * (i % 1000)};
    ASSERT_EQ(a2pack_logger_record(lg, sid, i, idx, val, 2), A2PACK_OK);
  }
  ASSERT_EQ(a2pack_logger_close(lg), A2PACK_OK);
  ASSERT_TRUE(std::filesystem::exists(dir.path + "/segments/00002.seg.zst"));

  // An old caller's struct (size up to `strict`) decodes with the defaults.
  a2pack_logger_decode_options o;
  a2pack_logger_decode_options_init(&o);
  o.size = offsetof(a2pack_logger_decode_options, max_frame_records);
  a2pack_logger_data* d = nullptr;
  ASSERT_EQ(a2pack_logger_decode(dir.path.c_str(), &o, &d), A2PACK_OK) << a2pack_last_error();
  EXPECT_EQ(summary(d).records, 4000u);
  a2pack_logger_data_close(d);

  a2pack_logger_decode_options_init(&o);
  o.max_records = 100;
  ASSERT_EQ(a2pack_logger_decode(dir.path.c_str(), &o, &d), A2PACK_OK) << a2pack_last_error();
  auto s = summary(d);
  EXPECT_LE(s.records, 100u);
  ASSERT_EQ(s.problems, 1u);
  EXPECT_EQ(s.notes, 0u);
  a2pack_logger_problem p;
  p.size = sizeof p;
  ASSERT_EQ(a2pack_logger_data_problem(d, 0, &p), A2PACK_OK);
  EXPECT_EQ(p.status, A2PACK_E_OUT_OF_RANGE);
  EXPECT_NE(std::strstr(p.message, "max_records"), nullptr) << p.message;
  EXPECT_EQ(p.note, 0u);
  a2pack_logger_data_close(d);
  o.strict = 1;
  EXPECT_EQ(a2pack_logger_decode(dir.path.c_str(), &o, &d), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(d, nullptr);

  // Segment 1 emptied: a note; segment 0 removed: a problem naming it.
  { FILE* f = std::fopen((dir.path + "/segments/00001.seg.zst").c_str(), "w"); std::fclose(f); }
  d = decode(dir.path);
  s = summary(d);
  ASSERT_EQ(s.problems, 1u);
  EXPECT_EQ(s.notes, 1u);
  ASSERT_EQ(a2pack_logger_data_problem(d, 0, &p), A2PACK_OK);
  EXPECT_EQ(p.note, 1u);
  EXPECT_EQ(p.status, A2PACK_OK);
  a2pack_logger_data_close(d);
  std::filesystem::remove(dir.path + "/segments/00000.seg.zst");
  d = decode(dir.path);
  s = summary(d);
  ASSERT_EQ(s.problems, 2u);
  ASSERT_EQ(a2pack_logger_data_problem(d, 0, &p), A2PACK_OK);
  EXPECT_EQ(p.status, A2PACK_E_NOT_FOUND);
  EXPECT_NE(std::strstr(p.path, "00000.seg.zst"), nullptr) << p.path;
  a2pack_logger_data_close(d);
  a2pack_logger_decode_options_init(&o);
  o.strict = 1;
  EXPECT_EQ(a2pack_logger_decode(dir.path.c_str(), &o, &d), A2PACK_E_NOT_FOUND);
  EXPECT_NE(std::strstr(a2pack_last_error(), "00000.seg.zst"), nullptr) << a2pack_last_error();
}
