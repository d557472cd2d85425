// .a2run2 run files: v1 (A2T1) and v2 (postcard), described in docs/run-files.md.
//
// Decoding is split in two so that batch decoders can size their output
// before decoding anything: parse_header() reads the metadata and the step
// count (checked against the bytes available), decode_steps() writes the
// steps straight into caller-provided columns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace a2pack::run {

enum class Kind : uint8_t { unknown = 0, v1 = 1, v2 = 2 };

Kind detect_kind(const uint8_t* data, size_t len);

struct Meta {
  uint32_t steps = 0;
  uint64_t start_unix_s = 0;
  float elapsed_s = 0;
  uint64_t max_score = 0;
  uint32_t highest_tile = 0;
  std::optional<std::string> engine;
  bool operator==(const Meta&) const = default;
};

struct Header {
  Meta meta;
  Kind kind = Kind::unknown;
  uint64_t n_steps = 0;  // length of the steps (v1: meta.steps)
  size_t body = 0;       // offset where the steps begin
};

// Validate and read everything up to the steps. v1: CRC first, then magic,
// version, endianness, then every length. Throws Error (CORRUPT, CHECKSUM or
// UNSUPPORTED) with the offset of the problem.
Header parse_header(const uint8_t* data, size_t len);

// Output columns for decode_steps; each has room for header.n_steps entries
// (values: 4 per step). Columns may not be null.
struct StepColumns {
  uint64_t* boards;
  uint8_t* moves;
  float* values;
  uint8_t* legal;
  uint8_t* present;
};

// Decode the steps and return the final board. Throws Error on bad bytes.
uint64_t decode_steps(const uint8_t* data, size_t len, const Header& h, const StepColumns& out);

// A whole decoded run in v2 shape, stored by column.
struct Run {
  Meta meta;
  Kind source = Kind::v2;
  std::vector<uint64_t> boards;
  std::vector<uint8_t> moves;
  std::vector<float> values;  // 4 per step, UDLR
  std::vector<uint8_t> legal;
  std::vector<uint8_t> present;
  uint64_t final_board = 0;

  size_t size() const { return boards.size(); }
  bool has_branches() const;
  void resize(size_t n);
  bool operator==(const Run&) const = default;
};

Run decode(const uint8_t* data, size_t len);
Run load(const std::string& path);

// Encoders. encode_v1 throws INVALID_ARGUMENT when the run has branches and
// drop_branches is false, or when it does not fit v1 (engine > 65535 bytes,
// meta.steps != step count).
std::string encode_v2(const Run& run);
std::string encode_v1(const Run& run, bool drop_branches);

// Exact encoded size of encode_v2(run), without encoding.
size_t encoded_size_v2(const Run& run);

}  // namespace a2pack::run
