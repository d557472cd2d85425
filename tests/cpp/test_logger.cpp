// Data logger internals: quantisation, the record codec, the segment scanner
// and the writer (round trips, rotation, bad input, backpressure, reopening).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <thread>

#include <zstd.h>

#include "base/error.hpp"
#include "logger/decoder.hpp"
#include "logger/encoder.hpp"
#include "logger/format.hpp"
#include "logger/logger.hpp"
#include "logger/segment.hpp"
#include "test_logger_util.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::logger;
namespace fs = std::filesystem;

namespace {

using a2test::Rec;

// A deterministic sparse vector for (stream, seq): what a test records and
// later expects back.
Rec make_rec(uint32_t stream, uint64_t seq, size_t max_n = 40) {
  std::mt19937_64 rng(stream * 1000003ull + seq);
  Rec r;
  r.stream = stream;
  r.epoch = static_cast<double>(seq) * 0.25 + 1000.0;
  size_t n = rng() % (max_n + 1);
  uint32_t cur = static_cast<uint32_t>(rng() % 50);
  for (size_t i = 0; i < n; ++i) {
    r.idx.push_back(cur);
    cur += 1 + static_cast<uint32_t>(rng() % (i % 7 == 0 ? 5000 : 30));
    std::normal_distribution<double> nd(0.0, i % 3 == 0 ? 1e3 : 1.0);
    r.val.push_back(nd(rng));
  }
  return r;
}

Options small_opts() {
  Options o;
  o.frame_bytes = 4096;
  o.ring_bytes = 1 << 20;
  o.rotate_bytes = 64 << 10;
  o.flush_interval_ms = 20;
  return o;
}

// The records of a decoded folder, as Rec, in file order.
std::vector<Rec> records_of(const Decoded& d) {
  std::vector<Rec> out(d.n_records());
  for (size_t r = 0; r < d.n_records(); ++r) {
    out[r].stream = d.stream_ids[r];
    out[r].epoch = d.epochs[r];
    out[r].idx.assign(d.indices.begin() + d.offsets[r], d.indices.begin() + d.offsets[r + 1]);
    out[r].val.assign(d.values.begin() + d.offsets[r], d.values.begin() + d.offsets[r + 1]);
  }
  return out;
}

void expect_close(const Rec& want, const Rec& got, double es, double vs) {
  ASSERT_EQ(want.stream, got.stream);
  EXPECT_LE(std::fabs(want.epoch - got.epoch), es / 2 * (1 + 1e-9));
  ASSERT_EQ(want.idx, got.idx);
  for (size_t i = 0; i < want.val.size(); ++i)
    ASSERT_LE(std::fabs(want.val[i] - got.val[i]), vs / 2 + std::fabs(want.val[i]) * 1e-15)
        << "value " << i << ": " << want.val[i] << " vs " << got.val[i];
}

void record(Logger& lg, const Rec& r) {
  lg.record(r.stream, r.epoch, r.idx.data(), r.val.data(), r.idx.size());
}

using a2test::status_of;

}  // namespace

// ---------------------------------------------------------------- quantise

TEST(LoggerFormat, QuantiseRoundsHalfToEvenAndRefusesOverflow) {
  int64_t q;
  ASSERT_TRUE(quantise(2.5, 1.0, q));
  EXPECT_EQ(q, 2);
  ASSERT_TRUE(quantise(3.5, 1.0, q));
  EXPECT_EQ(q, 4);
  ASSERT_TRUE(quantise(-2.5, 1.0, q));
  EXPECT_EQ(q, -2);
  ASSERT_TRUE(quantise(0.123456, 1e-3, q));
  EXPECT_EQ(q, 123);
  ASSERT_TRUE(quantise(1e17, 1.0, q));  // above 2^52: already an integer
  EXPECT_EQ(q, 100000000000000000LL);
  ASSERT_TRUE(quantise(-9.2e18, 1.0, q));
  EXPECT_LT(q, 0);
  EXPECT_FALSE(quantise(9.3e18, 1.0, q));
  EXPECT_FALSE(quantise(1.0, 1e-300, q));
  EXPECT_FALSE(quantise(std::nan(""), 1.0, q));
  EXPECT_FALSE(quantise(INFINITY, 1.0, q));
  EXPECT_FALSE(quantise(-INFINITY, 1.0, q));
}

