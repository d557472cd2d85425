#include "dataset/dataset.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/mapped_guard.hpp"
#include "base/path_prefix.hpp"
#include "base/worker_pool.hpp"
#include "dataset/builder.hpp"
#include "dataset/db_check.hpp"
#include "dataset/digest.hpp"
#include "dataset/foreign.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/journal.hpp"
#include "dataset/gather.hpp"
#include "dataset/npy.hpp"
#include "dataset/row.hpp"
#include "dataset/shards.hpp"
#include "dataset/team.hpp"

namespace a2pack::dataset {

namespace {

constexpr uint64_t kChunk = uint64_t{8} << 20;  // bytes per parallel read / CRC unit
// Below this many rows a gather stays on the calling thread: waking workers
// costs more than the copy.
constexpr size_t kMinRowsPerWorker = 1024;
// A split gather's chunks: 8 per thread (256 rows of a 4 096-row batch on 2
// threads) measured up to 10 % faster than 4 (512 rows) and than 16 or 32,
// whose extra claims (an atomic on a line both cores write) cost more than
// the closer finish saves. Never below 4 prefetch distances.
constexpr size_t kChunksPerThread = 8;
constexpr size_t kMinChunkRows = 4 * kPrefetchAhead;

// Rows per chunk of a split gather: small, so the threads finish close
// together (gather_chunks keeps prefetching across chunk boundaries, so a
// boundary costs one claim, not a drained prefetch window).
size_t chunk_rows(size_t n, unsigned threads) {
  size_t per = n / (kChunksPerThread * static_cast<size_t>(threads));
  return std::max<size_t>(per, kMinChunkRows);
}

uint32_t combine_chunks(const std::vector<uint32_t>& crcs, uint64_t len) {
  uint32_t crc = 0;
  for (size_t i = 0; i < crcs.size(); ++i) {
    uint64_t n = std::min(kChunk, len - i * kChunk);
    crc = crc32c::combine(crc, crcs[i], n);
  }
  return crc;
}

uint32_t parallel_crc(const uint8_t* p, uint64_t len, uint32_t workers, bool mapped) {
  size_t chunks = static_cast<size_t>((len + kChunk - 1) / kChunk);
  std::vector<uint32_t> crcs(chunks);
  parallel_for(chunks, workers, [&](size_t i) {
    uint64_t off = i * kChunk;
    const size_t n = static_cast<size_t>(std::min(kChunk, len - off));
    if (mapped)
      guarded_read([&] { crcs[i] = crc32c::compute(p + off, n); });
    else
      crcs[i] = crc32c::compute(p + off, n);
  });
  return combine_chunks(crcs, len);
}

uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}


}  // namespace

