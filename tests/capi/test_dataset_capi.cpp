// The dataset section of the C API, through the shared library and nothing
// but a2pack.h: build from generated runs (a folder and a packfile), append,
// open, gather, select, split, sample, stats, verify, and argument errors.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "a2pack.h"

namespace {

std::string tmpdir() {
  char tmpl[] = "/tmp/a2pack-capi-ds-XXXXXX";
  return mkdtemp(tmpl);
}

struct Owned {
  void* p = nullptr;
  ~Owned() { a2pack_free(p); }
};

struct DsGuard {
  a2pack_dataset* ds = nullptr;
  ~DsGuard() { a2pack_dataset_close(ds); }
};

// Generated greedy runs (with branches) in dir/runs and dir/more, once.
struct WorkDir {
  std::string path;
  ~WorkDir() { std::filesystem::remove_all(path); }
};

const std::string& workdir() {
  static WorkDir dir{[] {
    std::string d = tmpdir();
    a2pack_gen_options g;
    a2pack_gen_options_init(&g);
    g.policy = A2PACK_POLICY_GREEDY;
    g.max_steps = 120;
    g.jobs = 2;
    EXPECT_EQ(a2pack_gen_dir(&g, (d + "/runs").c_str(), 12, 7, nullptr, nullptr), A2PACK_OK);
    EXPECT_EQ(a2pack_gen_dir(&g, (d + "/more").c_str(), 5, 8, nullptr, nullptr), A2PACK_OK);
    g.policy = A2PACK_POLICY_RANDOM;
    EXPECT_EQ(a2pack_gen_dir(&g, (d + "/random").c_str(), 3, 9, nullptr, nullptr), A2PACK_OK);
    return d;
  }()};
  return dir.path;
}

int progress_calls = 0;
int count_progress(void*, uint64_t done, uint64_t total) {
  ++progress_calls;
  EXPECT_LE(done, total);
  return 0;
}
int stop_progress(void*, uint64_t, uint64_t) { return 1; }

std::string build_fresh(const std::string& name) {
  std::string out = workdir() + "/" + name;
  a2pack_dataset_build_options o;
  a2pack_dataset_build_options_init(&o);
  o.overwrite = 1;
  EXPECT_EQ(a2pack_dataset_build((workdir() + "/runs").c_str(), out.c_str(), &o, nullptr), A2PACK_OK)
      << a2pack_last_error();
  return out;
}

}  // namespace

TEST(CapiDataset, BuildAppendOpenInfo) {
  std::string out = workdir() + "/ds-basic";
  a2pack_dataset_build_options o;
  a2pack_dataset_build_options_init(&o);
  EXPECT_EQ(o.size, sizeof o);
  o.workers = 2;
  o.overwrite = 1;
  o.progress = count_progress;
  a2pack_dataset_build_result r{};
  r.size = sizeof r;
  ASSERT_EQ(a2pack_dataset_build((workdir() + "/runs").c_str(), out.c_str(), &o, &r), A2PACK_OK)
      << a2pack_last_error();
  EXPECT_GT(progress_calls, 0);
  EXPECT_EQ(r.runs_added, 12u);
  EXPECT_EQ(r.total_rows, r.rows_added);
  uint64_t first_rows = r.rows_added;

  a2pack_dataset_build_result r2{};
  r2.size = sizeof r2;
  ASSERT_EQ(a2pack_dataset_append(out.c_str(), (workdir() + "/more").c_str(), nullptr, &r2),
            A2PACK_OK)
      << a2pack_last_error();
  EXPECT_EQ(r2.runs_added, 5u);
  EXPECT_EQ(r2.total_runs, 17u);
  EXPECT_EQ(r2.total_rows, first_rows + r2.rows_added);

  DsGuard g;
  ASSERT_EQ(a2pack_dataset_open(out.c_str(), nullptr, &g.ds), A2PACK_OK) << a2pack_last_error();
  a2pack_dataset_info info{};
  info.size = sizeof info;
  ASSERT_EQ(a2pack_dataset_get_info(g.ds, &info), A2PACK_OK);
  EXPECT_EQ(info.rows, r2.total_rows);
  EXPECT_EQ(info.runs, 17u);
  EXPECT_EQ(info.next_run_id, 17u);
  EXPECT_EQ(info.has_manifest, 1);
  EXPECT_EQ(info.mapped, 0);
  EXPECT_EQ(info.uncommitted_rows, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(info.data) % 64, 0u);

  Owned rep;
  EXPECT_EQ(a2pack_dataset_verify(out.c_str(), 0, 0, reinterpret_cast<char**>(&rep.p)), A2PACK_OK);
  ASSERT_NE(rep.p, nullptr);
  EXPECT_NE(std::string(static_cast<char*>(rep.p)).find("\"ok\":true"), std::string::npos);

  // The api table reaches the same functions.
  const a2pack_api_table* t = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(t->dataset, nullptr);
  EXPECT_EQ(t->dataset->size, sizeof(a2pack_dataset_api));
  EXPECT_EQ(t->dataset->gather, &a2pack_dataset_gather);
  EXPECT_EQ(t->dataset->sampler_batch, &a2pack_dataset_sampler_batch);
}