TEST(LoggerFormat, HeaderRoundTripAndChecks) {
  BlockHeader h;
  h.compressed_len = 1234;
  h.raw_len = 99999;
  h.n_records = 77;
  h.payload_crc = 0xDEADBEEF;
  uint8_t b[kHeaderSize];
  write_header(b, h);
  EXPECT_EQ(std::memcmp(b, kHeaderPrefix, sizeof kHeaderPrefix), 0);
  BlockHeader g;
  ASSERT_EQ(read_header(b, sizeof b, g), HeaderCheck::ok);
  EXPECT_EQ(g.compressed_len, 1234u);
  EXPECT_EQ(g.raw_len, 99999u);
  EXPECT_EQ(g.n_records, 77u);
  EXPECT_EQ(g.payload_crc, 0xDEADBEEFu);
  EXPECT_EQ(read_header(b, kHeaderSize - 1, g), HeaderCheck::short_header);
  b[20] ^= 1;
  EXPECT_EQ(read_header(b, sizeof b, g), HeaderCheck::bad_crc);
  b[20] ^= 1;
  b[0] ^= 1;
  EXPECT_EQ(read_header(b, sizeof b, g), HeaderCheck::bad_prefix);
  b[0] ^= 1;
  // Version 3's sequence fields, covered by the header CRC.
  h.segment = 7;
  h.seq = 41;
  h.count = uint64_t{1} << 40;
  write_header(b, h);
  ASSERT_EQ(read_header(b, sizeof b, g), HeaderCheck::ok);
  EXPECT_EQ(g.segment, 7u);
  EXPECT_EQ(g.seq, 41u);
  EXPECT_EQ(g.count, uint64_t{1} << 40);
  b[45] ^= 1;
  EXPECT_EQ(read_header(b, sizeof b, g), HeaderCheck::bad_crc);
  // A closing frame: a header alone; a marker with a payload is refused.
  BlockHeader c;
  c.flags = kFlagClose;
  c.seq = 3;
  c.count = 99;
  write_header(b, c);
  ASSERT_EQ(read_header(b, sizeof b, g), HeaderCheck::ok);
  EXPECT_TRUE(g.marker());
  c.compressed_len = 5;
  write_header(b, c);
  EXPECT_EQ(read_header(b, sizeof b, g), HeaderCheck::bad_fields);
  // Versions 1 and 2 keep their 40-byte header.
  BlockHeader v2 = h;
  v2.version = 2;
  uint8_t o[kHeaderSizeV2];
  write_header(o, v2);
  EXPECT_EQ(std::memcmp(o, kHeaderPrefixV2, sizeof kHeaderPrefixV2), 0);
  ASSERT_EQ(read_header(o, sizeof o, g), HeaderCheck::ok);
  EXPECT_EQ(g.size(), kHeaderSizeV2);
  EXPECT_EQ(g.payload_version(), 2);
  EXPECT_FALSE(g.sequenced());
}

// ---------------------------------------------------------------- codec

TEST(LoggerCodec, RecordsRoundTripWithinTolerance) {
  StreamInfo a{0.001, 1e-6, 0}, b{1.0, 0.5, 0};
  ScaleTable scales = {&a, &b};
  std::vector<uint8_t> buf;
  DeltaState st;
  st.new_frame();
  std::vector<Rec> recs;
  for (uint64_t i = 0; i < 500; ++i) recs.push_back(make_rec(static_cast<uint32_t>(i % 2), i));
  for (const auto& r : recs) {
    const StreamInfo& s = r.stream ? b : a;
    size_t at = buf.size();
    buf.resize(at + max_record_bytes(r.idx.size()));
    int64_t tick;
    uint8_t* end = encode_record(buf.data() + at, r.stream, s, r.epoch, st.base(r.stream),
                                 r.idx.data(), r.val.data(), r.idx.size(), &tick, nullptr);
    st.set(r.stream, tick);
    buf.resize(static_cast<size_t>(end - buf.data()));
  }
  FrameRecords out;
  decode_records(1, buf.data(), buf.size(), static_cast<uint32_t>(recs.size()), scales, out);
  ASSERT_EQ(out.stream_ids.size(), recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    Rec g;
    g.stream = out.stream_ids[i];
    g.epoch = out.epochs[i];
    g.idx.assign(out.indices.begin() + out.offsets[i], out.indices.begin() + out.offsets[i + 1]);
    g.val.assign(out.values.begin() + out.offsets[i], out.values.begin() + out.offsets[i + 1]);
    const StreamInfo& s = recs[i].stream ? b : a;
    expect_close(recs[i], g, s.epoch_scale, s.value_scale);
  }
}

