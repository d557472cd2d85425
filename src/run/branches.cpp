#include "run/branches.hpp"

#include <cfloat>

namespace a2pack::run {

void normalise_branches(const float ev[4], uint32_t legal_mask, float out[4]) {
  constexpr float kBelowOne = 1.0f - FLT_EPSILON;
  int n_legal = 0;
  float lo = 0, hi = 0;
  for (int i = 0; i < 4; ++i) {
    out[i] = 0.0f;
    if (!(legal_mask & (1u << i))) continue;
    if (n_legal == 0 || ev[i] < lo) lo = ev[i];
    if (n_legal == 0 || ev[i] > hi) hi = ev[i];
    ++n_legal;
  }
  if (n_legal == 0) return;
  if (n_legal == 1) {
    for (int i = 0; i < 4; ++i)
      if (legal_mask & (1u << i)) out[i] = kBelowOne;
    return;
  }
  if (lo == hi) {
    for (int i = 0; i < 4; ++i)
      if (legal_mask & (1u << i)) out[i] = 0.5f;
    return;
  }
  const float range = hi - lo;
  for (int i = 0; i < 4; ++i) {
    if (!(legal_mask & (1u << i))) continue;
    float v = (ev[i] - lo) / range;
    out[i] = v >= 1.0f ? kBelowOne : v;
  }
}

}  // namespace a2pack::run
