// The run, board and gen sections of the C API, through the shared library
// and nothing but a2pack.h.
#include <gtest/gtest.h>

#include <algorithm>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <string>
#include <vector>

#include "a2pack.h"
#include "capi_test_util.hpp"

namespace {

using capitest::fixture_bytes;

std::string tmpdir() {
  char tmpl[] = "/tmp/a2pack-capi-XXXXXX";
  return mkdtemp(tmpl);
}

}  // namespace

TEST(CapiCore, VersionsAndStatusNames) {
  EXPECT_STREQ(a2pack_version(), "0.1.0");
  EXPECT_EQ(a2pack_abi_version(), static_cast<uint32_t>(A2PACK_ABI_VERSION));
  EXPECT_STREQ(a2pack_status_name(A2PACK_E_CHECKSUM), "A2PACK_E_CHECKSUM");
  EXPECT_STREQ(a2pack_status_name(12345), "A2PACK_E_UNKNOWN");
  // "MAJOR.MINOR.PATCH" of the zstd inside, the same through the table.
  std::string z = a2pack_zstd_version();
  EXPECT_EQ(std::count(z.begin(), z.end(), '.'), 2) << z;
  EXPECT_EQ(a2pack_api(A2PACK_ABI_VERSION)->zstd_version, &a2pack_zstd_version);
  std::string l = a2pack_lz4_version();
  EXPECT_EQ(std::count(l.begin(), l.end(), '.'), 2) << l;
  EXPECT_EQ(a2pack_api(A2PACK_ABI_VERSION)->lz4_version, &a2pack_lz4_version);
}

TEST(CapiCore, ApiTableCoversTheFunctions) {
  EXPECT_EQ(a2pack_api(999), nullptr);
  const a2pack_api_table* t = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->size, sizeof(a2pack_api_table));
  EXPECT_EQ(t->run_decode, &a2pack_run_decode);
  EXPECT_EQ(t->gen_dir, &a2pack_gen_dir);
  EXPECT_EQ(t->board_score(0x1000000000000000ull), 0u);
}

TEST(CapiRun, DecodesTheFixture) {
  auto bytes = fixture_bytes();
  a2pack_run* run = nullptr;
  ASSERT_EQ(a2pack_run_decode(bytes.data(), bytes.size(), &run), A2PACK_OK) << a2pack_last_error();
  a2pack_run_meta m{};
  m.size = sizeof m;
  ASSERT_EQ(a2pack_run_get_meta(run, &m), A2PACK_OK);
  EXPECT_EQ(m.steps, 959u);
  EXPECT_EQ(m.start_unix_s, 1755927754u);
  EXPECT_EQ(m.max_score, 20504u);
  EXPECT_EQ(m.highest_tile, 2048u);
  EXPECT_EQ(m.has_engine, 0);
  EXPECT_EQ(a2pack_run_step_count(run), 959u);
  EXPECT_EQ(a2pack_run_final_board(run), 0x100100010232001bull);
  EXPECT_EQ(a2pack_run_source_kind(run), A2PACK_RUN_V2);
  uint64_t b0 = 0;
  ASSERT_EQ(a2pack_run_get_steps(run, 0, 1, &b0, nullptr, nullptr, nullptr, nullptr), A2PACK_OK);
  EXPECT_EQ(b0, 0x0010000000000001ull);
  EXPECT_EQ(a2pack_run_get_steps(run, 950, 10, &b0, nullptr, nullptr, nullptr, nullptr),
            A2PACK_E_OUT_OF_RANGE);
  EXPECT_NE(std::string(a2pack_last_error()).find("out of range"), std::string::npos);

  uint8_t* out = nullptr;
  size_t len = 0;
  ASSERT_EQ(a2pack_run_encode(run, A2PACK_RUN_V2, 0, &out, &len), A2PACK_OK);
  ASSERT_EQ(len, bytes.size());
  EXPECT_EQ(std::memcmp(out, bytes.data(), len), 0);
  a2pack_free(out);
  // v1 refuses to drop branches silently.
  EXPECT_EQ(a2pack_run_encode(run, A2PACK_RUN_V1, 0, &out, &len), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr);
  ASSERT_EQ(a2pack_run_encode(run, A2PACK_RUN_V1, A2PACK_ENCODE_DROP_BRANCHES, &out, &len),
            A2PACK_OK);
  EXPECT_EQ(a2pack_run_detect_kind(out, len), A2PACK_RUN_V1);
  a2pack_free(out);
  a2pack_run_close(run);
}

