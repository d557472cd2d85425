// Frame format version 2 (docs/logger.md): structure and value regions,
// values coded against the previous record of the same stream in the frame.
// Round trips through both CPU builds of the encoder and decoder, the
// predictor's window, the exact path for huge values, and malformed frames.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/bytes.hpp"
#include "base/error.hpp"
#include "logger/cpu_features.hpp"
#include "logger/decoder.hpp"
#include "logger/encoder.hpp"
#include "logger/format.hpp"
#include "test_logger_util.hpp"

using namespace a2pack;
using namespace a2pack::logger;

namespace {

using a2test::Rec;

// A frame's payload: prefix, structure, values; plus the value region's size.
struct Frame {
  std::vector<uint8_t> bytes;
  size_t value_bytes = 0;
};

Frame encode_frame(const std::vector<Rec>& recs, const std::vector<StreamInfo>& infos) {
  size_t room = 0;
  for (const auto& r : recs) room += max_record_bytes(r.idx.size());
  std::vector<uint8_t> s(room + 64), v(room + 64);
  uint8_t* sp = s.data();
  uint8_t* vp = v.data();
  FrameState st;
  st.new_frame();
  SortScratch scratch;
  for (const auto& r : recs)
    encode_record_v2(sp, vp, r.stream, infos[r.stream], r.epoch, st, r.idx.data(), r.val.data(),
                     r.idx.size(), &scratch);
  size_t sl = static_cast<size_t>(sp - s.data()), vl = static_cast<size_t>(vp - v.data());
  Frame f;
  f.bytes.resize(kV2Prefix + sl + vl);
  le::store<uint32_t>(f.bytes.data(), static_cast<uint32_t>(sl));
  std::memcpy(f.bytes.data() + kV2Prefix, s.data(), sl);
  std::memcpy(f.bytes.data() + kV2Prefix + sl, v.data(), vl);
  f.value_bytes = vl;
  return f;
}

FrameRecords decode(const Frame& f, size_t n_records, const std::vector<StreamInfo>& infos) {
  ScaleTable scales;
  for (const auto& i : infos) scales.push_back(&i);
  FrameRecords out;
  decode_records(2, f.bytes.data(), f.bytes.size(), static_cast<uint32_t>(n_records), scales, out);
  return out;
}

void expect_round_trip(const std::vector<Rec>& recs, const std::vector<StreamInfo>& infos,
                       const FrameRecords& out) {
  ASSERT_EQ(out.stream_ids.size(), recs.size());
  for (size_t r = 0; r < recs.size(); ++r) {
    const Rec& want = recs[r];
    const StreamInfo& s = infos[want.stream];
    ASSERT_EQ(out.stream_ids[r], want.stream) << "record " << r;
    EXPECT_LE(std::fabs(out.epochs[r] - want.epoch), s.epoch_scale / 2 * (1 + 1e-9));
    ASSERT_EQ(out.offsets[r + 1] - out.offsets[r], want.idx.size()) << "record " << r;
    for (size_t k = 0; k < want.idx.size(); ++k) {
      ASSERT_EQ(out.indices[out.offsets[r] + k], want.idx[k]) << "record " << r << " pos " << k;
      double got = out.values[out.offsets[r] + k];
      ASSERT_LE(std::fabs(got - want.val[k]), s.value_scale / 2 + std::fabs(want.val[k]) * 1e-15)
          << "record " << r << " pos " << k << ": " << want.val[k] << " vs " << got;
    }
  }
}

// A simulation-like log: streams whose supports drift (indices replaced,
// inserted and removed, so positions shift) and whose values random-walk,
// with empty records, single non-zeros and, now and then, huge magnitudes
// (the exact quantisation path and wrapping differences).
std::vector<Rec> drifting_log(uint64_t seed, size_t n_records, uint32_t n_streams) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  struct S {
    std::vector<uint32_t> idx;
    std::vector<double> val;
  };
  std::vector<S> st(n_streams);
  std::vector<Rec> out;
  for (size_t i = 0; i < n_records; ++i) {
    uint32_t sid = static_cast<uint32_t>(rng() % n_streams);
    S& s = st[sid];
    int what = static_cast<int>(rng() % 10);
    if (what == 0 && !s.idx.empty()) {  // remove one
      size_t k = rng() % s.idx.size();
      s.idx.erase(s.idx.begin() + static_cast<ptrdiff_t>(k));
      s.val.erase(s.val.begin() + static_cast<ptrdiff_t>(k));
    } else if (what <= 2 || s.idx.size() < 3) {  // insert one
      uint32_t x = static_cast<uint32_t>(rng() % (what == 1 ? 0xFFFFFFFFu : 3000));
      auto it = std::lower_bound(s.idx.begin(), s.idx.end(), x);
      if (it == s.idx.end() || *it != x) {
        size_t k = static_cast<size_t>(it - s.idx.begin());
        s.idx.insert(it, x);
        s.val.insert(s.val.begin() + static_cast<ptrdiff_t>(k), nd(rng));
      }
    }
    if (s.idx.size() > 70) {
      s.idx.resize(40);
      s.val.resize(40);
    }
    for (auto& v : s.val) v += 0.01 * nd(rng);
    Rec r;
    r.stream = sid;
    r.epoch = 100.0 + static_cast<double>(i) * 0.5;
    r.idx = s.idx;
    r.val = s.val;
    if (rng() % 50 == 0) r.idx.clear(), r.val.clear();
    if (rng() % 40 == 0 && !r.val.empty())  // one huge value, then back to normal
      r.val[rng() % r.val.size()] = (rng() % 2 ? 1 : -1) * std::ldexp(1.0, 60 + rng() % 2);
    out.push_back(std::move(r));
  }
  return out;
}

