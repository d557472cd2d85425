// Data logger, second hardening pass:
// sidecar checksums, gaps in segment numbering, forged frame counts, decode
// limits, and segments in the single-folder one-frame-per-record layout.
#include <gtest/gtest.h>

#include <zstd.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/varint.hpp"
#include "logger/decoder.hpp"
#include "logger/logger.hpp"
#include "logger/segment.hpp"
#include "test_logger_util.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::logger;
namespace fs = std::filesystem;

namespace {

// Record i of stream s: epoch i, non-zeros exactly representable at scale 0.5.
void fill(uint32_t s, uint64_t i, std::vector<uint32_t>& idx, std::vector<double>& val) {
  idx.clear();
  val.clear();
  size_t n = (i * 7 + s) % 11;
  for (size_t k = 0; k < n; ++k) {
    idx.push_back(static_cast<uint32_t>(k * 3 + i % 5));
    val.push_back(static_cast<double>(static_cast<int64_t>(i * 31 + k) - 50) * 0.5);
  }
}

// Two streams, `n` records each, small frames and segments: many of both.
void write_log(const std::string& dir, uint64_t n, uint64_t rotate = 1 << 30) {
  Options o;
  o.frame_bytes = 4096;
  o.rotate_bytes = rotate;
  Logger lg(dir, o);
  uint32_t a = lg.register_stream("{\"name\":\"a\"}", 1.0, 0.5, 0);
  uint32_t b = lg.register_stream("{\"name\":\"b\"}", 1.0, 0.5, 0);
  std::vector<uint32_t> idx;
  std::vector<double> val;
  for (uint64_t i = 0; i < n; ++i)
    for (uint32_t s : {a, b}) {
      fill(s, i, idx, val);
      lg.record(s, static_cast<double>(i), idx.data(), val.data(), idx.size());
    }
  lg.close();
}

// Records of stream s in d, checked against fill(); returns their epochs.
std::vector<uint64_t> epochs_of(const Decoded& d, uint32_t s) {
  std::vector<uint64_t> out;
  std::vector<uint32_t> idx;
  std::vector<double> val;
  for (size_t r = 0; r < d.n_records(); ++r) {
    if (d.stream_ids[r] != s) continue;
    uint64_t i = static_cast<uint64_t>(d.epochs[r]);
    fill(s, i, idx, val);
    size_t a = d.offsets[r], b = d.offsets[r + 1];
    EXPECT_EQ(b - a, idx.size()) << "record " << r;
    for (size_t k = 0; k < idx.size() && k < b - a; ++k) {
      EXPECT_EQ(d.indices[a + k], idx[k]);
      EXPECT_EQ(d.values[a + k], val[k]);
    }
    out.push_back(i);
  }
  return out;
}

std::vector<uint64_t> iota(uint64_t n) {
  std::vector<uint64_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::string slurp(const std::string& path) {
  auto b = a2test::read_bytes(path);
  return std::string(b.begin(), b.end());
}

void spit(const std::string& path, const std::string& s) {
  a2test::write_bytes(path, s.data(), s.size());
}

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

std::string seg(const std::string& dir, uint32_t k) {
  return dir + "/segments/" + segment_name(k);
}

}  // namespace

// ------------------------------------------------ 1. sidecar integrity

TEST(LoggerSidecar, FlippedScaleBitIsAProblemNamingTheFileNotARescale) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 300);
  std::string path = tmp / "streams/1.json", text = slurp(path);
  ASSERT_TRUE(has(text, "\"scales_crc32c\"")) << text;
  // One flipped bit in the text of a scale: 0.5 -> 0.4 ('5' 0x35 -> '4' 0x34).
  size_t at = text.find("\"value_scale\": 0.5");
  ASSERT_NE(at, std::string::npos) << text;
  text[at + std::strlen("\"value_scale\": 0.")] ^= 0x01;
  spit(path, text);
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_EQ(epochs_of(d, 0), iota(300));  // the other stream is intact
  EXPECT_TRUE(epochs_of(d, 1).empty());   // nothing decoded at a wrong scale
  ASSERT_GE(d.problems.size(), 1u);
  EXPECT_EQ(d.problems[0].path, path);
  EXPECT_EQ(d.problems[0].status, A2PACK_E_CHECKSUM);
  EXPECT_TRUE(has(d.problems[0].message, "scales_crc32c mismatch")) << d.problems[0].message;
  DecodeOptions strict;
  strict.strict = true;
  try {
    decode_dir(tmp.path(), strict);
    FAIL() << "strict decode passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_CHECKSUM);
    EXPECT_TRUE(has(e.what(), path)) << e.what();
  }
  // Reopening the folder for writing refuses the damaged sidecar, naming it.
  try {
    Logger lg(tmp.path(), Options{});
    FAIL() << "reopened with a damaged sidecar";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), path)) << e.what();
  }
}

