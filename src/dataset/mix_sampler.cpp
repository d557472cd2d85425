#include "dataset/mix_sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/splitmix.hpp"

namespace a2pack::dataset {

namespace {

constexpr char kMixMagic[4] = {'A', '2', 'M', 'S'};
constexpr uint32_t kMixVersion = 1;
// magic, version, seed, batch size, source count, flags, next batch
constexpr size_t kMixHead = 4 + 4 + 8 + 8 + 4 + 4 + 8;
// per source: size, index hash, weight (IEEE double bits), rows consumed
constexpr size_t kMixPerSource = 8 * 4;

// Each source shuffles with its own seed, so adding a source to a mix does
// not change the others' orders.
uint64_t source_seed(uint64_t seed, size_t i) {
  SplitMix64 g{seed ^ (0xA24BAED4963EE407ull * (static_cast<uint64_t>(i) + 1))};
  return g.next();
}

void check_weights(const std::vector<double>& w, const std::vector<uint64_t>& sizes) {
  if (w.size() != sizes.size())
    fail(A2PACK_E_INVALID_ARGUMENT, "{} weights for {} sources", w.size(), sizes.size());
  bool positive = false;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(w[i]) || w[i] < 0)
      fail(A2PACK_E_INVALID_ARGUMENT, "weight of source {} is {}: expected a finite value >= 0",
           i, w[i]);
    if (w[i] > 0 && sizes[i] == 0)
      fail(A2PACK_E_INVALID_ARGUMENT, "source {} has weight {} but no rows", i, w[i]);
    positive |= w[i] > 0;
  }
  // Not their sum: finite weights may sum to +inf (two of 1e308), and
  // scaled() mixes them all the same.
  if (!positive) fail(A2PACK_E_INVALID_ARGUMENT, "the weights sum to 0: give one a positive weight");
}

// The weights times the power of two that brings the largest into [1, 2).
// Their sum is then at most 2 * kMaxSources: any finite weights (two of
// 1e308, or subnormal ones) have a finite, positive sum to divide by.
// Scaling by a power of two rounds nothing, so weights of ordinary size get
// the proportions w_i / sum of the unscaled weights to the bit, and a
// checkpointed mix keeps its batches. A weight below 2^-1022 of the largest
// may become 0 here; its rows per batch would round to 0 anyway.
std::vector<double> scaled(const std::vector<double>& w) {
  const double top = *std::max_element(w.begin(), w.end());
  const int e = std::ilogb(top);  // check_weights(): top is finite and > 0
  std::vector<double> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) out[i] = std::ldexp(w[i], -e);
  return out;
}

}  // namespace

MixSampler::MixSampler(std::vector<Source> sources, const std::vector<double>& weights,
                       uint64_t seed, size_t batch_size)
    : seed_(seed), batch_(batch_size) {
  if (sources.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "a mix needs at least one source");
  if (sources.size() > kMaxSources)
    fail(A2PACK_E_UNSUPPORTED, "a mix has at most {} sources, got {}", kMaxSources,
         sources.size());
  if (batch_ == 0) fail(A2PACK_E_INVALID_ARGUMENT, "batch size must be at least 1");
  if (batch_ > UINT32_MAX)
    fail(A2PACK_E_UNSUPPORTED, "batch size {} is over the limit of {}", batch_, UINT32_MAX);
  src_.reserve(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    Source& s = sources[i];
    if (s.identity) {
      if (s.n > 0) max_index_ = std::max<int64_t>(max_index_, static_cast<int64_t>(s.n - 1));
    } else if (!s.indices.empty()) {
      const auto [lo, hi] = std::minmax_element(s.indices.begin(), s.indices.end());
      min_index_ = std::min(min_index_, *lo);
      max_index_ = std::max(max_index_, *hi);
    }
    src_.emplace_back(std::move(s.indices), s.identity, s.n, source_seed(seed, i), 1, false);
    sizes_.push_back(src_.back().size());
  }
  check_weights(weights, sizes_);
  adopt(weights, 0, std::vector<uint64_t>(src_.size(), 0), table_for(weights));
}

