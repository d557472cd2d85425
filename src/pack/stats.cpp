#include "pack/stats.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace a2pack::pack {

StatsBlock summarize_lengths(std::vector<uint32_t>& lengths) {
  StatsBlock s;
  const size_t n = lengths.size();
  s.count = n;
  if (n == 0) return s;
  std::sort(lengths.begin(), lengths.end());
  for (uint32_t l : lengths) s.total_steps += l;
  s.min_len = lengths.front();
  s.max_len = lengths.back();
  s.mean_len = static_cast<double>(s.total_steps) / static_cast<double>(n);
  // std::round rounds halves away from zero, like Rust's f64::round upstream.
  auto pct = [&](double q) {
    return lengths[static_cast<size_t>(std::round(q * static_cast<double>(n - 1)))];
  };
  s.p50 = pct(0.5);
  s.p90 = pct(0.9);
  s.p99 = pct(0.99);
  return s;
}

namespace {
// Index of percentile q among n sorted lengths, as summarize_lengths picks it.
uint64_t pct_index(double q, uint64_t n) {
  return static_cast<uint64_t>(std::round(q * static_cast<double>(n - 1)));
}
}  // namespace

void StepCapacity::add(const Entry& e) {
  uint64_t len;
  if (e.flags == kEntryStored) len = e.length;
  else if (entry_compressed(e.flags)) len = e.reserved;
  else return void(known = false);
  uint64_t steps;
  if (e.kind == kKindV1) steps = len >= 46 ? (len - 46) / 9 : 0;
  else if (e.kind == kKindV2) steps = len >= 11 ? (len - 11) / 3 : 0;
  else return void(known = false);
  const uint32_t s32 = static_cast<uint32_t>(std::min<uint64_t>(steps, UINT32_MAX));
  largest = std::max(largest, s32);
  total = total > UINT64_MAX - s32 ? UINT64_MAX : total + s32;
}

std::string stats_block_problem(const StatsBlock& s) {
  const uint64_t n = s.count;
  if (n == 0) {
    if (!(s == StatsBlock{}))
      return fmt::format(
          "the stats block counts no runs but holds non-zero fields (total_steps {}, min_len {}, "
          "max_len {}, mean_len {}, p50/p90/p99 {}/{}/{})",
          s.total_steps, s.min_len, s.max_len, s.mean_len, s.p50, s.p90, s.p99);
    return {};
  }
  // The sorted lengths L[0..n) pin L[0] = min, L[i50] = p50, L[i90] = p90,
  // L[i99] = p99, L[n-1] = max.
  struct Pin {
    uint64_t at;
    uint32_t value;
    const char* name;
  };
  const Pin pins[5] = {{0, s.min_len, "min_len"},
                       {pct_index(0.5, n), s.p50, "p50"},
                       {pct_index(0.9, n), s.p90, "p90"},
                       {pct_index(0.99, n), s.p99, "p99"},
                       {n - 1, s.max_len, "max_len"}};
  for (int k = 0; k + 1 < 5; ++k) {
    const Pin& a = pins[k];
    const Pin& b = pins[k + 1];
    if (a.value > b.value || (a.at == b.at && a.value != b.value))
      return fmt::format("the stats block's {} {} and {} {} cannot both be right: {}", a.name,
                         a.value, b.name, b.value,
                         a.at == b.at ? fmt::format("with {} runs both are run length #{} in order", n, a.at)
                                      : fmt::format("{} may not exceed {}", a.name, b.name));
  }
  // Every length lies between the pins around it, so the total does too.
  using u128 = unsigned __int128;
  u128 lo = pins[4].value, hi = pins[0].value;
  for (int k = 0; k + 1 < 5; ++k) {
    const u128 width = pins[k + 1].at - pins[k].at;
    lo += width * pins[k].value;
    hi += width * pins[k + 1].value;
  }
  if (n == 1) lo = hi = s.max_len;  // one run: every pin is the same element
  if (s.total_steps < lo || s.total_steps > hi)
    return fmt::format(
        "the stats block's total_steps {} cannot be the sum of {} run lengths with min_len {}, "
        "max_len {} and p50/p90/p99 {}/{}/{}: that sum lies in [{}, {}]",
        s.total_steps, n, s.min_len, s.max_len, s.p50, s.p90, s.p99, static_cast<uint64_t>(lo),
        hi > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(hi));
  const double mean = static_cast<double>(s.total_steps) / static_cast<double>(n);
  // Upstream and a2pack store exactly this quotient; the tolerance (far below
  // anything printed) only allows for a writer that rounds differently.
  if (!(std::fabs(s.mean_len - mean) <= 1e-12 * mean))
    return fmt::format("the stats block's mean_len {} is not total_steps / count = {} / {} = {}",
                       s.mean_len, s.total_steps, n, mean);
  return {};
}

std::string stats_capacity_problem(const StatsBlock& s, const StepCapacity& cap) {
  if (cap.known && (s.max_len > cap.largest || s.total_steps > cap.total))
    return fmt::format(
        "the stats block says max_len {} and total_steps {}, but by their lengths in the index "
        "the runs hold at most {} steps each and {} in all (a damaged stats block, or runs whose "
        "meta.steps claims more steps than they store)",
        s.max_len, s.total_steps, cap.largest, cap.total);
  return {};
}

std::string stats_difference(const StatsBlock& b, const StatsBlock& r) {
  std::string same, differ;
  auto field = [&](const char* name, auto stored, auto actual) {
    // fmt's {} writes a double in its shortest round-trip form: two
    // different means never print alike.
    if (stored == actual) same += fmt::format("{}{} {}", same.empty() ? "" : ", ", name, stored);
    else differ += fmt::format("{}{} {} (the runs: {})", differ.empty() ? "" : ", ", name, stored, actual);
  };
  field("count", b.count, r.count);
  field("total_steps", b.total_steps, r.total_steps);
  field("min_len", b.min_len, r.min_len);
  field("max_len", b.max_len, r.max_len);
  field("mean_len", b.mean_len, r.mean_len);
  field("p50", b.p50, r.p50);
  field("p90", b.p90, r.p90);
  field("p99", b.p99, r.p99);
  return fmt::format("the stats block disagrees with the runs: it says {}{}{}", differ,
                     same.empty() ? "" : "; equal: ", same);
}

void HistogramBuilder::add(uint32_t tile, const std::optional<std::string>& engine) {
  ++tiles_[tile];
  ++engines_[engine];
}

void HistogramBuilder::merge(const HistogramBuilder& o) {
  for (auto& [tile, n] : o.tiles_) tiles_[tile] += n;
  for (auto& [engine, n] : o.engines_) engines_[engine] += n;
}

Histograms HistogramBuilder::finish() const {
  // Map order is the documented order: tiles ascending; std::optional sorts
  // nullopt first, then the strings by bytes.
  Histograms h;
  for (auto& [tile, n] : tiles_) h.tiles.push_back({tile, n});
  for (auto& [engine, n] : engines_) h.engines.push_back({engine, n});
  return h;
}

}  // namespace a2pack::pack
