// Opening a dataset: its manifest, rows (mapped, read into memory or
// fetched from an object store), shards and metadata.db, checked against
// each other before anything is served.
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
  check_combined_crc(dir_, m);
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

}  // namespace a2pack::dataset