// ---------------------------------------------------------------- open
std::unique_ptr<Dataset> Dataset::open(const std::string& dir_in, const OpenOptions& o) {
  if (is_remote_path(dir_in)) return open_remote(dir_in, o);
  std::unique_ptr<Dataset> ds(new Dataset());
  ds->dir_ = strip_slashes(dir_in);
  const std::string& dir = ds->dir_;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) fail_errno("open dataset", dir, errno);
  if (!S_ISDIR(st.st_mode)) fail(A2PACK_E_INVALID_ARGUMENT, "{}: not a dataset folder", dir);
  DirLock lock(dir, /*exclusive=*/false, /*timeout_ms=*/-1);  // not while an append is half-way
  if (auto m = read_manifest(dir); m && m->sharded) {
    ds->manifest_ = std::move(m);
    ds->open_shards(o);
    return ds;
  }

  bool has_steps = false, has_db = false;
  for (const auto& name : list_dir(dir)) {
    if (name == "steps.npy") has_steps = true;
    else if (name == "metadata.db") has_db = true;
    else if (name == "manifest.json" || name == kJournalName) continue;
    else if (name == "metadata.db-journal" || name == "metadata.db-wal" || name == "metadata.db-shm")
      continue;  // SQLite's own files
    else if (is_temp_name(name))
      ds->notes_.push_back(fmt::format(
          "{}/{}: leftover temporary file of an interrupted write (ignored; the next append or "
          "`verify --repair` removes it)",
          dir, name));
    else if (!o.allow_extra_files)
      fail(A2PACK_E_CORRUPT,
           "{}/{}: unexpected file in a dataset folder (a dataset holds steps.npy, metadata.db "
           "and manifest.json); remove it, or open with allow_extra_files",
           dir, name);
  }
  if (!has_steps) fail(A2PACK_E_NOT_FOUND, "{}/steps.npy: missing from the dataset folder", dir);
  if (!has_db) fail(A2PACK_E_NOT_FOUND, "{}/metadata.db: missing from the dataset folder", dir);

  ds->manifest_ = read_manifest(dir);
  if (!ds->manifest_)
    ds->notes_.push_back(fmt::format(
        "{}/manifest.json: absent (a dataset from the upstream tool); rows are not checked "
        "against a CRC",
        dir));
  auto journal = ds->manifest_ ? read_journal(dir) : std::nullopt;
  if (journal && journal->damaged())
    ds->notes_.push_back(journal->damage + "; ignored (nothing is hidden as an interrupted "
                         "append on its word; `verify --repair` removes it)");
  const std::string steps_path = dir + "/steps.npy";
  ReadFd f(steps_path);
  const Manifest base = ds->manifest_ ? *ds->manifest_ : Manifest{};
  NpyInfo info = read_npy_info(
      f, journal && (journal->owns_steps(base, f.fd()) || journal->damaged()));
  ds->file_rows_ = info.rows;
  if (info.rows < base.rows)
    fail(A2PACK_E_CORRUPT, "{}: holds {} rows but manifest.json records {} (truncated or replaced)",
         steps_path, info.rows, base.rows);
  ds->open_db(o.verify_crc);
  Unrecorded u = find_unrecorded(dir, base, journal, info, f, *ds->db_);
  if (!ds->manifest_ && u.foreign() && !u.adoptable())
    fail(A2PACK_E_CORRUPT, "{}: {}", dir, u.problem);
  ds->crc_rows_ = base.rows;
  ds->rows_ = base.rows + (u.adoptable() ? u.rows : 0);
  if (u.own_pending && (u.own_runs || u.own_rows))
    ds->notes_.push_back(fmt::format(
        "{}: an interrupted append (its journal {} is present) left {} runs and {} rows past the "
        "committed ones; they are ignored (the next append or `verify --repair` removes them)",
        dir, kJournalName, u.own_runs, u.own_rows));
  if (ds->manifest_ && u.adoptable())
    ds->notes_.push_back(fmt::format(
        "{}: includes {} that manifest.json does not record (written by another tool, such as "
        "upstream's `dataset append`; rows past {} are not covered by the manifest's CRC); the "
        "next append or `verify --repair` records them",
        dir, u.describe(), base.rows));
  else if (u.foreign() && !u.adoptable())
    ds->notes_.push_back(fmt::format(
        "{}: ignores {} that manifest.json does not record and that are not consistent: {}; "
        "appends refuse until `verify --repair --discard-unrecorded` drops them",
        dir, u.describe(), u.problem));
  ds->local_ids_ = local_id_ranges(ds->manifest_ ? &*ds->manifest_ : nullptr, &u);
  ds->load_rows(f, info.data_offset, o);
  ds->check_metadata(u);
  return ds;
}

