// The upstream per-step branch normalisation (docs/run-files.md).
#pragma once

#include <cstdint>

namespace a2pack::run {

// ev: raw expected values (UDLR); legal_mask bit i = move i legal. Writes the
// normalised values to out (0 for illegal moves).
void normalise_branches(const float ev[4], uint32_t legal_mask, float out[4]);

}  // namespace a2pack::run
