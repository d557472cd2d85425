#include "order/replay_order.hpp"

#include <algorithm>
#include <cstring>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/splitmix.hpp"
#include "dataset/index_shuffle.hpp"
#include "dataset/sampler.hpp"

namespace a2pack::order {

namespace {

// The state: "A2RP" · u32 version · u64 seed, epoch, next batch, batch
// size, window, stride, recent, units, the runs table's hash, rows · u32 flags
// (bit 0 shuffle, 1 drop_last, 2 pad_short, 3 replacement, 4 priorities) ·
// u32 CRC32C. The priorities themselves are saved apart (Priorities::save).
constexpr char kMagic[4] = {'A', '2', 'R', 'P'};
constexpr uint32_t kVersion = 1;
constexpr size_t kStateBytes = 4 + 4 + 8 * 10 + 4 + 4;

// Draw i of batch b: a counter-based value, so any draw of any batch is
// computed alone (ranks and producers share nothing).
uint64_t draw(uint64_t seed, uint64_t b, uint64_t i, uint64_t n) {
  SplitMix64 m{seed ^ 0xD1B54A32D192ED03ull};
  SplitMix64 k{m.next() ^ (b * 0x9E3779B97F4A7C15ull)};
  SplitMix64 r{k.next() ^ (i * 0xC2B2AE3D27D4EB4Full)};
  return r.below(n);
}

}  // namespace

ReplayOrder::ReplayOrder(const dataset::Ranges& runs, uint64_t rows, const Options& o)
    : o_(o), rows_(rows) {
  if (o_.window == 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed: a window of 0 steps; a window holds at least one");
  if (o_.stride != 1 && o_.stride != o_.window)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: stride {} for windows of {}: the stride is 1 (every start) or the window "
         "(non-overlapping tiles)",
         o_.stride, o_.window);
  if (o_.batch_size == 0) fail(A2PACK_E_INVALID_ARGUMENT, "feed: batch_size must be at least 1");
  if (o_.priorities) {
    if (o_.priorities->size() < rows)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "feed: {} priorities for a dataset of {} rows: one priority per row",
           o_.priorities->size(), rows);
    o_.replacement = true;
  }
  first_row_ = o_.recent && o_.recent < rows ? rows - o_.recent : 0;
  uint64_t longest = 0;
  auto add = [&](uint64_t first, uint64_t n) {
    // Cut to the rows the order reads.
    const uint64_t end = first + n;
    first = std::max(first, first_row_);
    if (first >= end) return;
    n = end - first;
    longest = std::max(longest, n);
    const uint64_t u = units_of(n);
    if (u == 0) return;
    runs_.push_back({first, n, units_});
    units_ += u;
  };
  if (o_.window == 1) {
    add(0, rows);  // rows need no runs
  } else {
    for (const auto& r : runs) add(static_cast<uint64_t>(r.first), static_cast<uint64_t>(r.count));
  }
  if (units_ == 0)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: windows of {} steps: no run {}has that many (the longest has {}); use a shorter "
         "window, or pad short runs",
         o_.window, o_.recent ? fmt::format("among the newest {} rows ", o_.recent) : "",
         longest);
  if (!o_.replacement && units_ > UINT32_MAX)
    fail(A2PACK_E_UNSUPPORTED, "feed: {} units: an epoch order shuffles at most {}", units_,
         UINT32_MAX);
  batch_count_ = o_.drop_last ? units_ / o_.batch_size
                              : (units_ + o_.batch_size - 1) / o_.batch_size;
  if (!o_.replacement && batch_count_ == 0)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: {} units make no whole batch of {} (drop_last is set): an epoch would be empty",
         units_, o_.batch_size);
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& r : runs_) {
    h = (h ^ r.first) * 0x100000001b3ull;
    h = (h ^ r.rows) * 0x100000001b3ull;
  }
  table_hash_ = SplitMix64{h}.next();
}

std::string ReplayOrder::describe() const {
  std::string what = o_.window > 1 ? fmt::format("windows of {} steps", o_.window) : "rows";
  return fmt::format("{} {}{}", what,
                     o_.priorities    ? "drawn by priority"
                     : o_.replacement ? "drawn with replacement"
                                      : "in epochs",
                     o_.recent ? fmt::format(" of the newest {} rows", o_.recent) : "");
}

uint64_t ReplayOrder::units_of(uint64_t rows) const {
  if (rows < o_.window) return o_.pad_short ? 1 : 0;
  return o_.stride == 1 ? rows - o_.window + 1 : rows / o_.window;
}

