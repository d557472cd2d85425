#include "dataset/sampler.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/splitmix.hpp"
#include "dataset/state_frame.hpp"

namespace a2pack::dataset {

namespace {

constexpr char kStateMagic[4] = {'A', '2', 'S', 'S'};
constexpr uint32_t kStateVersion = 1;
// magic, version, seed, epoch, next batch, batch size, n, set hash, flags, CRC32C
constexpr size_t kStateBytes = 4 + 4 + 8 * 6 + 4 + 4;
// flags: bit 0 drop_last, bit 1 the index shuffle (clear: the stored
// permutation, which is all a state from before the index shuffle can say).
constexpr uint32_t kFlagDropLast = 1, kFlagIndexShuffle = 2;

// FNV-1a over the indices' little-endian bytes, then mixed: any change of the
// sampled set (a row added, removed or reordered) changes it.
uint64_t hash_indices(const std::vector<int64_t>& idx, bool identity, uint64_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ (identity ? 0x1d : 0x2e);
  auto mix = [&h](uint64_t v) {
    for (int k = 0; k < 8; ++k) {
      h ^= (v >> (8 * k)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  };
  mix(n);
  if (!identity)
    for (int64_t v : idx) mix(static_cast<uint64_t>(v));
  SplitMix64 fin{h};
  return fin.next();
}

}  // namespace


Sampler::Sampler(std::vector<int64_t> indices, bool identity, uint64_t n, uint64_t seed,
                 size_t batch_size, bool drop_last, bool ordered, Shuffle shuffle)
    : idx_(std::make_shared<const std::vector<int64_t>>(std::move(indices))),
      identity_(identity), n_(identity ? n : idx_->size()), seed_(seed), batch_(batch_size),
      drop_last_(drop_last), shuffle_(shuffle) {
  if (batch_ == 0) fail(A2PACK_E_INVALID_ARGUMENT, "batch size must be at least 1");
  if (n_ > UINT32_MAX)
    fail(A2PACK_E_UNSUPPORTED, "a sampler holds at most {} indices, got {}", UINT32_MAX, n_);
  set_hash_ = hash_indices(*idx_, identity_, n_);
  set_epoch(0, ordered);
}

void Sampler::set_epoch(uint64_t e, bool ordered) {
  perm_.reset();  // before the new one is made: at most one per sampler at a time
  epoch_ = e;
  ordered_ = ordered;
  if (shuffle_ == Shuffle::kIndex) {
    index_ = IndexShuffle(n_, seed_, e);
    return;
  }
  if (!ordered) return;
  auto perm = std::make_shared<std::vector<uint32_t>>(n_);
  auto& p = *perm;
  for (uint32_t i = 0; i < n_; ++i) p[i] = i;
  SplitMix64 rng{seed_ * 0xD1B54A32D192ED03ull ^ (e + 1) * 0x9E3779B97F4A7C15ull};
  for (uint64_t i = n_; i > 1; --i) {
    uint64_t j = rng.below(i);
    std::swap(p[i - 1], p[j]);
  }
  perm_ = std::move(perm);
}

void Sampler::copy_order(uint64_t start, size_t len, int64_t* out) const {
  if (shuffle_ == Shuffle::kIndex) {
    // The positions go through a buffer of the thread's own, kept between
    // fills (a batch's worth: a fill allocates nothing once it has grown).
    thread_local std::vector<uint32_t> scratch;
    if (len == 0) return;
    if (scratch.size() < len) scratch.resize(len);
    uint32_t* pos = scratch.data();
    index_.fill(start, len, pos);
    const int64_t* sel = identity_ ? nullptr : idx_->data();
    for (size_t i = 0; i < len; ++i) {
      const uint32_t p = pos[i];
      out[i] = sel ? sel[p] : p;
    }
    return;
  }
  if (!perm_)
    fail(A2PACK_E_INTERNAL, "sampler: epoch {}'s permutation was not made (set_epoch)", epoch_);
  const uint32_t* p = perm_->data() + start;
  if (identity_) {
    for (size_t i = 0; i < len; ++i) out[i] = p[i];
  } else {
    const int64_t* sel = idx_->data();
    for (size_t i = 0; i < len; ++i) out[i] = sel[p[i]];
  }
}

void Sampler::reseed(uint64_t seed) {
  seed_ = seed;
  set_epoch(epoch_, ordered_);
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
  copy_order(start, len, out);
  return len;
}

void Sampler::fill_range(uint64_t start, size_t len, int64_t* out) const {
  if (start > n_ || len > n_ - start)
    fail(A2PACK_E_OUT_OF_RANGE, "positions {}..{} out of range: the epoch has {}", start,
         start + len, n_);
  copy_order(start, len, out);
}

void Sampler::part_bounds(size_t len, uint32_t rank, uint32_t world, size_t* lo, size_t* hi) {
  if (world == 0 || rank >= world)
    fail(A2PACK_E_INVALID_ARGUMENT, "rank {} of a world of {}: expected 0 <= rank < world", rank,
         world);
  auto at = [&](uint64_t r) {
    return static_cast<size_t>((static_cast<unsigned __int128>(len) * r) / world);
  };
  *lo = at(rank);
  *hi = at(static_cast<uint64_t>(rank) + 1);
}

size_t Sampler::fill_part(size_t b, uint32_t rank, uint32_t world, int64_t* out) const {
  if (b >= batch_count())
    fail(A2PACK_E_OUT_OF_RANGE, "batch {} out of range: the epoch has {} batches", b,
         batch_count());
  size_t lo, hi;
  part_bounds(batch_length(b), rank, world, &lo, &hi);
  const size_t len = hi - lo;
  copy_order(static_cast<uint64_t>(b) * batch_ + lo, len, out);
  return len;
}

std::string Sampler::save_state(uint64_t next_batch) const {
  std::string s(kStateMagic, 4);
  le::append<uint32_t>(s, kStateVersion);
  le::append<uint64_t>(s, seed_);
  le::append<uint64_t>(s, epoch_);
  le::append<uint64_t>(s, next_batch);
  le::append<uint64_t>(s, batch_);
  le::append<uint64_t>(s, n_);
  le::append<uint64_t>(s, set_hash_);
  le::append<uint32_t>(s, (drop_last_ ? kFlagDropLast : 0u) |
                               (shuffle_ == Shuffle::kIndex ? kFlagIndexShuffle : 0u));
  le::append<uint32_t>(s, crc32c::compute(s.data(), s.size()));
  return s;
}

uint64_t Sampler::load_state(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  check_state_frame(p, len, kStateMagic, kStateVersion, kStateBytes, "sampler");
  const uint64_t seed = le::load<uint64_t>(p + 8), epoch = le::load<uint64_t>(p + 16),
                 next = le::load<uint64_t>(p + 24), batch = le::load<uint64_t>(p + 32),
                 n = le::load<uint64_t>(p + 40), hash = le::load<uint64_t>(p + 48);
  const uint32_t flags = le::load<uint32_t>(p + 56);
  const bool drop_last = flags & kFlagDropLast;
  if (flags & ~(kFlagDropLast | kFlagIndexShuffle))
    fail(A2PACK_E_UNSUPPORTED, "sampler state has flags {:#x} this library does not know", flags);
  if (n != n_ || hash != set_hash_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "sampler state was taken over another set of rows ({} indices, hash {:016x}); this "
         "sampler has {} indices, hash {:016x}",
         n, hash, n_, set_hash_);
  if (batch != batch_ || drop_last != drop_last_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "sampler state has batch size {} (drop_last {}); this sampler has {} (drop_last {}): "
         "the global batch size must stay the same across a resume",
         batch, drop_last, batch_, drop_last_);
  if (next > batch_count())
    fail(A2PACK_E_INVALID_ARGUMENT, "sampler state's next batch {} is past the epoch's {}", next,
         batch_count());
  seed_ = seed;
  shuffle_ = flags & kFlagIndexShuffle ? Shuffle::kIndex : Shuffle::kStored;
  set_epoch(epoch, ordered_);
  return next;
}

}  // namespace a2pack::dataset