TEST(LoggerSidecar, EveryFieldThatSteersDecodingIsCovered) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 10);
  std::string path = tmp / "streams/0.json";
  const auto clean = nlohmann::json::parse(slurp(path));
  for (const char* field : {"epoch_scale", "value_scale", "sort", "stream_id"}) {
    auto doc = clean;
    if (std::string(field) == "sort")
      doc[field] = true;
    else if (std::string(field) == "stream_id")
      continue;  // checked against the file name already
    else
      doc[field] = doc[field].get<double>() * 2;
    spit(path, doc.dump(2));
    Decoded d = decode_dir(tmp.path(), {});
    ASSERT_FALSE(d.problems.empty()) << field;
    EXPECT_EQ(d.problems[0].status, A2PACK_E_CHECKSUM) << field;
    EXPECT_TRUE(epochs_of(d, 0).empty()) << field;
  }
  // A sidecar written before the check (no scales_crc32c) still decodes.
  auto old = clean;
  old.erase("scales_crc32c");
  spit(path, old.dump(2));
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_TRUE(d.problems.empty());
  EXPECT_EQ(epochs_of(d, 0), iota(10));
  // A checksum that is not a u32 is malformed, not ignored.
  auto bad = clean;
  bad["scales_crc32c"] = "x";
  spit(path, bad.dump(2));
  d = decode_dir(tmp.path(), {});
  ASSERT_FALSE(d.problems.empty());
  EXPECT_EQ(d.problems[0].status, A2PACK_E_CORRUPT);
  EXPECT_EQ(scales_crc(0, StreamInfo{1.0, 0.5, 0}), scales_crc(0, StreamInfo{1.0, 0.5, 0}));
  EXPECT_NE(scales_crc(0, StreamInfo{1.0, 0.5, 0}), scales_crc(1, StreamInfo{1.0, 0.5, 0}));
}

// ------------------------------------------------ 2. missing and emptied segments

TEST(LoggerSegments, AMissingSegmentIsAProblemNamingIt) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 4000, 16 << 10);
  auto ids = list_segments(tmp / "segments");
  ASSERT_GE(ids.size(), 4u);
  Decoded full = decode_dir(tmp.path(), {});
  ASSERT_TRUE(full.problems.empty());
  fs::remove(seg(tmp.path(), 0));
  fs::remove(seg(tmp.path(), 2));
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 2u);
  EXPECT_EQ(d.problems[0].path, seg(tmp.path(), 0));
  EXPECT_EQ(d.problems[1].path, seg(tmp.path(), 2));
  for (const auto& p : d.problems) {
    EXPECT_EQ(p.status, A2PACK_E_NOT_FOUND);
    EXPECT_FALSE(p.note);
    EXPECT_TRUE(has(p.message, "is missing")) << p.message;
  }
  EXPECT_LT(d.n_records(), full.n_records());
  EXPECT_GT(d.n_records(), 0u);
  DecodeOptions strict;
  strict.strict = true;
  try {
    decode_dir(tmp.path(), strict);
    FAIL() << "strict decode passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_NOT_FOUND);
    EXPECT_TRUE(has(e.what(), "00000.seg.zst")) << e.what();
  }
}

