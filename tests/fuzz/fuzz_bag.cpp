// Record-file reader (.bag / .bagz, limits at the tail or in a separate file)
// on arbitrary bytes. The first input byte picks the variant:
//   bit 0: .bagz (zstd records) instead of .bag
//   bit 1: cache policy DROP_AFTER_READ (pread) instead of SYSTEM (mmap)
//   bit 2: SEPARATE limits: the next two bytes give where the input splits
//          into the records file and its limits.<name> file
// Then every record is read (in order, reversed, and in two steps), and the
// records are indexed.
#include <a2pack.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  if (len < 1) return 0;
  const uint8_t mode = data[0];
  ++data, --len;
  const bool zstd = mode & 1, pread = mode & 2, separate = mode & 4;
  const std::string dir = fuzz::scratch_dir();
  const std::string name = zstd ? "input.bagz" : "input.bag";
  const std::string path = dir + "/" + name, limits = dir + "/limits." + name;
  std::remove(limits.c_str());
  if (separate) {
    if (len < 2) return 0;
    size_t split = std::min<size_t>((size_t{data[0]} << 8 | data[1]), len - 2);
    data += 2, len -= 2;
    fuzz::write_file(path, data, split);
    fuzz::write_file(limits, data + split, len - split);
  } else {
    fuzz::write_file(path, data, len);
  }

  a2pack_bag_reader_options o;
  a2pack_bag_reader_options_init(&o);
  o.limits_placement = separate ? A2PACK_BAG_LIMITS_SEPARATE : A2PACK_BAG_LIMITS_TAIL;
  o.cache_policy = pread ? A2PACK_BAG_CACHE_DROP_AFTER_READ : A2PACK_BAG_CACHE_SYSTEM;
  o.max_parallelism = 2;
  a2pack_bag_reader* r = nullptr;
  a2pack_status st = a2pack_bag_reader_open(path.c_str(), &o, &r);
  fuzz::expect_message(st);
  if (st != A2PACK_OK) return 0;
  const uint64_t n = std::min<uint64_t>(a2pack_bag_reader_count(r), 4096);

  a2pack_bag_batch* b = nullptr;
  st = a2pack_bag_reader_read_range(r, 0, n, 2, &b);
  fuzz::expect_message(st);
  a2pack_bag_batch_close(b);

  std::vector<uint64_t> idx(n);
  for (uint64_t i = 0; i < n; ++i) idx[i] = n - 1 - i;
  b = nullptr;
  fuzz::expect_message(a2pack_bag_reader_read(r, idx.data(), n, 2, &b));
  a2pack_bag_batch_close(b);

  a2pack_bag_pending* p = nullptr;
  const uint64_t* sizes = nullptr;
  st = a2pack_bag_reader_prepare(r, idx.data(), n, 2, &p, &sizes);
  fuzz::expect_message(st);
  if (st == A2PACK_OK) {
    // Each record in memory of exactly its size, so an overrun is caught.
    std::vector<std::vector<uint8_t>> mem(n);
    std::vector<uint8_t*> dests(n);
    uint64_t total = 0;
    for (uint64_t k = 0; k < n; ++k) total += sizes[k];
    if (total <= (64u << 20)) {
      for (uint64_t k = 0; k < n; ++k) {
        mem[k].resize(sizes[k]);
        dests[k] = mem[k].data();
      }
      fuzz::expect_message(a2pack_bag_pending_fill(p, dests.data()));
    }
    a2pack_bag_pending_close(p);
  }

  a2pack_bag_index* ix = nullptr;
  fuzz::expect_message(a2pack_bag_index_build(r, idx.data(), n, 2, &ix));
  a2pack_bag_index_close(ix);
  a2pack_bag_reader_close(r);
  return 0;
}
