// Static evaluation of a board for the search: larger is better.
#pragma once

#include <cstdint>

namespace a2pack::engine {

// Sum of a per-line table over the four rows and the four columns: usually
// positive, never below about -2.1e7 (8 lines of at least -2.6e6 each).
float heuristic(uint64_t b);

}  // namespace a2pack::engine
