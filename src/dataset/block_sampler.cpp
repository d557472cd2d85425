#include "dataset/block_sampler.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/splitmix.hpp"
#include "dataset/state_frame.hpp"

namespace a2pack::dataset {

namespace {

constexpr char kMagic[4] = {'A', '2', 'B', 'S'};
constexpr uint32_t kVersion = 1;
// magic, version, seed, epoch, next, batch, shards, hash (8 each), rank,
// world, window, flags (4 each), CRC32C
constexpr size_t kStateBytes = 4 + 4 + 8 * 6 + 4 * 4 + 4;

uint64_t key(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  SplitMix64 m{seed ^ 0x6A09E667F3BCC909ull};
  uint64_t h = m.next() ^ a * 0x9E3779B97F4A7C15ull;
  SplitMix64 m2{h};
  h = m2.next() ^ b * 0xC2B2AE3D27D4EB4Full;
  SplitMix64 m3{h};
  return m3.next() ^ c * 0x165667B19E3779F9ull;
}

}  // namespace

BlockSampler::BlockSampler(std::vector<uint64_t> shard_rows, std::vector<uint64_t> first_rows,
                           uint64_t seed, size_t batch, uint32_t rank, uint32_t world,
                           uint32_t window, bool drop_last)
    : rows_(std::move(shard_rows)), first_(std::move(first_rows)), seed_(seed), batch_(batch),
      rank_(rank), world_(world), window_(window), drop_last_(drop_last) {
  if (batch_ == 0) fail(A2PACK_E_INVALID_ARGUMENT, "batch size must be at least 1");
  if (world_ == 0 || rank_ >= world_)
    fail(A2PACK_E_INVALID_ARGUMENT, "rank {} of world {}: need world >= 1 and rank < world", rank_,
         world_);
  if (window_ == 0) fail(A2PACK_E_INVALID_ARGUMENT, "a window holds at least one shard");
  if (rows_.size() < world_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{} shards cannot be dealt out to {} ranks (each rank reads whole shards): build the "
         "dataset with smaller shards",
         rows_.size(), world_);
}

uint64_t BlockSampler::set_hash(size_t shards) const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < shards && i < rows_.size(); ++i) {
    h ^= rows_[i];
    h *= 0x100000001b3ull;
  }
  SplitMix64 fin{h ^ shards};
  return fin.next();
}

BlockPlan BlockSampler::plan(uint64_t epoch, size_t shards) const {
  const size_t n = std::min(shards, rows_.size());
  if (n < world_)
    fail(A2PACK_E_INVALID_ARGUMENT, "{} shards cannot be dealt out to {} ranks", n, world_);
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  SplitMix64 rng{key(seed_, epoch, 0xB10C, 0)};
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  // Deal: each shard in turn to the rank holding the fewest rows so far
  // (the lowest such rank on a tie), so the ranks' row counts stay within
  // one shard of each other.
  std::vector<uint64_t> load(world_, 0);
  BlockPlan p;
  p.epoch = epoch;
  for (uint32_t s : order) {
    const auto r = static_cast<uint32_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += rows_[s];
    if (r == rank_) p.shards.push_back(s);
  }
  p.window_pos.push_back(0);
  for (size_t a = 0; a < p.shards.size(); a += window_) {
    uint64_t w = 0;
    for (size_t j = a; j < std::min(p.shards.size(), a + window_); ++j) w += rows_[p.shards[j]];
    p.window_pos.push_back(p.window_pos.back() + w);
  }
  p.rows = p.window_pos.back();
  if (world_ > 1) {
    const uint64_t least = *std::min_element(load.begin(), load.end());
    p.batches = least / batch_;
    p.stream_end = p.batches * batch_;
  } else {
    p.batches = drop_last_ ? p.rows / batch_ : (p.rows + batch_ - 1) / batch_;
    p.stream_end = drop_last_ ? p.batches * batch_ : p.rows;
  }
  return p;
}

std::vector<uint32_t> BlockSampler::window_order(const BlockPlan& p, size_t w) const {
  const uint64_t n = p.window_pos[w + 1] - p.window_pos[w];
  if (n > UINT32_MAX)
    fail(A2PACK_E_UNSUPPORTED, "a window of {} rows: at most {} (use fewer or smaller shards)", n,
         UINT32_MAX);
  std::vector<uint32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0u);
  SplitMix64 rng{key(seed_, p.epoch, rank_ + (uint64_t{world_} << 32), w)};
  for (uint64_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
  return perm;
}

