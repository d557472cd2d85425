// Limits on a dataset's SQL selections through the C API: a deadline and a
// progress callback stop a query that would never end (a recursive CTE),
// naming the query; a normal query is unaffected; bad options are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "a2pack.h"

namespace {

// A filter that matches nothing and never finishes: the CTE counts forever.
const char* kEndless =
    "id IN (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c "
    "WHERE x < 0)";

struct Owned {
  int64_t* p = nullptr;
  ~Owned() { a2pack_free(p); }
};

class CapiDatasetQuery : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/a2pack-capi-query-XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    a2pack_gen_options g;
    a2pack_gen_options_init(&g);
    g.policy = A2PACK_POLICY_GREEDY;
    g.max_steps = 30;
    g.jobs = 1;
    ASSERT_EQ(a2pack_gen_dir(&g, (*dir_ + "/runs").c_str(), 6, 3, nullptr, nullptr), A2PACK_OK)
        << a2pack_last_error();
    a2pack_dataset_build_options b;
    a2pack_dataset_build_options_init(&b);
    b.workers = 1;
    ASSERT_EQ(a2pack_dataset_build((*dir_ + "/runs").c_str(), (*dir_ + "/ds").c_str(), &b, nullptr),
              A2PACK_OK)
        << a2pack_last_error();
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    ASSERT_EQ(a2pack_dataset_open((*dir_ + "/ds").c_str(), nullptr, &ds_), A2PACK_OK)
        << a2pack_last_error();
  }
  void TearDown() override { a2pack_dataset_close(ds_); }

  static std::string* dir_;
  a2pack_dataset* ds_ = nullptr;
};
std::string* CapiDatasetQuery::dir_ = nullptr;

TEST_F(CapiDatasetQuery, DeadlineStopsAnEndlessFilterNamingQueryAndDeadline) {
  a2pack_dataset_query_options o;
  a2pack_dataset_query_options_init(&o);
  EXPECT_EQ(o.size, sizeof o);
  EXPECT_EQ(o.timeout_ms, 0);
  EXPECT_EQ(o.progress, nullptr);
  o.timeout_ms = 200;
  Owned out;
  size_t n = 99;
  EXPECT_EQ(a2pack_dataset_select_opts(ds_, kEndless, nullptr, 0, &o, &out.p, &n),
            A2PACK_E_INTERRUPTED);
  const std::string msg = a2pack_last_error();
  EXPECT_NE(msg.find("metadata.db"), std::string::npos) << msg;
  EXPECT_NE(msg.find("WITH RECURSIVE c(x)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deadline of 0.2 s"), std::string::npos) << msg;
  EXPECT_EQ(out.p, nullptr);
  EXPECT_EQ(n, 0u);

  // The same for run ids and for a split (its validation query included).
  Owned ids;
  EXPECT_EQ(a2pack_dataset_select_runs_opts(ds_, kEndless, nullptr, 0, &o, &ids.p, &n),
            A2PACK_E_INTERRUPTED);
  Owned tr, va;
  size_t ntr = 1, nva = 1;
  EXPECT_EQ(a2pack_dataset_split_opts(ds_, nullptr, nullptr, 0, 0.5, 0, kEndless, nullptr, 0, &o,
                                      &tr.p, &ntr, &va.p, &nva),
            A2PACK_E_INTERRUPTED);
  EXPECT_NE(std::string(a2pack_last_error()).find("deadline of 0.2 s"), std::string::npos);
  EXPECT_EQ(tr.p, nullptr);
  EXPECT_EQ(va.p, nullptr);
  EXPECT_EQ(ntr + nva, 0u);

  // The connection is usable afterwards.
  Owned all;
  ASSERT_EQ(a2pack_dataset_select_opts(ds_, "", nullptr, 0, &o, &all.p, &n), A2PACK_OK)
      << a2pack_last_error();
  EXPECT_GT(n, 0u);
}

struct StopAfter {
  int calls = 0, stop_at = 0;
  uint64_t last_done = 0, total = 1;
};
int stop_after(void* user, uint64_t done, uint64_t total) {
  auto* s = static_cast<StopAfter*>(user);
  EXPECT_GE(done, s->last_done);  // milliseconds since the call began
  s->last_done = done;
  s->total = total;
  return ++s->calls >= s->stop_at ? 1 : 0;
}

TEST_F(CapiDatasetQuery, ProgressCallbackStopsAnEndlessFilter) {
  StopAfter s;
  s.stop_at = 3;
  a2pack_dataset_query_options o;
  a2pack_dataset_query_options_init(&o);
  o.progress = stop_after;
  o.progress_user = &s;
  Owned out;
  size_t n = 0;
  EXPECT_EQ(a2pack_dataset_select_opts(ds_, kEndless, nullptr, 0, &o, &out.p, &n),
            A2PACK_E_INTERRUPTED);
  const std::string msg = a2pack_last_error();
  EXPECT_NE(msg.find("stopped by the caller"), std::string::npos) << msg;
  EXPECT_NE(msg.find("WITH RECURSIVE c(x)"), std::string::npos) << msg;
  EXPECT_EQ(s.calls, 3);
  EXPECT_EQ(s.total, 0u);  // no deadline
  EXPECT_EQ(out.p, nullptr);
}