// Batch b's counts: floor(w_i * B) each, and the R rows left over to the R
// largest remainders. When a group of tied remainders straddles the cut
// (t of its g sources get a row), the t rows rotate through the group one
// place per batch, so over any g consecutive batches each gets exactly t:
// the counts depend on b only through b mod g (the table's period). Weights
// are quantised to integers (2^40 in all) so the comparison is exact and the
// same on every platform.
MixSampler::Table MixSampler::table_for(const std::vector<double>& weights) const {
  const size_t k = src_.size();
  const std::vector<double> w = scaled(weights);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<uint64_t> fl(k), rem(k);
  unsigned __int128 total = 0;
  for (size_t i = 0; i < k; ++i) {
    fl[i] = static_cast<uint64_t>(std::llround(w[i] / sum * 1099511627776.0));
    total += fl[i];
  }
  // The largest scaled weight is at least 1 and the sum at most 2k, so it
  // quantises to at least 2^39 / k and total > 0.
  uint64_t given = 0;
  for (size_t i = 0; i < k; ++i) {
    const unsigned __int128 q = static_cast<unsigned __int128>(fl[i]) * batch_;
    fl[i] = static_cast<uint64_t>(q / total);
    rem[i] = static_cast<uint64_t>(q % total);
    given += fl[i];
  }
  // sum(rem) == total * (B - given) exactly, so fewer than k rows are left
  const size_t left = batch_ - given;
  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
  std::vector<size_t> group;  // the tied sources straddling the cut, by index
  size_t t = 0;
  if (left > 0 && left < k && rem[order[left]] == rem[order[left - 1]]) {
    const uint64_t v = rem[order[left - 1]];
    for (size_t j = 0; j < k; ++j) {
      if (rem[order[j]] > v) ++fl[order[j]];
      if (rem[order[j]] == v) group.push_back(order[j]);
    }
    t = left - (std::find(order.begin(), order.end(), group[0]) - order.begin());
  } else {
    for (size_t j = 0; j < left; ++j) ++fl[order[j]];
  }
  Table tb;
  tb.period = group.empty() ? 1 : group.size();
  tb.cnt.assign(tb.period * k, 0);
  tb.pre.assign((tb.period + 1) * k, 0);
  for (size_t r = 0; r < tb.period; ++r) {
    for (size_t i = 0; i < k; ++i) tb.cnt[r * k + i] = fl[i];
    for (size_t j = 0; j < group.size(); ++j)
      if ((j + group.size() - r) % group.size() < t) ++tb.cnt[r * k + group[j]];
    for (size_t i = 0; i < k; ++i)
      tb.pre[(r + 1) * k + i] = tb.pre[r * k + i] + tb.cnt[r * k + i];
  }
  return tb;
}

void MixSampler::adopt(std::vector<double> weights, uint64_t base, std::vector<uint64_t> taken,
                       Table tb) noexcept {
  weights_ = std::move(weights);
  base_ = base;
  base_taken_ = std::move(taken);
  period_ = tb.period;
  cnt_ = std::move(tb.cnt);
  pre_ = std::move(tb.pre);
}

void MixSampler::batch_counts(uint64_t b, uint64_t* out) const {
  const size_t k = src_.size();
  for (size_t i = 0; i < k; ++i) out[i] = cnt_[(b % period_) * k + i];
}

uint64_t MixSampler::taken_before(size_t i, uint64_t b) const {
  const size_t k = src_.size();
  return (b / period_) * pre_[period_ * k + i] + pre_[(b % period_) * k + i];
}

uint64_t MixSampler::consumed(size_t i, uint64_t b) const {
  if (b < base_)
    fail(A2PACK_E_OUT_OF_RANGE,
         "batch {} is before batch {}, where the weights were last set or a state loaded", b,
         base_);
  return base_taken_[i] + taken_before(i, b) - taken_before(i, base_);
}

size_t MixSampler::fill_part(uint64_t b, uint32_t rank, uint32_t world, int64_t* out_idx,
                             uint32_t* out_src) {
  size_t lo, hi;
  Sampler::part_bounds(batch_, rank, world, &lo, &hi);
  const size_t k = src_.size();
  scratch_idx_.resize(batch_);
  scratch_src_.resize(batch_);
  size_t at = 0;
  for (size_t i = 0; i < k; ++i) {
    uint64_t left = cnt_[(b % period_) * k + i];
    if (left == 0) continue;
    const uint64_t start = consumed(i, b), n = sizes_[i];
    uint64_t epoch = start / n, pos = start % n;
    while (left) {
      if (src_[i].epoch() != epoch) src_[i].set_epoch(epoch);
      const size_t take = static_cast<size_t>(std::min(left, n - pos));
      src_[i].fill_range(pos, take, scratch_idx_.data() + at);
      std::fill_n(scratch_src_.data() + at, take, static_cast<uint32_t>(i));
      at += take;
      left -= take;
      ++epoch;
      pos = 0;
    }
  }
  // Shuffle the batch so each rank's slice holds every source in proportion.
  SplitMix64 g{seed_ * 0x9E3779B97F4A7C15ull ^ (b + 1) * 0xD1B54A32D192ED03ull ^ 0x6D6978ull};
  for (size_t j = batch_; j > 1; --j) {
    const size_t m = static_cast<size_t>(g.below(j));
    std::swap(scratch_idx_[j - 1], scratch_idx_[m]);
    std::swap(scratch_src_[j - 1], scratch_src_[m]);
  }
  if (out_idx) std::copy(scratch_idx_.begin() + lo, scratch_idx_.begin() + hi, out_idx);
  if (out_src) std::copy(scratch_src_.begin() + lo, scratch_src_.begin() + hi, out_src);
  return hi - lo;
}