TEST(CapiRun, ErrorsAreStatusesWithMessages) {
  a2pack_run* run = reinterpret_cast<a2pack_run*>(0x1);
  EXPECT_EQ(a2pack_run_load("/nonexistent/x.a2run2", &run), A2PACK_E_NOT_FOUND);
  EXPECT_EQ(run, nullptr);
  EXPECT_NE(std::string(a2pack_last_error()).find("/nonexistent/x.a2run2"), std::string::npos);
  EXPECT_EQ(a2pack_last_status(), A2PACK_E_NOT_FOUND);
  const uint8_t junk[] = {1, 2, 3};
  EXPECT_EQ(a2pack_run_decode(junk, 3, &run), A2PACK_E_CORRUPT);
  EXPECT_EQ(a2pack_run_decode(junk, 3, nullptr), A2PACK_E_INVALID_ARGUMENT);
  a2pack_run_close(nullptr);  // accepted
  a2pack_run_batch_close(nullptr);
}

TEST(CapiRun, ErrorMessagesAreThreadLocal) {
  const uint8_t junk[] = {1, 2, 3};
  a2pack_run* run;
  ASSERT_EQ(a2pack_run_decode(junk, 3, &run), A2PACK_E_CORRUPT);
  std::string here = a2pack_last_error();
  std::string other;
  std::thread t([&] {
    a2pack_run_load("/nonexistent/other", &run);
    other = a2pack_last_error();
  });
  t.join();
  EXPECT_EQ(a2pack_last_error(), here);
  EXPECT_NE(other, here);
}

TEST(CapiRun, CreateSaveLoadRoundTrip) {
  uint64_t boards[3] = {0x1000000000000001ull, 0x1100000000000001ull, 0x2000000000000011ull};
  uint8_t moves[3] = {2, 0, 3};
  float values[12] = {0.1f, 0.2f, 0.3f, 0.4f, 0, 0, 0, 0, 1, 0, 0, 0};
  uint8_t legal[3] = {0xF, 0x0, 0x1};
  uint8_t present[3] = {1, 0, 1};
  a2pack_run_meta m{};
  m.size = sizeof m;
  m.steps = 3;
  m.max_score = 8;
  m.highest_tile = 4;
  m.has_engine = 1;
  m.engine = "capi";
  m.engine_len = 4;
  a2pack_run* run = nullptr;
  ASSERT_EQ(a2pack_run_create(&m, 3, boards, moves, values, legal, present, 0x2100000000000011ull,
                              &run),
            A2PACK_OK)
      << a2pack_last_error();
  std::string dir = tmpdir();
  std::string path = dir + "/r.a2run2";
  ASSERT_EQ(a2pack_run_save(run, path.c_str(), A2PACK_RUN_V2, 0), A2PACK_OK);
  a2pack_run* back = nullptr;
  ASSERT_EQ(a2pack_run_load(path.c_str(), &back), A2PACK_OK);
  float v[12];
  uint8_t l[3], p[3];
  ASSERT_EQ(a2pack_run_get_steps(back, 0, 3, nullptr, nullptr, v, l, p), A2PACK_OK);
  EXPECT_EQ(std::memcmp(v, values, sizeof v), 0);
  EXPECT_EQ(std::memcmp(l, legal, 3), 0);
  EXPECT_EQ(std::memcmp(p, present, 3), 0);
  a2pack_run_meta mb{};
  mb.size = sizeof mb;
  ASSERT_EQ(a2pack_run_get_meta(back, &mb), A2PACK_OK);
  EXPECT_EQ(std::string(mb.engine, mb.engine_len), "capi");
  // A short out struct is filled only up to its size.
  struct {
    size_t size;
    uint32_t steps;
  } small{sizeof(size_t) + sizeof(uint32_t), 0};
  ASSERT_EQ(a2pack_run_get_meta(back, reinterpret_cast<a2pack_run_meta*>(&small)), A2PACK_OK);
  EXPECT_EQ(small.steps, 3u);
  a2pack_run_close(back);
  // Bad arguments.
  uint8_t bad_moves[3] = {2, 7, 3};
  EXPECT_EQ(a2pack_run_create(&m, 3, boards, bad_moves, nullptr, nullptr, nullptr, 0, &back),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_run_create(&m, 3, boards, moves, values, nullptr, nullptr, 0, &back),
            A2PACK_E_INVALID_ARGUMENT);
  a2pack_run_close(run);
  std::system(("rm -rf " + dir).c_str());
}