TEST(CapiDataset, GatherColumnsAndBounds) {
  std::string out = build_fresh("ds-gather");
  a2pack_dataset_open_options oo;
  a2pack_dataset_open_options_init(&oo);
  EXPECT_EQ(oo.verify_crc, 1);
  oo.mmap = 1;
  DsGuard g;
  ASSERT_EQ(a2pack_dataset_open(out.c_str(), &oo, &g.ds), A2PACK_OK) << a2pack_last_error();
  a2pack_dataset_info info{};
  info.size = sizeof info;
  a2pack_dataset_get_info(g.ds, &info);
  EXPECT_EQ(info.mapped, 1);
  std::vector<int64_t> idx;
  for (uint64_t i = 0; i < 3000; ++i) idx.push_back(static_cast<int64_t>((i * 977) % info.rows));
  std::vector<uint8_t> rows(32 * idx.size());
  ASSERT_EQ(a2pack_dataset_gather(g.ds, idx.data(), idx.size(), rows.data(), 2), A2PACK_OK);
  for (size_t i = 0; i < idx.size(); ++i)
    ASSERT_EQ(std::memcmp(rows.data() + 32 * i, info.data + 32 * idx[i], 32), 0);

  size_t n = idx.size();
  std::vector<uint8_t> exps(16 * n), moves(n), legal(4 * n);
  std::vector<float> ev(4 * n);
  a2pack_dataset_columns c{};
  c.size = sizeof c;
  c.exponents = exps.data();
  c.moves = moves.data();
  c.legal = legal.data();
  c.ev_values = ev.data();
  ASSERT_EQ(a2pack_dataset_gather_columns(g.ds, idx.data(), n, &c, 0), A2PACK_OK);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* row = rows.data() + 32 * i;
    uint64_t board;
    std::memcpy(&board, row, 8);
    EXPECT_EQ(exps[16 * i], board >> 60);
    EXPECT_EQ(exps[16 * i + 15], board & 0xF);
    EXPECT_EQ(moves[i], row[8]);
    EXPECT_EQ(legal[4 * i + row[8]], 1);  // generated runs: the chosen move is legal
    EXPECT_EQ(std::memcmp(&ev[4 * i], row + 10, 16), 0);
    EXPECT_EQ(ev[4 * i + row[8]], 1.0f);
  }
  int64_t bad[2] = {0, static_cast<int64_t>(info.rows)};
  EXPECT_EQ(a2pack_dataset_gather(g.ds, bad, 2, rows.data(), 1), A2PACK_E_OUT_OF_RANGE);
  EXPECT_NE(std::string(a2pack_last_error()).find("position 1"), std::string::npos);
  EXPECT_EQ(a2pack_dataset_gather(g.ds, nullptr, 2, rows.data(), 1), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_dataset_gather(nullptr, bad, 1, rows.data(), 1), A2PACK_E_INVALID_ARGUMENT);
  a2pack_dataset_columns tiny{};
  EXPECT_EQ(a2pack_dataset_gather_columns(g.ds, bad, 1, &tiny, 1), A2PACK_E_INVALID_ARGUMENT);
}

