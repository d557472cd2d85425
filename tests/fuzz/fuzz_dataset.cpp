// Step-dataset loader on an arbitrary steps.npy: the NPY header parser, the
// dtype and shape checks, the row-count checks against metadata.db and
// manifest.json, then gathers and a verify. The first input byte picks the
// variant (bit 0: with the seed dataset's manifest.json, else none, as the
// upstream tool writes; bit 1: mapped instead of loaded into RAM); the rest is
// steps.npy. manifest.json and metadata.db come from the seed dataset named
// by $A2PACK_FUZZ_DATASET (copied once).
#include <a2pack.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  if (len < 1) return 0;
  const std::string dir = fuzz::scratch_dir() + "/dataset";
  static const std::string manifest = [&] {
    mkdir(dir.c_str(), 0700);
    const char* seed = std::getenv("A2PACK_FUZZ_DATASET");
    if (!seed) {
      std::fprintf(stderr, "set A2PACK_FUZZ_DATASET to a small dataset folder\n");
      std::abort();
    }
    std::string db = fuzz::read_file(std::string(seed) + "/metadata.db");
    fuzz::write_file(dir + "/metadata.db", reinterpret_cast<const uint8_t*>(db.data()), db.size());
    return fuzz::read_file(std::string(seed) + "/manifest.json");
  }();
  const uint8_t mode = data[0];
  ++data, --len;
  const std::string manifest_path = dir + "/manifest.json";
  if (mode & 1)
    fuzz::write_file(manifest_path, reinterpret_cast<const uint8_t*>(manifest.data()),
                     manifest.size());
  else
    std::remove(manifest_path.c_str());
  fuzz::write_file(dir + "/steps.npy", data, len);

  a2pack_dataset_open_options o;
  a2pack_dataset_open_options_init(&o);
  o.mmap = (mode & 2) ? 1 : 0;
  o.workers = 2;
  a2pack_dataset* ds = nullptr;
  a2pack_status st = a2pack_dataset_open(dir.c_str(), &o, &ds);
  fuzz::expect_message(st);
  if (st == A2PACK_OK) {
    a2pack_dataset_info info{};
    info.size = sizeof info;
    if (a2pack_dataset_get_info(ds, &info) != A2PACK_OK) std::abort();
    // Every row, first and last, and one past the end (must be refused).
    int64_t idx[3] = {0, static_cast<int64_t>(info.rows) - 1, static_cast<int64_t>(info.rows)};
    uint8_t rows[3 * 32];
    if (info.rows) {
      if (a2pack_dataset_gather(ds, idx, 2, rows, 1) != A2PACK_OK) std::abort();
      uint8_t exps[2 * 16], moves[2], legal[2 * 4];
      float ev[2 * 4];
      a2pack_dataset_columns c{};
      c.size = sizeof c;
      c.exponents = exps, c.moves = moves, c.legal = legal, c.ev_values = ev;
      if (a2pack_dataset_gather_columns(ds, idx, 2, &c, 1) != A2PACK_OK) std::abort();
    }
    if (a2pack_dataset_gather(ds, idx + 2, 1, rows, 1) != A2PACK_E_OUT_OF_RANGE) std::abort();
    a2pack_dataset_close(ds);
  }
  char* report = nullptr;
  fuzz::expect_message(a2pack_dataset_verify(dir.c_str(), 0, 2, &report));
  a2pack_free(report);
  return 0;
}