// A sharded dataset (docs/dataset.md): the manifest's shards, read one after
// the other into one array, so that everything else (selections, gathers,
// checks, the feed) works on it as on a single steps.npy.
void Dataset::open_shards(const OpenOptions& o) {
  const Manifest& m = *manifest_;
  if (o.mmap)
    fail(A2PACK_E_UNSUPPORTED,
         "{}: a sharded dataset cannot be mapped as one array: open it into RAM (mmap off), or "
         "stream it under a memory budget (a2pack_shards_open, a2pack.ShardStream)",
         dir_);
  std::vector<char> present(m.shards.size(), 0);
  for (const auto& name : list_dir(dir_)) {
    if (name == "metadata.db" || name == "manifest.json" || name == kJournalName ||
        name == "metadata.db-journal" || name == "metadata.db-wal" || name == "metadata.db-shm")
      continue;
    auto it = std::find_if(m.shards.begin(), m.shards.end(),
                           [&](const ShardRecord& r) { return r.file == name; });
    if (it != m.shards.end()) {
      present[static_cast<size_t>(it - m.shards.begin())] = 1;
    } else if (is_temp_name(name) || shard_index(name)) {
      notes_.push_back(fmt::format(
          "{}/{}: not in manifest.json (left by an interrupted append; ignored, the next append "
          "or `verify --repair` removes it)",
          dir_, name));
    } else if (!o.allow_extra_files) {
      fail(A2PACK_E_CORRUPT,
           "{}/{}: unexpected file in a sharded dataset folder (it holds the shards manifest.json "
           "lists, metadata.db and manifest.json); remove it, or open with allow_extra_files",
           dir_, name);
    }
  }
  for (size_t i = 0; i < m.shards.size(); ++i)
    if (!present[i])
      fail(A2PACK_E_NOT_FOUND, "{}/{}: shard {} of manifest.json is missing", dir_,
           m.shards[i].file, i);
  uint32_t crc = 0;
  for (const auto& r : m.shards) crc = crc32c::combine(crc, r.crc32c, r.rows * kRowBytes);
  if (crc != m.steps_crc32c)
    fail(A2PACK_E_CORRUPT,
         "{}/manifest.json: its shards' CRCs combine to {:#010x}, but steps_crc32c is {:#010x}",
         dir_, crc, m.steps_crc32c);
  open_db(o.verify_crc);
  rows_ = file_rows_ = crc_rows_ = m.rows;
  mem_ = RowMemory(static_cast<size_t>(rows_ * kRowBytes), o.huge_pages);
  data_ = mem_.data();
  parallel_for(m.shards.size(), o.workers, [&](size_t i) {
    const ShardRecord& r = m.shards[i];
    read_shard(dir_, r, mem_.data() + r.first_row * kRowBytes, o.verify_crc);
  });
  // Runs past the manifest (an interrupted append's, or unexplained) are
  // hidden from every query, as in a single-file dataset.
  Unrecorded u;
  {
    Stmt q = db_->prepare("SELECT count(*) FROM runs WHERE id >= ?1");
    q.bind(1, static_cast<int64_t>(m.next_run_id));
    q.step();
    u.runs = static_cast<uint64_t>(q.col_int(0));
  }
  if (u.runs) {
    u.problem = "not recorded by manifest.json";
    notes_.push_back(fmt::format(
        "{}/metadata.db: ignores {} runs with id >= {} that manifest.json does not record (an "
        "interrupted append's: the next append or `verify --repair` removes them)",
        dir_, u.runs, m.next_run_id));
  }
  check_metadata(u);
}

void Dataset::load_rows(const ReadFd& f, uint64_t offset, const OpenOptions& o) {
  const uint64_t bytes = rows_ * kRowBytes;
  // The manifest's CRC covers its rows; rows another tool appended after
  // them (included when consistent) have none.
  const uint64_t crc_bytes = crc_rows_ * kRowBytes;
  const bool check = o.verify_crc && manifest_.has_value();
  uint32_t crc = 0;
  if (o.mmap) {
    map_ = MappedFile(f.path(), MappedFile::Advice::random);
    mapped_ = true;
    data_ = bytes ? map_.data() + offset : nullptr;
#ifdef MADV_HUGEPAGE
    if (bytes && o.huge_pages) ::madvise(const_cast<uint8_t*>(map_.data()), map_.size(), MADV_HUGEPAGE);  // a hint
#endif
    if (check) crc = parallel_crc(data_, crc_bytes, o.workers, /*mapped=*/true);
  } else {
    mem_ = RowMemory(static_cast<size_t>(bytes), o.huge_pages);
    data_ = mem_.data();
    // Large positional reads, one chunk per task, each checked while still
    // in cache; the chunk CRCs are then combined in order.
    size_t chunks = static_cast<size_t>((bytes + kChunk - 1) / kChunk);
    size_t crc_chunks = static_cast<size_t>((crc_bytes + kChunk - 1) / kChunk);
    std::vector<uint32_t> crcs(crc_chunks);
    parallel_for(chunks, o.workers, [&](size_t i) {
      uint64_t off = i * kChunk;
      size_t n = static_cast<size_t>(std::min(kChunk, bytes - off));
      f.pread_exact(mem_.data() + off, n, offset + off);
      if (check && off < crc_bytes)
        crcs[i] = crc32c::compute(mem_.data() + off, static_cast<size_t>(std::min<uint64_t>(n, crc_bytes - off)));
    });
    if (check) crc = combine_chunks(crcs, crc_bytes);
  }
  if (check && crc != manifest_->steps_crc32c)
    fail(A2PACK_E_CHECKSUM,
         "{}: CRC32C of the {} rows is {:#010x} but manifest.json records {:#010x} (the rows were "
         "changed or damaged)",
         f.path(), crc_rows_, crc, manifest_->steps_crc32c);
}