TEST(LoggerSegments, ARunOfMissingSegmentsIsOneProblem) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 4000, 16 << 10);
  ASSERT_GE(list_segments(tmp / "segments").size(), 5u);
  for (uint32_t k : {1u, 2u, 3u}) fs::remove(seg(tmp.path(), k));
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_EQ(d.problems[0].path, seg(tmp.path(), 1));
  EXPECT_TRUE(has(d.problems[0].message, "00001.seg.zst to 00003.seg.zst (3) are missing"))
      << d.problems[0].message;
}

TEST(LoggerSegments, AnEmptySegmentFollowedByOthersIsANote) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 10);
  // A crash right after creating segment 1, then a reopen that writes 2.
  spit(seg(tmp.path(), 1), "");
  {
    Logger lg(tmp.path(), Options{});
    uint32_t i = 1;
    double v = 1.5;
    lg.record(0, 10.0, &i, &v, 1);
  }
  ASSERT_TRUE(fs::exists(seg(tmp.path(), 2)));
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_TRUE(d.problems[0].note);
  EXPECT_EQ(d.problems[0].status, A2PACK_OK);
  EXPECT_EQ(d.problems[0].path, seg(tmp.path(), 1));
  EXPECT_EQ(d.n_records(), 21u);
  DecodeOptions strict;
  strict.strict = true;
  EXPECT_THROW(decode_dir(tmp.path(), strict), Error);
  // An empty newest segment (a logger about to write) is no problem at all.
  fs::remove(seg(tmp.path(), 2));
  d = decode_dir(tmp.path(), {});
  EXPECT_TRUE(d.problems.empty());
}

// ------------------------------------------------ 3. forged frame counts

namespace {

// Rewrite the header of frame `k` of a segment through `edit`, recomputing
// its header CRC (and, when asked, the payload CRC), as a forger would.
void forge(const std::string& path, size_t k, const std::function<void(BlockHeader&)>& edit) {
  auto bytes = a2test::read_bytes(path);
  std::vector<FrameRef> frames;
  std::vector<Problem> problems;
  scan_segment(bytes.data(), bytes.size(), path, 0, frames, problems);
  ASSERT_GT(frames.size(), k);
  BlockHeader h = frames[k].header;
  edit(h);
  write_header(bytes.data() + frames[k].offset, h);
  a2test::write_bytes(path, bytes.data(), bytes.size());
}

}  // namespace

TEST(LoggerForged, HugeCountsWithGoodCrcsSkipOnlyThatFrame) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 2000, 16 << 10);
  ASSERT_GE(list_segments(tmp / "segments").size(), 2u);
  Decoded full = decode_dir(tmp.path(), {});
  // raw_len 2 GiB, 715 M records: a frame forged to claim the most it can.
  forge(seg(tmp.path(), 0), 1, [](BlockHeader& h) {
    h.raw_len = 1u << 31;
    h.n_records = 715'000'000;
    h.n_values = 1'000'000'000;
  });
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Under an address-space limit (a container's memory limit) the decoder
  // must not reserve columns for the claimed counts: before the fix this
  // failed with std::bad_alloc ("out of memory", no file named).
  EXPECT_EQ(a2test::decode_under_address_limit(
                tmp.path(), uint64_t{3} << 30, [](const Decoded& d) { return d.problems.size() == 1 && d.n_records() > 0; }),
            0);
#endif
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_EQ(d.problems[0].path, seg(tmp.path(), 0));
  EXPECT_GT(d.problems[0].offset, 0u);
  EXPECT_TRUE(has(d.problems[0].message, "content size")) << d.problems[0].message;
  EXPECT_EQ(d.bad_frames, 1u);
  EXPECT_GT(d.n_records(), full.n_records() / 2);
  // Every other frame, the intact segments included, decodes.
  auto a = epochs_of(d, 0);
  EXPECT_EQ(a.back(), 1999u);
}

