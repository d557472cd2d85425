// The sharded layout's steps files (docs/dataset.md, "Sharded datasets"):
// writing rows into shards of whole runs, and reading one shard back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataset/fsutil.hpp"
#include "dataset/manifest.hpp"

namespace a2pack::dataset {

// Writes rows, whole runs at a time, into DIR/steps-NNNNN.npy from shard
// `first_index` (global rows from `first_row`). A shard is closed before a
// run that would take it past `shard_rows` rows, so no run spans two shards
// (a run longer than shard_rows gets a shard of its own). Each shard stays
// under a temporary name until install(); destroying the writer before then
// removes them all.
class ShardWriter {
 public:
  ShardWriter(std::string dir, size_t first_index, uint64_t first_row, uint64_t shard_rows);
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Rows p[0 .. ends[k]) of k runs, run j's rows [ends[j], ends[j + 1]) (ends[0] == 0).
  void put(const uint8_t* p, const uint64_t* ends, size_t k);
  // Close the open shard: its header's count, fsync. No put() after it.
  void finish();
  // Rename every shard to its name and fsync the folder.
  void install();
  // The shards written (after finish()).
  const std::vector<ShardRecord>& shards() const { return done_; }

 private:
  void open_next();
  void close_open();

  std::string dir_;
  uint64_t shard_rows_;
  uint64_t row_;  // global row of the next row put
  size_t next_index_;
  std::vector<ShardRecord> done_;
  std::vector<std::unique_ptr<TempFile>> files_;
  std::unique_ptr<TempFile> open_;
  ShardRecord cur_;
};

// Read shard `r` of the dataset in `dir` into dst (r.rows * 32 bytes): the
// file must be a step .npy of exactly r.rows rows; with check_crc its data
// must match r.crc32c. Errors name the file and what was wrong.
void read_shard(const std::string& dir, const ShardRecord& r, uint8_t* dst, bool check_crc);

// The shard holding global row `row` (shards sorted by first_row, non-empty
// ones covering [0, rows)).
size_t shard_of_row(const std::vector<ShardRecord>& shards, uint64_t row);
// How many of the first shards hold exactly the first `rows` rows (0 for
// none), or SIZE_MAX when no shard ends at row `rows`.
size_t shards_ending_at(const std::vector<ShardRecord>& shards, uint64_t rows);

// The CRC32C of the rows of shards [0, count), from the shards' own CRCs.
uint32_t combined_crc(const std::vector<ShardRecord>& shards, size_t count);
// CORRUPT, naming dir's manifest, unless its shards' CRCs combine to its
// steps_crc32c.
void check_combined_crc(const std::string& dir, const Manifest& m);

}  // namespace a2pack::dataset
