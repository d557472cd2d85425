#include "pack/order.hpp"

#include <utility>

#include "base/splitmix.hpp"

namespace a2pack::pack {

std::vector<uint64_t> permutation(uint64_t n, bool shuffle, uint64_t seed) {
  std::vector<uint64_t> order(n);
  for (uint64_t i = 0; i < n; ++i) order[i] = i;
  if (!shuffle) return order;
  SplitMix64 rng{seed};
  for (uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

}  // namespace a2pack::pack