TEST(LoggerCodec, ExtremeTicksWrapExactly) {
  StreamInfo s{1.0, 1.0, 0};
  ScaleTable scales = {&s};
  std::vector<uint8_t> buf(200);
  DeltaState st;
  int64_t t1, t2;
  uint8_t* p = encode_record(buf.data(), 0, s, -9.0e18, 0, nullptr, nullptr, 0, &t1, nullptr);
  p = encode_record(p, 0, s, 9.0e18, t1, nullptr, nullptr, 0, &t2, nullptr);
  FrameRecords out;
  decode_records(1, buf.data(), static_cast<size_t>(p - buf.data()), 2, scales, out);
  EXPECT_EQ(out.epochs[0], -9.0e18);
  EXPECT_EQ(out.epochs[1], 9.0e18);
}

TEST(LoggerCodec, DecoderRefusesMalformedRecords) {
  StreamInfo s{1.0, 1.0, 0};
  ScaleTable scales = {&s};
  FrameRecords out;
  // n = 5 but only 2 bytes left.
  std::vector<uint8_t> b1 = {0x00, 0x00, 0x05, 0x01, 0x01};
  EXPECT_THROW(decode_records(1, b1.data(), b1.size(), 1, scales, out), Error);
  // Index gap overflowing 2^32.
  std::vector<uint8_t> b2 = {0x00, 0x00, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x01, 0x00, 0x00};
  EXPECT_THROW(decode_records(1, b2.data(), b2.size(), 1, scales, out), Error);
  // Trailing bytes after the announced records.
  std::vector<uint8_t> b3 = {0x00, 0x00, 0x00, 0x07};
  EXPECT_THROW(decode_records(1, b3.data(), b3.size(), 1, scales, out), Error);
  // Truncated varint.
  std::vector<uint8_t> b4 = {0x00, 0x80};
  EXPECT_THROW(decode_records(1, b4.data(), b4.size(), 1, scales, out), Error);
  // Records of a stream without a sidecar are skipped, not fatal.
  std::vector<uint8_t> b5 = {0x05, 0x02, 0x01, 0x03, 0x02, 0x00, 0x02, 0x01, 0x04, 0x04};
  decode_records(1, b5.data(), b5.size(), 2, scales, out);
  EXPECT_EQ(out.skipped_unknown, 1u);
  ASSERT_EQ(out.stream_ids.size(), 1u);
  EXPECT_EQ(out.epochs[0], 1.0);
  EXPECT_EQ(out.values[0], 2.0);
}

// ---------------------------------------------------------------- writer

TEST(Logger, ManyStreamsAndThreadsRoundTrip) {
  a2test::TempDir tmp;
  const int kThreads = 4, kStreamsPer = 3, kPer = 3000;
  std::vector<uint32_t> ids;
  {
    Logger lg(tmp.path(), small_opts());
    for (int s = 0; s < kThreads * kStreamsPer; ++s)
      ids.push_back(lg.register_stream(fmt::format("{{\"entity\":\"e{}\"}}", s),
                                       s % 2 ? 0.25 : 0.001, s % 3 ? 1e-3 : 0.5, 0));
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t)
      th.emplace_back([&, t] {
        for (int i = 0; i < kPer; ++i) {
          uint32_t sid = ids[t * kStreamsPer + i % kStreamsPer];
          record(lg, make_rec(sid, i / kStreamsPer));
        }
      });
    for (auto& x : th) x.join();
    lg.close();
    Stats s = lg.stats();
    EXPECT_EQ(s.records, static_cast<uint64_t>(kThreads * kPer));
    EXPECT_GT(s.segments, 1u);  // rotation at 64 KiB
  }
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_TRUE(d.problems.empty()) << d.problems[0].message;
  ASSERT_EQ(d.n_records(), static_cast<size_t>(kThreads * kPer));
  EXPECT_EQ(d.streams.size(), ids.size());
  // One thread per stream: each stream's records come back in order.
  std::map<uint32_t, uint64_t> seq;
  for (const Rec& g : records_of(d)) {
    const StreamInfo& si = d.streams[g.stream].info;
    expect_close(make_rec(g.stream, seq[g.stream]++), g, si.epoch_scale, si.value_scale);
  }
  for (uint32_t sid : ids) EXPECT_EQ(seq[sid], static_cast<uint64_t>(kPer / kStreamsPer));
}

