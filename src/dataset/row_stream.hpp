// Decoding a source's runs into rows, as build and append both do: in
// rounds of whole runs decoded in parallel, each run's rows handed on in
// order with its content digest checked against the dataset and the other
// new runs. Internal to dataset/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dataset/builder.hpp"
#include "dataset/digest.hpp"
#include "dataset/metadata.hpp"

namespace a2pack::dataset {

struct StreamResult {
  std::vector<RunRow> runs;
  std::vector<RunDigest> digests;  // runs[i]'s content digest
  std::vector<int64_t> dup_of;     // the id of the run runs[i] repeats, or -1
  uint64_t rows = 0;
  uint32_t crc = 0;
  uint64_t skipped = 0;
  uint64_t duplicates() const {
    return static_cast<uint64_t>(std::count_if(dup_of.begin(), dup_of.end(),
                                               [](int64_t d) { return d >= 0; }));
  }
};

// What a writer checks its runs' digests against: the dataset's runs (an
// append), and each other. `where` names the dataset in a refusal.
struct DupContext {
  DuplicateCheck& check;
  std::string where;
  bool append = false;
};

// Where decoded rows go, in order, whole runs a call: a new steps file, the
// end of the existing one, or shards. (p, bytes, ends, k): run j's rows are
// [ends[j], ends[j + 1]) of p (ends[0] == 0, ends[k] * 32 == bytes).
using RowSink = std::function<void(const uint8_t*, size_t, const uint64_t*, size_t)>;

// Decode every run of `src` and hand its rows to `out`, run ids from
// `first_id`, row numbers from `first_row`, extending `crc`.
//
// Each run's content digest is computed with its rows (dataset/digest.hpp)
// and checked with `dup`; once a duplicate is to be refused nothing more is
// handed to `out`, the rest is decoded to count them all, and the refusal is
// thrown at the end (the callers' error paths take back what was written).
StreamResult stream_rows(const RunSource& src, const RowSink& out, uint64_t first_id,
                         uint64_t first_row, uint32_t crc, const BuildOptions& o,
                         const char* crash_name, DupContext& dup);

}  // namespace a2pack::dataset
