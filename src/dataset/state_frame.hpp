// The frame of a fixed-size checkpoint (a sampler's, a shard stream's):
// 4 magic bytes, a u32 version, the fields, a CRC32C of everything before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"

namespace a2pack::dataset {

// Check the frame of `len` bytes at p: refuses (naming `what`, e.g.
// "sampler") another magic, another version, another size, a CRC mismatch.
inline void check_state_frame(const uint8_t* p, size_t len, const char (&magic)[4],
                              uint32_t version, size_t bytes, const char* what) {
  if (len < 8 || std::memcmp(p, magic, 4) != 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "not a {} state ({} bytes, no '{}' magic)", what, len,
         std::string_view(magic, 4));
  const uint32_t v = le::load<uint32_t>(p + 4);
  if (v != version)
    fail(A2PACK_E_UNSUPPORTED, "{} state version {}: this library reads version {}", what, v,
         version);
  if (len != bytes)
    fail(A2PACK_E_INVALID_ARGUMENT, "{} state of {} bytes: version {} has {}", what, len, v, bytes);
  const uint32_t crc = le::load<uint32_t>(p + bytes - 4);
  if (crc != crc32c::compute(p, bytes - 4))
    fail(A2PACK_E_CORRUPT, "{} state damaged: CRC32C {:08x}, expected {:08x}", what, crc,
         crc32c::compute(p, bytes - 4));
}

}  // namespace a2pack::dataset
