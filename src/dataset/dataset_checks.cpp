// Scans of a whole dataset: its statistics, the checks of every row
// against metadata.db and of every run's digest, and `verify`, which
// reports them all (and SQLite's own check of metadata.db).
#include <array>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/mapped_guard.hpp"
#include "base/worker_pool.hpp"
#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "dataset/db_check.hpp"
#include "dataset/digest.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/row.hpp"

namespace a2pack::dataset {

namespace {

constexpr uint64_t kScanChunkBytes = uint64_t{8} << 20;  // rows a scan's worker takes at a time

}  // namespace

// ---------------------------------------------------------------- stats
std::string Dataset::stats_json(uint32_t workers) const {
  using nlohmann::json;
  json j;
  j["path"] = dir_;
  j["rows"] = rows_;
  j["runs"] = runs_;
  j["row_bytes"] = kRowBytes;
  j["data_bytes"] = rows_ * kRowBytes;
  j["uncommitted_rows"] = file_rows_ - rows_;
  j["next_run_id"] = next_run_id_;
  j["has_manifest"] = manifest_.has_value();
  j["mapped"] = mapped_;
  j["huge_pages"] = mem_.huge_pages();
  if (manifest_) {
    j["steps_crc32c"] = fmt::format("{:#010x}", manifest_->steps_crc32c);
    j["created"] = manifest_->created_utc;
    j["updated"] = manifest_->updated_utc;
    j["sources"] = manifest_->sources.size();
  }
  {
    std::lock_guard<std::mutex> lk(db_mu_);
    Stmt q = db_->prepare(
        "SELECT COALESCE(MIN(num_steps),0), COALESCE(MAX(num_steps),0), COALESCE(AVG(num_steps),0), "
        "COALESCE(MIN(max_score),0), COALESCE(MAX(max_score),0), COALESCE(AVG(max_score),0) "
        "FROM runs");
    q.step();
    j["run_steps"] = {{"min", q.col_int(0)}, {"max", q.col_int(1)}, {"mean", q.col_double(2)}};
    j["max_score"] = {{"min", q.col_int(3)}, {"max", q.col_int(4)}, {"mean", q.col_double(5)}};
    json tiles = json::object();
    Stmt t = db_->prepare("SELECT highest_tile, COUNT(*) FROM runs GROUP BY highest_tile ORDER BY highest_tile");
    while (t.step()) tiles[std::to_string(t.col_int(0))] = t.col_int(1);
    j["highest_tile"] = tiles;
    json engines = json::object();
    Stmt e = db_->prepare(
        "SELECT engine, COUNT(*) AS c FROM runs GROUP BY engine ORDER BY c DESC LIMIT 20");
    while (e.step()) engines[e.col_null(0) ? std::string("(none)") : e.col_text(0)] = e.col_int(1);
    j["engines"] = engines;
  }
  // Per-row histograms, counted per chunk in parallel.
  const uint64_t per_chunk = kScanChunkBytes / kRowBytes;
  size_t chunks = static_cast<size_t>((rows_ + per_chunk - 1) / per_chunk);
  std::vector<std::array<uint64_t, 9>> counts(chunks);
  parallel_for(chunks, workers, [&](size_t c) {
    std::array<uint64_t, 9> h{};
    uint64_t a = c * per_chunk, b = std::min(rows_, a + per_chunk);
    auto count = [&] {
      for (uint64_t r = a; r < b; ++r) {
        const uint8_t* p = data_ + r * kRowBytes;
        h[p[kOffMove] & 3]++;
        h[4 + __builtin_popcount(p[kOffLegal] & 0xF)]++;
      }
    };
    if (mapped_)
      guarded_read(count);
    else
      count();
    counts[c] = h;
  });
  std::array<uint64_t, 9> tot{};
  for (auto& h : counts)
    for (size_t k = 0; k < 9; ++k) tot[k] += h[k];
  j["moves"] = {{"up", tot[0]}, {"down", tot[1]}, {"left", tot[2]}, {"right", tot[3]}};
  j["legal_moves"] = {{"0", tot[4]}, {"1", tot[5]}, {"2", tot[6]}, {"3", tot[7]}, {"4", tot[8]}};
  // The folder's name and engine strings another tool wrote need not be
  // UTF-8: such bytes become U+FFFD.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// ---------------------------------------------------------------- checks
std::vector<std::string> Dataset::check_rows(uint32_t workers, size_t max_errors) const {
  struct R {
    int64_t id, first, num;
  };
  std::vector<R> runs;
  runs.reserve(runs_);
  {
    std::lock_guard<std::mutex> lk(db_mu_);
    QueryWatch watch(*db_, QueryLimits());
    for_each_run(watch, "", {},
                 [&](int64_t id, int64_t first, int64_t num) { runs.push_back({id, first, num}); });
  }
  std::vector<std::string> errors;
  std::mutex mu;
  std::atomic<uint64_t> n_errors{0};
  auto report = [&](std::string msg) {
    n_errors.fetch_add(1);
    std::lock_guard<std::mutex> lk(mu);
    if (errors.size() < max_errors) errors.push_back(std::move(msg));
  };
  uint64_t expected = 0;
  for (const auto& r : runs) {
    if (static_cast<uint64_t>(r.first) != expected)
      report(fmt::format("{}/metadata.db: runs do not tile steps.npy: run {} starts at row {}, "
                         "expected {}",
                         dir_, r.id, r.first, expected));
    expected = static_cast<uint64_t>(r.first + r.num);
  }
  if (expected != rows_)
    report(fmt::format("{}/metadata.db: the last run ends at row {}, steps.npy has {} rows", dir_,
                       expected, rows_));
  parallel_for(runs.size(), workers, [&](size_t k) {
    const R& r = runs[k];
    constexpr int64_t kBlock = 256;  // rows copied out at a time (one guard each when mapped)
    Row block[kBlock];
    for (int64_t s = 0; s < r.num; ++s) {
      if (n_errors.load(std::memory_order_relaxed) >= max_errors) return;
      uint64_t row = static_cast<uint64_t>(r.first + s);
      if (s % kBlock == 0)
        read_rows(row, static_cast<uint64_t>(std::min(kBlock, r.num - s)),
                  reinterpret_cast<uint8_t*>(block));
      const Row& x = block[s % kBlock];
      auto bad = [&](const std::string& what) {
        report(fmt::format("{}/steps.npy: row {} (run {}, step {}): {}", dir_, row, r.id, s, what));
      };
      const uint64_t want = expected_row_run_id(local_ids_, static_cast<uint64_t>(r.id));
      if (x.run_id != static_cast<uint32_t>(want))
        bad(fmt::format("run_id is {}, metadata.db says {}{}", uint32_t{x.run_id}, r.id,
                        want != static_cast<uint64_t>(r.id)
                            ? fmt::format(" (run-local id {} in its upstream append batch)", want)
                            : std::string()));
      if (x.step_index != static_cast<uint16_t>(s))
        bad(fmt::format("step_index is {}, expected {}", uint16_t{x.step_index}, s & 0xFFFF));
      if (x.move > 3) bad(fmt::format("move {} is not 0..3", x.move));
      if (x.ev_legal > 15) bad(fmt::format("ev_legal {:#x} has bits above the 4 moves", x.ev_legal));
      float ev[4];
      std::memcpy(ev, x.ev_values, sizeof ev);
      for (unsigned m = 0; m < 4; ++m) {
        bool legal = x.ev_legal >> m & 1;
        if (!(ev[m] >= 0.0f && ev[m] <= 1.0f))
          bad(fmt::format("ev_values[{}] = {} is outside [0, 1]", m, ev[m]));
        else if (!legal && ev[m] != 0.0f)
          bad(fmt::format("ev_values[{}] = {} for an illegal move (must be 0)", m, ev[m]));
      }
      if (x.move <= 3 && (x.ev_legal >> x.move & 1) && ev[x.move] != 1.0f)
        bad(fmt::format("the chosen move's value is {}, must be 1.0", ev[x.move]));
    }
  });
  uint64_t total = n_errors.load();
  if (total > errors.size())
    errors.push_back(fmt::format("... and {} more problems", total - errors.size()));
  return errors;
}

Dataset::DigestFindings Dataset::check_digests(uint32_t workers) const {
  DigestFindings f;
  std::vector<RunRow> runs;
  std::vector<std::string> stored;
  std::vector<int64_t> dup_of;
  {
    std::lock_guard<std::mutex> lk(db_mu_);
    const bool table = has_digest_table(*db_);
    if (table) check_db_indexes(*db_, "run_digests");
    Stmt q = db_->prepare(std::string(
        "SELECT r.id, r.first_step_idx, r.num_steps, r.max_score, r.highest_tile, r.engine, "
        "r.start_time, r.elapsed_s, ") + (table ? "d.sha256, d.duplicate_of FROM runs AS r "
        "LEFT JOIN main.run_digests AS d ON d.id = r.id" : "NULL, NULL FROM runs AS r") +
        " ORDER BY r.id");
    while (q.step()) {
      RunRow r = run_row_at(q);
      runs.push_back(std::move(r));
      stored.push_back(q.col_null(8) ? std::string() : q.col_blob(8));
      dup_of.push_back(q.col_null(9) ? -1 : q.col_int(9));
    }
  }
  // The open checked that the runs lie within the rows.
  const unsigned nw = resolve_workers(workers);
  std::vector<std::unique_ptr<RunHasher>> hashers(nw);
  std::vector<std::vector<uint8_t>> scratch(nw);
  std::vector<RunDigest> got(runs.size());
  parallel_for_worker(runs.size(), nw, [&](unsigned w, size_t i) {
    if (!hashers[w]) hashers[w] = std::make_unique<RunHasher>();
    const RunRow& r = runs[i];
    const auto first = static_cast<uint64_t>(r.first_step_idx);
    const auto n = static_cast<uint64_t>(r.num_steps);
    const uint8_t* p = data_ + first * kRowBytes;
    if (mapped_) {  // copied under the guard: a file cut short fails, naming itself
      scratch[w].resize(static_cast<size_t>(n * kRowBytes));
      read_rows(first, n, scratch[w].data());
      p = scratch[w].data();
    }
    got[i] = hashers[w]->digest(r, p);
  });
  for (size_t i = 0; i < runs.size(); ++i) {
    if (stored[i].empty()) {
      ++f.missing;
    } else if (stored[i].size() != got[i].size() ||
               std::memcmp(stored[i].data(), got[i].data(), got[i].size()) != 0) {
      if (f.mismatched_ids.size() < 5) f.mismatched_ids.push_back(runs[i].id);
      ++f.mismatched;
    }
  }
  // Runs of equal digest, by id within each: the first is the original.
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return got[a] != got[b] ? got[a] < got[b] : runs[a].id < runs[b].id;
  });
  for (size_t k = 1, start = 0; k < order.size(); ++k) {
    if (got[order[k]] != got[order[start]]) {
      start = k;
      continue;
    }
    const size_t i = order[k];
    f.duplicates.push_back({runs[i].id, runs[order[start]].id, dup_of[i] >= 0});
  }
  std::sort(f.duplicates.begin(), f.duplicates.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  return f;
}

std::vector<std::string> Dataset::defects() const {
  std::vector<std::string> out;
  for (const auto& r : local_ids_)
    out.push_back(fmt::format(
        "{}/steps.npy: the rows of runs {}..{} carry run-local run_ids 0..{} instead of the "
        "runs' ids (a known defect of upstream's `dataset append`, which wrote them); "
        "metadata.db maps them correctly, so select rows by SQL, not by the run_id column",
        dir_, r.first, r.end - 1, r.end - r.first - 1));
  return out;
}

std::string VerifyReport::to_json() const {
  nlohmann::json j;
  j["ok"] = ok;
  j["rows"] = rows;
  j["runs"] = runs;
  j["errors"] = errors;
  j["notes"] = notes;
  j["warnings"] = warnings;
  j["actions"] = actions;
  nlohmann::json listed = nlohmann::json::array();
  for (const auto& d : duplicates_listed)
    listed.push_back({{"id", d.id}, {"same_as", d.same_as}, {"allowed", d.allowed}});
  j["duplicates"] = {{"runs", duplicate_runs}, {"allowed", allowed_duplicates},
                     {"listed", std::move(listed)}};
  j["runs_without_digest"] = runs_without_digest;
  // Messages quote paths and file contents, which need not be UTF-8: such
  // bytes become U+FFFD rather than failing the report.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {
// SQLite's own page-level check of metadata.db: damaged pages would
// otherwise surface only later, as "database disk image is malformed" from a
// filter. quick_check is O(N); integrity_check also compares every index
// with its table.
void sqlite_check(const std::string& dir, bool full, VerifyReport& rep) {
  const std::string path = strip_slashes(dir) + "/metadata.db";
  Db db(path, Db::Mode::read_only);
  Stmt q = db.prepare(full ? "PRAGMA integrity_check(20)" : "PRAGMA quick_check(20)");
  while (q.step()) {
    std::string line = q.col_text(0);
    if (line != "ok")
      rep.errors.push_back(fmt::format("{}: SQLite {}: {}", path,
                                       full ? "integrity_check" : "quick_check", line));
  }
}
}  // namespace

namespace {

constexpr size_t kListedDuplicates = 100;  // in the report's JSON

std::string some_ids(const std::vector<Dataset::DigestFindings::Duplicate>& d, bool allowed,
                     uint64_t count) {
  std::string out;
  size_t shown = 0;
  for (const auto& x : d) {
    if (x.allowed != allowed) continue;
    if (shown == 5) break;
    out += fmt::format("{}run {} repeats run {}", shown ? "; " : "", x.id, x.same_as);
    ++shown;
  }
  if (count > shown) out += fmt::format("; and {} more", count - shown);
  return out;
}

// The digest findings of an open dataset into the report.
void check_digests(const Dataset& ds, const std::string& dir, uint32_t workers,
                   VerifyReport& rep) {
  const Dataset::DigestFindings f = ds.check_digests(workers);
  rep.runs_without_digest = f.missing;
  if (f.mismatched) {
    std::string ids;
    for (int64_t id : f.mismatched_ids) ids += fmt::format("{}{}", ids.empty() ? "" : ", ", id);
    if (f.mismatched > f.mismatched_ids.size()) ids += ", ...";
    rep.errors.push_back(fmt::format(
        "{}/metadata.db: the stored content digests of {} runs (run {}) do not match their rows "
        "and metadata (table run_digests was changed or damaged), so an append would not know "
        "those runs; `a2pack dataset verify --repair` recomputes them",
        dir, f.mismatched, ids));
    if (rep.status == A2PACK_OK) rep.status = A2PACK_E_CORRUPT;
  }
  if (f.missing)
    rep.notes.push_back(fmt::format(
        "{}/metadata.db: {} of the {} runs have no content digest recorded (the dataset was "
        "written before a2pack recorded them, or another tool added runs); they were computed "
        "for this check, and the next append records them before it adds runs (or run `a2pack "
        "dataset verify --repair` now)",
        dir, f.missing, ds.runs()));
  for (const auto& d : f.duplicates) {
    if (d.allowed) ++rep.allowed_duplicates;
    if (rep.duplicates_listed.size() < kListedDuplicates) rep.duplicates_listed.push_back(d);
  }
  rep.duplicate_runs = f.duplicates.size();
  const uint64_t unwanted = rep.duplicate_runs - rep.allowed_duplicates;
  if (unwanted) {
    rep.errors.push_back(fmt::format(
        "{}: {} runs repeat earlier runs of the dataset (the same content digest: the same steps "
        "and metadata), so training weighs those games more than once: {} (`--json` lists the "
        "first {}). They were not written with --allow-duplicates. a2pack does not remove runs "
        "from a dataset: rebuild it from its sources without the repeated input, or leave the "
        "copies out with a filter once every run has its digest (`verify --repair`): "
        "\"id NOT IN (SELECT b.id FROM run_digests AS a JOIN run_digests AS b ON b.sha256 = "
        "a.sha256 AND b.id > a.id)\"",
        dir, unwanted, some_ids(f.duplicates, false, unwanted), kListedDuplicates));
    if (rep.status == A2PACK_OK) rep.status = A2PACK_E_INVALID_ARGUMENT;
  }
  if (rep.allowed_duplicates)
    rep.notes.push_back(fmt::format(
        "{}: {} runs repeat earlier runs and were written knowingly (--allow-duplicates): {}",
        dir, rep.allowed_duplicates,
        some_ids(f.duplicates, true, rep.allowed_duplicates)));
}

}  // namespace

VerifyReport verify(const std::string& dir, const VerifyOptions& vo, uint32_t workers) {
  VerifyReport rep;
  try {
    if (vo.repair) {
      RecoverOptions ro;
      ro.discard_unrecorded = vo.discard_unrecorded;
      ro.record_digests = true;
      ro.workers = workers;
      RecoverReport r = recover(dir, ro);
      rep.actions = r.actions;
      rep.warnings = r.warnings;
    }
    try {
      sqlite_check(dir, vo.full, rep);
    } catch (const Error&) {
      // Not a database SQLite can open at all: the open below names the
      // problem (a missing file, a wrong schema) with its own status.
    }
    if (!rep.errors.empty()) rep.status = A2PACK_E_CORRUPT;
    OpenOptions o;
    o.verify_crc = true;
    o.workers = workers;
    auto ds = Dataset::open(dir, o);
    rep.rows = ds->rows();
    rep.runs = ds->runs();
    rep.notes = ds->notes();
    for (auto& w : ds->defects()) rep.warnings.push_back(std::move(w));
    if (const auto& m = ds->manifest();
        m && m->next_run_id > static_cast<uint64_t>(ds->max_run_id() + 1))
      rep.errors.push_back(fmt::format(
          "{}/manifest.json: next_run_id is {}, but the largest run id in metadata.db is {} (it "
          "must be at most one past it)",
          strip_slashes(dir), m->next_run_id, ds->max_run_id()));
    for (auto& e : ds->check_rows(workers, 20)) rep.errors.push_back(std::move(e));
    if (!rep.errors.empty()) rep.status = A2PACK_E_CORRUPT;
    check_digests(*ds, strip_slashes(dir), workers, rep);
  } catch (const Error& e) {
    rep.errors.push_back(e.what());
    if (rep.status == A2PACK_OK) rep.status = e.status();
  }
  rep.ok = rep.errors.empty();
  return rep;
}

}  // namespace a2pack::dataset
