// An open dataset: its committed rows in RAM (or mapped), the metadata
// database for selections, and the batch gathers that feed training.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "a2pack.h"
#include "base/file_io.hpp"
#include "dataset/columns.hpp"
#include "dataset/foreign.hpp"
#include "dataset/manifest.hpp"
#include "dataset/memory.hpp"
#include "dataset/metadata.hpp"
#include "dataset/query_limits.hpp"

namespace a2pack::dataset {

struct OpenOptions {
  bool mmap = false;              // map steps.npy instead of reading it into RAM
  bool verify_crc = true;         // check the rows against manifest.json's CRC32C, and
                                  // metadata.db's indexes against its table
  bool huge_pages = true;         // ask for transparent huge pages (RAM mode; with mmap a hint
                                  // under which a cold fault reads 2 MiB: off for files larger
                                  // than RAM)
  uint32_t workers = 0;           // threads for loading and checking, 0 = all cores
  bool allow_extra_files = false; // ignore files a dataset does not hold
};


// Consecutive step indices [first, first + count): one run's rows.
struct RowRange {
  int64_t first = 0, count = 0;
};
using Ranges = std::vector<RowRange>;
uint64_t total_rows(const Ranges& r);
// Write every index of `r`, in order, to out (total_rows(r) values).
void expand(const Ranges& r, int64_t* out);
std::vector<int64_t> expand(const Ranges& r);

struct Split {
  Ranges train, val;
};

class Dataset {
 public:
  // Open and load; see OpenOptions. Errors name the file and what was wrong:
  // a missing file, an unexpected file, a wrong dtype or header, a truncated
  // steps.npy, a CRC mismatch, row counts that disagree between steps.npy,
  // manifest.json and metadata.db.
  static std::unique_ptr<Dataset> open(const std::string& dir, const OpenOptions& opts);

  const std::string& dir() const { return dir_; }
  uint64_t rows() const { return rows_; }
  uint64_t runs() const { return runs_; }
  const uint8_t* data() const { return data_; }
  bool mapped() const { return mapped_; }
  bool huge_pages() const { return mem_.huge_pages(); }
  const std::optional<Manifest>& manifest() const { return manifest_; }
  uint64_t next_run_id() const { return next_run_id_; }
  // Rows past the committed count (an interrupted append's tail).
  uint64_t uncommitted_rows() const { return file_rows_ - rows_; }
  // Observations made while opening (leftover temporary files, ...).
  const std::vector<std::string>& notes() const { return notes_; }

  // Copy rows idx[0..n) to out (32 bytes each), in order. An index outside
  // [0, rows) fails with OUT_OF_RANGE before anything is written. Thread-safe.
  void gather(const int64_t* idx, size_t n, uint8_t* out, uint32_t workers) const;
  void gather_columns(const int64_t* idx, size_t n, const ColumnsOut& out, uint32_t workers) const;

  // Step indices (ascending) of the committed runs matching `where` (an SQL
  // expression over the columns of `runs`, with `?` parameters); empty
  // `where` selects every run. `limits` bound the whole call (query_limits.hpp).
  Ranges select(const std::string& where, const std::vector<SqlParam>& params,
                const QueryLimits& limits = QueryLimits()) const;
  // Ids of the matching runs, ascending.
  std::vector<int64_t> select_runs(const std::string& where, const std::vector<SqlParam>& params,
                                   const QueryLimits& limits = QueryLimits()) const;
  // Run-disjoint split of the runs matching `where`: runs matching `val_where`
  // go to validation when it is given, otherwise each run goes there with
  // probability `val_fraction` by a hash of (seed, run id), so a run keeps its
  // side when runs are appended.
  Split split(const std::string& where, const std::vector<SqlParam>& params, double val_fraction,
              uint64_t seed, const std::string& val_where,
              const std::vector<SqlParam>& val_params,
              const QueryLimits& limits = QueryLimits()) const;

  // Summary as a JSON object (rows, runs, per-run and per-move statistics).
  std::string stats_json(uint32_t workers) const;

