// a2pack_dataset_build_from_rows: the same three files as a2pack_dataset_build
// for the same runs (SOURCE_DATE_EPOCH fixing the manifest's time stamps), and
// rows that disagree with their runs refused before anything is written.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "a2pack.h"

namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/a2pack-capi-rows-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

struct Env {
  explicit Env(const char* value) { setenv("SOURCE_DATE_EPOCH", value, 1); }
  ~Env() { unsetenv("SOURCE_DATE_EPOCH"); }
};

// The runs of `dir` in the builder's order, as metadata records (the engine
// strings kept in `engines`).
std::vector<a2pack_dataset_run_record> records(const std::string& dir,
                                               std::vector<std::string>& engines) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".a2run2") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  engines.reserve(files.size());
  std::vector<a2pack_dataset_run_record> out;
  for (const auto& f : files) {
    a2pack_run* run = nullptr;
    EXPECT_EQ(a2pack_run_load(f.c_str(), &run), A2PACK_OK) << a2pack_last_error();
    a2pack_run_meta m{};
    m.size = sizeof m;
    EXPECT_EQ(a2pack_run_get_meta(run, &m), A2PACK_OK);
    a2pack_dataset_run_record r{};
    r.num_steps = a2pack_run_step_count(run);
    r.max_score = static_cast<int64_t>(m.max_score);
    r.highest_tile = m.highest_tile;
    r.start_time = static_cast<int64_t>(m.start_unix_s);
    r.elapsed_s = m.elapsed_s;
    if (m.has_engine) {
      engines.emplace_back(m.engine, m.engine_len);
      r.engine = engines.back().c_str();
    }
    out.push_back(r);
    a2pack_run_close(run);
  }
  return out;
}

}  // namespace

