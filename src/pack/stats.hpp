// Pack statistics: the postcard fields of the on-disk stats block (computed
// from the runs' meta.steps, as upstream does) and the histograms that are
// only ever computed from the runs (highest tile, engine string).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pack/format.hpp"

namespace a2pack::pack {

// count, total, min, max, mean and the p50/p90/p99 of `lengths` (sorted in
// place). Percentile q is element round(q * (n - 1)) of the sorted lengths;
// everything is 0 for no runs.
StatsBlock summarize_lengths(std::vector<uint32_t>& lengths);

struct Histograms {
  struct Tile {
    uint32_t value;  // meta.highest_tile
    uint64_t count;
    bool operator==(const Tile&) const = default;
  };
  struct Engine {
    std::optional<std::string> name;  // nullopt: the run stores no engine string
    uint64_t count;
    bool operator==(const Engine&) const = default;
  };
  std::vector<Tile> tiles;      // ascending value
  std::vector<Engine> engines;  // "no engine" first, then by bytes
  bool operator==(const Histograms&) const = default;
};

// Accumulates per-run facts; one per worker, merged at the end, so the result
// does not depend on how runs were split between workers.
class HistogramBuilder {
 public:
  void add(uint32_t highest_tile, const std::optional<std::string>& engine);
  void merge(const HistogramBuilder& other);
  Histograms finish() const;

 private:
  // Ordered maps: hostile files may hold a different value in every run.
  std::map<uint32_t, uint64_t> tiles_;
  std::map<std::optional<std::string>, uint64_t> engines_;
};

}  // namespace a2pack::pack
