// Many runs decoded into flat columns: the form the C API hands out, and what
// the packfile and dataset layers reuse for batch decoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/uninit_vector.hpp"
#include "run/codec.hpp"

namespace a2pack::run {

struct Batch {
  std::vector<uint64_t> step_offsets{0};  // n_runs + 1
  // Step columns: every element is written by the decoder.
  uninit_vector<uint64_t> boards;
  uninit_vector<uint8_t> moves;
  uninit_vector<float> values;
  uninit_vector<uint8_t> legal;
  uninit_vector<uint8_t> present;
  std::vector<uint64_t> final_boards;
  std::vector<uint32_t> meta_steps;
  std::vector<uint64_t> start_unix_s;
  std::vector<float> elapsed_s;
  std::vector<uint64_t> max_score;
  std::vector<uint32_t> highest_tile;
  std::vector<uint8_t> source_kind;
  std::vector<uint8_t> has_engine;
  std::vector<uint64_t> engine_offsets{0};
  std::string engine_bytes;

  uint64_t payload_bytes = 0;  // the encoded bytes decoded (throughput reports)

  size_t n_runs() const { return final_boards.size(); }
  size_t n_steps() const { return boards.size(); }
};

// A payload to decode: bytes plus a label used in error messages ("entry 12").
struct Payload {
  const uint8_t* data;
  size_t len;
  uint32_t crc = 0;  // when non-zero, the CRC32C the bytes must have
};

// Decode payloads in parallel (workers: 0 = all cores) straight into the
// batch's columns: headers first (to size every column once), then steps.
// A failure throws Error prefixed "<what> <id>: " where id is ids[i] (or i
// when ids is null), e.g. "entry 42: offset 17: ...".
Batch decode_batch(const Payload* payloads, size_t n, uint32_t workers,
                   const char* what = "payload", const uint64_t* ids = nullptr);

// The same, a failure prefixed "<labels[i]>: " (file paths).
Batch decode_batch_labelled(const Payload* payloads, size_t n, uint32_t workers,
                            const std::string* labels);

// Read run files and decode them into one batch: each worker reads a file
// (one open and, below a few MiB, one read) and parses its header, then the steps are
// decoded as in decode_batch. Errors name the file. Memory: the files' bytes
// until the call returns, plus the batch.
Batch load_batch(const char* const* paths, size_t n, uint32_t workers);

}  // namespace a2pack::run