TEST(Logger, RotationKeepsSegmentsUnderTheLimit) {
  a2test::TempDir tmp;
  Options o = small_opts();
  o.rotate_bytes = 16 << 10;
  o.zstd_level = -5;  // little compression: more bytes, more segments
  {
    Logger lg(tmp.path(), o);
    uint32_t s = lg.register_stream("{}", 1.0, 1e-9, 0);
    for (int i = 0; i < 4000; ++i) record(lg, make_rec(s, i));
  }
  auto segs = list_segments(tmp / "segments");
  ASSERT_GT(segs.size(), 5u);
  for (size_t i = 0; i < segs.size(); ++i) {
    EXPECT_EQ(segs[i], i);
    EXPECT_LE(fs::file_size(tmp / ("segments/" + segment_name(segs[i]))), o.rotate_bytes);
  }
  Decoded d = decode_dir(tmp.path(), {1, false});
  EXPECT_TRUE(d.problems.empty());
  EXPECT_EQ(d.n_records(), 4000u);
  EXPECT_EQ(d.segments, segs.size());
}

TEST(Logger, SegmentsAreValidZstdStreams) {
  a2test::TempDir tmp;
  {
    Logger lg(tmp.path(), small_opts());
    uint32_t s = lg.register_stream("{}", 1.0, 1e-3, 0);
    for (int i = 0; i < 500; ++i) record(lg, make_rec(s, i));
  }
  Decoded d = decode_dir(tmp.path(), {});
  auto bytes = a2test::read_bytes(tmp / "segments/00000.seg.zst");
  std::vector<uint8_t> out(d.raw_bytes + 16);
  size_t r = ZSTD_decompress(out.data(), out.size(), bytes.data(), bytes.size());
  ASSERT_FALSE(ZSTD_isError(r)) << ZSTD_getErrorName(r);
  EXPECT_EQ(r, d.raw_bytes);  // the skippable headers vanish, the records remain
}

TEST(Logger, SharedStreamFromManyThreads) {
  a2test::TempDir tmp;
  const int kThreads = 6, kPer = 2000;
  {
    Logger lg(tmp.path(), small_opts());
    uint32_t s = lg.register_stream("{}", 0.25, 1e-6, 0);  // epochs exact: they name the record
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t)
      th.emplace_back([&, t] {
        for (int i = 0; i < kPer; ++i) record(lg, make_rec(s, t * kPer + i, 8));
      });
    for (auto& x : th) x.join();
    lg.flush();
    Decoded mid = decode_dir(tmp.path(), {});
    EXPECT_EQ(mid.n_records(), static_cast<size_t>(kThreads * kPer));
  }
  Decoded d = decode_dir(tmp.path(), {});
  std::vector<int> seen(kThreads * kPer, 0);
  for (const Rec& g : records_of(d)) {
    uint64_t seq = static_cast<uint64_t>((g.epoch - 1000.0) / 0.25);
    ASSERT_EQ(g.epoch, 1000.0 + 0.25 * static_cast<double>(seq));
    ASSERT_LT(seq, seen.size());
    ++seen[seq];
    expect_close(make_rec(0, seq, 8), g, 0.25, 1e-6);
  }
  for (int c : seen) EXPECT_EQ(c, 1);
}