size_t ReplayOrder::max_rows() const {
  const uint64_t units = o_.replacement ? o_.batch_size : std::min(o_.batch_size, units_);
  return static_cast<size_t>((units + o_.world - 1) / o_.world * o_.window);
}

void ReplayOrder::unit(uint64_t u, uint64_t* first, uint64_t* steps) const {
  auto it = std::upper_bound(runs_.begin(), runs_.end(), u,
                             [](uint64_t v, const RunUnits& r) { return v < r.units_before; });
  const RunUnits& r = *(it - 1);
  const uint64_t k = u - r.units_before;
  if (r.rows < o_.window) {
    *first = r.first;
    *steps = r.rows;
    return;
  }
  *first = r.first + k * o_.stride;
  *steps = o_.window;
}

void ReplayOrder::batch_units(Position p, size_t a, size_t b, uint64_t* out) const {
  if (o_.replacement) {
    for (size_t i = a; i < b; ++i) out[i - a] = draw(o_.seed, p.batch, i, units_);
    return;
  }
  const uint64_t start = p.batch * o_.batch_size + a;
  if (!o_.shuffle) {
    for (size_t i = 0; i < b - a; ++i) out[i] = start + i;
    return;
  }
  // The index shuffle writes 32-bit positions: through a buffer of that
  // type, then widened.
  thread_local std::vector<uint32_t> pos;
  pos.resize(b - a);
  dataset::IndexShuffle(units_, o_.seed, p.epoch).fill(start, b - a, pos.data());
  for (size_t i = 0; i < b - a; ++i) out[i] = pos[i];
}

size_t ReplayOrder::fill(Position p, Out& out) const {
  uint64_t len;
  if (o_.replacement) {
    len = o_.batch_size;
  } else {
    if (p.batch >= batch_count_)
      fail(A2PACK_E_OUT_OF_RANGE, "feed: batch {} of an epoch of {}", p.batch, batch_count_);
    len = std::min(o_.batch_size, units_ - p.batch * o_.batch_size);
  }
  size_t lo, hi;
  dataset::Sampler::part_bounds(static_cast<size_t>(len), o_.rank, o_.world, &lo, &hi);
  out.global_rows = len * o_.window;
  const size_t n = hi - lo;
  if (n == 0) return 0;
  // The units first, at the back of the indices (a unit's rows are written
  // after it was read: a window of T rows writes T >= 1 values for one).
  if (o_.priorities) {
    // The whole global batch is drawn (the strata span it), this rank's
    // part kept; weights are normalised over the global batch.
    thread_local std::vector<int64_t> rows;
    thread_local std::vector<float> w;
    rows.resize(len);
    w.resize(len);
    if (o_.window > 1)
      draw_starts(p.batch, rows.data(), w.data(), static_cast<size_t>(len));
    else
      o_.priorities->sample(first_row_, rows_, static_cast<size_t>(len), o_.seed, p.batch,
                            rows.data(), w.data());
    if (o_.window == 1) {
      std::memcpy(out.indices, rows.data() + lo, n * sizeof(int64_t));
      if (out.weights) std::memcpy(out.weights, w.data() + lo, n * sizeof(float));
      return n;
    }
    // Windows from the drawn starts; each window's rows carry its weight.
    const uint64_t T = o_.window;
    for (size_t i = 0; i < n; ++i) {
      uint64_t first, steps;
      start_unit(static_cast<uint64_t>(rows[lo + i]), &first, &steps);
      int64_t* dst = out.indices + i * T;
      for (uint64_t t = 0; t < T; ++t)
        dst[t] = static_cast<int64_t>(first + std::min(t, steps - 1));
      if (out.valid && steps < T) std::memset(out.valid + i * T + steps, 0, T - steps);
      if (out.weights) std::fill_n(out.weights + i * T, T, w[lo + i]);
    }
    return static_cast<size_t>(n * T);
  }
  const uint64_t T = o_.window;
  auto* units = reinterpret_cast<uint64_t*>(out.indices + n * T - n);
  batch_units(p, lo, hi, units);
  for (size_t i = 0; i < n; ++i) {
    uint64_t first, steps;
    unit(units[i], &first, &steps);
    int64_t* dst = out.indices + i * T;
    for (uint64_t t = 0; t < T; ++t)
      dst[t] = static_cast<int64_t>(first + std::min(t, steps - 1));
    if (out.valid && steps < T) std::memset(out.valid + i * T + steps, 0, T - steps);
  }
  return static_cast<size_t>(n * T);
}