void Dataset::open_db(bool check_indexes) {
  const std::string path = dir_ + "/metadata.db";
  // Read-write when possible, so that SQLite can roll back a hot journal an
  // interrupted append left; nothing here writes to the file otherwise.
  // Never through a link (Db refuses to write through one).
  struct stat lst;
  bool writable = ::access(path.c_str(), W_OK) == 0 && ::access(dir_.c_str(), W_OK) == 0 &&
                  ::lstat(path.c_str(), &lst) == 0 && !S_ISLNK(lst.st_mode);
  db_ = std::make_unique<Db>(path, writable ? Db::Mode::read_write : Db::Mode::read_only);
  check_schema(*db_);  // the first read rolls back a hot journal
  check_db_size(*db_);  // O(1): a file cut inside its last page
  // A pass over the table and each index (about a second per million runs):
  // part of the content check that verify_crc = false skips.
  if (check_indexes) check_db_indexes(*db_);
}

void Dataset::check_metadata(const Unrecorded& u) {
  const std::string path = dir_ + "/metadata.db";
  uint64_t expect_runs = 0;
  std::string keep;
  if (manifest_) {
    expect_runs = manifest_->runs + (u.adoptable() ? u.runs : 0);
    // Every query, the caller's filters included, sees only the runs that
    // belong to the dataset: a temporary view named `runs` shadows the table.
    keep = u.visible_sql(manifest_->next_run_id);
    if (!keep.empty())
      db_->exec(fmt::format("CREATE TEMP VIEW runs AS SELECT * FROM main.runs WHERE {}", keep));
  }
  Stmt q = db_->prepare(
      "SELECT COUNT(*), COALESCE(SUM(num_steps), 0), COALESCE(MIN(first_step_idx), 0), "
      "COALESCE(MAX(first_step_idx + num_steps), 0), COALESCE(MIN(num_steps), 0), "
      "COALESCE(MAX(id), -1), COALESCE(MIN(id), 0) FROM runs");
  q.step();
  int64_t count = q.col_int(0), sum = q.col_int(1), min_first = q.col_int(2),
          max_end = q.col_int(3), min_len = q.col_int(4), max_id = q.col_int(5),
          min_id = q.col_int(6);
  if (manifest_ && static_cast<uint64_t>(count) != expect_runs)
    fail(A2PACK_E_CORRUPT, "{}: holds {} committed runs but manifest.json records {}", path,
         count, manifest_->runs);
  if (sum < 0 || static_cast<uint64_t>(sum) != rows_)
    fail(A2PACK_E_CORRUPT,
         "{}: row counts disagree: steps.npy has {} committed rows but the runs of metadata.db "
         "add up to {} steps",
         dir_, rows_, sum);
  if (min_first < 0 || min_len < 0 || min_id < 0 || static_cast<uint64_t>(max_end) > rows_)
    fail(A2PACK_E_CORRUPT,
         "{}: a run's first_step_idx/num_steps/id is negative or reaches past the {} rows of "
         "steps.npy",
         path, rows_);
  runs_ = static_cast<uint64_t>(count);
  max_run_id_ = max_id;
  // The reader keeps this connection after the folder lock is released, and
  // a later append adds runs (ids above every present one) to the same
  // metadata.db. Queries must see the runs of the rows loaded here, not the
  // newer ones whose rows this reader does not have: the view is frozen at
  // the ids present now, while the lock still holds appends off.
  db_->exec("DROP VIEW IF EXISTS temp.runs");
  db_->exec(fmt::format("CREATE TEMP VIEW runs AS SELECT * FROM main.runs WHERE {}id <= {}",
                        keep.empty() ? std::string() : "(" + keep + ") AND ", max_id));
  next_run_id_ = manifest_ ? std::max<uint64_t>(manifest_->next_run_id,
                                                 u.adoptable() ? u.max_id + 1 : 0)
                           : static_cast<uint64_t>(max_id + 1);
  // What steers row lookup: each run's first_step_idx must point at its own
  // step 0 (one row per run). A damaged or swapped value would otherwise
  // make selections return another run's rows.
  Stmt r = db_->prepare("SELECT id, first_step_idx, num_steps FROM runs WHERE num_steps > 0");
  while (r.step()) {
    int64_t id = r.col_int(0), first = r.col_int(1);
    Row x;
    read_rows(static_cast<uint64_t>(first), 1, reinterpret_cast<uint8_t*>(&x));
    uint64_t want = expected_row_run_id(local_ids_, static_cast<uint64_t>(id));
    if (x.run_id != static_cast<uint32_t>(want) || x.step_index != 0)
      fail(A2PACK_E_CORRUPT,
           "{}: run {} has first_step_idx {}, but row {} of steps.npy is step {} of run_id {} "
           "(expected step 0 of run_id {}): the run's first_step_idx is damaged or was swapped",
           path, id, first, first, uint16_t{x.step_index}, uint32_t{x.run_id}, want);
  }
}

