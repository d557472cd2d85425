// What a dataset folder holds beyond its manifest, and whose it is.
//
// The manifest records the committed content. Rows of steps.npy past
// manifest.rows and runs of metadata.db with id >= next_run_id come from one
// of two places:
//   - a2pack's own append that was interrupted: only when the append journal
//     (dataset/journal.hpp) is present and the manifest is still the one it
//     started from. Those runs (the journal's id range) and rows (when
//     steps.npy is the journal's file) are hidden from readers and undone by
//     the next append or `verify --repair`.
//   - anything else is foreign: typically upstream's `dataset append`, which
//     rewrites steps.npy and inserts runs but knows nothing of the manifest
//     (and writes run-local run_ids: row.run_id = id - the first id of its
//     batch). Foreign content is never deleted as "uncommitted": when it is
//     consistent (its runs tile the rows past the manifest, and each run's
//     first row is its step 0 with its id, global or batch-local) readers
//     include it and the next append or `verify --repair` adopts it into the
//     manifest; otherwise readers ignore it, saying so, and writers refuse,
//     naming the mismatch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "dataset/journal.hpp"
#include "dataset/manifest.hpp"
#include "dataset/metadata.hpp"
#include "dataset/npy.hpp"

namespace a2pack::dataset {

// Consecutive foreign runs written the same way: ids [first_run_id, end_run_id)
// over rows [first_row, first_row + rows). local_ids: their rows carry
// run_id = id - first_run_id (upstream's append) instead of id.
struct ForeignBatch {
  uint64_t first_run_id = 0, end_run_id = 0, runs = 0, first_row = 0, rows = 0;
  bool local_ids = false;
};

struct Unrecorded {
  // a2pack's own interrupted append (journal present, manifest unchanged).
  bool own_pending = false;
  bool stale_journal = false;     // a journal whose append did commit: only the file is left
  uint64_t own_first_id = 0, own_end_id = 0;
  uint64_t own_runs = 0;          // of its runs, those present in metadata.db
  bool own_tail = false;          // steps.npy is its file: rows past manifest.rows are its
  uint64_t own_rows = 0;

  // Everything else beyond the manifest.
  uint64_t runs = 0, rows = 0;
  int64_t min_id = 0, max_id = -1;
  std::vector<ForeignBatch> batches;  // when adoptable
  std::string problem;                // non-empty: not adoptable, and why

  bool foreign() const { return runs != 0 || rows != 0; }
  bool adoptable() const { return foreign() && problem.empty(); }
  // "3 runs (ids 6..8) and 120 rows"
  std::string describe() const;
  // An SQL condition over `id` that keeps the runs a reader may see
  // ("" when it sees every run).
  std::string visible_sql(uint64_t next_run_id) const;
};

// `base` is the manifest, or a default Manifest (nothing recorded) for a
// dataset without one. `steps` is steps.npy, `info` its header.
Unrecorded find_unrecorded(const std::string& dir, const Manifest& base,
                           const std::optional<Journal>& journal, const NpyInfo& info,
                           const ReadFd& steps, Db& db);

// The manifest that records `u`'s foreign batches on top of `m` (rows, runs,
// next_run_id, CRC extended over the adopted rows read from `steps`, one
// source per batch).
Manifest adopt_into(const Manifest& m, const Unrecorded& u, const NpyInfo& info,
                    const ReadFd& steps, const std::string& input, const std::string& kind);

// Runs whose rows carry batch-local run ids: [first, end) -> run_id = id - first.
struct LocalIdRange {
  uint64_t first = 0, end = 0;
};
std::vector<LocalIdRange> local_id_ranges(const Manifest* m, const Unrecorded* u);
// The run_id the rows of run `id` carry.
uint64_t expected_row_run_id(const std::vector<LocalIdRange>& r, uint64_t id);

}  // namespace a2pack::dataset
