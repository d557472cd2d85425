// Orders of entries for iteration: the identity, or a permutation that
// depends only on (n, seed) — never on worker counts or the platform.
#pragma once

#include <cstdint>
#include <vector>

namespace a2pack::pack {

// Fisher-Yates driven by SplitMix64 with unbiased bounded draws (Lemire's
// multiply-and-reject), so the same seed gives the same order everywhere.
std::vector<uint64_t> permutation(uint64_t n, bool shuffle, uint64_t seed);

}  // namespace a2pack::pack