// What a host's signal handler or another thread does: set a flag the
// callback reads.
std::atomic<int> g_stop{0};
int stop_when_flagged(void*, uint64_t, uint64_t) { return g_stop.load(); }

TEST_F(CapiDatasetQuery, AnotherThreadStopsTheQueryThroughTheCallback) {
  g_stop = 0;
  a2pack_dataset_query_options o;
  a2pack_dataset_query_options_init(&o);
  o.progress = stop_when_flagged;
  std::thread t([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    g_stop = 1;
  });
  Owned ids;
  size_t n = 0;
  EXPECT_EQ(a2pack_dataset_select_runs_opts(ds_, kEndless, nullptr, 0, &o, &ids.p, &n),
            A2PACK_E_INTERRUPTED);
  t.join();
}

TEST_F(CapiDatasetQuery, NormalQueriesAreUnaffected) {
  a2pack_dataset_query_options o;
  a2pack_dataset_query_options_init(&o);
  o.timeout_ms = 60000;
  StopAfter never;
  never.stop_at = 1 << 30;
  o.progress = stop_after;
  o.progress_user = &never;
  a2pack_sql_param p{};
  p.type = A2PACK_SQL_INTEGER;
  p.integer = 2;
  Owned a, b;
  size_t na = 0, nb = 0;
  ASSERT_EQ(a2pack_dataset_select(ds_, "id >= ?", &p, 1, &a.p, &na), A2PACK_OK);
  ASSERT_EQ(a2pack_dataset_select_opts(ds_, "id >= ?", &p, 1, &o, &b.p, &nb), A2PACK_OK)
      << a2pack_last_error();
  ASSERT_EQ(na, nb);
  ASSERT_GT(na, 0u);
  EXPECT_EQ(std::vector<int64_t>(a.p, a.p + na), std::vector<int64_t>(b.p, b.p + nb));
  // NULL options: no limits.
  Owned c;
  size_t nc = 0;
  ASSERT_EQ(a2pack_dataset_select_opts(ds_, "id >= ?", &p, 1, nullptr, &c.p, &nc), A2PACK_OK);
  EXPECT_EQ(nc, na);
  // Errors of the filter itself are still SQLite's.
  Owned d;
  EXPECT_EQ(a2pack_dataset_select_opts(ds_, "no_such_column = 1", nullptr, 0, &o, &d.p, &nc),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("no_such_column"), std::string::npos);
}

TEST_F(CapiDatasetQuery, BadOptionsAreRefused) {
  a2pack_dataset_query_options o;
  a2pack_dataset_query_options_init(&o);
  o.timeout_ms = -5;
  Owned out;
  size_t n = 0;
  EXPECT_EQ(a2pack_dataset_select_opts(ds_, "", nullptr, 0, &o, &out.p, &n),
            A2PACK_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(a2pack_last_error()).find("timeout_ms is -5"), std::string::npos);
  o.timeout_ms = INT64_MAX;
  EXPECT_EQ(a2pack_dataset_select_opts(ds_, "", nullptr, 0, &o, &out.p, &n),
            A2PACK_E_INVALID_ARGUMENT);
  o.timeout_ms = 0;
  o.size = 0;
  EXPECT_EQ(a2pack_dataset_select_opts(ds_, "", nullptr, 0, &o, &out.p, &n),
            A2PACK_E_INVALID_ARGUMENT);
  // An older caller's smaller struct (the size alone) reads as the defaults.
  o.size = sizeof(size_t);
  o.timeout_ms = -5;  // past its size: not read
  EXPECT_EQ(a2pack_dataset_select_opts(ds_, "", nullptr, 0, &o, &out.p, &n), A2PACK_OK)
      << a2pack_last_error();
}

TEST_F(CapiDatasetQuery, ApiTableReachesTheQueryFunctions) {
  const a2pack_api_table* t = a2pack_api(A2PACK_ABI_VERSION);
  ASSERT_NE(t->dataset, nullptr);
  EXPECT_EQ(t->dataset->size, sizeof(a2pack_dataset_api));
  EXPECT_EQ(t->dataset->query_options_init, &a2pack_dataset_query_options_init);
  EXPECT_EQ(t->dataset->select_opts, &a2pack_dataset_select_opts);
  EXPECT_EQ(t->dataset->select_runs_opts, &a2pack_dataset_select_runs_opts);
  EXPECT_EQ(t->dataset->split_opts, &a2pack_dataset_split_opts);
}

}  // namespace
