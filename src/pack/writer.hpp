// Building A2PACK packfiles.
//
// The index precedes the data but the writer streams, so it never holds
// payloads in memory beyond the few it is working on:
//  - when the number of entries is known up front (expected_count, e.g. the
//    length of a directory listing) the header and index are reserved at the
//    start of the output's temporary file, payloads are appended behind them,
//    and the index is written in place at finish(); entries that end up
//    skipped leave their reserved index slots as zero padding;
//  - otherwise payloads go to an unlinked temporary file in the output's
//    folder and are copied once behind the index at finish().
// Either way the pack appears under its name only when complete (AtomicFile).
// An s3:// or gs:// output is one upload: payloads stream as they come, and
// the header and index go in front at finish() (storage/head_first.hpp); the
// object appears only then, and an unfinished writer aborts the upload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "pack/format.hpp"
#include "pack/reader.hpp"

namespace a2pack::pack {

enum class Compression : uint32_t { none = 0, zstd = 1, lz4 = 2 };

struct WriterOptions {
  uint32_t align = 4096;       // payload alignment: a power of two, 1 .. 1 MiB
  bool entry_crc = true;       // store each payload's CRC32C in the index
  Compression compression = Compression::none;
  int zstd_level = 3;
  int lz4_level = 0;            // LZ4F's level: 0 fast, < 0 faster, 3..12 LZ4 HC
  uint64_t expected_count = 0;  // 0 = unknown (payloads are staged, see above)
};

// An input run, checked (fully decoded) and ready to append. Building one is
// thread-safe; appending is not.
struct Prepared {
  std::vector<uint8_t> owned;     // the input bytes when the Prepared owns them
  std::string compressed;         // the zstd or LZ4 frame when compression paid off
  const uint8_t* view = nullptr;  // the input bytes when it does not
  uint16_t kind = 0;
  uint16_t flags = kEntryStored;
  uint32_t crc = 0;
  uint32_t raw_len = 0;
  uint32_t meta_steps = 0;

  // The bytes to store (computed, so moving a Prepared keeps them valid).
  const uint8_t* stored() const {
    if (flags != kEntryStored) return reinterpret_cast<const uint8_t*>(compressed.data());
    return view ? view : owned.data();
  }
  size_t stored_size() const { return flags != kEntryStored ? compressed.size() : raw_len; }
};

// `data` must outlive the Prepared unless it was compressed. Throws Error
// (CORRUPT, CHECKSUM, ...) when the bytes are not a valid v1 or v2 run.
Prepared prepare(const uint8_t* data, size_t len, const WriterOptions& opts);
Prepared prepare(std::vector<uint8_t>&& bytes, const WriterOptions& opts);
// Read and prepare a run file; every error names the path.
Prepared prepare_file(const std::string& path, const WriterOptions& opts);

struct BuildSummary {
  uint64_t entries = 0;
  uint64_t skipped = 0;             // bad inputs skipped (skip_bad)
  uint64_t input_bytes = 0;         // run-file bytes of the entries
  uint64_t stored_bytes = 0;        // payload bytes stored (after compression)
  uint64_t compressed_entries = 0;  // entries stored compressed (zstd or lz4)
  uint64_t file_bytes = 0;          // size of the finished pack
};

// Called for each bad input skipped under skip_bad, with its path and error.
using BadInputFn = std::function<void(const std::string& path, const Error& error)>;

class SpillFile;
}  // namespace a2pack::pack
namespace a2pack::storage {
class HeadFirstWriter;
}  // namespace a2pack::storage
namespace a2pack::pack {

class Writer {
 public:
  Writer(std::string path, WriterOptions opts);
  ~Writer();  // an unfinished pack is abandoned; nothing appears under its name
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void add(const uint8_t* data, size_t len) { append(prepare(data, len, opts_)); }
  void add_file(const std::string& path) { append(prepare_file(path, opts_)); }
  // Read, check and compress files in parallel on up to `workers` threads and
  // append them in the given order. A bad input stops with its error unless
  // `skip_bad`, which counts it, reports it to `on_bad` and goes on.
  void add_files(const std::vector<std::string>& paths, uint32_t workers, bool skip_bad,
                 const BadInputFn& on_bad, const ProgressFn& progress);
  void append(const Prepared& p);

  uint64_t count() const { return entries_.size(); }
  const BuildSummary& summary() const { return summary_; }
  BuildSummary finish();

 private:
  void check_open() const;
  void write_data(const void* p, size_t n);
  void write_zeros_data(uint64_t n);
  BuildSummary finish_remote();

  std::string path_;
  WriterOptions opts_;
  std::unique_ptr<AtomicFile> out_;     // direct mode
  std::unique_ptr<SpillFile> spill_;    // staging mode
  std::unique_ptr<storage::HeadFirstWriter> remote_;  // s3:// / gs:// outputs
  uint64_t data_start_ = 0;             // direct mode: where payloads begin
  uint64_t rel_pos_ = 0;                // bytes of data region written so far
  std::vector<Entry> entries_;          // offsets relative to the data start
  std::vector<uint32_t> lengths_;
  BuildSummary summary_;
  bool finished_ = false;
  bool broken_ = false;
};

// All `*.a2run2` files under `dir` (recursively), in path order (component
// by component, like upstream's sorted PathBufs).
std::vector<std::string> list_run_files(const std::string& dir);

// `a2pack pack`: every run file under `dir` into the pack `output`.
BuildSummary pack_dir(const std::string& dir, const std::string& output, WriterOptions opts,
                      uint32_t workers, bool skip_bad, const BadInputFn& on_bad,
                      const ProgressFn& progress);

}  // namespace a2pack::pack
