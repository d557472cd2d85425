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

// The most steps the entries' run files can hold, from their lengths in the
// index alone (a v1 run is 46 + 9 bytes a step at least, a v2 run 11 + 3):
// a bound on honest lengths that costs nothing to compute at open.
struct StepCapacity {
  uint64_t total = 0;    // sum over the entries, saturating
  uint32_t largest = 0;  // the largest entry's
  bool known = true;     // false when an entry's kind or flags are unknown
  void add(const Entry& e);
};

// What is wrong with a stats block by itself, in O(1): all zero for no
// runs; min <= p50 <= p90 <= p99 <= max (equal where the percentiles pick
// the same element); total_steps within what count and those order
// statistics allow; mean_len == total_steps / count. Empty when nothing is;
// else one sentence that names the fields and both values. Only
// validate(full), which recomputes the block from the runs, catches a change
// that keeps all of these true.
std::string stats_block_problem(const StatsBlock& s);

// Whether the block's max_len and total_steps fit `cap`; else the sentence.
// Lengths are the runs' meta.steps, which a v2 file stores apart from its
// steps, so a failure here is the block's fault only if the runs say
// otherwise (the reader then reads their headers to tell).
std::string stats_capacity_problem(const StatsBlock& s, const StepCapacity& cap);

// "the stats block (...) disagrees with the runs (...)": every field of both,
// the differing ones marked, mean_len with the digits that tell them apart.
std::string stats_difference(const StatsBlock& block, const StatsBlock& runs);

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
