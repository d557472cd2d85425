// Packfile reader on arbitrary bytes: open (mapped and read modes), then
// every entry's info, read and decode, the stats, and a full validation.
#include <a2pack.h>

#include <algorithm>
#include <vector>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  const std::string path = fuzz::scratch_dir() + "/input.a2pack";
  fuzz::write_file(path, data, len);
  for (int use_mmap = 0; use_mmap < 2; ++use_mmap) {
    a2pack_pack_options o;
    a2pack_pack_options_init(&o);
    o.use_mmap = use_mmap;
    a2pack_pack* p = nullptr;
    a2pack_status st = a2pack_pack_open(path.c_str(), &o, &p);
    fuzz::expect_message(st);
    if (st != A2PACK_OK) continue;
    const uint64_t n = std::min<uint64_t>(a2pack_pack_len(p), 64);
    std::vector<uint64_t> idx;
    for (uint64_t i = 0; i < n; ++i) {
      idx.push_back(i);
      a2pack_pack_entry e{};
      e.size = sizeof e;
      fuzz::expect_message(a2pack_pack_entry_info(p, i, &e));
      uint8_t* bytes = nullptr;
      size_t blen = 0;
      fuzz::expect_message(a2pack_pack_read(p, i, 0, &bytes, &blen));
      a2pack_free(bytes);
      a2pack_run* r = nullptr;
      fuzz::expect_message(a2pack_pack_decode(p, i, 0, &r));
      a2pack_run_close(r);
    }
    a2pack_run_batch* b = nullptr;
    fuzz::expect_message(a2pack_pack_decode_batch(p, idx.data(), idx.size(), 2, 0, &b));
    a2pack_run_batch_close(b);
    a2pack_pack_stats s{};
    s.size = sizeof s;
    fuzz::expect_message(a2pack_pack_stats_get(p, 1, &s));
    a2pack_pack_histograms h{};
    h.size = sizeof h;
    fuzz::expect_message(a2pack_pack_histograms_get(p, 1, &h));
    fuzz::expect_message(a2pack_pack_validate(p, 1, 2, nullptr, nullptr));
    a2pack_pack_close(p);
  }
  return 0;
}
