// Run codecs against the upstream fixture, round trips, and hostile input.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

#include "base/bytes.hpp"
#include "base/varint.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "run/batch.hpp"
#include "run/branches.hpp"
#include "run/codec.hpp"
#include "test_util.hpp"

using namespace a2pack;

namespace {

std::vector<uint8_t> fixture() {
  auto b = a2test::fixture_bytes();
  return b;
}

// A small hand-made run with a mix of branch shapes.
run::Run sample_run(bool branches, size_t n = 5) {
  run::Run r;
  r.meta.steps = static_cast<uint32_t>(n);
  r.meta.start_unix_s = 1700000000;
  r.meta.elapsed_s = 1.25f;
  r.meta.max_score = 1234;
  r.meta.highest_tile = 128;
  r.meta.engine = "unit-test";
  r.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r.boards[i] = 0x0010000000000001ull * (i + 1) + (i << 40);
    r.moves[i] = static_cast<uint8_t>(i % 4);
    if (branches && i % 3 != 2) {
      r.present[i] = 1;
      r.legal[i] = static_cast<uint8_t>(0xF >> (i % 4));
      for (int k = 0; k < 4; ++k)
        r.values[4 * i + k] = (r.legal[i] >> k & 1) ? 0.25f * static_cast<float>(k) : 0.0f;
    }
  }
  r.final_board = 0x100100010232001bull;
  return r;
}

a2pack_status status_of(const std::vector<uint8_t>& bytes) {
  try {
    run::decode(bytes.data(), bytes.size());
    return A2PACK_OK;
  } catch (const Error& e) {
    return e.status();
  }
}