TEST(CapiDataset, SelectSplitStats) {
  std::string out = build_fresh("ds-select");
  DsGuard g;
  ASSERT_EQ(a2pack_dataset_open(out.c_str(), nullptr, &g.ds), A2PACK_OK);
  a2pack_dataset_info info{};
  info.size = sizeof info;
  a2pack_dataset_get_info(g.ds, &info);

  int64_t* all = nullptr;
  size_t n_all = 0;
  ASSERT_EQ(a2pack_dataset_select(g.ds, nullptr, nullptr, 0, &all, &n_all), A2PACK_OK);
  EXPECT_EQ(n_all, info.rows);
  for (size_t i = 0; i < n_all; ++i) ASSERT_EQ(all[i], static_cast<int64_t>(i));
  a2pack_free(all);

  a2pack_sql_param p[2] = {};
  p[0].type = A2PACK_SQL_INTEGER;
  p[0].integer = 0;
  p[1].type = A2PACK_SQL_TEXT;
  p[1].text = "3";
  p[1].text_len = 1;
  int64_t* ids = nullptr;
  size_t n_ids = 0;
  ASSERT_EQ(a2pack_dataset_select_runs(g.ds, "max_score >= ? AND id < ?", p, 2, &ids, &n_ids),
            A2PACK_OK)
      << a2pack_last_error();
  ASSERT_EQ(n_ids, 3u);
  EXPECT_EQ(ids[2], 2);
  a2pack_free(ids);

  int64_t* sel = nullptr;
  size_t n_sel = 7;
  EXPECT_EQ(a2pack_dataset_select(g.ds, "max_score < 0", nullptr, 0, &sel, &n_sel), A2PACK_OK);
  EXPECT_EQ(sel, nullptr);
  EXPECT_EQ(n_sel, 0u);
  EXPECT_EQ(a2pack_dataset_select(g.ds, "nonsense(", nullptr, 0, &sel, &n_sel),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("metadata.db"), std::string::npos);
  p[0].type = static_cast<a2pack_sql_type>(9);
  EXPECT_EQ(a2pack_dataset_select(g.ds, "id = ?", p, 1, &sel, &n_sel), A2PACK_E_INVALID_ARGUMENT);

  int64_t *tr = nullptr, *va = nullptr;
  size_t ntr = 0, nva = 0;
  ASSERT_EQ(a2pack_dataset_split(g.ds, nullptr, nullptr, 0, 0.3, 11, nullptr, nullptr, 0, &tr, &ntr,
                                 &va, &nva),
            A2PACK_OK);
  EXPECT_EQ(ntr + nva, info.rows);
  std::set<uint32_t> trr, var;
  for (size_t i = 0; i < ntr; ++i) trr.insert(info.data[32 * tr[i] + 26]);
  for (size_t i = 0; i < nva; ++i) var.insert(info.data[32 * va[i] + 26]);
  for (auto r : var) EXPECT_EQ(trr.count(r), 0u);
  a2pack_free(tr);
  a2pack_free(va);
  a2pack_sql_param q{};
  q.type = A2PACK_SQL_INTEGER;
  q.integer = 10;
  ASSERT_EQ(a2pack_dataset_split(g.ds, "", nullptr, 0, 0, 0, "id >= ?", &q, 1, &tr, &ntr, &va, &nva),
            A2PACK_OK);
  var.clear();
  for (size_t i = 0; i < nva; ++i) var.insert(info.data[32 * va[i] + 26]);
  EXPECT_EQ(var, (std::set<uint32_t>{10, 11}));
  a2pack_free(tr);
  a2pack_free(va);

  Owned js;
  ASSERT_EQ(a2pack_dataset_stats_json(g.ds, 0, reinterpret_cast<char**>(&js.p)), A2PACK_OK);
  std::string s = static_cast<char*>(js.p);
  EXPECT_NE(s.find("\"rows\":" + std::to_string(info.rows)), std::string::npos) << s;
  EXPECT_NE(s.find("\"moves\""), std::string::npos);
}

