// Step-dataset loader on an arbitrary file of the folder: the NPY header
// parser, the dtype and shape checks, SQLite's open of metadata.db and the
// checks on it (whole pages, indexes against the table, the runs against the
// rows), the manifest parser, then gathers and a verify. The first input byte
// picks the variant (bit 0: with the seed dataset's manifest.json, else none,
// as the upstream tool writes; bit 1: mapped instead of loaded into RAM; bits
// 2-3: which file the rest of the input is - 0 steps.npy, 1 metadata.db,
// 2 manifest.json (bit 0 then ignored)); the other files come from the seed
// dataset named by $A2PACK_FUZZ_DATASET (read once).
#include <a2pack.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  if (len < 1) return 0;
  const std::string dir = fuzz::scratch_dir() + "/dataset";
  struct Seed {
    std::string steps, db, manifest;
  };
  static const Seed seed = [&] {
    mkdir(dir.c_str(), 0700);
    const char* d = std::getenv("A2PACK_FUZZ_DATASET");
    if (!d) {
      std::fprintf(stderr, "set A2PACK_FUZZ_DATASET to a small dataset folder\n");
      std::abort();
    }
    return Seed{fuzz::read_file(std::string(d) + "/steps.npy"),
                fuzz::read_file(std::string(d) + "/metadata.db"),
                fuzz::read_file(std::string(d) + "/manifest.json")};
  }();
  auto put = [&](const char* name, const void* p, size_t n) {
    fuzz::write_file(dir + "/" + name, static_cast<const uint8_t*>(p), n);
  };
  const uint8_t mode = data[0];
  const unsigned which = (mode >> 2) & 3;
  ++data, --len;
  // Every file is rewritten each time: the library may have rolled back or
  // created SQLite's journal, and the previous input's files must not leak.
  std::remove((dir + "/metadata.db-journal").c_str());
  put("steps.npy", which == 0 ? data : reinterpret_cast<const uint8_t*>(seed.steps.data()),
      which == 0 ? len : seed.steps.size());
  put("metadata.db", which == 1 ? data : reinterpret_cast<const uint8_t*>(seed.db.data()),
      which == 1 ? len : seed.db.size());
  if (which == 2) put("manifest.json", data, len);
  else if (mode & 1) put("manifest.json", seed.manifest.data(), seed.manifest.size());
  else std::remove((dir + "/manifest.json").c_str());

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
