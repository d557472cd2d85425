// Decoding a logger folder into columns, in parallel across segments (scan)
// and frames (decompress + decode). Damage never stops the decode: a bad or
// torn frame is skipped and reported with its file and offset, and every good
// frame is still returned (unless `strict`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "a2pack.h"
#include "logger/format.hpp"
#include "logger/streams.hpp"

namespace a2pack::logger {


struct Problem {
  std::string path;
  uint64_t offset = 0;
  a2pack_status status = A2PACK_E_CORRUPT;
  std::string message;
  // A note: something unusual that loses nothing (an empty segment followed
  // by others, left by a crash and a reopen). Listed with the problems;
  // strict mode fails on it too.
  bool note = false;
};

struct Decoded {
  Column<uint32_t> stream_ids;
  Column<double> epochs;
  Column<uint64_t> offsets{0};  // n_records + 1
  Column<uint32_t> indices;
  Column<double> values;
  std::vector<StreamMeta> streams;  // ascending id
  std::vector<Problem> problems;
  uint64_t segments = 0;
  uint64_t frames = 0;      // good frames decoded (data frames; markers are not counted)
  uint64_t bad_frames = 0;  // frames (or byte ranges) skipped
  uint64_t file_bytes = 0;  // bytes of all segments
  uint64_t raw_bytes = 0;   // decompressed bytes of the good frames
  size_t n_records() const { return stream_ids.size(); }
};

// Limits against decompression bombs (docs/logger.md, "Limits"), checked
// against verified headers before anything is allocated by them. A frame
// past a per-frame limit is skipped as a problem; the frames from the one
// that would pass a per-decode limit onwards are skipped as one problem.
inline constexpr uint64_t kDefaultMaxFrameRecords = uint64_t{1} << 24;  // 16 Mi
inline constexpr uint64_t kDefaultMaxFrameBytes = uint64_t{1} << 28;    // 256 MiB decompressed
inline constexpr uint64_t kDefaultMaxRecords = uint64_t{1} << 30;       // 1 Gi per decode
inline constexpr uint64_t kDefaultMaxBytes = uint64_t{32} << 30;        // 32 GiB decompressed
// A frame may decompress to at most this many times its bytes on disk
// (header included): what keeps a decode's memory and time proportional to
// the bytes it reads. Records take at least 3 decompressed bytes and 20
// bytes of output columns, so a folder of F bytes yields at most about
// 7 * 1024 * F bytes of columns.
inline constexpr uint64_t kDefaultMaxExpansion = 1024;

struct DecodeOptions {
  uint32_t workers = 0;  // 0 = all cores
  bool strict = false;   // first problem (or note) fails the whole decode
  uint64_t max_frame_records = kDefaultMaxFrameRecords;
  uint64_t max_frame_bytes = kDefaultMaxFrameBytes;
  uint64_t max_records = kDefaultMaxRecords;
  uint64_t max_bytes = kDefaultMaxBytes;
  uint64_t max_expansion = kDefaultMaxExpansion;
  // Output (claimed by frame headers) decoded per window: each window's
  // columns are grown by its frames' header counts and shrunk to what the
  // frames really held. Tests make it small to cross many windows.
  uint64_t window_bytes = uint64_t{512} << 20;
};

// Decode <dir>/segments/*.seg.zst with the scales of <dir>/streams/*.json.
// A folder without segments/ whose own NNNNN.seg.zst files begin with a
// plain zstd frame is read in the single-folder layout (flat_layout.hpp).
Decoded decode_dir(const std::string& dir, const DecodeOptions& opts);

// Gaps in a folder's segment numbering (from 00000) become problems naming
// the missing segments; an empty segment followed by others becomes a note.
// `sizes` are the segments' byte sizes, parallel to `ids`.
void check_numbering(const std::string& seg_dir, const std::vector<uint32_t>& ids,
                     const std::vector<uint64_t>& sizes, std::vector<Problem>& problems);

// Problems for the entries `names` of a segments folder that are not
// segments (list_segments' `others`): a segment-like name (NNN.seg.zst) that
// is not read is a problem, with `all` anything else a note (the plain
// layout's run folder holds other files: not `all`).
void report_others(const std::string& seg_dir, const std::vector<std::string>& names, bool all,
                   std::vector<Problem>& problems);

// A stream's tick and quantised values as the frame parsers scale them (the
// double nearest the recorded decimal for scales 1/k): for other layouts.
double scale_epoch(const StreamInfo& s, int64_t tick);
void scale_values(const StreamInfo& s, const int64_t* q, size_t n, double* out);

// ---- lower level, used by decode_dir and by the tests and benchmarks

struct FrameRef {
  uint32_t file = 0;  // index into the caller's file list
  uint64_t offset = 0;
  BlockHeader header;
};

// Find the frames of one segment's bytes. Damaged ranges become problems
// naming `path` and the offset; the scan resynchronises after them.
void scan_segment(const uint8_t* data, size_t size, const std::string& path, uint32_t file,
                  std::vector<FrameRef>& frames, std::vector<Problem>& problems);

// Where decode_frame writes one frame's records: room for cap_records
// records and cap_values non-zeros. offsets[k] receives value_base + the end
// of kept record k's non-zeros (the caller's offsets array shifted by one).
struct FrameSink {
  uint32_t* stream_ids;
  double* epochs;
  uint64_t* offsets;
  uint32_t* indices;
  double* values;
  uint64_t value_base;
  size_t cap_records;
  size_t cap_values;
};

struct FrameCount {
  size_t records = 0;            // records kept
  size_t values = 0;             // their non-zeros
  uint64_t parsed_values = 0;    // non-zeros of all records, kept or not
  uint64_t skipped_unknown = 0;  // records of streams without a sidecar
  uint32_t first_unknown = 0;
};

// Scales by stream id (nullptr = no sidecar).
using ScaleTable = std::vector<const StreamInfo*>;

// Non-zeros in a frame's decompressed bytes of format `version`, from the
// count of varint terminators (bytes < 0x80): in version 1 a record of n
// non-zeros has 3 + 2n varints; in version 2, 3 + n in the structure region
// and n in the value region. Throws CORRUPT when the counts cannot belong to
// `n_records` records, UNSUPPORTED for an unknown version.
size_t count_values(uint8_t version, const uint8_t* raw, size_t len, uint32_t n_records);

// Parse a frame's decompressed bytes of format `version` (the block
// header's) into `out`. Throws Error(CORRUPT) naming the record on anything
// malformed, UNSUPPORTED for an unknown version; never reads outside
// [raw, raw + len) nor writes past the sink's capacities.
FrameCount decode_frame(uint8_t version, const uint8_t* raw, size_t len, uint32_t n_records,
                        const ScaleTable& scales, const FrameSink& out);

// Tests: which parser decodes. `best` (the default): the best build this
// CPU runs; on AVX2 CPUs version 2 goes through the bulk parser (its AVX-512
// build where the CPU has AVX-512), which hands anything malformed to the
// checked one. `avx2`: the AVX2 build of the bulk parser even on an AVX-512
// CPU. `checked`: the AVX2 build without the bulk parser. `portable`: the
// build for any CPU. All give the same records and the same errors. Not
// thread-safe: call before decoding starts.
enum class DecoderChoice { best, avx2, checked, portable };
void use_decoder(DecoderChoice choice);

// Tests: the bulk parser alone on a version-2 frame, in the build `build`
// picks (`best` or `avx2`, as for use_decoder). False when it hands the
// frame on to the checked parser (anything malformed) or when this CPU has
// no AVX2 build; `count` is then unspecified.
bool decode_frame_v2_bulk_only(const uint8_t* raw, size_t len, uint32_t n_records,
                               const ScaleTable& scales, const FrameSink& out, FrameCount& count,
                               DecoderChoice build = DecoderChoice::best);

// decode_frame into vectors sized by count_values (for tests and tools).
struct FrameRecords {
  Column<uint32_t> stream_ids;
  Column<double> epochs;
  Column<uint64_t> offsets;  // n_records + 1, from 0
  Column<uint32_t> indices;
  Column<double> values;
  uint64_t skipped_unknown = 0;
  uint32_t first_unknown = 0;
};
void decode_records(uint8_t version, const uint8_t* raw, size_t len, uint32_t n_records,
                    const ScaleTable& scales, FrameRecords& out);

}  // namespace a2pack::logger
