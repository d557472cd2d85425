// Static evaluation of a board for the search: larger is better.
#pragma once

#include <cstdint>

namespace a2pack::engine {

// Sum of a per-row table over the four rows and the four columns. Always
// positive for a board (a per-line baseline), so a dead end scored 0 by the
// search is worse than any live board.
float heuristic(uint64_t b);

}  // namespace a2pack::engine