TEST(CapiDataset, SamplerIsDeterministic) {
  std::vector<int64_t> idx = {5, 9, 2, 44, 17, 3, 8};
  a2pack_dataset_sampler *a = nullptr, *b = nullptr;
  ASSERT_EQ(a2pack_dataset_sampler_open(idx.data(), idx.size(), 123, 3, 0, &a), A2PACK_OK);
  ASSERT_EQ(a2pack_dataset_sampler_open(idx.data(), idx.size(), 123, 3, 0, &b), A2PACK_OK);
  EXPECT_EQ(a2pack_dataset_sampler_batch_count(a), 3u);
  std::multiset<int64_t> seen;
  for (size_t k = 0; k < 3; ++k) {
    int64_t x[3], y[3];
    size_t nx = 0, ny = 0;
    ASSERT_EQ(a2pack_dataset_sampler_batch(a, k, x, &nx), A2PACK_OK);
    ASSERT_EQ(a2pack_dataset_sampler_batch(b, k, y, &ny), A2PACK_OK);
    ASSERT_EQ(nx, ny);
    EXPECT_EQ(nx, k == 2 ? 1u : 3u);
    for (size_t i = 0; i < nx; ++i) {
      EXPECT_EQ(x[i], y[i]);
      seen.insert(x[i]);
    }
  }
  EXPECT_EQ(seen, std::multiset<int64_t>(idx.begin(), idx.end()));
  int64_t x[3];
  size_t nx;
  EXPECT_EQ(a2pack_dataset_sampler_batch(a, 3, x, &nx), A2PACK_E_OUT_OF_RANGE);
  EXPECT_EQ(a2pack_dataset_sampler_set_epoch(a, 4), A2PACK_OK);
  a2pack_dataset_sampler_close(a);
  a2pack_dataset_sampler_close(b);
  a2pack_dataset_sampler_close(nullptr);
  a2pack_dataset_sampler* s = nullptr;
  EXPECT_EQ(a2pack_dataset_sampler_open(nullptr, 10, 0, 0, 0, &s), A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
}

TEST(CapiDataset, ErrorsAndPackfileInput) {
  std::string out = workdir() + "/ds-err";
  EXPECT_EQ(a2pack_dataset_build((workdir() + "/random").c_str(), out.c_str(), nullptr, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("--allow-missing-branches"), std::string::npos);
  a2pack_dataset_build_options o;
  a2pack_dataset_build_options_init(&o);
  o.progress = stop_progress;
  EXPECT_EQ(a2pack_dataset_build((workdir() + "/runs").c_str(), out.c_str(), &o, nullptr),
            A2PACK_E_INTERRUPTED);
  a2pack_dataset_build_options tiny{};
  EXPECT_EQ(a2pack_dataset_build((workdir() + "/runs").c_str(), out.c_str(), &tiny, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_dataset_build(nullptr, out.c_str(), nullptr, nullptr), A2PACK_E_INVALID_ARGUMENT);
  DsGuard g;
  EXPECT_EQ(a2pack_dataset_open(out.c_str(), nullptr, &g.ds), A2PACK_E_NOT_FOUND);
  EXPECT_EQ(g.ds, nullptr);
  char* rep = nullptr;
  EXPECT_EQ(a2pack_dataset_verify(out.c_str(), 0, 0, &rep), A2PACK_E_NOT_FOUND);
  ASSERT_NE(rep, nullptr);
  EXPECT_NE(std::string(rep).find("\"ok\":false"), std::string::npos);
  a2pack_free(rep);
  EXPECT_EQ(a2pack_dataset_verify(out.c_str(), 8, 0, nullptr), A2PACK_E_INVALID_ARGUMENT);
  a2pack_dataset_close(nullptr);

  // Packfile input: the same rows as the folder it was packed from.
  std::string pack = workdir() + "/runs.a2pack";
  ASSERT_EQ(a2pack_pack_dir((workdir() + "/runs").c_str(), pack.c_str(), nullptr, nullptr, nullptr,
                            nullptr),
            A2PACK_OK)
      << a2pack_last_error();
  std::string from_pack = workdir() + "/ds-pack";
  a2pack_dataset_build_options_init(&o);
  o.overwrite = 1;
  ASSERT_EQ(a2pack_dataset_build(pack.c_str(), from_pack.c_str(), &o, nullptr), A2PACK_OK)
      << a2pack_last_error();
  std::string from_dir = build_fresh("ds-dir");
  DsGuard a, b;
  ASSERT_EQ(a2pack_dataset_open(from_pack.c_str(), nullptr, &a.ds), A2PACK_OK);
  ASSERT_EQ(a2pack_dataset_open(from_dir.c_str(), nullptr, &b.ds), A2PACK_OK);
  a2pack_dataset_info ia{}, ib{};
  ia.size = ib.size = sizeof ia;
  a2pack_dataset_get_info(a.ds, &ia);
  a2pack_dataset_get_info(b.ds, &ib);
  ASSERT_EQ(ia.rows, ib.rows);
  EXPECT_EQ(std::memcmp(ia.data, ib.data, 32 * ia.rows), 0);
  EXPECT_EQ(ia.steps_crc32c, ib.steps_crc32c);
  // Appending from a packfile works too. These are the runs the dataset was
  // built from: refused, naming the entries, unless duplicates are allowed.
  EXPECT_EQ(a2pack_dataset_append(from_pack.c_str(), pack.c_str(), nullptr, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("runs.a2pack: entry 0 is run 0"),
            std::string::npos)
      << a2pack_last_error();
  // A caller compiled before allow_duplicates existed passes a shorter
  // struct: the field reads as its default, 0.
  a2pack_dataset_build_options_init(&o);
  o.allow_duplicates = 1;
  o.size = offsetof(a2pack_dataset_build_options, allow_duplicates);
  EXPECT_EQ(a2pack_dataset_append(from_pack.c_str(), pack.c_str(), &o, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  o.size = sizeof o;
  a2pack_dataset_build_result res{};
  res.size = sizeof res;
  EXPECT_EQ(a2pack_dataset_append(from_pack.c_str(), pack.c_str(), &o, &res), A2PACK_OK)
      << a2pack_last_error();
  EXPECT_EQ(res.runs_duplicated, res.runs_added);
  EXPECT_GT(res.runs_added, 0u);
  char* vrep = nullptr;
  EXPECT_EQ(a2pack_dataset_verify(from_pack.c_str(), 0, 0, &vrep), A2PACK_OK) << a2pack_last_error();
  ASSERT_NE(vrep, nullptr);
  EXPECT_NE(std::string(vrep).find("\"duplicates\":{\"allowed\":"), std::string::npos) << vrep;
  a2pack_free(vrep);
  std::string junk = workdir() + "/junk.a2pack";
  FILE* f = std::fopen(junk.c_str(), "wb");
  std::fputs("not a pack", f);
  std::fclose(f);
  EXPECT_NE(a2pack_dataset_append(from_pack.c_str(), junk.c_str(), nullptr, nullptr), A2PACK_OK);
  EXPECT_NE(std::string(a2pack_last_error()).find("junk.a2pack"), std::string::npos);
}

namespace {
struct BadSeen {
  std::vector<std::string> labels;
};
void on_bad(void* user, const char* label, a2pack_status status, const char* message) {
  EXPECT_NE(status, A2PACK_OK);
  EXPECT_NE(std::strlen(message), 0u);
  static_cast<BadSeen*>(user)->labels.push_back(label);
}
}  // namespace

TEST(CapiDataset, SkipBadVerifyFlagsAndLockTimeoutDefault) {
  a2pack_dataset_build_options o;
  a2pack_dataset_build_options_init(&o);
  EXPECT_EQ(o.lock_timeout_ms, 60000);
  EXPECT_EQ(o.skip_bad, 0);

  // A folder of good runs plus one that is not a run file.
  std::string in = workdir() + "/withbad";
  std::filesystem::create_directories(in);
  for (const auto& e : std::filesystem::directory_iterator(workdir() + "/more"))
    std::filesystem::copy_file(e.path(), in + "/" + e.path().filename().string(),
                               std::filesystem::copy_options::overwrite_existing);
  {
    FILE* f = std::fopen((in + "/zz-bad.a2run2").c_str(), "wb");
    std::fputs("garbage", f);
    std::fclose(f);
  }
  std::string out = workdir() + "/skipbad";
  EXPECT_NE(a2pack_dataset_build(in.c_str(), out.c_str(), &o, nullptr), A2PACK_OK);
  EXPECT_NE(std::string(a2pack_last_error()).find("zz-bad.a2run2"), std::string::npos);
  BadSeen seen;
  o.skip_bad = 1;
  o.on_bad_input = &on_bad;
  o.on_bad_input_user = &seen;
  a2pack_dataset_build_result r{};
  r.size = sizeof r;
  ASSERT_EQ(a2pack_dataset_build(in.c_str(), out.c_str(), &o, &r), A2PACK_OK) << a2pack_last_error();
  EXPECT_EQ(r.runs_added, 5u);
  EXPECT_EQ(r.runs_skipped, 1u);
  ASSERT_EQ(seen.labels.size(), 1u);
  EXPECT_NE(seen.labels[0].find("zz-bad.a2run2"), std::string::npos);

  char* js = nullptr;
  EXPECT_EQ(a2pack_dataset_verify(out.c_str(), A2PACK_DATASET_VERIFY_FULL, 1, &js), A2PACK_OK);
  EXPECT_NE(std::string(js).find("\"warnings\""), std::string::npos);
  a2pack_free(js);
  EXPECT_EQ(a2pack_dataset_verify(out.c_str(), A2PACK_DATASET_VERIFY_DISCARD_UNRECORDED, 1, nullptr),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_EQ(a2pack_dataset_verify(out.c_str(),
                                  A2PACK_DATASET_VERIFY_REPAIR |
                                      A2PACK_DATASET_VERIFY_DISCARD_UNRECORDED,
                                  1, nullptr),
            A2PACK_OK)
      << a2pack_last_error();
}