TEST(LoggerForged, CountsThatLieWithinTheFrameAreCaughtByTheParse) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 2000);
  // raw_len stays true (it matches zstd's content size); the counts claim
  // as much as raw_len allows.
  forge(seg(tmp.path(), 0), 2, [](BlockHeader& h) {
    h.n_records = h.raw_len / 3;
    h.n_values = h.raw_len / 2;
  });
  for (uint64_t window : {uint64_t{512} << 20, uint64_t{1}, uint64_t{64} << 10}) {
    DecodeOptions o;
    o.window_bytes = window;
    Decoded d = decode_dir(tmp.path(), o);
    ASSERT_EQ(d.problems.size(), 1u) << window;
    EXPECT_EQ(d.problems[0].path, seg(tmp.path(), 0));
    EXPECT_TRUE(has(d.problems[0].message, "frame skipped")) << d.problems[0].message;
    // The columns hold what the good frames held, nothing of the claim.
    EXPECT_EQ(d.offsets.size(), d.n_records() + 1);
    EXPECT_EQ(d.offsets.back(), d.indices.size());
    auto a = epochs_of(d, 0), b = epochs_of(d, 1);
    EXPECT_EQ(a.back(), 1999u);
    EXPECT_EQ(b.back(), 1999u);
    EXPECT_LT(a.size() + b.size(), 4000u);
  }
}

TEST(LoggerForged, WindowsGiveTheSameColumns) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 3000, 64 << 10);
  Decoded one = decode_dir(tmp.path(), {});
  DecodeOptions o;
  o.window_bytes = 1;  // one frame per window
  Decoded many = decode_dir(tmp.path(), o);
  ASSERT_EQ(one.n_records(), many.n_records());
  EXPECT_EQ(std::vector<uint32_t>(one.stream_ids.begin(), one.stream_ids.end()),
            std::vector<uint32_t>(many.stream_ids.begin(), many.stream_ids.end()));
  EXPECT_EQ(std::vector<uint64_t>(one.offsets.begin(), one.offsets.end()),
            std::vector<uint64_t>(many.offsets.begin(), many.offsets.end()));
  EXPECT_EQ(std::vector<double>(one.values.begin(), one.values.end()),
            std::vector<double>(many.values.begin(), many.values.end()));
  EXPECT_EQ(epochs_of(many, 0), iota(3000));
}

// ------------------------------------------------ 4. limits

TEST(LoggerLimits, PerFrameLimitsSkipTheFrameNamingTheLimit) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 2000);
  std::vector<FrameRef> frames;
  std::vector<Problem> ps;
  auto bytes = a2test::read_bytes(seg(tmp.path(), 0));
  scan_segment(bytes.data(), bytes.size(), "x", 0, frames, ps);
  ASSERT_GE(frames.size(), 3u);
  uint32_t max_recs = 0, max_raw = 0;
  for (auto& f : frames) {
    max_recs = std::max(max_recs, f.header.n_records);
    max_raw = std::max(max_raw, f.header.raw_len);
  }
  DecodeOptions o;
  o.max_frame_records = max_recs - 1;
  Decoded d = decode_dir(tmp.path(), o);
  ASSERT_FALSE(d.problems.empty());
  EXPECT_EQ(d.problems[0].path, seg(tmp.path(), 0));
  EXPECT_EQ(d.problems[0].status, A2PACK_E_OUT_OF_RANGE);
  EXPECT_TRUE(has(d.problems[0].message, "max_frame_records")) << d.problems[0].message;
  EXPECT_TRUE(has(d.problems[0].message, std::to_string(max_recs - 1)));
  EXPECT_GT(d.n_records(), 0u);
  o = DecodeOptions{};
  o.max_frame_bytes = max_raw - 1;
  d = decode_dir(tmp.path(), o);
  ASSERT_FALSE(d.problems.empty());
  EXPECT_TRUE(has(d.problems[0].message, "max_frame_bytes")) << d.problems[0].message;
  o.strict = true;
  EXPECT_THROW(decode_dir(tmp.path(), o), Error);
}

