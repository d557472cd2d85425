#include "dataset/digest.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/worker_pool.hpp"
#include "dataset/npy.hpp"
#include "dataset/row.hpp"
#include "dataset/shards.hpp"

namespace a2pack::dataset {

namespace {

constexpr char kDigestTag[] = "a2pack run digest 1\n";  // 20 bytes, no NUL hashed
constexpr size_t kHashedRowBytes = kOffLegal;           // board, move
constexpr size_t kRowsPerUpdate = 256;                  // rows packed per SHA-256 update

template <typename T>
void put_le(uint8_t*& p, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::memcpy(p, &v, sizeof v);  // the library builds for little-endian hosts only
  p += sizeof v;
}

}  // namespace

RunDigest RunHasher::digest(const RunRow& r, const uint8_t* rows) {
  const std::string engine = r.engine.value_or(std::string());
  uint8_t head[sizeof kDigestTag - 1 + 5 * 8 + 4];
  uint8_t* p = head;
  std::memcpy(p, kDigestTag, sizeof kDigestTag - 1);
  p += sizeof kDigestTag - 1;
  put_le(p, static_cast<uint64_t>(r.num_steps));
  put_le(p, r.max_score);
  put_le(p, r.highest_tile);
  put_le(p, r.start_time);
  put_le(p, r.elapsed_s);
  put_le(p, static_cast<uint32_t>(engine.size()));
  sha_.update(head, sizeof head);
  sha_.update(engine.data(), engine.size());
  // The hashed part of each row, packed, a few hundred rows per update (one
  // update per 9 bytes would cost more in OpenSSL's dispatch than in SHA).
  buf_.resize(kRowsPerUpdate * kHashedRowBytes);
  const auto n = static_cast<uint64_t>(r.num_steps);
  for (uint64_t a = 0; a < n; a += kRowsPerUpdate) {
    const uint64_t k = std::min<uint64_t>(kRowsPerUpdate, n - a);
    for (uint64_t i = 0; i < k; ++i)
      std::memcpy(buf_.data() + i * kHashedRowBytes, rows + (a + i) * kRowBytes, kHashedRowBytes);
    sha_.update(buf_.data(), static_cast<size_t>(k * kHashedRowBytes));
  }
  return sha_.final();
}

std::string to_hex(const RunDigest& d) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * d.size());
  for (uint8_t c : d) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

// ---------------------------------------------------------------- table
bool has_digest_table(Db& db) {
  Stmt s = db.prepare(
      "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'run_digests'");
  return s.step();
}

void create_digest_table(Db& db) {
  db.exec(
      "CREATE TABLE IF NOT EXISTS run_digests (id INTEGER PRIMARY KEY, sha256 BLOB NOT NULL, "
      "duplicate_of INTEGER);"
      "CREATE INDEX IF NOT EXISTS idx_run_digests_sha256 ON run_digests(sha256);");
}

void insert_digests(Db& db, const std::vector<RunRow>& runs, const std::vector<RunDigest>& digests,
                    const std::vector<int64_t>& dup_of) {
  Stmt s = db.prepare("INSERT INTO run_digests (id, sha256, duplicate_of) VALUES (?1, ?2, ?3)");
  for (size_t i = 0; i < runs.size(); ++i) {
    s.bind(1, runs[i].id);
    s.bind_blob(2, digests[i].data(), digests[i].size());
    if (i < dup_of.size() && dup_of[i] >= 0) s.bind(3, dup_of[i]);
    else s.bind_null(3);
    s.step();
    s.reset();
  }
}

DigestLookup::DigestLookup(Db& db) {
  // Only digests of runs the table holds count (a digest another tool left
  // behind for a run it deleted is no run).
  if (has_digest_table(db))
    q_.emplace(db.prepare(
        "SELECT d.id FROM main.run_digests AS d JOIN main.runs AS r ON r.id = d.id "
        "WHERE d.sha256 = ?1 ORDER BY d.id LIMIT 1"));
}

std::optional<int64_t> DigestLookup::find(const RunDigest& d) {
  if (!q_) return std::nullopt;
  q_->bind_blob(1, d.data(), d.size());
  std::optional<int64_t> id;
  if (q_->step()) id = q_->col_int(0);
  q_->reset();
  return id;
}

// ---------------------------------------------------------------- duplicates
namespace {
constexpr size_t kReported = 5;  // duplicates named in a refusal
}