TEST(Logger, BatchRecordsAndSort) {
  a2test::TempDir tmp;
  {
    Logger lg(tmp.path(), small_opts());
    uint32_t a = lg.register_stream("{}", 1.0, 0.5, 0);
    uint32_t b = lg.register_stream("{}", 1.0, 0.5, kStreamSort);
    std::vector<uint32_t> sids = {a, b, a};
    std::vector<double> ep = {1, 2, 3};
    std::vector<uint64_t> off = {0, 2, 5, 5};
    std::vector<uint32_t> idx = {3, 9, 8, 1, 5};
    std::vector<double> val = {1, 2, 3, 4, 5};
    size_t done = 0;
    lg.record_batch(3, sids.data(), ep.data(), off.data(), idx.data(), val.data(), &done);
    EXPECT_EQ(done, 3u);
    // Same unsorted record on the stream without the flag: refused at 1.
    std::vector<uint32_t> sids2 = {b, a};
    std::vector<uint64_t> off2 = {0, 2, 5};
    std::vector<uint32_t> idx2 = {1, 2, 8, 1, 5};
    try {
      lg.record_batch(2, sids2.data(), ep.data(), off2.data(), idx2.data(), val.data(), &done);
      FAIL() << "unsorted indices accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("record 1 of the batch"), std::string::npos) << e.what();
    }
    EXPECT_EQ(done, 1u);
    // Duplicates are refused even with sorting.
    std::vector<uint32_t> dup = {4, 2, 4};
    std::vector<double> dv = {1, 2, 3};
    EXPECT_EQ(status_of([&] { lg.record(b, 0, dup.data(), dv.data(), 3); }),
              A2PACK_E_INVALID_ARGUMENT);
  }
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.n_records(), 4u);
  auto r = records_of(d);
  EXPECT_EQ(r[1].idx, (std::vector<uint32_t>{1, 5, 8}));
  EXPECT_EQ(r[1].val, (std::vector<double>{4, 5, 3}));
  EXPECT_TRUE(r[2].idx.empty());
  EXPECT_EQ(r[3].idx, (std::vector<uint32_t>{1, 2}));
}

