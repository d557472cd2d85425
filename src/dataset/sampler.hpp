// The epoch sampler: batches of a seeded permutation of a set of step
// indices. Epoch e's permutation depends only on (seed, e), so any epoch can
// be replayed, and any batch of it fetched directly (a DataLoader's workers
// need no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace a2pack::dataset {

class Sampler {
 public:
  // Sample `indices`, or 0..n-1 when `identity` (then `indices` is ignored).
  // Fails for an empty batch size or more than 2^32 - 1 indices (the
  // permutation is kept as 32-bit positions).
  Sampler(std::vector<int64_t> indices, bool identity, uint64_t n, uint64_t seed,
          size_t batch_size, bool drop_last);

  // Shuffle for epoch `e` (O(n)); the constructor sets epoch 0.
  void set_epoch(uint64_t e);
  uint64_t epoch() const { return epoch_; }
  uint64_t size() const { return n_; }
  size_t batch_size() const { return batch_; }
  size_t batch_count() const;
  // Length of batch b (the last may be short unless drop_last).
  size_t batch_length(size_t b) const;
  // Write batch b of the current epoch to out (batch_length(b) values).
  // OUT_OF_RANGE for b >= batch_count().
  size_t fill_batch(size_t b, int64_t* out) const;

 private:
  std::vector<int64_t> idx_;
  bool identity_;
  uint64_t n_, seed_;
  size_t batch_;
  bool drop_last_;
  uint64_t epoch_ = 0;
  std::vector<uint32_t> perm_;
};

}  // namespace a2pack::dataset
