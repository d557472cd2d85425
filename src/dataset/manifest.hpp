// manifest.json: the commit record of a dataset. A dataset's committed content
// is exactly what its manifest says: the first `rows` rows of steps.npy (whose
// data CRC32C it holds) and the runs of metadata.db with id < next_run_id.
// Anything beyond those is an interrupted append and is ignored (then removed
// by the next append or by a repair).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <exception>

namespace a2pack::dataset {

inline constexpr uint32_t kFormatVersion = 2;  // the newest this build reads
// A sharded dataset's manifest has format_version 2, so that a build that
// knows only steps.npy refuses it (UNSUPPORTED) instead of calling it damaged.
inline constexpr uint32_t kShardedFormatVersion = 2;
inline constexpr const char* kFormatName = "a2pack-steps";
// The manifest's "run_digests" value: the layout of the run digests in
// metadata.db (dataset/digest.hpp), SHA-256 of the canonical content v1.
inline constexpr const char* kRunDigestKind = "sha256-v1";

struct SourceRecord {
  std::string input;     // the folder or packfile given
  std::string kind;      // "dir", "pack", "existing" (described when first appended to) or
                         // "adopted" (written by another tool, recorded afterwards)
  uint64_t runs = 0;
  uint64_t rows = 0;
  uint64_t first_run_id = 0;
  std::string added_utc;
  // The rows carry run_id = id - first_run_id (upstream's append writes
  // run-local ids) rather than the run's id. JSON: "row_run_ids": "local".
  bool local_run_ids = false;
};

// One steps file of a sharded dataset (docs/dataset.md, "Sharded datasets"):
// DIR/<file>, a plain .npy of `rows` rows, global rows [first_row, first_row +
// rows), holding whole runs (`runs` of them); `crc32c` of its data bytes.
struct ShardRecord {
  std::string file;
  uint64_t first_row = 0;
  uint64_t rows = 0;
  uint64_t runs = 0;
  uint32_t crc32c = 0;
};

struct Manifest {
  uint32_t format_version = 1;  // kShardedFormatVersion when sharded
  uint64_t rows = 0;
  uint64_t runs = 0;
  uint64_t next_run_id = 0;  // runs with id >= this are not committed
  uint32_t steps_crc32c = 0; // CRC32C of the first `rows` rows (data only, no header)
  std::string created_utc;
  std::string updated_utc;
  std::string generator;     // "a2pack 0.1.0"
  std::vector<SourceRecord> sources;
  // metadata.db as a2pack committed it (its size and the CRC32C of its bytes;
  // JSON "metadata_db": {"bytes": N, "crc32c": X}). While the file still
  // matches, it is the file a2pack wrote or checked, and an append need not
  // scan its indexes again (dataset/db_check.hpp). Absent in manifests
  // written before it existed; any change (another tool's insert, damage)
  // makes the next append check the indexes in full.
  bool has_metadata_stamp = false;
  uint64_t metadata_bytes = 0;
  uint32_t metadata_crc32c = 0;
  // Every committed run has its content digest in metadata.db's run_digests
  // table (dataset/digest.hpp), as of the metadata_db stamp: while the file
  // still matches the stamp, an append need not look for runs without one.
  // JSON "run_digests": "sha256-v1". Absent in manifests written before
  // digests existed and in ones another a2pack version rewrote (which may
  // have added runs without digests): the next append computes the missing.
  bool run_digests = false;
  // Sharded layout: the rows live in `shards` (in order; together the first
  // `rows` rows, `steps_crc32c` still the CRC of all of them) instead of
  // steps.npy. JSON "layout": "sharded", "shard_rows", "shards": [...].
  bool sharded = false;
  uint64_t shard_rows = 0;  // the target rows per shard the dataset was built with
  std::vector<ShardRecord> shards;
};

std::string to_json(const Manifest& m);

// The file name of shard i: "steps-00000.npy", "steps-00001.npy", ...
std::string shard_file_name(size_t i);
// The index a shard file name stands for, or nullopt for any other name.
std::optional<size_t> shard_index(const std::string& name);

// Parse manifest.json text; errors name `path` and the key that is missing or
// wrong. A format_version above kFormatVersion is UNSUPPORTED.
Manifest parse_manifest(const std::string& text, const std::string& path);

// Read DIR/manifest.json; nullopt when the file does not exist (datasets
// written by the upstream tool have none).
std::optional<Manifest> read_manifest(const std::string& dir);

// A JSON library message made safe to carry in an error: bytes outside
// printable ASCII (nlohmann quotes the offending input, which may be invalid
// UTF-8) become \xNN, so the message can itself be written as JSON or
// decoded by a binding.
std::string printable(const std::string& s);

// A JSON library error's own words, without the input text it quotes (a
// parse error's "last read: '...'"), made printable.
std::string json_error_text(const std::exception& e);
// "PATH: not valid JSON at byte offset N: <why> (byte \xNN)" for a parse
// error in `text`: the file and the offset named, and of its text only the
// one byte the parser stopped at.
std::string json_parse_error(const std::exception& e, size_t byte, const std::string& text,
                             const std::string& path);

// The text of a dataset's own small file (the manifest, the journal): not
// through a symbolic link (O_NOFOLLOW: an error naming the file), nor a
// file over `max_bytes` (CORRUPT, `what` saying what it should be).
std::string read_own_file(const std::string& path, uint64_t max_bytes, const char* what);

// The current time as "2025-08-23T12:34:56Z".
std::string utc_now();

}  // namespace a2pack::dataset