TEST(Logger, BadInputIsRefusedAndNothingOfItWritten) {
  a2test::TempDir tmp;
  {
    Logger lg(tmp.path(), small_opts());
    EXPECT_EQ(status_of([&] { lg.register_stream("{}", 0.0, 1.0, 0); }), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { lg.register_stream("{}", 1.0, -1.0, 0); }), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { lg.register_stream("{}", std::nan(""), 1.0, 0); }),
              A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { lg.register_stream("{}", 1.0, INFINITY, 0); }),
              A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { lg.register_stream("[1,2]", 1.0, 1.0, 0); }),
              A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { lg.register_stream("{bad", 1.0, 1.0, 0); }),
              A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { lg.register_stream("{}", 1.0, 1.0, 8); }), A2PACK_E_INVALID_ARGUMENT);
    uint32_t s = lg.register_stream("{\"m\":1}", 1.0, 1e-3, 0);
    EXPECT_EQ(s, 0u);  // failed registrations used no id
    std::vector<uint32_t> idx = {1, 2, 3};
    std::vector<double> ok = {1, 2, 3};
    auto rec = [&](uint32_t sid, double ep, std::vector<uint32_t> i, std::vector<double> v) {
      return status_of([&] { lg.record(sid, ep, i.data(), v.data(), i.size()); });
    };
    EXPECT_EQ(rec(s, 0, idx, {1, std::nan(""), 3}), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(rec(s, 0, idx, {1, 2, INFINITY}), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(rec(s, 0, idx, {-INFINITY, 2, 3}), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(rec(s, 0, idx, {1, 1e300, 3}), A2PACK_E_OUT_OF_RANGE);
    EXPECT_EQ(rec(s, 0, {1, 3, 2}, ok), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(rec(s, 0, {1, 1, 2}, ok), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(rec(s, std::nan(""), idx, ok), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(rec(s, 1e300, idx, ok), A2PACK_E_OUT_OF_RANGE);
    EXPECT_EQ(rec(7, 0, idx, ok), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { lg.record(s, 0, nullptr, nullptr, 3); }), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { lg.record(s, 0, nullptr, nullptr, kMaxRecordValues + 1); }),
              A2PACK_E_INVALID_ARGUMENT);
    std::vector<double> nanv = {1, std::nan(""), 3};
    try {
      lg.record(s, 0, idx.data(), nanv.data(), 3);
      ADD_FAILURE() << "NaN accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("values[1] is NaN"), std::string::npos) << e.what();
    }
    // A good record between bad ones keeps the frame's delta state right.
    EXPECT_EQ(rec(s, 5, idx, ok), A2PACK_OK);
    EXPECT_EQ(rec(s, 6, {1, 3, 2}, ok), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_EQ(rec(s, 7, idx, ok), A2PACK_OK);
  }
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_TRUE(d.problems.empty());
  ASSERT_EQ(d.n_records(), 2u);
  EXPECT_EQ(d.epochs[0], 5.0);
  EXPECT_EQ(d.epochs[1], 7.0);
  EXPECT_EQ(d.values[0], 1.0);
}

TEST(Logger, OptionsAreChecked) {
  a2test::TempDir tmp;
  Options o;
  o.frame_bytes = 100;
  EXPECT_EQ(status_of([&] { Logger lg(tmp.path(), o); }), A2PACK_E_INVALID_ARGUMENT);
  o = Options{};
  o.ring_bytes = 1000;
  EXPECT_EQ(status_of([&] { Logger lg(tmp.path(), o); }), A2PACK_E_INVALID_ARGUMENT);
  o = Options{};
  o.zstd_level = 1000;
  EXPECT_EQ(status_of([&] { Logger lg(tmp.path(), o); }), A2PACK_E_INVALID_ARGUMENT);
  o = Options{};
  o.rotate_bytes = 10;
  EXPECT_EQ(status_of([&] { Logger lg(tmp.path(), o); }), A2PACK_E_INVALID_ARGUMENT);
  a2test::write_bytes(tmp / "file", "x", 1);
  EXPECT_NE(status_of([&] { Logger lg(tmp / "file", Options{}); }), A2PACK_OK);
}

TEST(Logger, ASecondLoggerOnTheFolderIsRefused) {
  a2test::TempDir tmp;
  Logger a(tmp.path(), small_opts());
  EXPECT_EQ(status_of([&] { Logger b(tmp.path(), small_opts()); }), A2PACK_E_IO);
  a.close();
  Logger c(tmp.path(), small_opts());  // released by close
}

TEST(Logger, ReopenContinuesIdsAndSegments) {
  a2test::TempDir tmp;
  {
    Logger lg(tmp.path(), small_opts());
    uint32_t s = lg.register_stream("{\"run\":1}", 1.0, 1e-3, 0);
    for (int i = 0; i < 100; ++i) record(lg, make_rec(s, i));
  }
  {
    Logger lg(tmp.path(), small_opts());
    uint32_t t = lg.register_stream("{\"run\":2}", 1.0, 1e-3, 0);
    EXPECT_EQ(t, 1u);
    for (int i = 100; i < 200; ++i) record(lg, make_rec(0, i));  // the old stream still works
    for (int i = 0; i < 50; ++i) record(lg, make_rec(t, i));
  }
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_TRUE(d.problems.empty());
  EXPECT_EQ(d.n_records(), 250u);
  EXPECT_EQ(d.segments, 2u);
  ASSERT_EQ(d.streams.size(), 2u);
  EXPECT_EQ(d.streams[1].labels_json, "{\"run\":2}");
  auto r = records_of(d);
  for (int i = 0; i < 200; ++i) expect_close(make_rec(0, i), r[i], 1.0, 1e-3);
}

TEST(Logger, CloseIsIdempotentAndLaterCallsFail) {
  a2test::TempDir tmp;
  Logger lg(tmp.path(), small_opts());
  uint32_t s = lg.register_stream("{}", 1.0, 1.0, 0);
  record(lg, make_rec(s, 0));
  lg.close();
  lg.close();
  EXPECT_EQ(status_of([&] { record(lg, make_rec(s, 1)); }), A2PACK_E_CLOSED);
  EXPECT_EQ(status_of([&] { lg.flush(); }), A2PACK_E_CLOSED);
  EXPECT_EQ(status_of([&] { lg.register_stream("{}", 1.0, 1.0, 0); }), A2PACK_E_CLOSED);
  std::thread([&] {  // a thread that never recorded before
    EXPECT_EQ(status_of([&] { record(lg, make_rec(s, 2)); }), A2PACK_E_CLOSED);
  }).join();
  EXPECT_EQ(lg.stats().records, 1u);
}

TEST(Logger, IdleAndExitedThreadsAreWrittenWithoutFlush) {
  a2test::TempDir tmp;
  Options o = small_opts();
  o.flush_interval_ms = 10;
  Logger lg(tmp.path(), o);
  uint32_t s = lg.register_stream("{}", 1.0, 1.0, 0);
  record(lg, make_rec(s, 0));                              // this thread stays alive
  std::thread([&] { record(lg, make_rec(s, 1)); }).join();  // this one exits
  // The writer hands both partial frames to the file within the interval;
  // poll rather than assume a timing.
  size_t n = 0;
  for (int i = 0; i < 500 && n < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = decode_dir(tmp.path(), {1, false}).n_records();
  }
  EXPECT_EQ(n, 2u);
}

TEST(Logger, LargeRecordsGetTheirOwnFrame) {
  a2test::TempDir tmp;
  Options o = small_opts();
  Rec big;
  for (uint32_t i = 0; i < 20000; ++i) {
    big.idx.push_back(i * 3);
    big.val.push_back(i * 0.5);
  }
  {
    Logger lg(tmp.path(), o);
    uint32_t s = lg.register_stream("{}", 1.0, 0.5, 0);
    big.stream = s;
    record(lg, make_rec(s, 0));
    record(lg, big);
    record(lg, make_rec(s, 2));
  }
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.n_records(), 3u);
  expect_close(big, records_of(d)[1], 1.0, 0.5);
}

// ---------------------------------------------------------------- backpressure

TEST(Logger, BackpressureBlocksWithoutLossAndBoundsMemory) {
  a2test::TempDir tmp;
  Options o;
  o.frame_bytes = 4096;
  o.ring_bytes = 4 * 4096;
  o.zstd_level = 19;  // a writer that cannot keep up
  o.rotate_bytes = 1 << 30;
  const int kThreads = 3, kPer = 4000;
  Stats st;
  {
    Logger lg(tmp.path(), o);
    uint32_t s = lg.register_stream("{}", 1.0, 1e-6, 0);
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t)
      th.emplace_back([&, t] {
        for (int i = 0; i < kPer; ++i) record(lg, make_rec(s, t * kPer + i, 30));
      });
    for (auto& x : th) x.join();
    lg.close();
    st = lg.stats();
  }
  EXPECT_GT(st.full_events, 0u);
  // ring_bytes plus one forced chunk per thread (flush/close seals).
  EXPECT_LE(st.max_queued_bytes, o.ring_bytes + (kThreads + 1) * uint64_t{o.frame_bytes});
  Decoded d = decode_dir(tmp.path(), {});
  EXPECT_EQ(d.n_records(), static_cast<size_t>(kThreads * kPer));
}

TEST(Logger, FullModeFailsThenAcceptsAfterRetry) {
  a2test::TempDir tmp;
  Options o;
  o.frame_bytes = 4096;
  o.ring_bytes = 2 * 4096;
  o.zstd_level = 19;
  o.fail_when_full = true;
  const int kN = 6000;
  uint64_t fulls = 0;
  // Made before the logger opens: the producer must outrun the compressor
  // (making them in the loop, under a sanitizer, let it keep up).
  std::vector<Rec> recs_in;
  for (int i = 0; i < kN; ++i) recs_in.push_back(make_rec(0, i, 30));
  {
    Logger lg(tmp.path(), o);
    uint32_t s = lg.register_stream("{}", 1.0, 1e-6, 0);
    ASSERT_EQ(s, 0u);
    for (const Rec& r : recs_in) {
      for (;;) {
        a2pack_status st = status_of([&] { record(lg, r); });
        if (st == A2PACK_OK) break;
        ASSERT_EQ(st, A2PACK_E_FULL);
        ++fulls;
        std::this_thread::yield();
      }
    }
  }
  EXPECT_GT(fulls, 0u);
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.n_records(), static_cast<size_t>(kN));
  auto recs = records_of(d);
  for (int i = 0; i < kN; ++i) expect_close(make_rec(0, i, 30), recs[i], 1.0, 1e-6);
}

