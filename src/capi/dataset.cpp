// C ABI of the dataset section: build, append, verify, open, gather, select,
// split, stats and the epoch sampler.
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <climits>
#include <memory>
#include <vector>

#include "capi/api_table.hpp"
#include "capi/columns.hpp"
#include "capi/common.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/sampler.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

struct a2pack_dataset {
  // Shared so an Arrow stream over the rows (capi/arrow_dataset.cpp) keeps
  // them alive after the handle is closed.
  std::shared_ptr<dataset::Dataset> ds;
};

namespace a2pack::capi {
std::shared_ptr<const dataset::Dataset> share_dataset(const a2pack_dataset* h) { return h->ds; }
}  // namespace a2pack::capi

struct a2pack_dataset_sampler {
  dataset::Sampler s;
};

namespace {

// Packfile input, read through the pack section's public functions (this
// file is a client of a2pack.h like any other; the dataset core never sees
// pack internals).
class PackApiSource final : public dataset::RunSource {
 public:
  explicit PackApiSource(const std::string& path) : path_(path) {
    a2pack_pack_options o;
    a2pack_pack_options_init(&o);
    if (a2pack_pack_open(path.c_str(), &o, &pack_) != A2PACK_OK)
      throw Error(a2pack_last_status(), a2pack_last_error());
  }
  ~PackApiSource() override { a2pack_pack_close(pack_); }
  size_t count() const override { return static_cast<size_t>(a2pack_pack_len(pack_)); }
  dataset::PayloadView payload(size_t i, std::vector<uint8_t>& scratch) const override {
    uint8_t* data = nullptr;
    size_t len = 0;
    if (a2pack_pack_read(pack_, i, 0, &data, &len) != A2PACK_OK)
      throw Error(a2pack_last_status(), a2pack_last_error());
    scratch.assign(data, data + len);
    a2pack_free(data);
    return {scratch.data(), scratch.size()};
  }
  std::string label(size_t i) const override { return fmt::format("{}: entry {}", path_, i); }
  std::string input() const override { return path_; }
  std::string kind() const override { return "pack"; }

