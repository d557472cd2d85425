#include "dataset/sampler.hpp"

#include <algorithm>
#include <utility>

#include "base/splitmix.hpp"

#include "base/error.hpp"

namespace a2pack::dataset {


Sampler::Sampler(std::vector<int64_t> indices, bool identity, uint64_t n, uint64_t seed,
                 size_t batch_size, bool drop_last)
    : idx_(std::move(indices)), identity_(identity), n_(identity ? n : idx_.size()), seed_(seed),
      batch_(batch_size), drop_last_(drop_last) {
  if (batch_ == 0) fail(A2PACK_E_INVALID_ARGUMENT, "batch size must be at least 1");
  if (n_ > UINT32_MAX)
    fail(A2PACK_E_UNSUPPORTED, "a sampler holds at most {} indices, got {}", UINT32_MAX, n_);
  perm_.resize(n_);
  set_epoch(0);
}

void Sampler::set_epoch(uint64_t e) {
  epoch_ = e;
  for (uint32_t i = 0; i < n_; ++i) perm_[i] = i;
  SplitMix64 rng{seed_ * 0xD1B54A32D192ED03ull ^ (e + 1) * 0x9E3779B97F4A7C15ull};
  for (uint64_t i = n_; i > 1; --i) {
    uint64_t j = rng.below(i);
    std::swap(perm_[i - 1], perm_[j]);
  }
}

size_t Sampler::batch_count() const {
  return drop_last_ ? n_ / batch_ : (n_ + batch_ - 1) / batch_;
}

size_t Sampler::batch_length(size_t b) const {
  if (b >= batch_count()) return 0;
  uint64_t start = static_cast<uint64_t>(b) * batch_;
  return static_cast<size_t>(std::min<uint64_t>(batch_, n_ - start));
}

size_t Sampler::fill_batch(size_t b, int64_t* out) const {
  if (b >= batch_count())
    fail(A2PACK_E_OUT_OF_RANGE, "batch {} out of range: the epoch has {} batches", b,
         batch_count());
  uint64_t start = static_cast<uint64_t>(b) * batch_;
  size_t len = batch_length(b);
  const uint32_t* p = perm_.data() + start;
  if (identity_) {
    for (size_t i = 0; i < len; ++i) out[i] = p[i];
  } else {
    for (size_t i = 0; i < len; ++i) out[i] = idx_[p[i]];
  }
  return len;
}

}  // namespace a2pack::dataset
