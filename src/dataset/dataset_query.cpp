// Selecting rows with SQL over metadata.db: the runs a filter selects (as
// row ranges or ids, under the query's time and memory limits) and seeded
// train/validation splits by run.
#include <algorithm>

#include "base/error.hpp"
#include "base/splitmix.hpp"
#include "dataset/dataset.hpp"

namespace a2pack::dataset {

namespace {

// A run's place in a split depends on (seed, id) alone: SplitMix64's
// finaliser of the value.
uint64_t mix(uint64_t z) { return SplitMix64{z}.next(); }

}  // namespace

// ---------------------------------------------------------------- selection
void Dataset::for_each_run(QueryWatch& watch, const std::string& where,
                           const std::vector<SqlParam>& params,
                           const std::function<void(int64_t, int64_t, int64_t)>& fn) const {
  std::string sql = "SELECT id, first_step_idx, num_steps FROM runs";
  if (!where.empty()) sql += " WHERE (" + where + ")";
  sql += " ORDER BY first_step_idx";
  watch.run(sql, [&] {
    Stmt s = db_->prepare(sql);
    if (!s.read_only())
      fail(A2PACK_E_INVALID_ARGUMENT, "{}/metadata.db: a filter may only read: \"{}\"", dir_, where);
    if (static_cast<size_t>(s.param_count()) != params.size())
      fail(A2PACK_E_INVALID_ARGUMENT, "{}/metadata.db: the filter \"{}\" has {} parameters, {} given",
           dir_, where, s.param_count(), params.size());
    for (size_t i = 0; i < params.size(); ++i) s.bind(static_cast<int>(i + 1), params[i]);
    while (s.step()) {
      int64_t id = s.col_int(0), first = s.col_int(1), num = s.col_int(2);
      if (first < 0 || num < 0 || static_cast<uint64_t>(first) > rows_ ||
          static_cast<uint64_t>(num) > rows_ - static_cast<uint64_t>(first))
        fail(A2PACK_E_CORRUPT,
             "{}/metadata.db: run {} covers rows [{}, {}+{}), outside the {} rows of steps.npy",
             dir_, id, first, first, num, rows_);
      fn(id, first, num);
    }
  });
}

uint64_t total_rows(const Ranges& r) {
  uint64_t t = 0;
  for (const auto& x : r) t += static_cast<uint64_t>(x.count);
  return t;
}

void expand(const Ranges& r, int64_t* out) {
  for (const auto& x : r)
    for (int64_t s = 0; s < x.count; ++s) *out++ = x.first + s;
}

std::vector<int64_t> expand(const Ranges& r) {
  std::vector<int64_t> out(total_rows(r));
  expand(r, out.data());
  return out;
}

Ranges Dataset::select(const std::string& where, const std::vector<SqlParam>& params,
                       const QueryLimits& limits) const {
  Ranges out;
  std::lock_guard<std::mutex> lk(db_mu_);
  QueryWatch watch(*db_, limits);
  for_each_run(watch, where, params, [&](int64_t, int64_t first, int64_t num) {
    if (num) out.push_back({first, num});
  });
  return out;
}

std::vector<int64_t> Dataset::run_ids(QueryWatch& watch, const std::string& where,
                                      const std::vector<SqlParam>& params) const {
  std::vector<int64_t> ids;
  for_each_run(watch, where, params, [&](int64_t id, int64_t, int64_t) { ids.push_back(id); });
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int64_t> Dataset::select_runs(const std::string& where,
                                          const std::vector<SqlParam>& params,
                                          const QueryLimits& limits) const {
  std::lock_guard<std::mutex> lk(db_mu_);
  QueryWatch watch(*db_, limits);
  return run_ids(watch, where, params);
}

Split Dataset::split(const std::string& where, const std::vector<SqlParam>& params,
                     double val_fraction, uint64_t seed, const std::string& val_where,
                     const std::vector<SqlParam>& val_params, const QueryLimits& limits) const {
  if (val_where.empty() && !(val_fraction >= 0.0 && val_fraction <= 1.0))
    fail(A2PACK_E_INVALID_ARGUMENT, "validation fraction {} is outside [0, 1]", val_fraction);
  // Both queries under one watch: the deadline is the whole call's.
  std::lock_guard<std::mutex> lk(db_mu_);
  QueryWatch watch(*db_, limits);
  std::vector<int64_t> val_ids;
  if (!val_where.empty()) {
    std::string both = where.empty() ? val_where : "(" + where + ") AND (" + val_where + ")";
    std::vector<SqlParam> all = params;
    all.insert(all.end(), val_params.begin(), val_params.end());
    val_ids = run_ids(watch, both, all);
  }
  // A run goes to validation when its hash falls below the fraction: the
  // decision depends on (seed, id) only.
  const double scale = 1.0 / 9007199254740992.0;  // 2^-53
  Split out;
  for_each_run(watch, where, params, [&](int64_t id, int64_t first, int64_t num) {
    bool val = val_where.empty()
                   ? static_cast<double>(mix(seed ^ mix(static_cast<uint64_t>(id))) >> 11) *
                             scale <
                         val_fraction
                   : std::binary_search(val_ids.begin(), val_ids.end(), id);
    if (num) (val ? out.val : out.train).push_back({first, num});
  });
  return out;
}

}  // namespace a2pack::dataset