 private:
  std::string path_;
  a2pack_pack* pack_ = nullptr;
};

std::unique_ptr<dataset::RunSource> open_input(const char* input) {
  struct stat st;
  if (::stat(input, &st) != 0) fail_errno("open input", input, errno);
  if (S_ISREG(st.st_mode)) return std::make_unique<PackApiSource>(input);
  return dataset::open_source(input);
}

dataset::BuildOptions convert(const a2pack_dataset_build_options* user) {
  a2pack_dataset_build_options o =
      capi::read_options(user, a2pack_dataset_build_options_init);
  dataset::BuildOptions b;
  b.workers = o.workers;
  b.allow_missing_branches = o.allow_missing_branches != 0;
  b.overwrite = o.overwrite != 0;
  if (o.progress) {
    auto fn = o.progress;
    void* user_data = o.progress_user;
    b.progress = [fn, user_data](uint64_t done, uint64_t total) {
      return fn(user_data, done, total) == 0;
    };
  }
  if (o.on_warning) {
    auto fn = o.on_warning;
    void* user_data = o.on_warning_user;
    b.on_warning = [fn, user_data](const std::string& m) { fn(user_data, m.c_str()); };
  }
  if (o.on_note) {
    auto fn = o.on_note;
    void* user_data = o.on_note_user;
    b.on_note = [fn, user_data](const std::string& m) { fn(user_data, m.c_str()); };
  }
  b.skip_bad = o.skip_bad != 0;
  if (o.on_bad_input) {
    auto fn = o.on_bad_input;
    void* user_data = o.on_bad_input_user;
    b.on_bad_input = [fn, user_data](const std::string& label, a2pack_status st,
                                     const std::string& m) {
      fn(user_data, label.c_str(), st, m.c_str());
    };
  }
  b.lock_timeout_ms = o.lock_timeout_ms;
  b.copy_steps = o.copy_steps != 0;
  b.shard_rows = o.shard_rows;
  b.allow_duplicates = o.allow_duplicates != 0;
  return b;
}

void fill_result(a2pack_dataset_build_result* out, const dataset::BuildResult& r) {
  if (!out) return;
  a2pack_dataset_build_result full{};
  full.size = sizeof full;
  full.runs_added = r.runs_added;
  full.rows_added = r.rows_added;
  full.total_runs = r.total_runs;
  full.total_rows = r.total_rows;
  full.runs_skipped = r.runs_skipped;
  full.runs_adopted = r.runs_adopted;
  full.steps_copied = r.steps_copied ? 1 : 0;
  full.runs_duplicated = r.runs_duplicated;
  full.digests_recorded = r.digests_recorded;
  capi::write_out(out, full);
}

std::vector<dataset::SqlParam> convert_params(const a2pack_sql_param* p, size_t n,
                                              const char* name) {
  if (n) require(p, name);
  std::vector<dataset::SqlParam> out(n);
  for (size_t i = 0; i < n; ++i) {
    auto& q = out[i];
    const long long type = capi::enum_int(p[i].type);
    switch (type) {
      case A2PACK_SQL_NULL: q.type = dataset::SqlParam::null; break;
      case A2PACK_SQL_INTEGER:
        q.type = dataset::SqlParam::integer;
        q.i = p[i].integer;
        break;
      case A2PACK_SQL_REAL:
        q.type = dataset::SqlParam::real;
        q.d = p[i].real;
        break;
      case A2PACK_SQL_TEXT:
        q.type = dataset::SqlParam::text;
        if (p[i].text_len && !p[i].text)
          fail(A2PACK_E_INVALID_ARGUMENT, "{}[{}].text is NULL", name, i);
        q.s.assign(p[i].text ? p[i].text : "", p[i].text_len);
        break;
      default:
        fail(A2PACK_E_INVALID_ARGUMENT, "{}[{}].type {} is not an a2pack_sql_type", name, i, type);
    }
  }
  return out;
}

// Owned int64 array of every index of `r` (NULL when empty).
void hand_out_ranges(const dataset::Ranges& r, int64_t** out, size_t* out_n) {
  uint64_t n = dataset::total_rows(r);
  if (n == 0) return;
  auto* p = static_cast<int64_t*>(std::malloc(n * sizeof(int64_t)));
  if (!p) fail(A2PACK_E_NO_MEMORY, "cannot allocate {} step indices", n);
  dataset::expand(r, p);
  *out = p;
  *out_n = static_cast<size_t>(n);
}

void hand_out_ids(const std::vector<int64_t>& ids, int64_t** out, size_t* out_n) {
  if (ids.empty()) return;
  *out = reinterpret_cast<int64_t*>(capi::owned_copy(ids.data(), ids.size() * sizeof(int64_t)));
  *out_n = ids.size();
}

const char* or_empty(const char* s) { return s ? s : ""; }

}  // namespace

// ---------------------------------------------------------------- build
A2PACK_EXPORT void a2pack_dataset_build_options_init(a2pack_dataset_build_options* o) {
  if (!o) return;
  *o = a2pack_dataset_build_options{};
  o->size = sizeof *o;
  o->lock_timeout_ms = 60000;
}