std::string message_of(const std::vector<uint8_t>& bytes) {
  try {
    run::decode(bytes.data(), bytes.size());
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

std::vector<uint8_t> to_vec(const std::string& s) { return {s.begin(), s.end()}; }

// Re-sign a v1 file after editing it, so the CRC passes and the edit is seen.
void resign_v1(std::vector<uint8_t>& b) {
  uint32_t c = crc32c::compute(b.data(), b.size() - 4);
  le::store(b.data() + b.size() - 4, c);
}

}  // namespace

TEST(RunFixture, DecodesToTheDocumentedValues) {
  auto bytes = fixture();
  ASSERT_EQ(bytes.size(), 28211u);
  EXPECT_EQ(run::detect_kind(bytes.data(), bytes.size()), run::Kind::v2);
  run::Run r = run::decode(bytes.data(), bytes.size());
  EXPECT_EQ(r.meta.steps, 959u);
  EXPECT_EQ(r.meta.start_unix_s, 1755927754u);
  EXPECT_NEAR(r.meta.elapsed_s, 15.2595, 1e-3);
  EXPECT_EQ(r.meta.max_score, 20504u);
  EXPECT_EQ(r.meta.highest_tile, 2048u);
  EXPECT_FALSE(r.meta.engine.has_value());
  ASSERT_EQ(r.size(), 959u);
  int moves[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < r.size(); ++i) {
    moves[r.moves[i]]++;
    EXPECT_EQ(r.present[i], 1) << "step " << i;
  }
  EXPECT_EQ(moves[0], 78);
  EXPECT_EQ(moves[1], 337);
  EXPECT_EQ(moves[2], 253);
  EXPECT_EQ(moves[3], 291);
  EXPECT_EQ(r.boards[0], 0x0010000000000001ull);
  EXPECT_EQ(r.final_board, 0x100100010232001bull);
}

TEST(RunFixture, ReencodesToIdenticalBytes) {
  auto bytes = fixture();
  run::Run r = run::decode(bytes.data(), bytes.size());
  std::string again = run::encode_v2(r);
  EXPECT_EQ(run::encoded_size_v2(r), bytes.size());
  ASSERT_EQ(again.size(), bytes.size());
  EXPECT_EQ(std::memcmp(again.data(), bytes.data(), bytes.size()), 0);
}

TEST(RunFixture, BranchValuesFollowTheUpstreamNormalisation) {
  auto bytes = fixture();
  run::Run r = run::decode(bytes.data(), bytes.size());
  for (size_t i = 0; i < r.size(); ++i) {
    int legal = __builtin_popcount(r.legal[i]);
    float hi = -1;
    for (int k = 0; k < 4; ++k) {
      if (!(r.legal[i] >> k & 1)) continue;
      EXPECT_GE(r.values[4 * i + k], 0.0f);
      EXPECT_LT(r.values[4 * i + k], 1.0f);
      hi = std::max(hi, r.values[4 * i + k]);
    }
    if (legal == 1) EXPECT_EQ(hi, 1.0f - FLT_EPSILON);
  }
}

TEST(RunV1, RoundTripAndUpgrade) {
  run::Run r = sample_run(false);
  std::string v1 = run::encode_v1(r, false);
  EXPECT_EQ(v1.size(), 36 + 9 + 8 * 6 + 5 + 4u);
  auto bytes = to_vec(v1);
  EXPECT_EQ(run::detect_kind(bytes.data(), bytes.size()), run::Kind::v1);
  run::Run back = run::decode(bytes.data(), bytes.size());
  EXPECT_EQ(back.source, run::Kind::v1);
  back.source = run::Kind::v2;
  EXPECT_EQ(back, r);
  // Upgrade: the v2 encoding of the decoded v1 run decodes to the same run.
  std::string v2 = run::encode_v2(back);
  auto v2b = to_vec(v2);
  EXPECT_EQ(run::detect_kind(v2b.data(), v2b.size()), run::Kind::v2);
  EXPECT_EQ(run::decode(v2b.data(), v2b.size()), r);
}

TEST(RunV1, SmallestFileHasNoSteps) {
  run::Run r;
  r.final_board = 0x1000000000000001ull;
  std::string v1 = run::encode_v1(r, false);
  EXPECT_EQ(v1.size(), 48u);  // 36-byte header + one state + CRC
  auto b = to_vec(v1);
  run::Run back = run::decode(b.data(), b.size());
  EXPECT_EQ(back.size(), 0u);
  EXPECT_EQ(back.final_board, r.final_board);
}

TEST(RunV1, RefusesBranchesUnlessDropped) {
  run::Run r = sample_run(true);
  EXPECT_THROW(run::encode_v1(r, false), Error);
  auto b = to_vec(run::encode_v1(r, true));
  run::Run back = run::decode(b.data(), b.size());
  EXPECT_FALSE(back.has_branches());
  EXPECT_EQ(back.boards, r.boards);
}

TEST(RunV2, RoundTripWithBranchShapes) {
  run::Run r = sample_run(true, 40);
  auto b = to_vec(run::encode_v2(r));
  EXPECT_EQ(run::decode(b.data(), b.size()), r);
  run::Run none;  // no engine, no steps
  auto e = to_vec(run::encode_v2(none));
  EXPECT_EQ(run::decode(e.data(), e.size()), none);
}

// Found by fuzzing: a valid v2 payload (meta.steps 65 and start_unix_s 50,
// the latter as an overlong varint) whose canonical v2 encoding starts
// "A2T1" 0x01 0x00 - the v1 magic, so it would read back as v1.
TEST(RunV2, BytesThatWouldSpellTheV1MagicAreRefused) {
  const std::vector<uint8_t> in = {'A', 0xB2, 0x00, 'T', '1', 0x01, 0, 0, 0, 0, 0, 0x04};
  ASSERT_EQ(run::detect_kind(in.data(), in.size()), run::Kind::v2);
  run::Run r = run::decode(in.data(), in.size());
  EXPECT_EQ(r.meta.steps, 65u);
  EXPECT_EQ(r.meta.start_unix_s, 50u);
  try {
    run::encode_v2(r);
    FAIL() << "encode_v2 wrote bytes that read back as v1";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("v1 magic"), std::string::npos) << e.what();
  }
  // Any other start_unix_s is fine.
  r.meta.start_unix_s = 51;
  auto b = to_vec(run::encode_v2(r));
  EXPECT_EQ(run::detect_kind(b.data(), b.size()), run::Kind::v2);
  EXPECT_EQ(run::decode(b.data(), b.size()), r);
}