TEST(LoggerLimits, PerDecodeLimitsKeepAPrefixAndNameTheFrame) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 2000);
  Decoded full = decode_dir(tmp.path(), {});
  DecodeOptions o;
  o.max_records = 1000;
  Decoded d = decode_dir(tmp.path(), o);
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_EQ(d.problems[0].path, seg(tmp.path(), 0));
  EXPECT_GT(d.problems[0].offset, 0u);
  EXPECT_TRUE(has(d.problems[0].message, "decode limit reached")) << d.problems[0].message;
  EXPECT_TRUE(has(d.problems[0].message, "max_records")) << d.problems[0].message;
  EXPECT_LE(d.n_records(), 1000u);
  EXPECT_GT(d.n_records(), 0u);
  // A prefix: the first records of the full decode.
  for (size_t r = 0; r < d.n_records(); ++r) {
    ASSERT_EQ(d.stream_ids[r], full.stream_ids[r]);
    ASSERT_EQ(d.epochs[r], full.epochs[r]);
  }
  o = DecodeOptions{};
  o.max_bytes = full.raw_bytes / 2;
  d = decode_dir(tmp.path(), o);
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_TRUE(has(d.problems[0].message, "max_bytes")) << d.problems[0].message;
  EXPECT_LE(d.raw_bytes, full.raw_bytes / 2);
  o.max_bytes = full.raw_bytes;  // exactly enough
  d = decode_dir(tmp.path(), o);
  EXPECT_TRUE(d.problems.empty());
  EXPECT_EQ(d.n_records(), full.n_records());
}

// ------------------------------------------------ 5. the single-folder layout

namespace {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// The single-folder layout's reference writer: one zstd frame per record,
// the varint records of docs/formats.md, epoch deltas against the stream's
// previous record in the run.
struct FlatWriter {
  std::map<uint32_t, int64_t> last;
  bool streaming = false;  // frames without a content size
  std::string record(uint32_t sid, int64_t tick, const std::vector<uint32_t>& idx,
                     const std::vector<int64_t>& q) {
    std::string raw;
    put_varint(raw, sid);
    put_varint(raw, varint::zigzag_encode(tick - last[sid]));
    last[sid] = tick;
    put_varint(raw, idx.size());
    for (size_t k = 0; k < idx.size(); ++k) put_varint(raw, k ? idx[k] - idx[k - 1] - 1 : idx[0]);
    for (int64_t v : q) put_varint(raw, varint::zigzag_encode(v));
    std::string out(ZSTD_compressBound(raw.size()) + 64, '\0');
    size_t n;
    if (!streaming) {
      n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 1);
    } else {
      ZSTD_CCtx* c = ZSTD_createCCtx();
      ZSTD_outBuffer ob{out.data(), out.size(), 0};
      ZSTD_inBuffer ib{raw.data(), raw.size(), 0};
      ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_continue);
      while (ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_end) != 0) {
      }
      ZSTD_freeCCtx(c);
      n = ob.pos;
    }
    EXPECT_FALSE(ZSTD_isError(n));
    out.resize(n);
    return out;
  }
};

void flat_sidecar(const std::string& dir, uint32_t id, double es, double vs) {
  fs::create_directories(dir + "/streams");
  nlohmann::json j = {{"stream_id", id},
                      {"epoch_scale", es},
                      {"value_scale", vs},
                      {"labels", {{"entity", "cell-" + std::to_string(id)}}}};
  spit(fmt::format("{}/streams/{}.json", dir, id), j.dump());
}

