// JSONL export: upstream's exact bytes, and the same bytes for any worker
// count or storage choice.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "pack/jsonl.hpp"
#include "pack/writer.hpp"
#include "test_pack_util.hpp"
#include "test_util.hpp"

using namespace a2pack;
using namespace a2pack::pack;

namespace {

run::Run tiny_run() {
  run::Run r;
  r.meta.steps = 2;
  r.meta.start_unix_s = 1755927754;
  r.meta.elapsed_s = 15.259485f;
  r.meta.max_score = 20504;
  r.meta.highest_tile = 2048;
  r.resize(2);
  r.boards = {0x0010000000000001ull, 0x100100010232001bull};
  r.moves = {0, 3};
  r.present = {1, 0};
  r.legal = {0b1011, 0};
  r.values = {0.99999994f, 0.5f, 0.0f, 0.25f, 0, 0, 0, 0};
  r.final_board = 0x1234;
  return r;
}

std::string slurp(const std::string& p) {
  auto b = a2test::read_bytes(p);
  return std::string(b.begin(), b.end());
}

std::string make_pack(const std::string& path, const std::vector<std::string>& payloads,
                      WriterOptions o = {}) {
  Writer w(path, o);
  for (auto& p : payloads) w.add(reinterpret_cast<const uint8_t*>(p.data()), p.size());
  w.finish();
  return path;
}

}  // namespace

TEST(PackJsonl, RunsModeMatchesUpstreamSchema) {
  a2test::TempDir dir;
  std::string v2 = run::encode_v2(tiny_run());
  Reader r(make_pack(dir / "p.a2pack", {v2}));
  JsonlSummary s = export_jsonl(r, dir / "runs.jsonl", JsonlMode::runs, 1, true, {});
  const std::string expect =
      "{\"run_idx\":0,\"steps\":2,\"start_unix_s\":1755927754,\"elapsed_s\":15.259485,"
      "\"max_score\":20504,\"highest_tile\":2048,\"final_board\":4660,"
      "\"states\":[4503599627370497,1153202983915356187,4660],\"moves\":[\"UP\",\"RIGHT\"]}\n";
  EXPECT_EQ(slurp(dir / "runs.jsonl"), expect);
  EXPECT_EQ(s.bytes, expect.size());
  EXPECT_EQ(s.lines, 1u);
}

TEST(PackJsonl, StepsModeMatchesUpstreamSchema) {
  a2test::TempDir dir;
  std::string v2 = run::encode_v2(tiny_run());
  Reader r(make_pack(dir / "p.a2pack", {v2}));
  JsonlSummary s = export_jsonl(r, dir / "steps.jsonl", JsonlMode::steps, 1, true, {});
  char uuid[32];
  std::snprintf(uuid, sizeof uuid, "a2r-%08x-%08x", crc32c::compute(v2.data(), v2.size()), 0u);
  const std::string expect =
      std::string("{\"run_idx\":0,\"run_uuid\":\"") + uuid +
      "\",\"step_idx\":0,\"pre_board\":[0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,1],\"chosen\":\"UP\","
      "\"branches\":[{\"legal\":true,\"value\":1.0},{\"legal\":true,\"value\":0.5},"
      "{\"legal\":false,\"value\":0.0},{\"legal\":true,\"value\":0.25}]}\n"
      "{\"run_idx\":0,\"run_uuid\":\"" +
      uuid +
      "\",\"step_idx\":1,\"pre_board\":[1,0,0,1,0,0,0,1,0,2,3,2,0,0,1,11],\"chosen\":\"RIGHT\","
      "\"branches\":[{\"legal\":false,\"value\":0.0},{\"legal\":false,\"value\":0.0},"
      "{\"legal\":false,\"value\":0.0},{\"legal\":true,\"value\":1.0}]}\n";
  EXPECT_EQ(slurp(dir / "steps.jsonl"), expect);
  EXPECT_EQ(s.lines, 2u);
}

TEST(PackJsonl, ChosenValueClampOnlyAboveTheThreshold) {
  run::Run r = tiny_run();
  r.values[0] = 0.999998f;  // below 1 - 1e-6: written as is
  JsonBuf b;
  append_steps_json(b, 7, 0xABCDEF01, r);
  std::string s = b.str();
  EXPECT_NE(s.find("\"run_uuid\":\"a2r-abcdef01-00000007\""), std::string::npos) << s;
  EXPECT_NE(s.find("{\"legal\":true,\"value\":0.999998}"), std::string::npos) << s;
  r.values[1] = 0.99999994f;  // not the chosen move: never clamped
  JsonBuf c;
  append_steps_json(c, 7, 0, r);
  EXPECT_NE(c.str().find("\"value\":0.99999994}"), std::string::npos) << c.str();
}

TEST(PackJsonl, SameBytesForAnyWorkerCountAndStorage) {
  a2test::TempDir dir;
  std::vector<std::string> payloads;
  for (int i = 0; i < 61; ++i) payloads.push_back(a2test::synthetic_bytes(i, 5 + (i * 37) % 90));
  Reader plain(make_pack(dir / "plain.a2pack", payloads));
  WriterOptions z;
  z.compression = Compression::zstd;
  z.entry_crc = false;
  Reader packed(make_pack(dir / "z.a2pack", payloads, z));
  for (JsonlMode mode : {JsonlMode::runs, JsonlMode::steps}) {
    export_jsonl(plain, dir / "ref.jsonl", mode, 1, true, {});
    const std::string ref = slurp(dir / "ref.jsonl");
    EXPECT_GT(ref.size(), 1000u);
    for (uint32_t w : {2u, 3u, 8u}) {
      export_jsonl(plain, dir / "w.jsonl", mode, w, true, {});
      EXPECT_EQ(slurp(dir / "w.jsonl"), ref) << "workers " << w;
    }
    export_jsonl(packed, dir / "z.jsonl", mode, 2, false, {});
    EXPECT_EQ(slurp(dir / "z.jsonl"), ref);
  }
}

TEST(PackJsonl, ACorruptEntryFailsTheExportAndLeavesNoFile) {
  a2test::TempDir dir;
  std::vector<std::string> payloads;
  for (int i = 0; i < 40; ++i) payloads.push_back(a2test::synthetic_bytes(i, 20));
  make_pack(dir / "p.a2pack", payloads);
  auto bytes = a2test::read_bytes(dir / "p.a2pack");
  Reader good(dir / "p.a2pack");
  bytes[good.entry(33).offset + 10] ^= 0xFF;
  a2test::write_bytes(dir / "bad.a2pack", bytes.data(), bytes.size());
  Reader r(dir / "bad.a2pack");
  try {
    export_jsonl(r, dir / "out.jsonl", JsonlMode::runs, 2, true, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_CHECKSUM);
    EXPECT_NE(std::string(e.what()).find("entry 33"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "out.jsonl"));
}