bool ReplayOrder::start_unit(uint64_t row, uint64_t* first, uint64_t* steps) const {
  auto it = std::upper_bound(runs_.begin(), runs_.end(), row,
                             [](uint64_t v, const RunUnits& r) { return v < r.first; });
  if (it == runs_.begin()) return false;
  const RunUnits& r = *(it - 1);
  if (row >= r.first + r.rows) return false;  // a run without units, or a gap
  const uint64_t k = row - r.first;
  if (r.rows < o_.window) {  // a short run padded: its one window
    if (k != 0) return false;
    *first = r.first;
    *steps = r.rows;
    return true;
  }
  if (k % o_.stride != 0 || k / o_.stride >= units_of(r.rows)) return false;
  *first = row;
  *steps = o_.window;
  return true;
}

void ReplayOrder::draw_starts(uint64_t batch, int64_t* rows, float* w, size_t len) const {
  // Windows are drawn by the priority of their first step. Draws that fall
  // on rows starting no window (a run's last window - 1 steps, a tile's
  // inner steps, a run too short) are drawn again until each is a start:
  // the starts keep probabilities proportional to p^alpha, and the weights,
  // normalised by the batch's largest, are those of the starts.
  constexpr int kMaxRounds = 64;
  uint64_t first, steps;
  const size_t left = o_.priorities->sample_where(
      first_row_, rows_, len, o_.seed, batch,
      [&](uint64_t r) { return start_unit(r, &first, &steps); }, kMaxRounds, rows, w);
  if (left)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: windows of {} steps drawn by priority: after {} rounds {} of {} draws still fell "
         "on rows that start no window; the rows that start windows hold too little of the "
         "priority mass (give them their windows' priorities)",
         o_.window, kMaxRounds, left, len);
}

uint32_t ReplayOrder::flags() const {
  return (o_.shuffle ? 1u : 0u) | (o_.drop_last ? 2u : 0u) | (o_.pad_short ? 4u : 0u) |
         (o_.replacement ? 8u : 0u) | (o_.priorities ? 16u : 0u);
}

std::string ReplayOrder::save_state(Position next) const {
  std::string s(kMagic, 4);
  le::append<uint32_t>(s, kVersion);
  for (uint64_t v : {o_.seed, next.epoch, next.batch, o_.batch_size, o_.window, o_.stride,
                     o_.recent, units_, table_hash_, rows_})
    le::append<uint64_t>(s, v);
  le::append<uint32_t>(s, flags());
  le::append<uint32_t>(s, crc32c::compute(s.data(), s.size()));
  return s;
}

std::unique_ptr<Order> ReplayOrder::load_state(const void* data, size_t len,
                                               Position* next) const {
  const auto* p = static_cast<const uint8_t*>(data);
  if (!p || len != kStateBytes || std::memcmp(p, kMagic, 4) != 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "not a replay order's state ({} bytes, no 'A2RP' magic)", len);
  if (le::load<uint32_t>(p + 4) != kVersion)
    fail(A2PACK_E_UNSUPPORTED, "replay order state version {}: this library reads version {}",
         le::load<uint32_t>(p + 4), kVersion);
  if (le::load<uint32_t>(p + len - 4) != crc32c::compute(p, len - 4))
    fail(A2PACK_E_CORRUPT, "replay order state damaged (CRC32C)");
  uint64_t v[10];
  for (int i = 0; i < 10; ++i) v[i] = le::load<uint64_t>(p + 8 + 8 * i);
  const uint32_t theirs = le::load<uint32_t>(p + 88);
  const uint32_t mine = flags();
  if (v[3] != o_.batch_size || v[4] != o_.window || v[5] != o_.stride || theirs != mine)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed state is of batches of {} units, windows of {} with stride {}, flags {:#x} "
         "(shuffle, drop_last, pad, replacement, priorities); this feed has {}, {}, {}, {:#x}",
         v[3], v[4], v[5], theirs, o_.batch_size, o_.window, o_.stride, mine);
  if (v[6] != o_.recent || v[7] != units_ || v[8] != table_hash_)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed state was taken over {} units (recent {}) of other runs; this feed has {} units "
         "(recent {})",
         v[7], v[6], units_, o_.recent);
  Options o = o_;
  o.seed = v[0];  // adopted, as every order does
  auto r = std::unique_ptr<ReplayOrder>(new ReplayOrder(*this));
  r->o_ = o;
  *next = {v[1], v[2]};
  return r;
}

}  // namespace a2pack::order