TEST(RunBatch, MatchesSingleDecodesAtAnyWorkerCount) {
  auto fx = fixture();
  std::vector<std::string> encoded = {run::encode_v2(sample_run(true, 17)),
                                      run::encode_v1(sample_run(false, 9), false),
                                      std::string(fx.begin(), fx.end()),
                                      run::encode_v2(run::Run{})};
  std::vector<run::Payload> p;
  for (auto& s : encoded) p.push_back({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  for (uint32_t w : {1u, 2u, 0u}) {
    run::Batch b = run::decode_batch(p.data(), p.size(), w);
    ASSERT_EQ(b.n_runs(), 4u);
    for (size_t i = 0; i < p.size(); ++i) {
      run::Run r = run::decode(p[i].data, p[i].len);
      size_t o = b.step_offsets[i], n = b.step_offsets[i + 1] - o;
      ASSERT_EQ(n, r.size());
      EXPECT_TRUE(std::equal(r.boards.begin(), r.boards.end(), b.boards.begin() + o));
      EXPECT_TRUE(std::equal(r.moves.begin(), r.moves.end(), b.moves.begin() + o));
      EXPECT_TRUE(std::equal(r.values.begin(), r.values.end(), b.values.begin() + 4 * o));
      EXPECT_TRUE(std::equal(r.legal.begin(), r.legal.end(), b.legal.begin() + o));
      EXPECT_EQ(b.final_boards[i], r.final_board);
      EXPECT_EQ(b.max_score[i], r.meta.max_score);
      EXPECT_EQ(b.source_kind[i], static_cast<uint8_t>(r.source));
      EXPECT_EQ(b.has_engine[i], r.meta.engine.has_value());
      if (r.meta.engine)
        EXPECT_EQ(b.engine_bytes.substr(b.engine_offsets[i], b.engine_offsets[i + 1] - b.engine_offsets[i]),
                  *r.meta.engine);
    }
  }
}

TEST(RunBatch, ErrorNamesThePayload) {
  std::string good = run::encode_v2(sample_run(true));
  std::string bad = good.substr(0, good.size() - 3);
  std::vector<run::Payload> p = {{reinterpret_cast<const uint8_t*>(good.data()), good.size()},
                                 {reinterpret_cast<const uint8_t*>(bad.data()), bad.size()}};
  uint64_t ids[] = {10, 42};
  try {
    run::decode_batch(p.data(), 2, 2, "entry", ids);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
    EXPECT_EQ(std::string(e.what()).rfind("entry 42: ", 0), 0u) << e.what();
  }
}

// Files of every size class read by one worker: small ones packed into the
// worker's buffer, one that fills what is left of it (sized and read again),
// and one larger than a whole buffer (4 MiB); each decodes as read alone.
TEST(RunBatch, LoadReadsFilesOfAnySizeWhole) {
  a2test::TempDir dir;
  std::vector<std::string> paths;
  std::vector<run::Run> runs;
  for (size_t steps : {5u, 3000u, 2500u, 250000u, 40u, 0u, 7000u, 1u}) {
    runs.push_back(sample_run(true, steps));
    paths.push_back(dir / ("r" + std::to_string(paths.size()) + ".a2run2"));
    std::string bytes = run::encode_v2(runs.back());
    a2test::write_bytes(paths.back(), bytes.data(), bytes.size());
  }
  std::vector<const char*> c_paths;
  for (auto& p : paths) c_paths.push_back(p.c_str());
  for (uint32_t w : {1u, 2u}) {
    run::Batch b = run::load_batch(c_paths.data(), c_paths.size(), w);
    ASSERT_EQ(b.n_runs(), runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {
      size_t o = b.step_offsets[i];
      ASSERT_EQ(b.step_offsets[i + 1] - o, runs[i].size()) << i;
      EXPECT_TRUE(std::equal(runs[i].boards.begin(), runs[i].boards.end(), b.boards.begin() + o));
      EXPECT_TRUE(std::equal(runs[i].values.begin(), runs[i].values.end(), b.values.begin() + 4 * o));
      EXPECT_EQ(b.final_boards[i], runs[i].final_board);
    }
  }
}

TEST(RunBatch, LoadNamesAFolderAnEmptyFileAndAMissingOne) {
  a2test::TempDir dir;
  std::string good = dir / "good.a2run2", empty = dir / "empty.a2run2";
  std::string bytes = run::encode_v2(sample_run(true));
  a2test::write_bytes(good, bytes.data(), bytes.size());
  a2test::write_bytes(empty, "", 0);
  auto status_for = [&](const std::string& other, std::string* msg) {
    const char* paths[] = {good.c_str(), other.c_str()};
    return a2test::status_of([&] { run::load_batch(paths, 2, 2); }, msg);
  };
  std::string msg;
  EXPECT_EQ(status_for(dir.path(), &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find(dir.path() + ": is a folder"), std::string::npos) << msg;
  EXPECT_EQ(status_for(empty, &msg), A2PACK_E_CORRUPT);
  EXPECT_EQ(msg.rfind(empty + ": ", 0), 0u) << msg;
  EXPECT_EQ(status_for(dir / "missing.a2run2", &msg), A2PACK_E_NOT_FOUND);
  EXPECT_NE(msg.find("missing.a2run2"), std::string::npos) << msg;
}

// ---------------------------------------------------------------- hostile input

TEST(RunBadInput, EmptyAndGarbage) {
  EXPECT_EQ(status_of({}), A2PACK_E_CORRUPT);
  std::mt19937 rng(7);
  for (int t = 0; t < 2000; ++t) {
    std::vector<uint8_t> g(rng() % 200);
    for (auto& b : g) b = static_cast<uint8_t>(rng());
    a2pack_status s = status_of(g);  // must not crash; almost always an error
    EXPECT_TRUE(s == A2PACK_OK || s == A2PACK_E_CORRUPT || s == A2PACK_E_CHECKSUM ||
                s == A2PACK_E_UNSUPPORTED);
  }
}

TEST(RunBadInput, EveryTruncationOfTheFixtureFails) {
  auto fx = fixture();
  for (size_t len = 0; len < fx.size(); ++len) {
    std::vector<uint8_t> t(fx.begin(), fx.begin() + static_cast<long>(len));
    ASSERT_EQ(status_of(t), A2PACK_E_CORRUPT) << "length " << len;
  }
}

TEST(RunBadInput, EveryTruncationOfAV1FileFails) {
  auto b = to_vec(run::encode_v1(sample_run(false, 20), false));
  for (size_t len = 0; len < b.size(); ++len) {
    std::vector<uint8_t> t(b.begin(), b.begin() + static_cast<long>(len));
    a2pack_status s = status_of(t);
    // Short prefixes are not v1 by kind detection and fail as v2; longer ones
    // fail the CRC (the trailer is taken from the wrong place).
    ASSERT_TRUE(s == A2PACK_E_CORRUPT || s == A2PACK_E_CHECKSUM) << "length " << len;
  }
}

TEST(RunBadInput, TrailingBytes) {
  auto fx = fixture();
  fx.push_back(0);
  EXPECT_EQ(status_of(fx), A2PACK_E_CORRUPT);
  EXPECT_NE(message_of(fx).find("trailing"), std::string::npos);
  auto v1 = to_vec(run::encode_v1(sample_run(false), false));
  v1.insert(v1.end() - 4, 0);  // an extra byte before the CRC, re-signed
  resign_v1(v1);
  EXPECT_EQ(status_of(v1), A2PACK_E_CORRUPT);
}

TEST(RunBadInput, V1MagicVersionEndiannessAndCrc) {
  auto good = to_vec(run::encode_v1(sample_run(false), false));
  {
    auto b = good;
    b[10] ^= 1;  // payload change without re-signing
    EXPECT_EQ(status_of(b), A2PACK_E_CHECKSUM);
    EXPECT_NE(message_of(b).find("CRC32C mismatch"), std::string::npos);
  }
  {
    auto b = good;
    b[4] = 2;  // version 2 is not v1 by detection: decoded as v2 → corrupt
    EXPECT_NE(status_of(b), A2PACK_OK);
  }
  {
    auto b = good;
    b[5] = 1;  // big-endian flag
    resign_v1(b);
    EXPECT_EQ(status_of(b), A2PACK_E_UNSUPPORTED);
    EXPECT_NE(message_of(b).find("endianness"), std::string::npos);
  }
  {
    auto b = good;
    le::store<uint32_t>(b.data() + 6, 0xFFFFFFF0u);  // steps far larger than the file
    resign_v1(b);
    EXPECT_EQ(status_of(b), A2PACK_E_CORRUPT);
  }
  {
    auto b = good;
    b[b.size() - 5] = 9;  // last move out of range
    resign_v1(b);
    EXPECT_EQ(status_of(b), A2PACK_E_CORRUPT);
    EXPECT_NE(message_of(b).find("move 9"), std::string::npos);
  }
}

TEST(RunBadInput, V2HugeStepCountIsRejectedBeforeAllocating) {
  // meta, then a steps length of 2^60: must fail on the length check, not
  // try to allocate.
  std::string s;
  s += '\x01';              // steps 1
  s += '\x00';              // start 0
  s.append(4, '\0');        // elapsed
  s += '\x00';              // max_score
  s += '\x00';              // highest_tile
  s += '\x00';              // engine None
  uint8_t len[10];
  uint8_t* e = varint::write(len, 1ull << 60);
  s.append(reinterpret_cast<char*>(len), static_cast<size_t>(e - len));
  s += '\x00';
  auto b = to_vec(s);
  EXPECT_EQ(status_of(b), A2PACK_E_CORRUPT);
  EXPECT_NE(message_of(b).find("cannot fit"), std::string::npos);
}

TEST(RunBadInput, V2OverlongAndOverflowingVarints) {
  {
    // meta.steps as a u32 varint that overflows u32.
    std::vector<uint8_t> b = {0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    EXPECT_EQ(status_of(b), A2PACK_E_CORRUPT);
    EXPECT_NE(message_of(b).find("overflows u32"), std::string::npos);
  }
  {
    // A board varint of 11 bytes inside a step.
    run::Run r = sample_run(false, 1);
    auto b = to_vec(run::encode_v2(r));
    run::Header h = run::parse_header(b.data(), b.size());
    std::vector<uint8_t> bad(b.begin(), b.begin() + static_cast<long>(h.body));
    for (int i = 0; i < 10; ++i) bad.push_back(0xFF);
    bad.push_back(0x01);
    bad.insert(bad.end(), {0, 0, 0});
    EXPECT_EQ(status_of(bad), A2PACK_E_CORRUPT);
  }
}

TEST(RunBadInput, V2EnumAndOptionTagsOutOfRange) {
  run::Run r = sample_run(true, 1);  // step 0 has branches, all legal
  auto good = to_vec(run::encode_v2(r));
  run::Header h = run::parse_header(good.data(), good.size());
  size_t board_len = varint::size(r.boards[0]);
  size_t move_at = h.body + board_len;
  {
    auto b = good;
    b[move_at] = 4;
    EXPECT_EQ(status_of(b), A2PACK_E_CORRUPT);
    EXPECT_NE(message_of(b).find("move variant 4"), std::string::npos);
  }
  {
    auto b = good;
    b[move_at + 1] = 2;  // Option tag
    EXPECT_EQ(status_of(b), A2PACK_E_CORRUPT);
    EXPECT_NE(message_of(b).find("option tag 2"), std::string::npos);
  }
  {
    auto b = good;
    b[move_at + 2] = 7;  // BranchV2 variant
    EXPECT_EQ(status_of(b), A2PACK_E_CORRUPT);
    EXPECT_NE(message_of(b).find("variant 7"), std::string::npos);
  }
  {
    // Engine option tag out of range: the byte after highest_tile.
    std::vector<uint8_t> b = {0, 0, 0, 0, 0, 0, 0, 0, 5};
    EXPECT_EQ(status_of(b), A2PACK_E_CORRUPT);
  }
}

TEST(RunBadInput, V2InvalidUtf8Engine) {
  run::Run r = sample_run(false, 1);
  r.meta.engine = std::string("\xff\xfe", 2);
  auto b = to_vec(run::encode_v2(r));
  EXPECT_EQ(status_of(b), A2PACK_E_CORRUPT);
  EXPECT_NE(message_of(b).find("UTF-8"), std::string::npos);
}

TEST(Branches, UpstreamNormalisationRules) {
  float out[4];
  const float ev[4] = {10, 20, 30, 40};
  run::normalise_branches(ev, 0, out);
  for (float v : out) EXPECT_EQ(v, 0.0f);
  run::normalise_branches(ev, 0b0100, out);
  EXPECT_EQ(out[2], 1.0f - FLT_EPSILON);
  EXPECT_EQ(out[0], 0.0f);
  const float eq[4] = {5, 5, 5, 9};
  run::normalise_branches(eq, 0b0111, out);
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 0.5f);
  EXPECT_EQ(out[2], 0.5f);
  EXPECT_EQ(out[3], 0.0f);
  run::normalise_branches(ev, 0b1111, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 1.0f / 3);
  EXPECT_FLOAT_EQ(out[2], 2.0f / 3);
  EXPECT_EQ(out[3], 1.0f - FLT_EPSILON);  // the max maps to 1.0, replaced
}

// ---------------------------------------------------------------- meta.steps
TEST(RunV2, MetaStepsIsKeptApartFromTheStepsAsUpstreamDecodesIt) {
  // v2 stores meta.steps and the steps separately; upstream never compares
  // them, so the codec keeps both and the commands report the difference
  // (warning, or an error under --strict). 150 real steps, forged counts.
  for (uint32_t forged : {4294967295u, 0u, 1u}) {
    run::Run r = sample_run(true, 150);
    r.meta.steps = forged;
    std::string b = run::encode_v2(r);
    run::Run d = run::decode(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    EXPECT_EQ(d.meta.steps, forged);
    EXPECT_EQ(d.size(), 150u);
    run::Header h = run::parse_header(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    EXPECT_EQ(h.meta.steps, forged);
    EXPECT_EQ(h.n_steps, 150u);
  }
  // Upstream's own file agrees with itself.
  auto f = fixture();
  run::Run x = run::decode(f.data(), f.size());
  EXPECT_EQ(x.meta.steps, x.size());
}

TEST(RunBadInput, AFifoIsRefusedNotWaitedFor) {
  a2test::TempDir dir;
  const std::string fifo = dir / "r.a2run2";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int keep = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);  // a regression fails, not hangs
  ASSERT_GE(keep, 0);
  std::string msg;
  EXPECT_EQ(a2test::status_of([&] { run::load(fifo); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find(fifo + ": is a FIFO (named pipe), not a regular file"), std::string::npos) << msg;
  const char* paths[] = {fifo.c_str()};
  EXPECT_EQ(a2test::status_of([&] { run::load_batch(paths, 1, 1); }, &msg), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(msg.find(fifo), std::string::npos) << msg;
  ::close(keep);
}