// ---------------------------------------------------------------- more

TEST(LoggerCodec, HugeValuesAndLongVarintsRoundTrip) {
  // 9- and 10-byte varints, in the windowed part of a frame and at its tail.
  StreamInfo s{1.0, 1.0, 0};
  ScaleTable scales = {&s};
  std::vector<uint8_t> buf;
  DeltaState st;
  st.new_frame();
  std::vector<Rec> recs;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 300; ++i) {
    Rec r;
    r.epoch = static_cast<double>(i);
    for (uint32_t k = 0; k < 5; ++k) {
      r.idx.push_back(k * 1000000u + static_cast<uint32_t>(rng() % 1000));
      double mag = (k % 3 == 0) ? 9.0e18 : (k % 3 == 1 ? 1e15 : 3.0);
      r.val.push_back((rng() % 2 ? -1.0 : 1.0) * std::ldexp(std::floor(mag / 4096), 12));
    }
    recs.push_back(r);
    size_t at = buf.size();
    buf.resize(at + max_record_bytes(5));
    int64_t tick;
    uint8_t* end = encode_record(buf.data() + at, 0, s, r.epoch, st.base(0), r.idx.data(),
                                 r.val.data(), 5, &tick, nullptr);
    st.set(0, tick);
    buf.resize(static_cast<size_t>(end - buf.data()));
  }
  FrameRecords out;
  decode_records(1, buf.data(), buf.size(), 300, scales, out);
  ASSERT_EQ(out.stream_ids.size(), 300u);
  for (size_t i = 0; i < 300; ++i)
    for (size_t k = 0; k < 5; ++k) {
      ASSERT_EQ(out.indices[i * 5 + k], recs[i].idx[k]);
      ASSERT_EQ(out.values[i * 5 + k], recs[i].val[k]);
    }
}