// Records (stream s, record i): tick 3i + s, non-zeros k*2+i%3 = i - k.
void flat_rec(uint32_t s, uint64_t i, std::vector<uint32_t>& idx, std::vector<int64_t>& q) {
  idx.clear();
  q.clear();
  for (uint32_t k = 0; k < (i + s) % 6; ++k) {
    idx.push_back(k * 2 + static_cast<uint32_t>(i % 3));
    q.push_back(static_cast<int64_t>(i) - k);
  }
}

// Segments `segs` of `per` records per stream each, two streams, single-folder layout.
void write_flat(const std::string& dir, int segs, int per, bool streaming = false) {
  flat_sidecar(dir, 0, 0.001, 0.5);
  flat_sidecar(dir, 1, 0.25, 0.001);
  FlatWriter w;
  w.streaming = streaming;
  std::vector<uint32_t> idx;
  std::vector<int64_t> q;
  uint64_t i = 0;
  for (int sgi = 0; sgi < segs; ++sgi) {
    std::string bytes;
    for (int r = 0; r < per; ++r, ++i)
      for (uint32_t s : {0u, 1u}) {
        flat_rec(s, i, idx, q);
        bytes += w.record(s, static_cast<int64_t>(3 * i + s), idx, q);
      }
    spit(dir + "/" + segment_name(static_cast<uint32_t>(sgi)), bytes);
  }
}

void expect_flat_records(const Decoded& d, uint64_t first, uint64_t n) {
  ASSERT_EQ(d.n_records(), 2 * n);
  std::vector<uint32_t> idx;
  std::vector<int64_t> q;
  for (uint64_t r = 0; r < 2 * n; ++r) {
    uint32_t s = static_cast<uint32_t>(r % 2);
    uint64_t i = first + r / 2;
    flat_rec(s, i, idx, q);
    ASSERT_EQ(d.stream_ids[r], s);
    double es = s ? 0.25 : 0.001, vs = s ? 0.001 : 0.5;
    EXPECT_NEAR(d.epochs[r], static_cast<double>(3 * i + s) * es, 1e-9) << r;
    ASSERT_EQ(d.offsets[r + 1] - d.offsets[r], idx.size()) << r;
    for (size_t k = 0; k < idx.size(); ++k) {
      EXPECT_EQ(d.indices[d.offsets[r] + k], idx[k]);
      EXPECT_NEAR(d.values[d.offsets[r] + k], static_cast<double>(q[k]) * vs, 1e-12);
    }
  }
}

}  // namespace

TEST(LoggerFlatLayout, OneFramePerRecordSegmentsInTheRunFolderDecode) {
  for (bool streaming : {false, true}) {
    a2test::TempDir tmp;
    write_flat(tmp.path(), 3, 40, streaming);
    Decoded d = decode_dir(tmp.path(), {});
    EXPECT_TRUE(d.problems.empty()) << d.problems[0].message;
    EXPECT_EQ(d.segments, 3u);
    EXPECT_EQ(d.frames, 240u);
    ASSERT_EQ(d.streams.size(), 2u);
    EXPECT_EQ(d.streams[1].labels_json, "{\"entity\":\"cell-1\"}");
    expect_flat_records(d, 0, 120);
    // Epochs as the frame layout scales them: the decimal recorded.
    EXPECT_EQ(d.epochs[2], 0.003);
  }
}

