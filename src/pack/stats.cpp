#include "pack/stats.hpp"

#include <algorithm>
#include <cmath>

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
