// What the logger tests record and expect back.
#pragma once

#include <cstdint>
#include <vector>

namespace a2test {

// One sparse-vector record of a stream.
struct Rec {
  uint32_t stream = 0;
  double epoch = 0;
  std::vector<uint32_t> idx;
  std::vector<double> val;
};

}  // namespace a2test