void MixSampler::set_weights(const std::vector<double>& weights, uint64_t from) {
  // Everything is worked out before anything changes: a refusal (or a
  // failed allocation) leaves the weights and the position as they were.
  check_weights(weights, sizes_);
  std::vector<uint64_t> taken(src_.size());
  for (size_t i = 0; i < src_.size(); ++i) taken[i] = consumed(i, from);
  Table tb = table_for(weights);
  std::vector<double> w = weights;
  adopt(std::move(w), from, std::move(taken), std::move(tb));
}

std::string MixSampler::save_state(uint64_t next_batch) const {
  std::string s(kMixMagic, 4);
  le::append<uint32_t>(s, kMixVersion);
  le::append<uint64_t>(s, seed_);
  le::append<uint64_t>(s, batch_);
  le::append<uint32_t>(s, static_cast<uint32_t>(src_.size()));
  le::append<uint32_t>(s, 0);
  le::append<uint64_t>(s, next_batch);
  for (size_t i = 0; i < src_.size(); ++i) {
    uint64_t wbits;
    std::memcpy(&wbits, &weights_[i], 8);
    le::append<uint64_t>(s, sizes_[i]);
    le::append<uint64_t>(s, src_[i].set_hash());
    le::append<uint64_t>(s, wbits);
    le::append<uint64_t>(s, consumed(i, next_batch));
  }
  le::append<uint32_t>(s, crc32c::compute(s.data(), s.size()));
  return s;
}

uint64_t MixSampler::load_state(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (len < 8 || std::memcmp(p, kMixMagic, 4) != 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "not a mixing sampler state ({} bytes, no 'A2MS' magic)",
         len);
  const uint32_t version = le::load<uint32_t>(p + 4);
  if (version != kMixVersion)
    fail(A2PACK_E_UNSUPPORTED, "mixing sampler state version {}: this library reads version {}",
         version, kMixVersion);
  if (len < kMixHead + 4)
    fail(A2PACK_E_INVALID_ARGUMENT, "mixing sampler state of {} bytes is truncated", len);
  const uint32_t k = le::load<uint32_t>(p + 24);
  const size_t want = kMixHead + kMixPerSource * k + 4;
  if (len != want)
    fail(A2PACK_E_INVALID_ARGUMENT, "mixing sampler state of {} bytes: {} sources need {}", len,
         k, want);
  const uint32_t crc = le::load<uint32_t>(p + len - 4);
  if (crc != crc32c::compute(p, len - 4))
    fail(A2PACK_E_CORRUPT, "mixing sampler state damaged: CRC32C {:08x}, expected {:08x}", crc,
         crc32c::compute(p, len - 4));
  if (k != src_.size())
    fail(A2PACK_E_INVALID_ARGUMENT,
         "mixing sampler state has {} sources; this sampler has {}", k, src_.size());
  const uint64_t seed = le::load<uint64_t>(p + 8), batch = le::load<uint64_t>(p + 16),
                 next = le::load<uint64_t>(p + 32);
  if (batch != batch_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "mixing sampler state has batch size {}; this sampler has {}: the global batch size "
         "must stay the same across a resume",
         batch, batch_);
  std::vector<double> w(k);
  std::vector<uint64_t> taken(k);
  for (size_t i = 0; i < k; ++i) {
    const uint8_t* q = p + kMixHead + kMixPerSource * i;
    const uint64_t n = le::load<uint64_t>(q), hash = le::load<uint64_t>(q + 8),
                   wbits = le::load<uint64_t>(q + 16);
    if (n != sizes_[i] || hash != src_[i].set_hash())
      fail(A2PACK_E_INVALID_ARGUMENT,
           "mixing sampler state's source {} was another set of rows ({} indices, hash "
           "{:016x}); this sampler's has {} indices, hash {:016x}",
           i, n, hash, sizes_[i], src_[i].set_hash());
    std::memcpy(&w[i], &wbits, 8);
    taken[i] = le::load<uint64_t>(q + 24);
  }
  // As set_weights: worked out first (the sources reshuffled on copies,
  // which share their rows), then adopted.
  check_weights(w, sizes_);
  Table tb = table_for(w);
  std::vector<Sampler> src;
  if (seed != seed_) {
    src = src_;
    for (size_t i = 0; i < k; ++i) src[i].reseed(source_seed(seed, i));
  }
  if (!src.empty()) {
    src_.swap(src);
    seed_ = seed;
  }
  adopt(std::move(w), next, std::move(taken), std::move(tb));
  return next;
}

}  // namespace a2pack::dataset
