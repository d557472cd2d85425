// JSONL export of a pack in upstream's two schemas (docs/pack.md):
//
//   runs:  {"run_idx","steps","start_unix_s","elapsed_s","max_score",
//           "highest_tile","final_board","states":[...],"moves":["UP",...]}
//   steps: {"run_idx","run_uuid","step_idx","pre_board":[16 exponents],
//           "chosen":"UP","branches":[{"legal":bool,"value":f32} x4]}
//
// written compactly (no spaces) with serde_json's number forms. Runs are
// decoded and serialised in parallel in fixed-size shards and written in pack
// order by one writer thread, so the bytes never depend on the worker count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "pack/reader.hpp"
#include "run/codec.hpp"

namespace a2pack::pack {

enum class JsonlMode : uint32_t { runs = 0, steps = 1 };

// An output buffer that grows without zero-filling what it reserves.
class JsonBuf {
 public:
  // Room for `n` more bytes; returns where they go. Finish with commit(end).
  char* reserve(size_t n);
  void commit(char* end) { size_ = static_cast<size_t>(end - p_.get()); }
  const char* data() const { return p_.get(); }
  size_t size() const { return size_; }
  void clear() { size_ = 0; }
  std::string str() const { return std::string(data(), size_); }

 private:
  std::unique_ptr<char[]> p_;
  size_t size_ = 0, cap_ = 0;
};

// Decode a run into `r`, reusing its vectors' memory (no allocation once they
// are big enough), as the export does for every run.
void decode_reusing(run::Run& r, const uint8_t* data, size_t len);

// Append one run's line (runs mode).
void append_run_json(JsonBuf& out, uint64_t run_idx, const run::Run& r);
// Append one line per step (steps mode); payload_crc is the CRC32C of the
// run-file bytes (the first half of run_uuid).
void append_steps_json(JsonBuf& out, uint64_t run_idx, uint32_t payload_crc, const run::Run& r);

struct JsonlSummary {
  uint64_t runs = 0;
  uint64_t lines = 0;
  uint64_t bytes = 0;
};

// Export every entry to `output` (temporary name, then rename: never a
// partial file under the final name; s3:// and gs:// outputs are streamed
// uploads that appear only when complete, storage/object_store.hpp). Entry CRCs are checked when `verify`;
// the output is fsync'ed before the rename only when `durable`.
JsonlSummary export_jsonl(const Reader& reader, const std::string& output, JsonlMode mode,
                          uint32_t workers, bool verify, const ProgressFn& progress,
                          bool durable = false);

}  // namespace a2pack::pack