int64_t DuplicateCheck::add(const RunDigest& d, int64_t id, size_t index) {
  Key key;
  std::memcpy(&key.a, d.data(), 8);
  std::memcpy(&key.b, d.data() + 8, 8);
  if (existing_)
    if (auto old = existing_->find(d)) {
      ++in_dataset_;
      if (found_.size() < kReported) found_.push_back({index, *old, 0, true});
      return *old;
    }
  auto [it, fresh] = seen_.try_emplace(key, id, index);
  if (fresh) return -1;
  ++repeated_;
  if (found_.size() < kReported) found_.push_back({index, it->second.first, it->second.second, false});
  return it->second.first;
}

std::string DuplicateCheck::refusal(const std::string& where, uint64_t runs, bool append) const {
  std::string counts;
  if (in_dataset_ && repeated_)
    counts = fmt::format("{} are already in the dataset and {} repeat an earlier run of this "
                         "{}",
                         in_dataset_, repeated_, append ? "append" : "input");
  else if (in_dataset_)
    counts = fmt::format("{} already in the dataset", in_dataset_ == 1 ? "is" : "are");
  else
    counts = fmt::format("repeat{} an earlier run of this {}", repeated_ == 1 ? "s" : "",
                         append ? "append" : "input");
  std::string which;
  for (const Found& f : found_) {
    if (!which.empty()) which += "; ";
    if (f.in_dataset)
      which += fmt::format("{} is run {}", label_(f.index), f.same_as);
    else
      which += fmt::format("{} repeats {}", label_(f.index), label_(f.same_as_index));
  }
  if (duplicates() > found_.size())
    which += fmt::format("; and {} more", duplicates() - found_.size());
  return fmt::format(
      "{}: {} of the {} runs {} {} (the same content digest: the same boards, moves and metadata): {}. "
      "Nothing was {}. Each copy would count as one more game in training; to {} them anyway, "
      "pass --allow-duplicates (C: allow_duplicates; Python: allow_duplicates=True)",
      where, duplicates(), runs, append ? "to append" : "given", counts, which,
      append ? "changed" : "written", append ? "append" : "build with");
}

// ---------------------------------------------------------------- repair
namespace {

// The committed rows of a dataset, read a run at a time in row order.
class RowReader {
 public:
  RowReader(const std::string& dir, const Manifest& m) : dir_(dir), m_(m) {
    if (!m.sharded) {
      f_.emplace(dir + "/steps.npy");
      NpyInfo info = read_npy_info(*f_, /*allow_tail=*/true);
      if (info.rows < m.rows)
        fail(A2PACK_E_CORRUPT, "{}: holds {} rows, fewer than the {} that manifest.json records",
             f_->path(), info.rows, m.rows);
      offset_ = info.data_offset;
    }
  }

  // Rows [first, first + n) of run `id` into dst.
  void read(int64_t id, uint64_t first, uint64_t n, uint8_t* dst) {
    if (first > m_.rows || n > m_.rows - first)
      fail(A2PACK_E_CORRUPT,
           "{}/metadata.db: run {} has rows {}..{}, past the {} rows manifest.json records", dir_,
           id, first, first + n, m_.rows);
    if (n == 0) return;
    if (m_.sharded) {
      const size_t s = shard_of_row(m_.shards, first);
      const ShardRecord& r = m_.shards[s];
      if (first + n > r.first_row + r.rows)
        fail(A2PACK_E_CORRUPT,
             "{}/metadata.db: run {} has rows {}..{}, which cross the end of shard {} (rows "
             "{}..{}): a shard holds whole runs",
             dir_, id, first, first + n, r.file, r.first_row, r.first_row + r.rows);
      if (s != shard_ || !f_) {
        f_.emplace(dir_ + "/" + r.file);
        NpyInfo info = read_npy_info(*f_);
        if (info.rows != r.rows)
          fail(A2PACK_E_CORRUPT, "{}: holds {} rows but manifest.json records {} for it",
               f_->path(), info.rows, r.rows);
        offset_ = info.data_offset;
        shard_ = s;
      }
      first -= r.first_row;
    }
    f_->pread_exact(dst, static_cast<size_t>(n * kRowBytes), offset_ + first * kRowBytes);
  }

 private:
  std::string dir_;
  const Manifest& m_;
  std::optional<ReadFd> f_;
  uint64_t offset_ = 0;
  size_t shard_ = 0;
};

}  // namespace

