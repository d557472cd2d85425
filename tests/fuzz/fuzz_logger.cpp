// Data-logger decoder on arbitrary segment bytes: the input is one segment
// file of a folder whose stream sidecar is valid. Damage must be reported as
// problems (or a status in strict mode), never crash; the columns must be
// consistent. An input that begins like a plain zstd frame is also decoded
// as a segment of the single-folder layout (segments in the run folder, one
// zstd frame per record). Forged counts and decompression bombs are kept in
// regressions/logger/: the decode limits must refuse them before allocating.
//
// Inputs that begin with 'Q' fuzz the frame sequence instead: the rest is a
// program that rearranges the blocks (frames and closing frame) of a segment
// a real logger wrote — each byte picks a block, so frames go missing, repeat
// or change places — optionally cut at a byte. The decode must report at
// least one problem unless the result is the segment itself (or empty).
#include <a2pack.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.hpp"

namespace {

// Decode `dir` leniently and strictly; the result must be consistent.
void check_folder(const std::string& dir) {
  for (uint32_t strict = 0; strict < 2; ++strict) {
    a2pack_logger_decode_options o;
    a2pack_logger_decode_options_init(&o);
    o.workers = 2;
    o.strict = strict;
    a2pack_logger_data* d = nullptr;
    a2pack_status st = a2pack_logger_decode(dir.c_str(), &o, &d);
    fuzz::expect_message(st);
    if (st != A2PACK_OK) continue;
    a2pack_logger_columns c{};
    c.size = sizeof c;
    if (a2pack_logger_data_columns(d, &c) != A2PACK_OK) std::abort();
    if (c.offsets[c.n_records] != c.n_values) std::abort();
    for (size_t r = 0; r < c.n_records; ++r)
      if (c.offsets[r] > c.offsets[r + 1]) std::abort();
    a2pack_logger_summary s{};
    s.size = sizeof s;
    if (a2pack_logger_data_summary(d, &s) != A2PACK_OK) std::abort();
    if (strict && s.problems) std::abort();  // strict mode fails on the first problem
    if (s.notes > s.problems) std::abort();
    for (size_t i = 0; i < s.problems; ++i) {
      a2pack_logger_problem pr{};
      pr.size = sizeof pr;
      if (a2pack_logger_data_problem(d, i, &pr) != A2PACK_OK) std::abort();
      if (!pr.message || !*pr.message || !pr.path) std::abort();
    }
    a2pack_logger_data_close(d);
  }
}

// Problems of a lenient decode (-1 when the decode itself failed).
long problems_of(const std::string& dir) {
  a2pack_logger_decode_options o;
  a2pack_logger_decode_options_init(&o);
  o.workers = 1;
  a2pack_logger_data* d = nullptr;
  a2pack_status st = a2pack_logger_decode(dir.c_str(), &o, &d);
  fuzz::expect_message(st);
  if (st != A2PACK_OK) return -1;
  a2pack_logger_summary s{};
  s.size = sizeof s;
  if (a2pack_logger_data_summary(d, &s) != A2PACK_OK) std::abort();
  a2pack_logger_data_close(d);
  return static_cast<long>(s.problems);
}

// A segment from a real logger (small frames, closed cleanly), split into
// its blocks: 56-byte version-3 headers, compressed_len at byte 16.
const std::vector<std::string>& logged_blocks(const std::string& dir) {
  static const std::vector<std::string> blocks = [&] {
    a2pack_logger_options o;
    a2pack_logger_options_init(&o);
    o.frame_bytes = 4096;
    a2pack_logger* lg = nullptr;
    if (a2pack_logger_open(dir.c_str(), &o, &lg) != A2PACK_OK) std::abort();
    uint32_t sid = 0;
    if (a2pack_logger_register_stream(lg, "{}", 1.0, 0.5, 0, &sid) != A2PACK_OK) std::abort();
    uint32_t idx[8];
    double val[8];
    for (uint32_t i = 0; i < 3000; ++i) {
      for (uint32_t k = 0; k < 8; ++k) {
        idx[k] = k * 3 + i % 3;
        val[k] = 0.5 * static_cast<double>(i + k);
      }
      if (a2pack_logger_record(lg, sid, static_cast<double>(i), idx, val, i % 9) != A2PACK_OK)
        std::abort();
    }
    if (a2pack_logger_close(lg) != A2PACK_OK) std::abort();
    std::string seg = fuzz::read_file(dir + "/segments/00000.seg.zst");
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos + 56 <= seg.size()) {
      uint32_t clen;
      std::memcpy(&clen, seg.data() + pos + 16, 4);
      out.push_back(seg.substr(pos, 56 + clen));
      pos += 56 + clen;
    }
    if (pos != seg.size() || out.size() < 3) std::abort();
    return out;
  }();
  return blocks;
}

