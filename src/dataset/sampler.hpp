// The epoch sampler: batches of a seeded permutation of a set of step
// indices. Epoch e's permutation depends only on (seed, e), so any epoch can
// be replayed, and any batch of it fetched directly (a DataLoader's workers
// need no shared state).
//
// Two permutations: the stored one (a Fisher-Yates shuffle made for each
// epoch, 4 bytes a row) and the index shuffle (a keyed bijection computed
// position by position, index_shuffle.hpp: nothing stored, nothing made in
// advance). They give different orders; a checkpoint says which it used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataset/index_shuffle.hpp"

namespace a2pack::dataset {

enum class Shuffle : uint8_t {
  kStored = 0,  // a stored Fisher-Yates permutation per epoch
  kIndex = 1,   // the stateless index shuffle
};

class Sampler {
 public:
  // Sample `indices`, or 0..n-1 when `identity` (then `indices` is ignored).
  // Fails for an empty batch size or more than 2^32 - 1 indices (the
  // permutation is kept as 32-bit positions). `ordered`: as set_epoch's.
  Sampler(std::vector<int64_t> indices, bool identity, uint64_t n, uint64_t seed,
          size_t batch_size, bool drop_last, bool ordered = true,
          Shuffle shuffle = Shuffle::kStored);

  // Copies are O(1): they share the selection and the epoch's permutation,
  // and set_epoch() gives the copy a permutation of its own.

  // Shuffle for epoch `e` (stored: O(n); index shuffle: O(1)); the
  // constructor sets epoch 0. With `ordered` false, only the epoch number
  // changes and a stored permutation is let go: save_state() and the batch
  // counts still work, the fills fail until set_epoch(e) makes one (a
  // template or an unshuffled feed's sampler needs none, and one costs 4
  // bytes a row). reseed() and load_state() keep a sampler without one so.
  // The index shuffle is always ready.
  void set_epoch(uint64_t e, bool ordered = true);
  uint64_t epoch() const { return epoch_; }
  uint64_t size() const { return n_; }
  size_t batch_size() const { return batch_; }
  size_t batch_count() const;
  // Length of batch b (the last may be short unless drop_last).
  size_t batch_length(size_t b) const;
  // Write batch b of the current epoch to out (batch_length(b) values).
  // OUT_OF_RANGE for b >= batch_count().
  size_t fill_batch(size_t b, int64_t* out) const;
  // Write positions [start, start + len) of the current epoch's order to out
  // (the mixing sampler walks a source's order across batch boundaries).
  // OUT_OF_RANGE past size().
  void fill_range(uint64_t start, size_t len, int64_t* out) const;

  // Elastic ranks: the order is one global sequence of batches whatever the
  // number of ranks; rank `rank` of `world` takes the contiguous slice
  // [floor(rank*L/world), floor((rank+1)*L/world)) of global batch b (L its
  // length), so at every global step the ranks' slices are disjoint and
  // their union is the one-rank batch. Returns the slice's length (may be 0).
  // INVALID_ARGUMENT for world == 0 or rank >= world.
  size_t fill_part(size_t b, uint32_t rank, uint32_t world, int64_t* out) const;
  static void part_bounds(size_t len, uint32_t rank, uint32_t world, size_t* lo, size_t* hi);

  // Checkpoint: a small versioned byte string (magic, version, seed, epoch,
  // the caller's next global batch, batch size, drop_last, the sampled set's
  // size and a hash of its indices, CRC32C) - O(1) bytes, never the
  // permutation. load_state() adopts the state's seed and epoch (reshuffling
  // as set_epoch does) and returns its next batch; it refuses, naming what
  // differs, a state of another version or format, a damaged one, or one
  // taken over another index set or batch size. It adopts the state's kind
  // of permutation too (a state from before the index shuffle existed says
  // stored), so a resumed order is the order the state was taken in.
  std::string save_state(uint64_t next_batch) const;
  uint64_t load_state(const void* data, size_t len);
  uint64_t seed() const { return seed_; }
  Shuffle shuffle() const { return shuffle_; }
  // Adopt another seed, keeping the epoch (reshuffles, O(n)).
  void reseed(uint64_t seed);
  // Hash of the sampled indices (identity: of n alone), the state's check
  // that it is restored over the same rows.
  uint64_t set_hash() const { return set_hash_; }
  // The sampled indices (empty for the identity sampler), in their order.
  const std::vector<int64_t>& selection() const { return *idx_; }

 private:
  // Shared between copies: neither changes after construction, except that
  // set_epoch() puts a new permutation in place of the shared one.
  std::shared_ptr<const std::vector<int64_t>> idx_;
  bool identity_;
  uint64_t n_, seed_;
  size_t batch_;
  bool drop_last_;
  uint64_t epoch_ = 0;
  uint64_t set_hash_ = 0;
  Shuffle shuffle_ = Shuffle::kStored;
  bool ordered_ = true;  // set_epoch's last `ordered`
  std::shared_ptr<const std::vector<uint32_t>> perm_;  // stored; null: see set_epoch
  IndexShuffle index_;                                 // the index shuffle's epoch
  // Positions [start, start + len) of the epoch's order, as indices, to out;
  // fails without a stored permutation where one is needed.
  void copy_order(uint64_t start, size_t len, int64_t* out) const;
};

}  // namespace a2pack::dataset