struct PortableBuilds {
  explicit PortableBuilds(bool on) {
    use_portable_encoder(on);
    use_decoder(on ? DecoderChoice::portable : DecoderChoice::best);
  }
  ~PortableBuilds() {
    use_portable_encoder(false);
    use_decoder(DecoderChoice::best);
  }
};

// Four streams at different scales, stream 3's fine enough for one- to
// three-byte values, and a drifting log over them whose huge values (2^60,
// 2^61) are kept only where value_scale 1 leaves q in int64 (elsewhere
// clipped to 1e12).
std::vector<StreamInfo> mixed_scales() {
  return {{0.001, 1e-3, 0}, {1.0, 1.0, 0}, {0.25, 0.5, 0}, {0.01, 1e-5, 0}};
}
std::vector<Rec> mixed_log(uint64_t seed, size_t n_records) {
  std::vector<Rec> recs = drifting_log(seed, n_records, 4);
  for (auto& r : recs)
    if (r.stream == 0 || r.stream == 3)
      for (auto& v : r.val)
        if (std::fabs(v) > 1e15) v = std::copysign(1e12, v);
  return recs;
}

// A record of stream 0 with `extra` more non-zeros than a predictor may
// hold: indices 0, 3, 6, ..., values counting up to `period` and again.
Rec above_predictor_limit(double epoch, uint32_t extra, uint32_t period) {
  Rec big{0, epoch, {}, {}};
  for (uint32_t k = 0; k < kMaxPredictorValues + extra; ++k) {
    big.idx.push_back(k * 3);
    big.val.push_back(static_cast<double>(k % period));
  }
  return big;
}

// The frame of recs written by both encoder builds (the same bytes) and read
// back by every decoder: the bulk, the checked and the portable parser.
void expect_round_trip_in_every_build(const std::vector<Rec>& recs,
                                      const std::vector<StreamInfo>& infos) {
  const Frame fast = encode_frame(recs, infos);
  for (bool portable : {false, true}) {
    PortableBuilds builds(portable);
    ASSERT_EQ(encode_frame(recs, infos).bytes, fast.bytes);
    for (DecoderChoice c : {DecoderChoice::best, DecoderChoice::avx2, DecoderChoice::checked,
                            DecoderChoice::portable}) {
      use_decoder(c);
      expect_round_trip(recs, infos, decode(fast, recs.size(), infos));
    }
    use_decoder(DecoderChoice::best);
  }
}

}  // namespace

TEST(LoggerV2, DriftingRecordsRoundTripAndBothBuildsAgree) {
  // Integer scale: huge values (2^60, 2^61) are exact; value_scale 1 keeps
  // them in int64 after quantisation.
  // Stream 3's fine scale makes one-, two- and three-byte varints.
  std::vector<StreamInfo> infos = mixed_scales();
  std::vector<Rec> recs = mixed_log(11, 4000);
  Frame fast = encode_frame(recs, infos);
  expect_round_trip(recs, infos, decode(fast, recs.size(), infos));
  {
    PortableBuilds portable(true);
    Frame generic = encode_frame(recs, infos);
    EXPECT_EQ(generic.bytes, fast.bytes) << "the two encoder builds must write the same bytes";
    FrameRecords a = decode(generic, recs.size(), infos);
    expect_round_trip(recs, infos, a);
  }
}