TEST(LoggerFlatLayout, FlatLabelsAndDamageAreHandled) {
  a2test::TempDir tmp;
  write_flat(tmp.path(), 2, 30);
  // A sidecar with its labels at the top level.
  spit(tmp / "streams/0.json",
       "{\"stream_id\":0,\"epoch_scale\":0.001,\"value_scale\":0.5,\"entity\":\"e\"}");
  // A torn last frame of segment 1.
  std::string last = tmp / "00001.seg.zst", b = slurp(last);
  spit(last, b.substr(0, b.size() - 3));
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_EQ(d.streams[0].labels_json, "{\"entity\":\"e\"}");
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_EQ(d.problems[0].path, last);
  EXPECT_TRUE(has(d.problems[0].message, "cut short")) << d.problems[0].message;
  EXPECT_EQ(d.n_records(), 119u);
  // Garbage in the middle of segment 0: skipped up to the next frame.
  write_flat(tmp.path(), 2, 30);
  std::string first = tmp / "00000.seg.zst";
  b = slurp(first);
  b.insert(100, "garbage!");
  spit(first, b);
  d = decode_dir(tmp.path(), {});
  ASSERT_GE(d.problems.size(), 1u);
  EXPECT_EQ(d.problems[0].path, first);
  EXPECT_GE(d.n_records(), 110u);
  // A missing segment is a problem here too.
  write_flat(tmp.path(), 3, 10);
  fs::remove(tmp / "00001.seg.zst");
  d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_TRUE(has(d.problems[0].message, "00001.seg.zst is missing")) << d.problems[0].message;
}

TEST(LoggerFlatLayout, LimitsApply) {
  a2test::TempDir tmp;
  write_flat(tmp.path(), 2, 50);
  DecodeOptions o;
  o.max_records = 31;
  Decoded d = decode_dir(tmp.path(), o);
  EXPECT_EQ(d.n_records(), 31u);
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_TRUE(has(d.problems[0].message, "max_records")) << d.problems[0].message;
  o = DecodeOptions{};
  o.max_frame_bytes = 4;
  d = decode_dir(tmp.path(), o);
  ASSERT_FALSE(d.problems.empty());
  EXPECT_TRUE(has(d.problems[0].message, "max_frame_bytes")) << d.problems[0].message;
}

// ------------------------------------------------ killed writers

TEST(LoggerSidecar, ReopeningRemovesSidecarTemporariesOfAKilledLogger) {
  a2test::TempDir tmp;
  write_log(tmp.path(), 5);
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // its pid is now dead
  std::string stale = tmp / fmt::format("streams/2.json.tmp-{}-0", child);
  std::string live = tmp / fmt::format("streams/3.json.tmp-{}-0", ::getpid());
  spit(stale, "{\"stream_id\": 2");
  spit(live, "{\"stream_id\": 3");
  { Logger lg(tmp.path(), Options{}); }
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));  // a live process's temporary is not ours to remove
  fs::remove(live);
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_TRUE(d.problems.empty());
}

// ------------------------------------------------ links planted in the folder

// A logger folder whose .lock, segments/ or streams/ someone who can write
// there replaced with a symbolic link: the logger refuses to open it, naming
// the link, and writes nothing through it.
TEST(LoggerLinks, APlantedLockLinkIsRefusedAndItsTargetNeverCreated) {
  for (const char* target : {"missing", "victim"}) {
    a2test::TempDir tmp;
    fs::create_directories(tmp / "log");
    fs::create_directories(tmp / "outside");
    spit(tmp / "outside/victim", "keep");
    const auto before = a2test::tree_snapshot(tmp / "outside");
    fs::create_symlink(tmp / ("outside/" + std::string(target)), tmp / "log/.lock");
    std::string msg;
    EXPECT_EQ(a2test::status_of([&] { Logger lg(tmp / "log", Options{}); }, &msg),
              A2PACK_E_INVALID_ARGUMENT);
    EXPECT_TRUE(has(msg, tmp / "log/.lock") && has(msg, "symbolic link")) << msg;
    EXPECT_EQ(a2test::tree_snapshot(tmp / "outside"), before) << target;
  }
}