void fuzz_sequence(const uint8_t* data, size_t len) {
  const std::string dir = fuzz::scratch_dir() + "/log-seq";
  const auto& blocks = logged_blocks(dir);
  std::string seg;
  bool identity = len >= 1;
  size_t cut = std::string::npos;
  size_t n = 0;
  for (size_t i = 0; i < len; ++i) {
    if (data[i] == 0xFF && i + 2 < len) {  // a cut: two bytes of offset into what is built
      cut = (size_t{data[i + 1]} << 8 | data[i + 2]);
      break;
    }
    const size_t b = data[i] % blocks.size();
    identity &= b == n;
    seg += blocks[b];
    ++n;
  }
  identity &= n == blocks.size();
  if (cut != std::string::npos && cut < seg.size()) {
    seg.resize(cut);
    identity = false;
  }
  fuzz::write_file(dir + "/segments/00000.seg.zst", reinterpret_cast<const uint8_t*>(seg.data()),
                   seg.size());
  const long problems = problems_of(dir);
  if (problems < 0) std::abort();  // a lenient decode of a folder that exists never fails
  if (identity && problems != 0) std::abort();
  if (!identity && !seg.empty() && problems == 0) std::abort();  // a change went unreported
  check_folder(dir);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  if (len >= 1 && data[0] == 'Q') {
    fuzz_sequence(data + 1, len - 1);
    return 0;
  }
  const std::string dir = fuzz::scratch_dir() + "/log";
  static const bool made = [&] {
    std::string segs = dir + "/segments", streams = dir + "/streams";
    mkdir(dir.c_str(), 0700);
    mkdir(segs.c_str(), 0700);
    mkdir(streams.c_str(), 0700);
    const char* sidecar = std::getenv("A2PACK_FUZZ_LOGGER_SIDECAR");
    if (sidecar) {
      // A real sidecar of a seed folder, so records of stream 0 decode.
      std::string s = fuzz::read_file(sidecar), name = sidecar;
      name = name.substr(name.find_last_of('/') + 1);
      fuzz::write_file(streams + "/" + name, reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
    return true;
  }();
  (void)made;
  fuzz::write_file(dir + "/segments/00000.seg.zst", data, len);
  check_folder(dir);
  if (len >= 4 && data[0] == 0x28 && data[1] == 0xB5 && data[2] == 0x2F && data[3] == 0xFD) {
    const std::string seed = fuzz::scratch_dir() + "/log-seed";
    static const bool seed_made = [&] {
      mkdir(seed.c_str(), 0700);
      mkdir((seed + "/streams").c_str(), 0700);
      const char* side = "{\"stream_id\":0,\"epoch_scale\":0.001,\"value_scale\":0.5,"
                         "\"labels\":{}}";
      fuzz::write_file(seed + "/streams/0.json", reinterpret_cast<const uint8_t*>(side),
                       std::strlen(side));
      return true;
    }();
    (void)seed_made;
    fuzz::write_file(seed + "/00000.seg.zst", data, len);
    check_folder(seed);
  }
  return 0;
}