TEST(LoggerV2, RepeatedValuesCostOneByteEachAndShiftedPositionsStillPredict) {
  std::vector<StreamInfo> infos = {{1.0, 0.01, 0}};
  Rec a{0, 1.0, {10, 20, 30, 40, 50, 60, 70, 80, 90}, {}};
  for (size_t k = 0; k < a.idx.size(); ++k) a.val.push_back(100.0 + 37.0 * static_cast<double>(k));
  Rec same = a;
  same.epoch = 2.0;
  // One index inserted at the front: every old position shifts by one, and
  // the window of three neighbours still finds each value.
  Rec shifted = same;
  shifted.epoch = 3.0;
  shifted.idx.insert(shifted.idx.begin(), 5);
  shifted.val.insert(shifted.val.begin(), 0.0);  // predicted 0: one byte too
  // One index removed in the middle: positions after it shift back.
  Rec removed = shifted;
  removed.epoch = 4.0;
  removed.idx.erase(removed.idx.begin() + 4);
  removed.val.erase(removed.val.begin() + 4);
  for (const auto& recs : {std::vector<Rec>{a}, std::vector<Rec>{a, same, shifted, removed}}) {
    Frame f = encode_frame(recs, infos);
    expect_round_trip(recs, infos, decode(f, recs.size(), infos));
    if (recs.size() == 1) {
      EXPECT_GT(f.value_bytes, a.idx.size());  // q = 10000.. : two bytes each
    } else {
      size_t first = encode_frame({a}, infos).value_bytes;
      EXPECT_EQ(f.value_bytes,
                first + same.idx.size() + shifted.idx.size() + removed.idx.size());
    }
  }
}

TEST(LoggerV2, LargeRecordsAreNotPredictorsButRoundTrip) {
  std::vector<StreamInfo> infos = {{1.0, 1.0, 0}};
  Rec big = above_predictor_limit(1.0, 5, 1000);
  Rec next = big;
  next.epoch = 2.0;
  std::vector<Rec> recs = {big, next};
  Frame f = encode_frame(recs, infos);
  expect_round_trip(recs, infos, decode(f, recs.size(), infos));
  // Not predicted: the second record's values cost what the first's did.
  EXPECT_EQ(f.value_bytes, 2 * encode_frame({big}, infos).value_bytes);
}

TEST(LoggerV2, SortedStreamsPredictFromTheSortedRecord) {
  std::vector<StreamInfo> infos = {{1.0, 1.0, kStreamSort}};
  Rec a{0, 1.0, {30, 10, 20}, {3.0, 1.0, 2.0}};
  Rec b{0, 2.0, {20, 30, 10}, {2.0, 3.0, 1.0}};
  Frame f = encode_frame({a, b}, infos);
  FrameRecords out = decode(f, 2, infos);
  ASSERT_EQ(out.indices.size(), 6u);
  for (size_t r = 0; r < 2; ++r)
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(out.indices[r * 3 + k], 10u * (k + 1));
      EXPECT_EQ(out.values[r * 3 + k], static_cast<double>(k + 1));
    }
  EXPECT_EQ(f.value_bytes, 6u);
}

