#include "dataset/foreign.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "dataset/row.hpp"

namespace a2pack::dataset {

std::string Unrecorded::describe() const {
  std::string s;
  if (runs) s = fmt::format("{} run{} (ids {}..{})", runs, runs == 1 ? "" : "s", min_id, max_id);
  else s = "no runs";
  return s + fmt::format(" and {} row{}", rows, rows == 1 ? "" : "s");
}

std::string Unrecorded::visible_sql(uint64_t next_run_id) const {
  std::string c;
  if (own_pending && own_end_id > own_first_id)
    c = fmt::format("NOT (id >= {} AND id < {})", own_first_id, own_end_id);
  if (foreign() && !adoptable())
    c += fmt::format("{}id < {}", c.empty() ? "" : " AND ", next_run_id);
  return c;
}

Unrecorded find_unrecorded(const std::string& dir, const Manifest& base,
                           const std::optional<Journal>& journal, const NpyInfo& info,
                           const ReadFd& steps, Db& db) {
  Unrecorded u;
  if (journal) {
    if (journal->describes_uncommitted(base)) {
      u.own_pending = true;
      u.own_first_id = journal->first_new_id;
      u.own_end_id = journal->end_new_id;
      Stmt q = db.prepare("SELECT COUNT(*) FROM main.runs WHERE id >= ?1 AND id < ?2");
      q.bind(1, static_cast<int64_t>(std::min<uint64_t>(u.own_first_id, INT64_MAX)));
      q.bind(2, static_cast<int64_t>(std::min<uint64_t>(u.own_end_id, INT64_MAX)));
      q.step();
      u.own_runs = static_cast<uint64_t>(q.col_int(0));
      if (journal->owns_steps(base, steps.fd())) {
        u.own_tail = true;
        // Rows the header declares past the committed ones, and a tail an
        // append extending in place had written before it patched the header.
        u.own_rows = (info.rows > base.rows ? info.rows - base.rows : 0) +
                     (info.tail_bytes + kRowBytes - 1) / kRowBytes;
      }
    } else {
      u.stale_journal = true;
    }
  }
  if (info.rows < base.rows) return u;  // the caller reports the truncation
  const uint64_t end_rows = u.own_tail ? base.rows : info.rows;
  u.rows = end_rows - base.rows;

  // Foreign runs, in row order.
  struct R {
    int64_t id, first, num;
  };
  std::vector<R> runs;
  {
    Stmt q = db.prepare(
        "SELECT id, first_step_idx, num_steps FROM main.runs WHERE id >= ?1 AND NOT (id >= ?2 AND "
        "id < ?3) ORDER BY first_step_idx, id");
    q.bind(1, static_cast<int64_t>(std::min<uint64_t>(base.next_run_id, INT64_MAX)));
    q.bind(2, static_cast<int64_t>(std::min<uint64_t>(u.own_first_id, INT64_MAX)));
    q.bind(3, static_cast<int64_t>(std::min<uint64_t>(u.own_end_id, INT64_MAX)));
    while (q.step()) runs.push_back({q.col_int(0), q.col_int(1), q.col_int(2)});
  }
  u.runs = runs.size();
  for (const R& r : runs) u.max_id = std::max(u.max_id, r.id);
  if (!runs.empty())
    u.min_id = std::min_element(runs.begin(), runs.end(),
                                [](const R& a, const R& b) { return a.id < b.id; })->id;
  if (!u.foreign()) return u;

  const std::string db_path = dir + "/metadata.db";
  // The runs must tile the rows past the manifest exactly.
  uint64_t expected = base.rows;
  for (const R& r : runs) {
    if (r.first < 0 || r.num < 0) {
      u.problem = fmt::format("{}: run {} has first_step_idx {} and num_steps {}", db_path, r.id,
                              r.first, r.num);
      return u;
    }
    if (static_cast<uint64_t>(r.first) != expected) {
      u.problem = fmt::format(
          "{}: run {} starts at row {}, but the rows before it end at row {} (the runs that "
          "manifest.json does not record must cover the rows past its {} one after another)",
          db_path, r.id, r.first, expected, base.rows);
      return u;
    }
    expected += static_cast<uint64_t>(r.num);
  }
  if (expected != end_rows) {
    if (runs.empty())
      u.problem = fmt::format(
          "{}/steps.npy: holds {} rows past the {} that manifest.json records, and no run of "
          "metadata.db covers them",
          dir, end_rows - base.rows, base.rows);
    else
      u.problem = fmt::format(
          "{}: the runs that manifest.json does not record cover rows [{}, {}), but steps.npy "
          "{} rows (row counts disagree)",
          db_path, base.rows, expected,
          u.own_tail ? fmt::format("has only the {} recorded", base.rows)
                     : fmt::format("has {}", end_rows));
    return u;
  }
  // Each run's first row is its step 0 and carries its id, either as is or
  // as its position in an upstream append batch.
  for (const R& r : runs) {
    const uint64_t id = static_cast<uint64_t>(r.id);
    ForeignBatch* cur = u.batches.empty() ? nullptr : &u.batches.back();
    bool local = false;
    uint64_t first_id = id;
    if (r.num > 0) {
      uint8_t row[kRowBytes];
      steps.pread_exact(row, kRowBytes, info.data_offset + static_cast<uint64_t>(r.first) * kRowBytes);
      uint32_t rid;
      uint16_t step;
      std::memcpy(&rid, row + kOffRunId, 4);
      std::memcpy(&step, row + kOffStepIndex, 2);
      if (step != 0) {
        u.problem = fmt::format(
            "{}/steps.npy: row {}, the first row of run {} (first_step_idx in metadata.db), has "
            "step_index {}, not 0",
            dir, r.first, id, step);
        return u;
      }
      if (rid != static_cast<uint32_t>(id)) {
        local = true;
        first_id = id - rid;
        bool continues = cur && cur->local_ids && cur->first_run_id == first_id && cur->end_run_id == id;
        if (!continues && rid != 0) {
          u.problem = fmt::format(
              "{}/steps.npy: row {}, the first row of run {}, carries run_id {}: neither the "
              "run's id nor its position in an append batch (first_step_idx damaged?)",
              dir, r.first, id, rid);
          return u;
        }
      }
    } else if (cur && cur->end_run_id == id) {
      local = cur->local_ids;
      first_id = cur->first_run_id;
    }
    bool extend = cur && cur->end_run_id == id && cur->local_ids == local &&
                  (!local || cur->first_run_id == first_id);
    if (!extend) {
      u.batches.push_back({});
      cur = &u.batches.back();
      cur->first_run_id = first_id;
      cur->first_row = static_cast<uint64_t>(r.first);
      cur->local_ids = local;
    }
    cur->end_run_id = id + 1;
    cur->runs++;
    cur->rows += static_cast<uint64_t>(r.num);
  }
  return u;
}

Manifest adopt_into(const Manifest& m, const Unrecorded& u, const NpyInfo& info,
                    const ReadFd& steps, const std::string& input, const std::string& kind) {
  Manifest nm = m;
  nm.run_digests = false;  // the adopted runs have none yet
  const std::string now = utc_now();
  std::vector<uint8_t> buf;
  for (const ForeignBatch& b : u.batches) {
    uint64_t len = b.rows * kRowBytes, off = info.data_offset + b.first_row * kRowBytes;
    buf.resize(static_cast<size_t>(std::min<uint64_t>(std::max<uint64_t>(len, 1), 8u << 20)));
    for (uint64_t done = 0; done < len;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(len - done, buf.size()));
      steps.pread_exact(buf.data(), n, off + done);
      nm.steps_crc32c = crc32c::extend(nm.steps_crc32c, buf.data(), n);
      done += n;
    }
    nm.rows += b.rows;
    nm.runs += b.runs;
    nm.next_run_id = std::max(nm.next_run_id, b.end_run_id);
    SourceRecord s{input, kind, b.runs, b.rows, b.first_run_id, now};
    s.local_run_ids = b.local_ids;
    nm.sources.push_back(std::move(s));
  }
  return nm;
}

std::vector<LocalIdRange> local_id_ranges(const Manifest* m, const Unrecorded* u) {
  std::vector<LocalIdRange> r;
  if (m)
    for (const auto& s : m->sources)
      if (s.local_run_ids) r.push_back({s.first_run_id, s.first_run_id + s.runs});
  if (u && u->adoptable())
    for (const auto& b : u->batches)
      if (b.local_ids) r.push_back({b.first_run_id, b.end_run_id});
  return r;
}

uint64_t expected_row_run_id(const std::vector<LocalIdRange>& r, uint64_t id) {
  for (const auto& x : r)
    if (id >= x.first && id < x.end) return id - x.first;
  return id;
}

}  // namespace a2pack::dataset