TEST(LoggerLinks, LinkedSubfoldersAreRefusedAndNothingIsWrittenThroughThem) {
  for (const char* sub : {"segments", "streams"}) {
    a2test::TempDir tmp;
    fs::create_directories(tmp / "log");
    fs::create_directories(tmp / "outside/folder");
    const auto before = a2test::tree_snapshot(tmp / "outside");
    fs::create_symlink(tmp / "outside/folder", tmp / ("log/" + std::string(sub)));
    std::string msg;
    EXPECT_EQ(a2test::status_of([&] { write_log(tmp / "log", 5); }, &msg),
              A2PACK_E_INVALID_ARGUMENT)
        << sub;
    EXPECT_TRUE(has(msg, tmp / ("log/" + std::string(sub))) && has(msg, "symbolic link")) << msg;
    EXPECT_EQ(a2test::tree_snapshot(tmp / "outside"), before) << sub;
  }
}

TEST(LoggerLinks, SegmentsFolderSwappedForALinkAfterOpeningIsNotWrittenThrough) {
  a2test::TempDir tmp;
  fs::create_directories(tmp / "outside/folder");
  const auto before = a2test::tree_snapshot(tmp / "outside");
  Options o;
  o.frame_bytes = 4096;
  Logger lg(tmp / "log", o);
  uint32_t s = lg.register_stream("{}", 1.0, 0.5, 0);
  fs::rename(tmp / "log/segments", tmp / "log/moved");
  fs::create_symlink(tmp / "outside/folder", tmp / "log/segments");
  std::vector<uint32_t> idx;
  std::vector<double> val;
  for (uint64_t i = 0; i < 50; ++i) {
    fill(s, i, idx, val);
    lg.record(s, static_cast<double>(i), idx.data(), val.data(), idx.size());
  }
  lg.close();
  EXPECT_EQ(a2test::tree_snapshot(tmp / "outside"), before);
  // The segments went into the folder the logger opened, wherever it is now.
  EXPECT_TRUE(fs::exists(tmp / ("log/moved/" + segment_name(0))));
}

TEST(LoggerLinks, AFolderNamedByALinkIsStillALoggerFolder) {
  // The folder the caller names may itself be a link (their choice); only
  // what lies inside it must not be.
  a2test::TempDir tmp;
  fs::create_directories(tmp / "real");
  fs::create_symlink(tmp / "real", tmp / "log");
  write_log(tmp / "log", 5);
  Decoded d = decode_dir(tmp / "real", {});
  EXPECT_TRUE(d.problems.empty());
  EXPECT_EQ(epochs_of(d, 0), iota(5));
}

namespace {

size_t mapped_now() {
  unsigned long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

// Where a process limit leaves room for some of a logger's threads and not
// the rest (each thread's stack is address space), opening it fails with an
// error, or works: never an abort with a thread still running.
TEST(LoggerLimits, ThreadsThatCannotStartAreAnErrorNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan's own allocator, not the library, decides what an exhausted address
  // space does to an allocation (it may end the process itself).
  GTEST_SKIP() << "the address-space limit is ASan's to handle in this build";
#endif
  a2test::TempDir tmp;
  const std::string root = tmp.path();
  int errors = 0, opened = 0;
  for (size_t mib = 0; mib <= 48; mib += 2) {
    const std::string dir = root + "/l" + std::to_string(mib);
    const pid_t pid = ::fork();
    if (pid == 0) {
      rlimit lim{};
      lim.rlim_cur = lim.rlim_max = mapped_now() + (mib << 20);
      if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
      try {
        Options o;
        o.writer_threads = 4;
        Logger lg(dir, o);
        lg.close();
        ::_exit(0);
      } catch (const Error&) {
        ::_exit(1);
      } catch (...) {
        ::_exit(1);  // std::bad_alloc before any thread: also no abort
      }
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << mib << " MiB of headroom: killed by signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    ASSERT_NE(WEXITSTATUS(status), 3);
    (WEXITSTATUS(status) == 0 ? opened : errors) += 1;
  }
  EXPECT_GT(opened, 0);  // with room enough, it works
  // How many fail depends on what the process had mapped and cached before
  // (glibc reuses the stacks of threads that have ended): not asserted.
  (void)errors;
}