// ---------------------------------------------------------------- gather
unsigned Dataset::check_gather(const int64_t* idx, size_t n, uint32_t workers) const {
  if (size_t bad = first_out_of_range(idx, n, rows_); bad != n)
    fail(A2PACK_E_OUT_OF_RANGE, "{}: index {} (position {} of the batch) is outside the {} rows",
         dir_, idx[bad], bad, rows_);
  unsigned w = resolve_workers(workers);
  size_t max_w = n / kMinRowsPerWorker;
  if (w > max_w) w = static_cast<unsigned>(std::max<size_t>(max_w, 1));
  return w;
}

namespace {
// Every row of a checked batch to emit(i, row), on w threads. Rows of a
// mapping are read under a guard on each thread (mapped_guard.hpp), so a
// steps.npy cut short under the mapping fails the batch with an error
// naming it; the gather loops themselves are plain copies into the
// caller's buffers, as a guard requires.
template <typename Emit>
void gather_on(const uint8_t* base, const int64_t* idx, size_t n, unsigned w, bool mapped,
               const Emit& emit) {
  if (w <= 1) {
    if (mapped)
      guarded_read([&] { gather_all(base, idx, n, emit); });
    else
      gather_all(base, idx, n, emit);
    return;
  }
  size_t per = chunk_rows(n, w);
  MapFault fault;
  run_claiming((n + per - 1) / per, w, [&](const ChunkClaim& claim) {
    if (mapped)
      fault.record(guarded_fault([&] { gather_chunks(base, idx, n, per, claim, emit); }));
    else
      gather_chunks(base, idx, n, per, claim, emit);
  });
  fault.raise_if_any();
}
}  // namespace

void Dataset::gather(const int64_t* idx, size_t n, uint8_t* out, uint32_t workers) const {
  gather_on(data_, idx, n, check_gather(idx, n, workers), mapped_,
            [out](size_t i, const uint8_t* row) { std::memcpy(out + i * kRowBytes, row, kRowBytes); });
}


void Dataset::gather_columns(const int64_t* idx, size_t n, const ColumnsOut& out,
                             uint32_t workers) const {
  gather_on(data_, idx, n, check_gather(idx, n, workers), mapped_,
            [&out](size_t i, const uint8_t* row) { emit_columns(i, row, out); });
}

void Dataset::read_rows(uint64_t first, uint64_t count, uint8_t* out) const {
  const uint8_t* src = data_ + first * kRowBytes;
  if (mapped_)
    guarded_copy(out, src, static_cast<size_t>(count * kRowBytes));
  else
    std::memcpy(out, src, static_cast<size_t>(count * kRowBytes));
}

// ---------------------------------------------------------------- selection
template <typename F>
void Dataset::for_each_run(QueryWatch& watch, const std::string& where,
                           const std::vector<SqlParam>& params, F&& fn) const {
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
                   ? static_cast<double>(mix64(seed ^ mix64(static_cast<uint64_t>(id))) >> 11) *
                             scale <
                         val_fraction
                   : std::binary_search(val_ids.begin(), val_ids.end(), id);
    if (num) (val ? out.val : out.train).push_back({first, num});
  });
  return out;
}

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
  const uint64_t per_chunk = kChunk / kRowBytes;
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