TEST(LoggerV2, MalformedFramesAreRefused) {
  std::vector<StreamInfo> infos = {{1.0, 1.0, 0}};
  ScaleTable scales = {&infos[0]};
  FrameRecords out;
  auto status = [&](const std::vector<uint8_t>& b, uint32_t n, uint8_t version = 2) -> a2pack_status {
    try {
      decode_records(version, b.data(), b.size(), n, scales, out);
    } catch (const Error& e) {
      return e.status();
    }
    return A2PACK_OK;
  };
  // A good frame: one record, stream 0, tick 1, indices {3, 5}, values {2, -1}.
  std::vector<uint8_t> good = {5, 0, 0, 0, 0x00, 0x02, 0x02, 0x03, 0x01, 0x04, 0x01};
  ASSERT_EQ(status(good, 1), A2PACK_OK);
  EXPECT_EQ(out.values[0], 2.0);
  EXPECT_EQ(out.values[1], -1.0);
  // Too short for the prefix; structure length past the end.
  EXPECT_EQ(status({1, 0}, 1), A2PACK_E_CORRUPT);
  std::vector<uint8_t> b = good;
  b[0] = 200;
  EXPECT_EQ(status(b, 1), A2PACK_E_CORRUPT);
  // A value byte left over; a structure byte left over.
  b = good;
  b.push_back(0x00);
  EXPECT_EQ(status(b, 1), A2PACK_E_CORRUPT);
  b = good;
  b[0] = 6;
  b.insert(b.begin() + 9, 0x00);
  EXPECT_EQ(status(b, 1), A2PACK_E_CORRUPT);
  // Fewer value bytes than the count; a truncated value varint.
  b = good;
  b.pop_back();
  EXPECT_EQ(status(b, 1), A2PACK_E_CORRUPT);
  b = good;
  b.back() = 0x81;
  EXPECT_EQ(status(b, 1), A2PACK_E_CORRUPT);
  // More records announced than the structure holds.
  EXPECT_EQ(status(good, 2), A2PACK_E_CORRUPT);
  // A gap of 2^64 - 1: the index sum must not wrap back into range (both
  // versions), nor may a gap that overflows 2^32 on its own.
  std::vector<uint8_t> wrap_gap = {0x00, 0x02, 0x02, 0x03};
  for (int i = 0; i < 9; ++i) wrap_gap.push_back(0xFF);
  wrap_gap.push_back(0x01);
  std::vector<uint8_t> v2 = {static_cast<uint8_t>(wrap_gap.size()), 0, 0, 0};
  v2.insert(v2.end(), wrap_gap.begin(), wrap_gap.end());
  v2.push_back(0x04);
  v2.push_back(0x01);
  EXPECT_EQ(status(v2, 1), A2PACK_E_CORRUPT);
  std::vector<uint8_t> v1 = wrap_gap;
  v1.push_back(0x04);
  v1.push_back(0x01);
  EXPECT_EQ(status(v1, 1, 1), A2PACK_E_CORRUPT);
  // Unknown versions, in a header and for the parser.
  EXPECT_EQ(status(good, 1, 3), A2PACK_E_UNSUPPORTED);
  EXPECT_EQ(status(good, 1, 0), A2PACK_E_UNSUPPORTED);
  BlockHeader h;
  h.version = 4;  // past the newest header version, in either header size
  h.compressed_len = 10;
  h.raw_len = 100;
  h.n_records = 1;
  uint8_t hb[kHeaderSize];
  write_header(hb, h);
  EXPECT_EQ(read_header(hb, sizeof hb, h), HeaderCheck::bad_version);
  BlockHeader old;
  old.version = 3;  // version 3 in the 40-byte header of versions 1 and 2
  old.compressed_len = 10;
  old.raw_len = 100;
  old.n_records = 1;
  write_header(hb, old);
  hb[4] = 32;  // the old header's skippable size
  le::store<uint32_t>(hb + 36, crc32c::compute(hb, 36));
  EXPECT_EQ(read_header(hb, kHeaderSizeV2, old), HeaderCheck::bad_version);
}

TEST(LoggerV2, RandomCorruptionNeverCrashesEitherDecoder) {
  std::vector<StreamInfo> infos = {{0.001, 1e-3, 0}, {1.0, 1.0, 0}};
  std::vector<Rec> recs = drifting_log(5, 400, 2);
  for (auto& r : recs)
    for (auto& v : r.val)
      if (std::fabs(v) > 1e15) v = 1e12;
  Frame f = encode_frame(recs, infos);
  ScaleTable scales = {&infos[0], &infos[1]};
  std::mt19937_64 rng(3);
  for (bool portable : {false, true}) {
    PortableBuilds builds(portable);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<uint8_t> b = f.bytes;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < flips; ++i) b[rng() % b.size()] = static_cast<uint8_t>(rng());
      if (rng() % 4 == 0) b.resize(rng() % b.size());
      FrameRecords out;
      try {
        decode_records(2, b.data(), b.size(), static_cast<uint32_t>(recs.size()), scales, out);
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), A2PACK_E_CORRUPT) << e.what();
      }
    }
  }
}

TEST(LoggerV2, QuantisationMatchesDivisionNearHalfIntegers) {
  // The AVX2 build quantises by a reciprocal multiplication and divides only
  // near half-integers; the portable build always divides. Values at, just
  // below and just above (k + 1/2) × scale must give the same q in both.
  std::mt19937_64 rng(17);
  for (double scale : {0.1, 1e-3, 3e-7, 0.7, 1.0, 0.5, 1.0 / 3.0, 12345.678, 1e-300, 1e200}) {
    std::vector<StreamInfo> infos = {{1.0, scale, 0}};
    std::vector<Rec> recs;
    for (int r = 0; r < 200; ++r) {
      Rec rec{0, static_cast<double>(r), {}, {}};
      for (uint32_t i = 0; i < 16; ++i) {
        double k = static_cast<double>(rng() % (uint64_t{1} << (r % 2 ? 12 : 45))) + 0.5;
        double x = k * scale;
        if (rng() % 2) x = -x;
        int how = static_cast<int>(rng() % 3);
        if (how == 1) x = std::nextafter(x, INFINITY);
        if (how == 2) x = std::nextafter(x, -INFINITY);
        rec.idx.push_back(i * 7);
        rec.val.push_back(x);
      }
      recs.push_back(std::move(rec));
    }
    Frame fast = encode_frame(recs, infos);
    PortableBuilds portable(true);
    Frame generic = encode_frame(recs, infos);
    ASSERT_EQ(generic.bytes, fast.bytes) << "scale " << scale;
  }
}