TEST(CapiRun, UpgradeV1) {
  // A v1 run (no branches) upgrades to v2 bytes that decode to the same run.
  uint64_t boards[2] = {0x1000000000000001ull, 0x1100000000000001ull};
  uint8_t moves[2] = {2, 0};
  a2pack_run_meta m{};
  m.size = sizeof m;
  m.steps = 2;
  a2pack_run* run = nullptr;
  ASSERT_EQ(a2pack_run_create(&m, 2, boards, moves, nullptr, nullptr, nullptr,
                              0x2000000000000011ull, &run),
            A2PACK_OK)
      << a2pack_last_error();
  uint8_t *v1 = nullptr, *v2 = nullptr, *up = nullptr;
  size_t v1_len = 0, v2_len = 0, up_len = 0;
  ASSERT_EQ(a2pack_run_encode(run, A2PACK_RUN_V1, 0, &v1, &v1_len), A2PACK_OK);
  ASSERT_EQ(a2pack_run_encode(run, A2PACK_RUN_V2, 0, &v2, &v2_len), A2PACK_OK);
  ASSERT_EQ(a2pack_run_upgrade_v1(v1, v1_len, &up, &up_len), A2PACK_OK) << a2pack_last_error();
  EXPECT_EQ(a2pack_run_detect_kind(up, up_len), A2PACK_RUN_V2);
  ASSERT_EQ(up_len, v2_len);
  EXPECT_EQ(std::memcmp(up, v2, v2_len), 0);
  a2pack_free(up);
  // A v2 payload is validated and handed back unchanged - even a
  // non-canonical one (start_unix_s 50 as an overlong varint), whose
  // re-encoding would spell the v1 magic and which v2 encoding refuses.
  const uint8_t odd[] = {'A', 0xB2, 0x00, 'T', '1', 0x01, 0, 0, 0, 0, 0, 0x04};
  ASSERT_EQ(a2pack_run_upgrade_v1(odd, sizeof odd, &up, &up_len), A2PACK_OK) << a2pack_last_error();
  ASSERT_EQ(up_len, sizeof odd);
  EXPECT_EQ(std::memcmp(up, odd, sizeof odd), 0);
  a2pack_free(up);
  a2pack_run* odd_run = nullptr;
  ASSERT_EQ(a2pack_run_decode(odd, sizeof odd, &odd_run), A2PACK_OK);
  uint8_t* again = nullptr;
  size_t again_len = 0;
  EXPECT_EQ(a2pack_run_encode(odd_run, A2PACK_RUN_V2, 0, &again, &again_len),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("v1 magic"), std::string::npos)
      << a2pack_last_error();
  EXPECT_EQ(again, nullptr);
  a2pack_run_close(odd_run);
  // Damage and bad arguments.
  v1[v1_len - 1] ^= 1;  // the CRC
  EXPECT_EQ(a2pack_run_upgrade_v1(v1, v1_len, &up, &up_len), A2PACK_E_CHECKSUM);
  EXPECT_EQ(up, nullptr);
  EXPECT_EQ(up_len, 0u);
  EXPECT_EQ(a2pack_run_upgrade_v1(v2, v2_len, nullptr, &up_len), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_run_upgrade_v1(nullptr, 5, &up, &up_len), A2PACK_E_INVALID_ARGUMENT);
  a2pack_free(v1);
  a2pack_free(v2);
  a2pack_run_close(run);
}

TEST(CapiRun, BatchColumns) {
  auto fx = fixture_bytes();
  const uint8_t* p[2] = {fx.data(), fx.data()};
  size_t l[2] = {fx.size(), fx.size()};
  a2pack_run_batch* b = nullptr;
  ASSERT_EQ(a2pack_run_batch_decode(p, l, 2, 2, &b), A2PACK_OK);
  a2pack_run_columns c{};
  c.size = sizeof c;
  ASSERT_EQ(a2pack_run_batch_columns(b, &c), A2PACK_OK);
  EXPECT_EQ(c.n_runs, 2u);
  EXPECT_EQ(c.n_steps, 2 * 959u);
  EXPECT_EQ(c.step_offsets[1], 959u);
  EXPECT_EQ(c.boards[959], 0x0010000000000001ull);
  EXPECT_EQ(c.final_boards[1], 0x100100010232001bull);
  EXPECT_EQ(c.highest_tile[0], 2048u);
  a2pack_run_batch_close(b);
  l[1] = 100;
  EXPECT_EQ(a2pack_run_batch_decode(p, l, 2, 2, &b), A2PACK_E_CORRUPT);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(std::string(a2pack_last_error()).rfind("payload 1: ", 0), 0u);
}

