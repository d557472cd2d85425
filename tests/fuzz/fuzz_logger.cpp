// Data-logger decoder on arbitrary segment bytes: the input is one segment
// file of a folder whose stream sidecar is valid. Damage must be reported as
// problems (or a status in strict mode), never crash; the columns must be
// consistent. An input that begins like a plain zstd frame is also decoded
// as a segment of seed 004's own layout (segments in the run folder, one
// zstd frame per record). Forged counts and decompression bombs are kept in
// regressions/logger/: the decode limits must refuse them before allocating.
#include <a2pack.h>

#include <cstdlib>
#include <cstring>
#include <string>

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
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