TEST(LoggerV2, DecodedValuesAreTheCorrectlyRoundedQuotient) {
  // Decimal scales decode as q / k (k = 1 / scale), the double nearest the
  // decimal the caller recorded. The AVX2 decoder computes it without a
  // division (a reciprocal product and one FMA correction); both builds
  // must give exactly the bits of the division, epochs included, for values
  // of every magnitude (2^51 and above take the scalar path).
  std::mt19937_64 rng(23);
  for (double scale : {0.1, 1e-3, 1e-6, 1e-9, 0.01, 1e-4, 1.0 / 1024}) {
    const double k = std::round(1.0 / scale);
    std::vector<StreamInfo> infos = {{scale, scale, 0}};
    std::vector<Rec> recs;
    int64_t tick = 0;
    for (int r = 0; r < 300; ++r) {
      tick += static_cast<int64_t>(rng() % 5000);
      Rec rec{0, static_cast<double>(tick) / k, {}, {}};
      for (uint32_t i = 0; i < 21; ++i) {
        int bits = static_cast<int>(rng() % (r % 7 == 0 ? 60 : 52));
        int64_t v = static_cast<int64_t>(rng() & ((uint64_t{1} << bits) - 1));
        if (rng() % 2) v = -v;
        rec.idx.push_back(i * 3 + static_cast<uint32_t>(r % 2));
        rec.val.push_back(static_cast<double>(v) / k);
      }
      recs.push_back(std::move(rec));
    }
    // What the encoder stores: q = round(x / scale), exactly as quantise().
    auto expected = [&](double x) {
      int64_t q = 0;
      EXPECT_TRUE(quantise(x, scale, q));
      return static_cast<double>(q) / k;
    };
    Frame f = encode_frame(recs, infos);
    for (bool portable : {false, true}) {
      PortableBuilds builds(portable);
      FrameRecords out = decode(f, recs.size(), infos);
      ASSERT_EQ(out.stream_ids.size(), recs.size());
      for (size_t r = 0; r < recs.size(); ++r) {
        EXPECT_EQ(out.epochs[r], expected(recs[r].epoch))
            << "scale " << scale << " record " << r << (portable ? " portable" : " fast");
        for (size_t i = 0; i < recs[r].val.size(); ++i)
          ASSERT_EQ(out.values[out.offsets[r] + i], expected(recs[r].val[i]))
              << "scale " << scale << " record " << r << " value " << i
              << (portable ? " portable" : " fast");
      }
    }
  }
}

TEST(LoggerV2, VarintsOfEveryLengthDecodeInBothBuilds) {
  // Values whose varints take 1 to 10 bytes, mixed in every order, so the
  // AVX2 decoder's table paths (four 1-2 byte varints, two 1-3 byte ones)
  // and its checked fallback all meet each other's boundaries. Scale 1:
  // every value decodes exactly.
  std::vector<StreamInfo> infos = {{1.0, 1.0, 0}};
  const int64_t mags[] = {0, 63, 64, 8191, 8192, 1048575, 1048576, (int64_t{1} << 27) - 1,
                          int64_t{1} << 27, int64_t{1} << 40, int64_t{1} << 50};
  std::mt19937_64 rng(31);
  std::vector<Rec> recs;
  for (int r = 0; r < 400; ++r) {
    // One stream, but every other record moves all its indices, so
    // predictions are mostly 0 and the stored varint is the value's own
    // ZigZag.
    Rec rec{0, static_cast<double>(r), {}, {}};
    size_t n = 1 + rng() % 40;
    uint32_t index = r % 2 ? 1000000 : 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t q = mags[rng() % std::size(mags)];
      if (rng() % 2) q = -q;
      index += 1 + static_cast<uint32_t>(rng() % 300);
      rec.idx.push_back(index);
      rec.val.push_back(static_cast<double>(q));
    }
    recs.push_back(std::move(rec));
  }
  Frame f = encode_frame(recs, infos);
  for (bool portable : {false, true}) {
    PortableBuilds builds(portable);
    FrameRecords out = decode(f, recs.size(), infos);
    ASSERT_EQ(out.stream_ids.size(), recs.size());
    for (size_t r = 0; r < recs.size(); ++r)
      for (size_t i = 0; i < recs[r].val.size(); ++i)
        ASSERT_EQ(out.values[out.offsets[r] + i], recs[r].val[i])
            << "record " << r << " value " << i << (portable ? " portable" : " fast");
  }
}