TEST(Logger, SeveralWriterThreadsKeepEachThreadsOrder) {
  a2test::TempDir tmp;
  Options o = small_opts();
  o.writer_threads = 3;
  const int kThreads = 3, kPer = 4000;
  {
    Logger lg(tmp.path(), o);
    std::vector<uint32_t> ids;
    for (int t = 0; t < kThreads; ++t) ids.push_back(lg.register_stream("{}", 1.0, 1e-3, 0));
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t)
      th.emplace_back([&, t] {
        for (int i = 0; i < kPer; ++i) record(lg, make_rec(ids[t], i, 20));
      });
    for (auto& x : th) x.join();
  }
  Decoded d = decode_dir(tmp.path(), {});
  ASSERT_EQ(d.n_records(), static_cast<size_t>(kThreads * kPer));
  std::map<uint32_t, uint64_t> seq;
  for (const Rec& g : records_of(d)) expect_close(make_rec(g.stream, seq[g.stream]++, 20), g, 1.0, 1e-3);
}

TEST(Logger, WriterFailureIsReportedNotHidden) {
  a2test::TempDir tmp;
  Options o = small_opts();
  o.flush_interval_ms = 0;
  Logger lg(tmp.path(), o);
  uint32_t s = lg.register_stream("{}", 1.0, 1.0, 0);
  // Take the first segment's name: creating it must fail.
  a2test::write_bytes(tmp / ("segments/" + segment_name(0)), "x", 1);
  record(lg, make_rec(s, 0));
  a2pack_status st = status_of([&] { lg.flush(); });
  EXPECT_NE(st, A2PACK_OK);
  // Later calls keep failing with the writer's error, and nothing hangs.
  a2pack_status later = A2PACK_OK;
  for (int i = 0; i < 2000 && later == A2PACK_OK; ++i)
    later = status_of([&] { record(lg, make_rec(s, i)); });
  EXPECT_EQ(later, st);
  EXPECT_EQ(status_of([&] { lg.close(); }), st);
  EXPECT_EQ(status_of([&] { lg.close(); }), A2PACK_OK);  // idempotent
}