TEST(CapiRun, BatchLoadReadsFilesAndNamesTheBadOne) {
  std::string fx = capitest::fixture_path();
  std::string dir = tmpdir();
  std::string torn = dir + "/torn.a2run2";
  auto bytes = fixture_bytes();
  {
    FILE* f = fopen(torn.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    fwrite(bytes.data(), 1, bytes.size() - 3, f);
    fclose(f);
  }
  const char* paths[3] = {fx.c_str(), fx.c_str(), fx.c_str()};
  a2pack_run_batch* b = nullptr;
  ASSERT_EQ(a2pack_run_batch_load(paths, 3, 2, &b), A2PACK_OK);
  a2pack_run_columns c{};
  c.size = sizeof c;
  ASSERT_EQ(a2pack_run_batch_columns(b, &c), A2PACK_OK);
  EXPECT_EQ(c.n_runs, 3u);
  EXPECT_EQ(c.n_steps, 3 * 959u);
  EXPECT_EQ(c.final_boards[2], 0x100100010232001bull);
  EXPECT_EQ(a2pack_run_batch_payload_bytes(b), 3 * bytes.size());
  a2pack_run_batch_close(b);

  paths[1] = torn.c_str();
  EXPECT_EQ(a2pack_run_batch_load(paths, 3, 2, &b), A2PACK_E_CORRUPT);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(std::string(a2pack_last_error()).rfind(torn + ": ", 0), 0u) << a2pack_last_error();
  std::string missing = dir + "/missing.a2run2";
  paths[1] = missing.c_str();
  EXPECT_NE(a2pack_run_batch_load(paths, 3, 1, &b), A2PACK_OK);
  EXPECT_NE(std::string(a2pack_last_error()).find(missing), std::string::npos);
  paths[1] = nullptr;
  EXPECT_EQ(a2pack_run_batch_load(paths, 3, 1, &b), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_run_batch_load(nullptr, 0, 1, &b), A2PACK_OK);
  a2pack_run_batch_close(b);
  EXPECT_EQ(a2pack_run_batch_payload_bytes(nullptr), 0u);
  std::remove(torn.c_str());
  rmdir(dir.c_str());
}

TEST(CapiBoard, ScoreTilesMoves) {
  // Row 0 = 2 2 4 8 (exponents 1 1 2 3).
  uint64_t b = 0x1123000000000000ull;
  EXPECT_EQ(a2pack_board_score(b), 4u + 16u);  // 4: (2-1)*4, 8: (3-1)*8
  EXPECT_EQ(a2pack_board_highest_tile(b), 8u);
  EXPECT_EQ(a2pack_board_apply_move(b, A2PACK_MOVE_LEFT), 0x2230000000000000ull);
  EXPECT_EQ(a2pack_board_apply_move(b, 9), b);
  uint32_t legal = a2pack_board_legal_moves(b);
  EXPECT_EQ(legal & (1u << A2PACK_MOVE_UP), 0u);  // top row cannot move up
  EXPECT_NE(legal & (1u << A2PACK_MOVE_DOWN), 0u);
}

TEST(CapiGen, DeterministicAndOptionsChecked) {
  a2pack_gen_options o;
  a2pack_gen_options_init(&o);
  EXPECT_EQ(o.size, sizeof o);
  EXPECT_EQ(o.policy, A2PACK_POLICY_EXPECTIMAX);
  o.policy = A2PACK_POLICY_RANDOM;
  a2pack_run *a = nullptr, *b = nullptr;
  ASSERT_EQ(a2pack_gen_run(&o, 5, &a), A2PACK_OK);
  ASSERT_EQ(a2pack_gen_run(&o, 5, &b), A2PACK_OK);
  uint8_t *da, *db;
  size_t la, lb;
  ASSERT_EQ(a2pack_run_encode(a, A2PACK_RUN_V2, 0, &da, &la), A2PACK_OK);
  ASSERT_EQ(a2pack_run_encode(b, A2PACK_RUN_V2, 0, &db, &lb), A2PACK_OK);
  ASSERT_EQ(la, lb);
  EXPECT_EQ(std::memcmp(da, db, la), 0);
  a2pack_free(da);
  a2pack_free(db);
  a2pack_run_close(a);
  a2pack_run_close(b);
  o.depth = 99;
  EXPECT_EQ(a2pack_gen_run(&o, 5, &a), A2PACK_E_INVALID_ARGUMENT);
  o.depth = 2;
  o.size = 0;
  EXPECT_EQ(a2pack_gen_run(&o, 5, &a), A2PACK_E_INVALID_ARGUMENT);
}

TEST(CapiGen, ProgressCanInterrupt) {
  a2pack_gen_options o;
  a2pack_gen_options_init(&o);
  o.policy = A2PACK_POLICY_RANDOM;
  std::string dir = tmpdir();
  auto stop = [](void*, uint64_t, uint64_t) -> int { return 1; };
  EXPECT_EQ(a2pack_gen_dir(&o, dir.c_str(), 50, 1, stop, nullptr), A2PACK_E_INTERRUPTED);
  std::system(("rm -rf " + dir).c_str());
}