TEST(LoggerV2, PredictorEdgesGiveTheSameBytesInBothBuilds) {
  // Records of 0 to 40 non-zeros drawn from a small index universe, so the
  // previous record of a stream is often much shorter or longer than the
  // current one and indices match at every position, the first and last
  // included. The AVX2 encoder reads the previous record's neighbours from
  // a sentinel-padded arena without masks; the portable one masks every
  // read: both must write the same bytes, and the frame must round-trip.
  std::vector<StreamInfo> infos = {{1.0, 1.0, 0}, {1.0, 0.5, 0}, {1.0, 1.0, 0}};
  std::mt19937_64 rng(77);
  std::vector<Rec> recs;
  for (int r = 0; r < 3000; ++r) {
    Rec rec{static_cast<uint32_t>(rng() % 3), static_cast<double>(r), {}, {}};
    size_t n = rng() % 5 == 0 ? 0 : rng() % 41;
    std::vector<uint32_t> pool(60);
    for (uint32_t i = 0; i < 60; ++i) pool[i] = i * (1 + static_cast<uint32_t>(r % 3));
    std::shuffle(pool.begin(), pool.end(), rng);
    pool.resize(n);
    std::sort(pool.begin(), pool.end());
    for (uint32_t x : pool) {
      rec.idx.push_back(x);
      rec.val.push_back(static_cast<double>(static_cast<int64_t>(rng() % 2000) - 1000));
    }
    recs.push_back(std::move(rec));
  }
  Frame fast = encode_frame(recs, infos);
  expect_round_trip(recs, infos, decode(fast, recs.size(), infos));
  PortableBuilds portable(true);
  Frame generic = encode_frame(recs, infos);
  ASSERT_EQ(generic.bytes, fast.bytes) << "the two encoder builds must write the same bytes";
  expect_round_trip(recs, infos, decode(generic, recs.size(), infos));
}