A2PACK_EXPORT a2pack_status a2pack_dataset_build(const char* input, const char* out_dir,
                                                 const a2pack_dataset_build_options* opts,
                                                 a2pack_dataset_build_result* result) {
  return guard([&] {
    require(input, "input");
    require(out_dir, "out_dir");
    auto o = convert(opts);
    auto src = open_input(input);
    fill_result(result, dataset::build(*src, out_dir, o));
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_append(const char* dataset_dir, const char* input,
                                                  const a2pack_dataset_build_options* opts,
                                                  a2pack_dataset_build_result* result) {
  return guard([&] {
    require(dataset_dir, "dataset_dir");
    require(input, "input");
    auto o = convert(opts);
    auto src = open_input(input);
    fill_result(result, dataset::append(*src, dataset_dir, o));
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_append_runs(
    const char* dataset_dir, const a2pack_dataset_run_bytes* runs, uint64_t n_runs,
    const char* source_input, const char* source_kind, const a2pack_dataset_build_options* opts,
    a2pack_dataset_build_result* result) {
  return guard([&] {
    require(dataset_dir, "dataset_dir");
    if (!n_runs) fail(A2PACK_E_INVALID_ARGUMENT, "{}: no runs to append", dataset_dir);
    require(runs, "runs");
    auto o = convert(opts);
    std::vector<dataset::BytesSource::Entry> entries(n_runs);
    for (uint64_t i = 0; i < n_runs; ++i) {
      const a2pack_dataset_run_bytes& r = runs[i];
      auto& e = entries[i];
      e.label = r.label ? std::string(r.label) : fmt::format("run {}", i);
      if (!r.data && !r.path)
        fail(A2PACK_E_INVALID_ARGUMENT, "{}: neither data nor path is set", e.label);
      e.data = static_cast<const uint8_t*>(r.data);
      if (!r.data) e.path = r.path;
      e.offset = r.offset;
      e.length = r.length;
    }
    dataset::BytesSource src(std::move(entries), source_input ? source_input : "runs",
                             source_kind ? source_kind : "runs");
    fill_result(result, dataset::append(src, dataset_dir, o));
  });
}

A2PACK_EXPORT void a2pack_dataset_rows_options_init(a2pack_dataset_rows_options* o) {
  if (!o) return;
  *o = a2pack_dataset_rows_options{};
  o->size = sizeof *o;
  o->lock_timeout_ms = 60000;
}

A2PACK_EXPORT a2pack_status a2pack_dataset_build_from_rows(
    const char* out_dir, const void* rows, uint64_t n_rows, const a2pack_dataset_run_record* runs,
    uint64_t n_runs, const a2pack_dataset_rows_options* opts,
    a2pack_dataset_build_result* result) {
  return guard([&] {
    require(out_dir, "out_dir");
    if (n_runs) require(runs, "runs");
    auto o = capi::read_options(opts, a2pack_dataset_rows_options_init);
    dataset::BuildOptions b;
    b.overwrite = o.overwrite != 0;
    b.lock_timeout_ms = o.lock_timeout_ms;
    b.shard_rows = o.shard_rows;
    b.allow_duplicates = o.allow_duplicates != 0;
    if (o.on_note) {
      auto fn = o.on_note;
      void* user_data = o.on_note_user;
      b.on_note = [fn, user_data](const std::string& m) { fn(user_data, m.c_str()); };
    }
    std::vector<dataset::RunRow> meta(n_runs);
    for (uint64_t i = 0; i < n_runs; ++i) {
      const a2pack_dataset_run_record& r = runs[i];
      if (r.num_steps > static_cast<uint64_t>(INT64_MAX))
        fail(A2PACK_E_INVALID_ARGUMENT, "run {}: num_steps {} is too large", i, r.num_steps);
      meta[i].num_steps = static_cast<int64_t>(r.num_steps);
      meta[i].max_score = r.max_score;
      meta[i].highest_tile = r.highest_tile;
      meta[i].start_time = r.start_time;
      meta[i].elapsed_s = r.elapsed_s;
      if (r.engine) meta[i].engine = std::string(r.engine);
    }
    fill_result(result, dataset::build_from_rows(
                            static_cast<const uint8_t*>(rows), n_rows, std::move(meta),
                            o.source_input ? o.source_input : "rows",
                            o.source_kind ? o.source_kind : "rows", out_dir, b));
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_verify(const char* dataset_dir, uint32_t flags,
                                                  uint32_t workers, char** out_report_json) {
  if (out_report_json) *out_report_json = nullptr;
  return guard([&] {
    require(dataset_dir, "dataset_dir");
    const uint32_t known = A2PACK_DATASET_VERIFY_REPAIR | A2PACK_DATASET_VERIFY_FULL |
                           A2PACK_DATASET_VERIFY_DISCARD_UNRECORDED;
    if (flags & ~known) fail(A2PACK_E_INVALID_ARGUMENT, "unknown verify flags {:#x}", flags);
    if ((flags & A2PACK_DATASET_VERIFY_DISCARD_UNRECORDED) && !(flags & A2PACK_DATASET_VERIFY_REPAIR))
      fail(A2PACK_E_INVALID_ARGUMENT,
           "A2PACK_DATASET_VERIFY_DISCARD_UNRECORDED needs A2PACK_DATASET_VERIFY_REPAIR");
    dataset::VerifyOptions vo;
    vo.repair = flags & A2PACK_DATASET_VERIFY_REPAIR;
    vo.full = flags & A2PACK_DATASET_VERIFY_FULL;
    vo.discard_unrecorded = flags & A2PACK_DATASET_VERIFY_DISCARD_UNRECORDED;
    auto rep = dataset::verify(dataset_dir, vo, workers);
    if (out_report_json) *out_report_json = capi::owned_string(rep.to_json());
    if (!rep.ok) {
      std::string msg = rep.errors.front();
      for (size_t i = 1; i < rep.errors.size() && i < 5; ++i) msg += "; " + rep.errors[i];
      if (rep.errors.size() > 5) msg += fmt::format(" (and {} more)", rep.errors.size() - 5);
      throw Error(rep.status, msg);
    }
  });
}

// ---------------------------------------------------------------- open
A2PACK_EXPORT void a2pack_dataset_open_options_init(a2pack_dataset_open_options* o) {
  if (!o) return;
  dataset::OpenOptions d;
  *o = a2pack_dataset_open_options{};
  o->size = sizeof *o;
  o->mmap = d.mmap;
  o->verify_crc = d.verify_crc;
  o->huge_pages = d.huge_pages;
  o->workers = d.workers;
  o->allow_extra_files = d.allow_extra_files;
}

A2PACK_EXPORT a2pack_status a2pack_dataset_open(const char* dataset_dir,
                                                const a2pack_dataset_open_options* opts,
                                                a2pack_dataset** out) {
  if (out) *out = nullptr;
  return guard([&] {
    require(out, "out");
    require(dataset_dir, "dataset_dir");
    auto u = capi::read_options(opts, a2pack_dataset_open_options_init);
    dataset::OpenOptions o;
    o.mmap = u.mmap != 0;
    o.verify_crc = u.verify_crc != 0;
    o.huge_pages = u.huge_pages != 0;
    o.workers = u.workers;
    o.allow_extra_files = u.allow_extra_files != 0;
    *out = new a2pack_dataset{dataset::Dataset::open(dataset_dir, o)};
  });
}

A2PACK_EXPORT void a2pack_dataset_close(a2pack_dataset* ds) { delete ds; }

A2PACK_EXPORT a2pack_status a2pack_dataset_get_info(const a2pack_dataset* h,
                                                    a2pack_dataset_info* out) {
  return guard([&] {
    require(h, "dataset");
    require(out, "out");
    const auto& d = *h->ds;
    a2pack_dataset_info full{};
    full.size = sizeof full;
    full.rows = d.rows();
    full.runs = d.runs();
    full.next_run_id = d.next_run_id();
    full.data = d.data();
    full.mapped = d.mapped();
    full.huge_pages = d.huge_pages();
    full.has_manifest = d.manifest().has_value();
    full.steps_crc32c = d.manifest() ? d.manifest()->steps_crc32c : 0;
    full.uncommitted_rows = d.uncommitted_rows();
    capi::write_out(out, full);
  });
}

// ---------------------------------------------------------------- gather
A2PACK_EXPORT a2pack_status a2pack_dataset_gather(const a2pack_dataset* h, const int64_t* idx,
                                                  size_t n, void* out_rows, uint32_t workers) {
  return guard([&] {
    require(h, "dataset");
    if (n) {
      require(idx, "idx");
      require(out_rows, "out_rows");
    }
    h->ds->gather(idx, n, static_cast<uint8_t*>(out_rows), workers);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_gather_columns(const a2pack_dataset* h,
                                                          const int64_t* idx, size_t n,
                                                          const a2pack_dataset_columns* out,
                                                          uint32_t workers) {
  return guard([&] {
    require(h, "dataset");
    require(out, "out");
    if (n) require(idx, "idx");
    h->ds->gather_columns(idx, n, capi::columns_out(out), workers);
  });
}

// ---------------------------------------------------------------- selection
A2PACK_EXPORT void a2pack_dataset_query_options_init(a2pack_dataset_query_options* o) {
  if (!o) return;
  *o = a2pack_dataset_query_options{};
  o->size = sizeof *o;
}

namespace {
dataset::QueryLimits query_limits(const a2pack_dataset_query_options* user) {
  const a2pack_dataset_query_options o =
      capi::read_options(user, a2pack_dataset_query_options_init);
  if (o.timeout_ms < 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "opts->timeout_ms is {}; give a positive deadline or 0 for none",
         o.timeout_ms);
  dataset::QueryLimits l;
  l.timeout_ms = o.timeout_ms;
  if (o.progress) {
    auto fn = o.progress;
    void* user_data = o.progress_user;
    const uint64_t total = static_cast<uint64_t>(o.timeout_ms);
    l.keep_going = [fn, user_data, total](uint64_t elapsed_ms) {
      return fn(user_data, elapsed_ms, total) == 0;
    };
  }
  return l;
}
}  // namespace

A2PACK_EXPORT a2pack_status a2pack_dataset_select_opts(const a2pack_dataset* h, const char* where,
                                                       const a2pack_sql_param* params,
                                                       size_t n_params,
                                                       const a2pack_dataset_query_options* opts,
                                                       int64_t** out, size_t* out_n) {
  if (out) *out = nullptr;
  if (out_n) *out_n = 0;
  return guard([&] {
    require(h, "dataset");
    require(out, "out_indices");
    require(out_n, "out_n");
    auto r = h->ds->select(or_empty(where), convert_params(params, n_params, "params"),
                           query_limits(opts));
    hand_out_ranges(r, out, out_n);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_select(const a2pack_dataset* h, const char* where,
                                                  const a2pack_sql_param* params, size_t n_params,
                                                  int64_t** out, size_t* out_n) {
  return a2pack_dataset_select_opts(h, where, params, n_params, nullptr, out, out_n);
}

A2PACK_EXPORT a2pack_status a2pack_dataset_select_runs_opts(
    const a2pack_dataset* h, const char* where, const a2pack_sql_param* params, size_t n_params,
    const a2pack_dataset_query_options* opts, int64_t** out, size_t* out_n) {
  if (out) *out = nullptr;
  if (out_n) *out_n = 0;
  return guard([&] {
    require(h, "dataset");
    require(out, "out_ids");
    require(out_n, "out_n");
    hand_out_ids(h->ds->select_runs(or_empty(where), convert_params(params, n_params, "params"),
                                    query_limits(opts)),
                 out, out_n);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_select_runs(const a2pack_dataset* h, const char* where,
                                                       const a2pack_sql_param* params,
                                                       size_t n_params, int64_t** out,
                                                       size_t* out_n) {
  return a2pack_dataset_select_runs_opts(h, where, params, n_params, nullptr, out, out_n);
}

A2PACK_EXPORT a2pack_status a2pack_dataset_split_opts(
    const a2pack_dataset* h, const char* where, const a2pack_sql_param* params, size_t n_params,
    double val_fraction, uint64_t seed, const char* val_where, const a2pack_sql_param* val_params,
    size_t n_val_params, const a2pack_dataset_query_options* opts, int64_t** out_train,
    size_t* out_n_train, int64_t** out_val, size_t* out_n_val) {
  if (out_train) *out_train = nullptr;
  if (out_n_train) *out_n_train = 0;
  if (out_val) *out_val = nullptr;
  if (out_n_val) *out_n_val = 0;
  return guard([&] {
    require(h, "dataset");
    require(out_train, "out_train");
    require(out_n_train, "out_n_train");
    require(out_val, "out_val");
    require(out_n_val, "out_n_val");
    auto sp = h->ds->split(or_empty(where), convert_params(params, n_params, "params"),
                           val_fraction, seed, or_empty(val_where),
                           convert_params(val_params, n_val_params, "val_params"),
                           query_limits(opts));
    hand_out_ranges(sp.train, out_train, out_n_train);
    try {
      hand_out_ranges(sp.val, out_val, out_n_val);
    } catch (...) {
      std::free(*out_train);
      *out_train = nullptr;
      *out_n_train = 0;
      throw;
    }
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_split(
    const a2pack_dataset* h, const char* where, const a2pack_sql_param* params, size_t n_params,
    double val_fraction, uint64_t seed, const char* val_where, const a2pack_sql_param* val_params,
    size_t n_val_params, int64_t** out_train, size_t* out_n_train, int64_t** out_val,
    size_t* out_n_val) {
  return a2pack_dataset_split_opts(h, where, params, n_params, val_fraction, seed, val_where,
                                   val_params, n_val_params, nullptr, out_train, out_n_train,
                                   out_val, out_n_val);
}

A2PACK_EXPORT a2pack_status a2pack_dataset_stats_json(const a2pack_dataset* h, uint32_t workers,
                                                      char** out_json) {
  if (out_json) *out_json = nullptr;
  return guard([&] {
    require(h, "dataset");
    require(out_json, "out_json");
    *out_json = capi::owned_string(h->ds->stats_json(workers));
  });
}

// ---------------------------------------------------------------- sampler
A2PACK_EXPORT a2pack_status a2pack_dataset_sampler_open(const int64_t* indices, uint64_t n,
                                                        uint64_t seed, size_t batch_size,
                                                        int32_t drop_last,
                                                        a2pack_dataset_sampler** out) {
  if (out) *out = nullptr;
  return guard([&] {
    require(out, "out");
    std::vector<int64_t> idx;
    if (indices) idx.assign(indices, indices + n);
    *out = new a2pack_dataset_sampler{
        dataset::Sampler(std::move(idx), indices == nullptr, n, seed, batch_size, drop_last != 0)};
  });
}

A2PACK_EXPORT void a2pack_dataset_sampler_close(a2pack_dataset_sampler* s) { delete s; }

A2PACK_EXPORT a2pack_status a2pack_dataset_sampler_set_epoch(a2pack_dataset_sampler* s,
                                                             uint64_t epoch) {
  return guard([&] {
    require(s, "sampler");
    s->s.set_epoch(epoch);
  });
}

A2PACK_EXPORT size_t a2pack_dataset_sampler_batch_count(const a2pack_dataset_sampler* s) {
  return s ? s->s.batch_count() : 0;
}

A2PACK_EXPORT a2pack_status a2pack_dataset_sampler_batch(const a2pack_dataset_sampler* s,
                                                         size_t b, int64_t* out, size_t* out_n) {
  if (out_n) *out_n = 0;
  return guard([&] {
    require(s, "sampler");
    require(out, "out");
    require(out_n, "out_n");
    *out_n = s->s.fill_batch(b, out);
  });
}

A2PACK_EXPORT uint64_t a2pack_dataset_sampler_epoch(const a2pack_dataset_sampler* s) {
  return s ? s->s.epoch() : 0;
}

A2PACK_EXPORT a2pack_status a2pack_dataset_sampler_part(const a2pack_dataset_sampler* s,
                                                        size_t b, uint32_t rank, uint32_t world,
                                                        int64_t* out, size_t* out_n) {
  if (out_n) *out_n = 0;
  return guard([&] {
    require(s, "sampler");
    require(out, "out");
    require(out_n, "out_n");
    *out_n = s->s.fill_part(b, rank, world, out);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_sampler_state(const a2pack_dataset_sampler* s,
                                                         uint64_t next_batch, uint8_t** out_data,
                                                         size_t* out_len) {
  return capi::bytes_out(out_data, out_len, [&] {
    require(s, "sampler");
    return s->s.save_state(next_batch);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_sampler_load_state(a2pack_dataset_sampler* s,
                                                              const void* data, size_t len,
                                                              uint64_t* out_next_batch) {
  return guard([&] {
    require(s, "sampler");
    require(data, "data");
    const uint64_t next = s->s.load_state(data, len);
    if (out_next_batch) *out_next_batch = next;
  });
}

namespace a2pack::capi {
dataset::ColumnsOut columns_out(const a2pack_dataset_columns* out) {
  if (out->size < sizeof(size_t))
    fail(A2PACK_E_INVALID_ARGUMENT, "out->size is {}; set it to sizeof(a2pack_dataset_columns)",
         out->size);
  a2pack_dataset_columns c{};
  std::memcpy(static_cast<void*>(&c), out, std::min(out->size, sizeof c));
  dataset::ColumnsOut o;
  o.exponents = c.exponents;
  o.boards = c.boards;
  o.moves = c.moves;
  o.legal = c.legal;
  o.legal_mask = c.legal_mask;
  o.ev_values = c.ev_values;
  o.run_ids = c.run_ids;
  o.step_indices = c.step_indices;
  return o;
}
}  // namespace a2pack::capi

// ---------------------------------------------------------------- api table
namespace a2pack::capi {
const a2pack_dataset_api* dataset_api_table() {
  static const a2pack_dataset_api table = {
      sizeof(a2pack_dataset_api),
      a2pack_dataset_build_options_init,
      a2pack_dataset_build,
      a2pack_dataset_append,
      a2pack_dataset_verify,
      a2pack_dataset_open_options_init,
      a2pack_dataset_open,
      a2pack_dataset_close,
      a2pack_dataset_get_info,
      a2pack_dataset_gather,
      a2pack_dataset_gather_columns,
      a2pack_dataset_select,
      a2pack_dataset_select_runs,
      a2pack_dataset_split,
      a2pack_dataset_stats_json,
      a2pack_dataset_sampler_open,
      a2pack_dataset_sampler_close,
      a2pack_dataset_sampler_set_epoch,
      a2pack_dataset_sampler_batch_count,
      a2pack_dataset_sampler_batch,
      a2pack_dataset_rows_options_init,
      a2pack_dataset_build_from_rows,
      a2pack_dataset_sampler_epoch,
      a2pack_dataset_sampler_part,
      a2pack_dataset_sampler_state,
      a2pack_dataset_sampler_load_state,
      a2pack_dataset_mix_open,
      a2pack_dataset_mix_close,
      a2pack_dataset_mix_batch,
      a2pack_dataset_mix_counts,
      a2pack_dataset_mix_consumed,
      a2pack_dataset_mix_get_weights,
      a2pack_dataset_mix_set_weights,
      a2pack_dataset_mix_state,
      a2pack_dataset_mix_load_state,
      a2pack_dataset_query_options_init,
      a2pack_dataset_select_opts,
      a2pack_dataset_select_runs_opts,
      a2pack_dataset_split_opts,
      a2pack_dataset_info_get,
      a2pack_dataset_sampler_state_save,
      a2pack_dataset_sampler_state_load,
      a2pack_dataset_mix_state_save,
      a2pack_dataset_mix_state_load,
      a2pack_dataset_append_runs,
  };
  return &table;
}
}  // namespace a2pack::capi

// The one spelling of each verb (`<noun>_info_get`, `_state_save`, `_state_load`,
// `_stats_get`); the first names stay as aliases.
A2PACK_EXPORT a2pack_status a2pack_dataset_info_get(const a2pack_dataset *ds,
                                                    a2pack_dataset_info *out) {
  return a2pack_dataset_get_info(ds, out);
}

A2PACK_EXPORT a2pack_status a2pack_dataset_sampler_state_save(const a2pack_dataset_sampler *s,
                                                              uint64_t next_batch,
                                                              uint8_t **out_data, size_t *out_len) {
  return a2pack_dataset_sampler_state(s, next_batch, out_data, out_len);
}

A2PACK_EXPORT a2pack_status a2pack_dataset_sampler_state_load(a2pack_dataset_sampler *s,
                                                              const void *data, size_t len,
                                                              uint64_t *out_next_batch) {
  return a2pack_dataset_sampler_load_state(s, data, len, out_next_batch);
}
