// Data-logger decoder on arbitrary segment bytes: the input is one segment
// file of a folder whose stream sidecar is valid. Damage must be reported as
// problems (or a status in strict mode), never crash; the columns must be
// consistent.
#include <a2pack.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz_util.hpp"

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
    if (c.n_records && c.offsets[c.n_records] != c.n_values) std::abort();
    for (size_t r = 0; r < c.n_records; ++r)
      if (c.offsets[r] > c.offsets[r + 1]) std::abort();
    a2pack_logger_summary s{};
    s.size = sizeof s;
    if (a2pack_logger_data_summary(d, &s) != A2PACK_OK) std::abort();
    if (strict && s.problems) std::abort();  // strict mode fails on the first problem
    for (size_t i = 0; i < s.problems; ++i) {
      a2pack_logger_problem pr{};
      pr.size = sizeof pr;
      if (a2pack_logger_data_problem(d, i, &pr) != A2PACK_OK) std::abort();
      if (!pr.message || !*pr.message || !pr.path) std::abort();
    }
    a2pack_logger_data_close(d);
  }
  return 0;
}
