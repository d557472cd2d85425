// The mixing sampler: one global sequence of batches drawn from several
// sources (selections of one dataset, or several datasets) in fixed
// proportions. Every batch holds exactly floor(w_i * B) or ceil(w_i * B)
// rows of source i (largest remainder, so no random drift), each source
// walking its own seeded epoch order and starting a new epoch of its own
// when it runs out. Batch b is computed directly from (seed, weights, b), so
// any rank or DataLoader worker can fetch any batch, and the checkpoint is
// O(number of sources): seed, weights and rows taken per source.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dataset/sampler.hpp"

namespace a2pack::dataset {

class MixSampler {
 public:
  struct Source {
    std::vector<int64_t> indices;  // the rows to sample, or 0..n-1 when identity
    bool identity = false;
    uint64_t n = 0;
  };
  // Weights must be finite and >= 0, one per source, and one positive (of
  // any size: only their ratios count, 1e308 and 1e308 mix as 1 and 1); a
  // source with a positive weight must have rows. At most kMaxSources.
  MixSampler(std::vector<Source> sources, const std::vector<double>& weights, uint64_t seed,
             size_t batch_size);

  static constexpr size_t kMaxSources = 256;

  size_t source_count() const { return src_.size(); }
  size_t batch_size() const { return batch_; }
  uint64_t seed() const { return seed_; }
  // The smallest and largest row any source names (0 and -1 when every
  // source is empty): a consumer over one dataset checks them against its
  // rows.
  int64_t min_index() const { return min_index_; }
  int64_t max_index() const { return max_index_; }
  // Rows of global batch b taken from each source (source_count() values).
  void batch_counts(uint64_t b, uint64_t* out) const;
  // Rows of source i consumed by batches [0, b) (its epoch is that over its
  // size, its position the remainder).
  uint64_t consumed(size_t i, uint64_t b) const;
  // Rank `rank` of `world`'s contiguous slice of global batch b (as
  // Sampler::fill_part): step indices to out_idx and source numbers to
  // out_src (either may be null). Returns the slice's length. OUT_OF_RANGE
  // for a batch before the last weight change or load_state.
  size_t fill_part(uint64_t b, uint32_t rank, uint32_t world, int64_t* out_idx,
                   uint32_t* out_src);
  // From batch `from` on, mix with `weights`; batches before it keep the old
  // proportions and can no longer be fetched. Refused weights (or a `from`
  // before the last change) change nothing.
  void set_weights(const std::vector<double>& weights, uint64_t from);
  const std::vector<double>& weights() const { return weights_; }

  // Checkpoint: magic 'A2MS', version, seed, batch size, the caller's next
  // batch, and per source its size, index hash, weight and rows consumed
  // before that batch; CRC32C. load_state adopts seed and weights and
  // returns the next batch; it refuses another source list, batch size or
  // version, or a damaged state, naming what differs.
  std::string save_state(uint64_t next_batch) const;
  uint64_t load_state(const void* data, size_t len);

 private:
  // Per residue of b mod period: each source's rows, and their prefix sums.
  struct Table {
    size_t period = 1;
    std::vector<uint64_t> cnt, pre;
  };
  Table table_for(const std::vector<double>& weights) const;
  // Take on new weights from batch `base` on (the rows consumed before it:
  // `taken`) with their table; nothing in it can fail.
  void adopt(std::vector<double> weights, uint64_t base, std::vector<uint64_t> taken,
             Table tb) noexcept;
  uint64_t taken_before(size_t i, uint64_t b) const;  // table sum over batches [0, b)

  std::vector<Sampler> src_;
  std::vector<uint64_t> sizes_;
  std::vector<double> weights_;
  uint64_t seed_;
  size_t batch_;
  int64_t min_index_ = 0, max_index_ = -1;
  uint64_t base_ = 0;                   // first batch of the current weights
  std::vector<uint64_t> base_taken_;    // rows of each source consumed before base_
  size_t period_ = 1;                   // the counts repeat every period_ batches
  std::vector<uint64_t> cnt_, pre_;     // per residue of b mod period_: counts and prefix sums
  std::vector<int64_t> scratch_idx_;
  std::vector<uint32_t> scratch_src_;
};

}  // namespace a2pack::dataset