uint64_t BlockSampler::pool_row(const BlockPlan& p, size_t w, uint64_t pos) const {
  const size_t a = w * window_, b = std::min(p.shards.size(), a + window_);
  for (size_t j = a; j < b; ++j) {
    const uint32_t s = p.shards[j];
    if (pos < rows_[s]) return first_[s] + pos;
    pos -= rows_[s];
  }
  fail(A2PACK_E_OUT_OF_RANGE, "position past window {}'s rows", w);
}

size_t BlockSampler::window_of(const BlockPlan& p, uint64_t s) {
  auto it = std::upper_bound(p.window_pos.begin(), p.window_pos.end(), s);
  return static_cast<size_t>(it - p.window_pos.begin()) - 1;
}

std::string BlockSampler::save_state(uint64_t epoch, uint64_t next_batch, size_t shards) const {
  std::string s(kMagic, 4);
  le::append<uint32_t>(s, kVersion);
  le::append<uint64_t>(s, seed_);
  le::append<uint64_t>(s, epoch);
  le::append<uint64_t>(s, next_batch);
  le::append<uint64_t>(s, batch_);
  le::append<uint64_t>(s, shards);
  le::append<uint64_t>(s, set_hash(shards));
  le::append<uint32_t>(s, rank_);
  le::append<uint32_t>(s, world_);
  le::append<uint32_t>(s, window_);
  le::append<uint32_t>(s, drop_last_ ? 1u : 0u);
  le::append<uint32_t>(s, crc32c::compute(s.data(), s.size()));
  return s;
}

BlockSampler::Position BlockSampler::load_state(const void* data, size_t len) const {
  const auto* p = static_cast<const uint8_t*>(data);
  check_state_frame(p, len, kMagic, kVersion, kStateBytes, "shard stream");
  const uint64_t seed = le::load<uint64_t>(p + 8), epoch = le::load<uint64_t>(p + 16),
                 next = le::load<uint64_t>(p + 24), batch = le::load<uint64_t>(p + 32),
                 shards = le::load<uint64_t>(p + 40), hash = le::load<uint64_t>(p + 48);
  const uint32_t rank = le::load<uint32_t>(p + 56), world = le::load<uint32_t>(p + 60),
                 window = le::load<uint32_t>(p + 64);
  const bool drop_last = le::load<uint32_t>(p + 68) & 1;
  if (seed != seed_)
    fail(A2PACK_E_INVALID_ARGUMENT, "shard stream state has seed {}; this stream has seed {}",
         seed, seed_);
  if (batch != batch_ || drop_last != drop_last_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "shard stream state has batch size {} (drop_last {}); this stream has {} (drop_last {})",
         batch, drop_last, batch_, drop_last_);
  if (next != 0) {
    // Mid-epoch the deal and the windows must be the ones the state was taken under.
    if (world != world_ || rank != rank_)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "shard stream state is rank {} of {} at batch {} of epoch {}; this stream is rank {} "
           "of {}: a new rank count takes effect at an epoch's start (save the state there, "
           "or resume with the old count until then)",
           rank, world, next, epoch, rank_, world_);
    if (window != window_)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "shard stream state reads windows of {} shards, this stream {} (at batch {} of epoch "
           "{}; a new window takes effect at an epoch's start)",
           window, window_, next, epoch);
    // Shards appended since the state was taken join at the next epoch.
    if (shards > rows_.size() || hash != set_hash(shards))
      fail(A2PACK_E_INVALID_ARGUMENT,
           "shard stream state was taken over {} shards (hash {:016x}) that are not the first "
           "shards of this dataset ({} shards, the first {} hash {:016x}): it was taken over "
           "another dataset, or shards were replaced",
           shards, hash, rows_.size(), std::min<size_t>(shards, rows_.size()),
           set_hash(std::min<size_t>(shards, rows_.size())));
    const uint64_t batches = plan(epoch, static_cast<size_t>(shards)).batches;
    if (next > batches)
      fail(A2PACK_E_INVALID_ARGUMENT, "shard stream state's next batch {} is past the epoch's {}",
           next, batches);
    return {epoch, next, static_cast<size_t>(shards)};
  }
  return {epoch, next, rows_.size()};
}

}  // namespace a2pack::dataset