  // Full consistency check of the loaded rows against metadata.db: runs tile
  // the rows, every row's run_id and step_index match its run, moves and
  // values are in range. Returns problems (at most `max_errors`).
  std::vector<std::string> check_rows(uint32_t workers, size_t max_errors) const;
  // The runs' content digests (dataset/digest.hpp), computed from the loaded
  // rows and metadata.db, against those metadata.db stores, and the runs
  // that repeat an earlier one.
  struct DigestFindings {
    uint64_t missing = 0;               // runs without a stored digest
    uint64_t mismatched = 0;            // stored digests that differ from the rows'
    std::vector<int64_t> mismatched_ids;  // the first few
    struct Duplicate {
      int64_t id, same_as;  // run `id` repeats the lower run `same_as`
      bool allowed;         // written with allow_duplicates (duplicate_of set)
    };
    std::vector<Duplicate> duplicates;  // every one, by id
  };
  DigestFindings check_digests(uint32_t workers) const;
  // Known defects of content another tool wrote that a2pack keeps as it is
  // (run-local run_ids from upstream's append), one line per batch.
  std::vector<std::string> defects() const;
  // The largest run id (-1 when there are none).
  int64_t max_run_id() const { return max_run_id_; }

 private:
  // Bounds-checks a batch (throws naming the first bad index) and returns how
  // many threads its gather should use.
  unsigned check_gather(const int64_t* idx, size_t n, uint32_t workers) const;
  // Copy rows [first, first + count) to out: under a guard when mapped, so a
  // steps.npy cut short fails with an error naming it.
  void read_rows(uint64_t first, uint64_t count, uint8_t* out) const;

  Dataset() = default;
  // s3:// and gs:// datasets (remote.cpp).
  static std::unique_ptr<Dataset> open_remote(const std::string& url, const OpenOptions& opts);
  void load_rows(const ReadFd& f, uint64_t offset, const OpenOptions& o);
  void open_shards(const OpenOptions& o);
  void open_db(bool check_indexes);
  void check_metadata(const Unrecorded& u);
  // One query of the caller's filter under `watch`, each run it selects to
  // fn(id, first_step_idx, num_steps) in row order; db_mu_ is held.
  void for_each_run(QueryWatch& watch, const std::string& where,
                    const std::vector<SqlParam>& params,
                    const std::function<void(int64_t, int64_t, int64_t)>& fn) const;
  std::vector<int64_t> run_ids(QueryWatch& watch, const std::string& where,
                               const std::vector<SqlParam>& params) const;

  std::string dir_;
  std::optional<Manifest> manifest_;
  uint64_t rows_ = 0, file_rows_ = 0, runs_ = 0, next_run_id_ = 0;
  uint64_t crc_rows_ = 0;  // rows the manifest's CRC covers
  int64_t max_run_id_ = -1;
  std::vector<LocalIdRange> local_ids_;
  RowMemory mem_;
  MappedFile map_;
  const uint8_t* data_ = nullptr;
  bool mapped_ = false;
  std::unique_ptr<Db> db_;
  mutable std::mutex db_mu_;
  std::vector<std::string> notes_;
};

// Open `dir` and check everything (manifest CRC, files, row-level checks).
// With repair, first bring an interrupted append back to the committed state
// (builder.hpp recover()). The report lists errors (empty: the dataset is
// sound), notes and actions taken, as JSON.
struct VerifyReport {
  bool ok = false;
  a2pack_status status = A2PACK_OK;  // of the first error (CORRUPT for row-level problems)
  uint64_t rows = 0, runs = 0;
  std::vector<std::string> errors, notes, warnings, actions;
  // Runs that repeat an earlier run of the dataset (JSON "duplicates": the
  // count, those written knowingly, and the first few as {id, same_as,
  // allowed}); only those not written knowingly are an error.
  uint64_t duplicate_runs = 0, allowed_duplicates = 0;
  std::vector<Dataset::DigestFindings::Duplicate> duplicates_listed;
  uint64_t runs_without_digest = 0;
  std::string to_json() const;
};
struct VerifyOptions {
  bool repair = false;              // first recover() (undo, adopt; see builder.hpp)
  bool discard_unrecorded = false;  // with repair: drop inconsistent unrecorded content
  bool full = false;                // SQLite integrity_check instead of quick_check
};
VerifyReport verify(const std::string& dir, const VerifyOptions& vo, uint32_t workers);
inline VerifyReport verify(const std::string& dir, bool repair, uint32_t workers) {
  VerifyOptions vo;
  vo.repair = repair;
  return verify(dir, vo, workers);
}

}  // namespace a2pack::dataset
