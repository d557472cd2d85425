// Helpers shared by the C API tests (public header only: these tests see
// nothing of the library's internals).
#pragma once

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace capitest {

// The upstream fixture: $A2PACK_FIXTURE, else the path CMake passes in.
inline std::string fixture_path() {
  const char* env = std::getenv("A2PACK_FIXTURE");
  return env && *env ? env : A2PACK_FIXTURE_DEFAULT;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// The fixture's bytes; a missing or empty fixture fails the test with its
// path (not as a decode error of zero bytes).
inline std::vector<uint8_t> fixture_bytes() {
  std::vector<uint8_t> b = read_bytes(fixture_path());
  if (b.empty())
    throw std::runtime_error("upstream fixture " + fixture_path() +
                             " is missing or empty (set A2PACK_FIXTURE to upstream's "
                             "example.a2run2)");
  return b;
}

}  // namespace capitest