DigestRepair record_digests(const std::string& dir, const Manifest& m, bool recheck,
                            uint32_t workers) {
  DigestRepair rep;
  Db db(dir + "/metadata.db", Db::Mode::read_write);
  set_durable(db);
  db.exec("BEGIN IMMEDIATE");
  const bool had_table = has_digest_table(db);
  create_digest_table(db);
  if (had_table) {
    db.exec("DELETE FROM run_digests WHERE id NOT IN (SELECT id FROM runs)");
    rep.orphans = static_cast<uint64_t>(db.changes());
  }
  // In row order, so the rows are read front to back. The sort happens
  // before the first row is returned, so the inserts below do not disturb
  // the scan.
  Stmt q = db.prepare(std::string(
      "SELECT r.id, r.first_step_idx, r.num_steps, r.max_score, r.highest_tile, r.engine, "
      "r.start_time, r.elapsed_s, d.sha256 FROM runs AS r LEFT JOIN run_digests AS d "
      "ON d.id = r.id") + (recheck ? "" : " WHERE d.id IS NULL") + " ORDER BY r.first_step_idx");
  Stmt ins = db.prepare("INSERT INTO run_digests (id, sha256) VALUES (?1, ?2)");
  Stmt upd = db.prepare("UPDATE run_digests SET sha256 = ?2 WHERE id = ?1");
  RowReader reader(dir, m);
  const unsigned nw = resolve_workers(workers);
  std::vector<std::unique_ptr<RunHasher>> hashers(nw);
  // A batch: up to 4096 runs or 1 Mi rows (32 MiB) read, then hashed in parallel.
  constexpr size_t kBatchRuns = 4096;
  constexpr uint64_t kBatchRows = uint64_t{1} << 20;
  std::vector<RunRow> runs;
  std::vector<std::string> stored;
  std::vector<uint64_t> at;  // each run's first row in `buf`
  std::vector<uint8_t> buf;
  std::vector<RunDigest> got;
  auto flush = [&] {
    if (runs.empty()) return;
    got.resize(runs.size());
    parallel_for_worker(runs.size(), nw, [&](unsigned w, size_t i) {
      if (!hashers[w]) hashers[w] = std::make_unique<RunHasher>();
      got[i] = hashers[w]->digest(runs[i], buf.data() + at[i] * kRowBytes);
    });
    for (size_t i = 0; i < runs.size(); ++i) {
      const std::string& old = stored[i];
      if (!old.empty() && old.size() == got[i].size() &&
          std::memcmp(old.data(), got[i].data(), got[i].size()) == 0)
        continue;
      Stmt& s = old.empty() ? ins : upd;
      s.bind(1, runs[i].id);
      s.bind_blob(2, got[i].data(), got[i].size());
      s.step();
      s.reset();
      ++(old.empty() ? rep.added : rep.replaced);
    }
    runs.clear();
    stored.clear();
    at.clear();
  };
  uint64_t rows_in_batch = 0;
  while (q.step()) {
    RunRow r = run_row_at(q);
    if (r.first_step_idx < 0 || r.num_steps < 0)
      fail(A2PACK_E_CORRUPT, "{}/metadata.db: run {} has first_step_idx {} and num_steps {}", dir,
           r.id, r.first_step_idx, r.num_steps);
    const auto n = static_cast<uint64_t>(r.num_steps);
    if (!runs.empty() && (runs.size() == kBatchRuns || rows_in_batch + n > kBatchRows)) {
      flush();
      rows_in_batch = 0;
    }
    at.push_back(rows_in_batch);
    buf.resize(static_cast<size_t>((rows_in_batch + n) * kRowBytes));
    reader.read(r.id, static_cast<uint64_t>(r.first_step_idx), n,
                buf.data() + rows_in_batch * kRowBytes);
    rows_in_batch += n;
    stored.push_back(q.col_null(8) ? std::string() : q.col_blob(8));
    runs.push_back(std::move(r));
  }
  flush();
  db.exec("COMMIT");
  if (rep.added)
    rep.actions.push_back(fmt::format(
        "recorded the content digests of {} runs that had none in metadata.db (a dataset written "
        "before a2pack recorded them, or runs another tool appended)",
        rep.added));
  if (rep.replaced)
    rep.actions.push_back(fmt::format(
        "replaced {} stored run digests that did not match the runs' rows and metadata",
        rep.replaced));
  if (rep.orphans)
    rep.actions.push_back(fmt::format(
        "removed {} run digests of ids that are no run of metadata.db", rep.orphans));
  return rep;
}

}  // namespace a2pack::dataset