namespace {

// One parser's answer for a frame: the error it threw, or everything it
// wrote (bit for bit) and counted.
struct ParseResult {
  std::string error;
  std::vector<uint8_t> bytes;
  FrameCount count;
};

// choice: a decoder; nullopt: the bulk parser alone, in the build `bulk`
// picks (error "handed on" when it leaves the frame to the checked parser).
ParseResult parse_with(std::optional<DecoderChoice> choice, const std::vector<uint8_t>& b,
                       uint32_t n_records, const ScaleTable& scales,
                       DecoderChoice bulk = DecoderChoice::best) {
  if (choice) use_decoder(*choice);
  // Room for any frame of these bytes: every value takes at least one byte.
  std::vector<uint32_t> ids(n_records), idx(b.size());
  std::vector<double> ep(n_records), val(b.size());
  std::vector<uint64_t> off(n_records + 1);
  FrameSink sink{ids.data(), ep.data(), off.data() + 1, idx.data(), val.data(), 7, n_records, b.size()};
  ParseResult r;
  try {
    if (!choice) {
      if (!decode_frame_v2_bulk_only(b.data(), b.size(), n_records, scales, sink, r.count, bulk))
        r.error = "handed on";
    } else {
      r.count = decode_frame(2, b.data(), b.size(), n_records, scales, sink);
    }
  } catch (const Error& e) {
    r.error = e.what();
  }
  use_decoder(DecoderChoice::best);
  if (!r.error.empty()) return r;
  auto put = [&](const void* p, size_t n) {
    r.bytes.insert(r.bytes.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  put(ids.data(), r.count.records * 4);
  put(ep.data(), r.count.records * 8);
  put(off.data() + 1, r.count.records * 8);
  put(idx.data(), r.count.values * 4);
  put(val.data(), r.count.values * 8);
  return r;
}

void expect_same(const ParseResult& a, const ParseResult& b, const std::string& what) {
  EXPECT_EQ(a.error, b.error) << what;
  EXPECT_EQ(a.bytes, b.bytes) << what;
  EXPECT_EQ(a.count.records, b.count.records) << what;
  EXPECT_EQ(a.count.values, b.count.values) << what;
  EXPECT_EQ(a.count.parsed_values, b.count.parsed_values) << what;
  EXPECT_EQ(a.count.skipped_unknown, b.count.skipped_unknown) << what;
  EXPECT_EQ(a.count.first_unknown, b.count.first_unknown) << what;
}

}  // namespace

TEST(LoggerV2, BulkParserAgreesWithTheCheckedOneOnGoodAndDamagedFrames) {
  // The AVX2 build parses version 2 with the bulk parser first and hands it
  // to the checked parser on anything odd. Whatever the bytes, the two must
  // give the same records bit for bit, or the same error; so must the bulk
  // parser's AVX-512 build (`best` on CPUs with AVX-512). Streams with one-
  // to three-byte values (fine scale), huge values (nine- and ten-byte
  // varints), empty and single-value records; frames damaged by byte flips,
  // truncation, a wrong record count, a missing sidecar (unknown stream).
  std::vector<StreamInfo> infos = mixed_scales();
  std::vector<Rec> recs = mixed_log(23, 1500);
  Frame f = encode_frame(recs, infos);
  ScaleTable scales = {&infos[0], &infos[1], &infos[2], &infos[3]};
  const uint32_t n = static_cast<uint32_t>(recs.size());
  ParseResult good = parse_with(DecoderChoice::best, f.bytes, n, scales);
  ASSERT_EQ(good.error, "");
  ASSERT_EQ(good.count.records, recs.size());
  expect_same(good, parse_with(DecoderChoice::checked, f.bytes, n, scales), "undamaged frame");
  // The bulk parser takes the good frame itself (on CPUs that run it), so
  // the comparisons below test it, not only the hand-over.
  const bool bulk = cpu_runs_fast_builds();
  if (bulk) {
    expect_same(good, parse_with(std::nullopt, f.bytes, n, scales), "bulk parser alone");
    expect_same(good, parse_with(std::nullopt, f.bytes, n, scales, DecoderChoice::avx2),
                "AVX2 bulk parser alone");
  }
  size_t taken = 0, taken_avx2 = 0;
  ScaleTable missing = scales;
  missing[2] = nullptr;
  expect_same(parse_with(DecoderChoice::best, f.bytes, n, missing),
              parse_with(DecoderChoice::checked, f.bytes, n, missing), "unknown stream");
  expect_same(parse_with(DecoderChoice::avx2, f.bytes, n, missing),
              parse_with(DecoderChoice::checked, f.bytes, n, missing), "unknown stream, AVX2");
  std::mt19937_64 rng(41);
  for (int trial = 0; trial < 1500; ++trial) {
    std::vector<uint8_t> b = f.bytes;
    uint32_t count = n;
    switch (trial % 5) {
      case 0:  // a few bytes anywhere
      case 1:
        for (int i = 0, k = 1 + static_cast<int>(rng() % 4); i < k; ++i)
          b[rng() % b.size()] = static_cast<uint8_t>(rng());
        break;
      case 2:  // one byte's top bit: a varint joins its neighbour or splits
        b[kV2Prefix + rng() % (b.size() - kV2Prefix)] ^= 0x80;
        break;
      case 3:  // cut short
        b.resize(rng() % b.size());
        break;
      default:  // the header's record count off by a little
        count = n + static_cast<uint32_t>(rng() % 5) - 2;
        break;
    }
    const ParseResult checked = parse_with(DecoderChoice::checked, b, count, scales);
    expect_same(parse_with(DecoderChoice::best, b, count, scales), checked,
                "trial " + std::to_string(trial));
    expect_same(parse_with(DecoderChoice::avx2, b, count, scales), checked,
                "AVX2 build, trial " + std::to_string(trial));
    // What the bulk parser accepts on its own, the checked one accepts
    // with the same records.
    ParseResult alone = parse_with(std::nullopt, b, count, scales);
    if (alone.error.empty()) {
      ++taken;
      expect_same(alone, checked, "bulk parser alone, trial " + std::to_string(trial));
    }
    ParseResult alone_avx2 = parse_with(std::nullopt, b, count, scales, DecoderChoice::avx2);
    if (alone_avx2.error.empty()) {
      ++taken_avx2;
      expect_same(alone_avx2, checked, "AVX2 bulk parser alone, trial " + std::to_string(trial));
    }
    if (HasFailure()) break;
  }
  // Some damage leaves a well-formed frame (a flipped value byte): the bulk
  // parser must have decoded some of those itself.
  if (bulk) {
    EXPECT_GT(taken, 50u);
    EXPECT_GT(taken_avx2, 50u);
  }
}

TEST(LoggerV2, AHugeRecordAfterASmallOneOfItsStreamRoundTrips) {
  // The huge record is predicted from the small one: every position past
  // the small one's length predicts 0 without reading past it (the arena
  // and the output column end long before the huge record's positions).
  std::vector<StreamInfo> infos = {{1.0, 1.0, 0}};
  Rec small{0, 1.0, {0, 3, 6}, {5, 6, 7}};
  Rec big = above_predictor_limit(2.0, 9, 997);
  Rec after = small;
  after.epoch = 3.0;
  expect_round_trip_in_every_build({small, big, after, big}, infos);
}

TEST(LoggerV2, EmptyRecordsBetweenOthersKeepEveryStreamsPredictor) {
  // Each stream owns two slots of the predictor arena; an empty record still
  // takes one (for its sentinels), and must not write into another stream's.
  // Streams start with an empty record, alternate empty and full ones, and
  // the frame is checked through every encoder and decoder build.
  std::vector<StreamInfo> infos = {{1.0, 1.0, 0}, {1.0, 1.0, 0}, {1.0, 1.0, 0}};
  std::vector<Rec> recs;
  for (int r = 0; r < 300; ++r) {
    uint32_t sid = static_cast<uint32_t>(r % 3);
    Rec rec{sid, static_cast<double>(r), {}, {}};
    size_t n = (r / 3 + sid) % 4 == 0 ? 0 : 3 + static_cast<size_t>(r % 7);
    for (size_t k = 0; k < n; ++k) {
      rec.idx.push_back(static_cast<uint32_t>(k * 2 + sid));
      rec.val.push_back(static_cast<double>(100 * sid + k) + (r % 5));
    }
    recs.push_back(std::move(rec));
  }
  expect_round_trip_in_every_build(recs, infos);
  // Repeated values cost one byte each: the predictor found them.
  EXPECT_LT(encode_frame(recs, infos).value_bytes, 300u * 10u);
}

TEST(LoggerV2, BulkParsersTakeVarintsOfEveryLengthAtEveryGroupOffset) {
  // The bulk parsers decode one- to three-byte varints in groups (eight
  // bytes in the AVX2 build, sixteen in the AVX-512 one) and hand a group
  // holding a longer varint to one-at-a-time reads. Records of one stream at
  // value_scale 1 with fresh supports (nothing predicted: the value bytes
  // are the values' own varints) whose magnitudes 2^k, k in [0, 61], give
  // varints of 1 to 9 bytes, with gaps of 1 to 5 bytes between indices: long
  // varints land at every offset of a group and across group boundaries.
  // Records of one to three blocks (kBulkBlock positions go through a bulk
  // parser at a time). Every frame is valid, so both bulk builds must take
  // it themselves and decode exactly what the checked parser decodes.
  std::vector<StreamInfo> infos = {{1.0, 1.0, 0}};
  ScaleTable scales = {&infos[0]};
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<Rec> recs;
    for (int r = 0; r < 120; ++r) {
      Rec rec{0, 0.5 * r, {}, {}};
      const size_t n = rng() % 150;  // one to three blocks of kBulkBlock (64)
      uint64_t at = rng() % 4;
      for (size_t k = 0; k < n && at < UINT32_MAX; ++k) {
        rec.idx.push_back(static_cast<uint32_t>(at));
        rec.val.push_back((rng() % 2 ? 1.0 : -1.0) * std::ldexp(1.0, static_cast<int>(rng() % 62)));
        at += 1 + (uint64_t{1} << (rng() % 29));  // gaps of one to five bytes
      }
      recs.push_back(std::move(rec));
    }
    const Frame f = encode_frame(recs, infos);
    const uint32_t n = static_cast<uint32_t>(recs.size());
    const ParseResult checked = parse_with(DecoderChoice::checked, f.bytes, n, scales);
    ASSERT_EQ(checked.error, "") << "trial " << trial;
    if (!cpu_runs_fast_builds()) continue;  // no bulk parser on this CPU
    for (DecoderChoice build : {DecoderChoice::best, DecoderChoice::avx2}) {
      const ParseResult bulk = parse_with(std::nullopt, f.bytes, n, scales, build);
      EXPECT_EQ(bulk.error, "") << "trial " << trial << ": a valid frame was handed on";
      expect_same(bulk, checked, "trial " + std::to_string(trial));
    }
    if (HasFailure()) break;
  }
}