TEST(CapiDatasetRows, SameFilesAsABuildAndRowsChecked) {
  TempDir t;
  a2pack_gen_options g;
  a2pack_gen_options_init(&g);
  g.policy = A2PACK_POLICY_GREEDY;
  g.max_steps = 60;
  ASSERT_EQ(a2pack_gen_dir(&g, (t.path + "/runs").c_str(), 6, 3, nullptr, nullptr), A2PACK_OK);
  const std::string runs = t.path + "/runs";
  Env env("1700000000");

  ASSERT_EQ(a2pack_dataset_build(runs.c_str(), (t.path + "/cli").c_str(), nullptr, nullptr),
            A2PACK_OK)
      << a2pack_last_error();
  a2pack_dataset* ds = nullptr;
  ASSERT_EQ(a2pack_dataset_open((t.path + "/cli").c_str(), nullptr, &ds), A2PACK_OK);
  a2pack_dataset_info info{};
  info.size = sizeof info;
  ASSERT_EQ(a2pack_dataset_get_info(ds, &info), A2PACK_OK);
  std::vector<uint8_t> rows(info.data, info.data + info.rows * A2PACK_DATASET_ROW_BYTES);
  a2pack_dataset_close(ds);
  std::vector<std::string> engines;
  auto recs = records(runs, engines);
  ASSERT_EQ(recs.size(), 6u);

  a2pack_dataset_rows_options o;
  a2pack_dataset_rows_options_init(&o);
  EXPECT_EQ(o.size, sizeof o);
  EXPECT_EQ(o.lock_timeout_ms, 60000);
  o.source_input = runs.c_str();
  o.source_kind = "dir";
  a2pack_dataset_build_result r{};
  r.size = sizeof r;
  const std::string out = t.path + "/rows";
  ASSERT_EQ(a2pack_dataset_build_from_rows(out.c_str(), rows.data(), info.rows, recs.data(),
                                           recs.size(), &o, &r),
            A2PACK_OK)
      << a2pack_last_error();
  EXPECT_EQ(r.total_rows, info.rows);
  EXPECT_EQ(r.total_runs, 6u);
  for (const char* f : {"steps.npy", "metadata.db", "manifest.json"})
    EXPECT_EQ(slurp(out + "/" + f), slurp(t.path + "/cli/" + f)) << f << " differs";
  EXPECT_NE(slurp(out + "/manifest.json").find("\"created\": \"2023-11-14T22:13:20Z\""),
            std::string::npos);
  // The function table has it too.
  const a2pack_api_table* api = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->dataset->build_from_rows, &a2pack_dataset_build_from_rows);
  EXPECT_EQ(api->dataset->rows_options_init, &a2pack_dataset_rows_options_init);

  // A row whose step_index disagrees with its run: refused, naming the row;
  // nothing written.
  std::vector<uint8_t> bad = rows;
  const uint64_t row = recs[0].num_steps + 2;  // step 2 of run 1
  bad[row * A2PACK_DATASET_ROW_BYTES + 30] ^= 0x40;
  const std::string out2 = t.path + "/bad";
  EXPECT_EQ(a2pack_dataset_build_from_rows(out2.c_str(), bad.data(), info.rows, recs.data(),
                                           recs.size(), nullptr, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("row " + std::to_string(row) + ":"),
            std::string::npos)
      << a2pack_last_error();
  EXPECT_FALSE(fs::exists(out2));
  // Counts that do not add up.
  EXPECT_EQ(a2pack_dataset_build_from_rows(out2.c_str(), rows.data(), info.rows - 1, recs.data(),
                                           recs.size(), nullptr, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_dataset_build_from_rows(out2.c_str(), rows.data(), info.rows, recs.data(),
                                           recs.size() - 1, nullptr, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_FALSE(fs::exists(out2));
  // An existing folder without overwrite, as for a build.
  EXPECT_EQ(a2pack_dataset_build_from_rows(out.c_str(), rows.data(), info.rows, recs.data(),
                                           recs.size(), nullptr, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_dataset_build_from_rows(nullptr, rows.data(), info.rows, recs.data(),
                                           recs.size(), nullptr, nullptr),
            A2PACK_E_INVALID_ARGUMENT);

  // The same run twice: refused, naming both, nothing written; written with
  // allow_duplicates, and counted.
  const uint64_t n0 = recs[0].num_steps;
  std::vector<uint8_t> twice(rows.begin(), rows.begin() + n0 * A2PACK_DATASET_ROW_BYTES);
  twice.insert(twice.end(), twice.begin(), twice.end());
  for (uint64_t i = n0; i < 2 * n0; ++i) twice[i * A2PACK_DATASET_ROW_BYTES + 26] = 1;  // run_id 1
  const a2pack_dataset_run_record two[2] = {recs[0], recs[0]};
  EXPECT_EQ(a2pack_dataset_build_from_rows(out2.c_str(), twice.data(), 2 * n0, two, 2, nullptr,
                                           nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("1 of the 2 runs given repeats an earlier run "
                                                  "of this input"),
            std::string::npos)
      << a2pack_last_error();
  EXPECT_NE(std::string(a2pack_last_error()).find("run 1 repeats run 0"), std::string::npos);
  EXPECT_FALSE(fs::exists(out2));
  a2pack_dataset_rows_options_init(&o);
  o.allow_duplicates = 1;
  r.size = sizeof r;
  ASSERT_EQ(a2pack_dataset_build_from_rows(out2.c_str(), twice.data(), 2 * n0, two, 2, &o, &r),
            A2PACK_OK)
      << a2pack_last_error();
  EXPECT_EQ(r.runs_duplicated, 1u);
}

TEST(CapiDatasetRows, BadSourceDateEpochIsAnError) {
  TempDir t;
  Env env("yesterday");
  EXPECT_EQ(a2pack_dataset_build_from_rows((t.path + "/ds").c_str(), nullptr, 0, nullptr, 0,
                                           nullptr, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("SOURCE_DATE_EPOCH"), std::string::npos);
  EXPECT_FALSE(fs::exists(t.path + "/ds"));
}
