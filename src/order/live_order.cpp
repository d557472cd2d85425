#include "order/live_order.hpp"

#include <algorithm>
#include <cstring>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"

namespace a2pack::order {

namespace {

// The state: "A2LV" · u32 version · u32 generations · per generation u64
// from, u64 rows · u32 the generation the position falls in · u32 inner
// length · that generation's own state · u32 CRC32C of everything before.
constexpr char kMagic[4] = {'A', '2', 'L', 'V'};
constexpr uint32_t kVersion = 1;
// More generations than any feed makes (one per append it saw): a bound
// that a damaged count cannot turn into a huge allocation.
constexpr uint32_t kMaxGenerations = 1u << 24;

}  // namespace

LiveOrder::LiveOrder(Make make, uint64_t rows, uint64_t seed)
    : make_(std::move(make)), seed_(seed) {
  gens_.push_back({0, rows, make_(rows, seed)});
  endless_ = gens_[0].order->batches_in(0) == kEndless;
  max_rows_ = gens_[0].order->max_rows_any();
}

std::unique_ptr<LiveOrder> LiveOrder::grown(uint64_t rows, Position at) const {
  auto o = std::unique_ptr<LiveOrder>(new LiveOrder(*this));
  // A batch begun keeps its rows: an epoch order takes the new ones in at
  // the next epoch that has not begun.
  const uint64_t from =
      std::max(gens_.back().from, endless_ ? at.batch : at.epoch + (at.batch > 0 ? 1 : 0));
  Generation g{from, rows, make_(rows, seed_)};
  if (g.order->max_rows_any() > max_rows_)
    fail(A2PACK_E_INTERNAL, "feed: a grown order needs {} rows a batch, the ring holds {}",
         g.order->max_rows_any(), max_rows_);
  if (o->gens_.back().from == from) o->gens_.back() = std::move(g);
  else o->gens_.push_back(std::move(g));
  return o;
}

std::string LiveOrder::describe() const {
  return gens_.back().order->describe() + " of a growing dataset";
}

const Order& LiveOrder::at(Position p) const {
  const uint64_t k = key(p);
  auto it = std::upper_bound(gens_.begin(), gens_.end(), k,
                             [](uint64_t v, const Generation& g) { return v < g.from; });
  return *(it - 1)->order;
}

uint64_t LiveOrder::batches_in(uint64_t epoch) const {
  if (endless_) return kEndless;
  return at(Position{epoch, 0}).batches_in(epoch);
}

uint64_t LiveOrder::sequence(Position p) const {
  if (endless_) return p.batch;
  // Whole epochs before p, generation by generation (each generation's own
  // count of the epochs it serves: a block order's epochs differ in
  // length), then p's batch.
  uint64_t s = 0;
  for (size_t i = 0; i < gens_.size() && gens_[i].from < p.epoch; ++i) {
    const uint64_t end = i + 1 < gens_.size() ? std::min(gens_[i + 1].from, p.epoch) : p.epoch;
    const Order& o = *gens_[i].order;
    s += o.sequence(Position{end, 0}) - o.sequence(Position{gens_[i].from, 0});
  }
  return s + p.batch;
}

Residency LiveOrder::residency(Position p) const {
  const Order& o = at(p);
  Residency r = o.residency(p);
  // The last batch of an epoch before a generation begins: what comes next
  // is the next generation's (a block order's next shards are its own).
  if (!endless_ && p.batch + 1 >= o.batches_in(p.epoch)) {
    const Position first{p.epoch + 1, 0};
    if (const Order& n = at(first); &n != &o) r.next = n.residency(first).now;
  }
  return r;
}

void LiveOrder::restart(Position p) {
  for (auto& g : gens_) g.order->restart(p);
}

void LiveOrder::stop() {
  for (auto& g : gens_) g.order->stop();
}

std::string LiveOrder::save_state(Position next) const {
  const uint64_t k = key(next);
  size_t gi = 0;
  while (gi + 1 < gens_.size() && gens_[gi + 1].from <= k) ++gi;
  const std::string inner = gens_[gi].order->save_state(next);
  std::string s(kMagic, 4);
  le::append<uint32_t>(s, kVersion);
  le::append<uint32_t>(s, static_cast<uint32_t>(gens_.size()));
  for (const auto& g : gens_) {
    le::append<uint64_t>(s, g.from);
    le::append<uint64_t>(s, g.rows);
  }
  le::append<uint32_t>(s, static_cast<uint32_t>(gi));
  le::append<uint32_t>(s, static_cast<uint32_t>(inner.size()));
  s += inner;
  le::append<uint32_t>(s, crc32c::compute(s.data(), s.size()));
  return s;
}

std::unique_ptr<Order> LiveOrder::load_state(const void* data, size_t len, Position* next) const {
  const auto* p = static_cast<const uint8_t*>(data);
  if (!p || len < 16 || std::memcmp(p, kMagic, 4) != 0)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "not the state of a live feed ({} bytes, no 'A2LV' magic): a state taken without "
         "live loads into a feed opened without it",
         len);
  if (le::load<uint32_t>(p + 4) != kVersion)
    fail(A2PACK_E_UNSUPPORTED, "live feed state version {}: this library reads version {}",
         le::load<uint32_t>(p + 4), kVersion);
  if (le::load<uint32_t>(p + len - 4) != crc32c::compute(p, len - 4))
    fail(A2PACK_E_CORRUPT, "live feed state damaged (CRC32C)");
  const uint32_t count = le::load<uint32_t>(p + 8);
  if (count == 0 || count > kMaxGenerations || len < 12 + 16 * uint64_t{count} + 12)
    fail(A2PACK_E_CORRUPT, "live feed state of {} bytes names {} generations", len, count);
  std::vector<Generation> gens(count);
  const uint8_t* q = p + 12;
  for (auto& g : gens) {
    g.from = le::load<uint64_t>(q);
    g.rows = le::load<uint64_t>(q + 8);
    q += 16;
  }
  const uint32_t gi = le::load<uint32_t>(q);
  const uint32_t inner_len = le::load<uint32_t>(q + 4);
  q += 8;
  if (gi >= count || static_cast<size_t>(q - p) + inner_len + 4 != len)
    fail(A2PACK_E_CORRUPT, "live feed state of {} bytes: its generation {} of {} or its "
         "order's {} bytes do not fit", len, gi, count, inner_len);
  for (uint32_t i = 0; i < count; ++i) {
    if (i == 0 ? gens[i].from != 0 : gens[i].from <= gens[i - 1].from || gens[i].rows <= gens[i - 1].rows)
      fail(A2PACK_E_CORRUPT, "live feed state: generation {} (from {}, {} rows) does not follow "
           "the one before", i, gens[i].from, gens[i].rows);
  }
  if (gens.back().rows > rows())
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed state was taken over {} rows of the dataset; it holds {} now (a live feed resumes "
         "over the same rows or more)",
         gens.back().rows, rows());
  // The generation of the position adopts the state (and its checks); the
  // others are made again with the seed it carries.
  auto mine = make_(gens[gi].rows, seed_);
  auto loaded = std::shared_ptr<Order>(mine->load_state(q, inner_len, next));
  const uint64_t k = key(*next);
  if (k < gens[gi].from || (gi + 1 < count && k >= gens[gi + 1].from))
    fail(A2PACK_E_CORRUPT, "live feed state: its position ({}, {}) is not in its generation {}",
         next->epoch, next->batch, gi);
  const uint64_t seed = loaded->seed();
  auto o = std::unique_ptr<LiveOrder>(new LiveOrder(*this));
  o->seed_ = seed;
  for (uint32_t i = 0; i < count; ++i)
    gens[i].order = i == gi ? loaded : make_(gens[i].rows, seed);
  o->gens_ = std::move(gens);
  for (const auto& g : o->gens_)
    if (g.order->max_rows_any() > max_rows_)
      fail(A2PACK_E_INVALID_ARGUMENT, "feed state's batches need {} rows; this feed's hold {}",
           g.order->max_rows_any(), max_rows_);
  return o;
}

}  // namespace a2pack::order
