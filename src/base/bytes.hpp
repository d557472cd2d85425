// Little-endian loads and stores on unaligned memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace a2pack::le {

template <typename T>
inline T load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;  // all supported targets are little-endian (checked in CMake)
}

template <typename T>
inline void store(void* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

template <typename T>
inline void append(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace a2pack::le
