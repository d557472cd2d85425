// Core of the C ABI: errors, versions, memory.
#include <lz4.h>
#include <zstd.h>

#include <cstdlib>

#include "capi/common.hpp"

namespace a2pack::capi {
namespace {
struct ThreadError {
  a2pack_status status = A2PACK_OK;
  std::string message;
};
thread_local ThreadError t_error;
}  // namespace

void set_error(a2pack_status status, std::string message) {
  t_error.status = status;
  t_error.message = std::move(message);
}
void clear_error() {
  t_error.status = A2PACK_OK;
  t_error.message.clear();
}

uint8_t* owned_copy(const void* data, size_t len) {
  auto* p = static_cast<uint8_t*>(std::malloc(len ? len : 1));
  if (!p) throw std::bad_alloc();
  if (len) std::memcpy(p, data, len);
  return p;
}
char* owned_string(const std::string& s) {
  auto* p = reinterpret_cast<char*>(owned_copy(s.c_str(), s.size() + 1));
  return p;
}

}  // namespace a2pack::capi

using namespace a2pack;

A2PACK_EXPORT const char* a2pack_status_name(a2pack_status s) {
  switch (s) {
    case A2PACK_OK: return "A2PACK_OK";
    case A2PACK_E_IO: return "A2PACK_E_IO";
    case A2PACK_E_NOT_FOUND: return "A2PACK_E_NOT_FOUND";
    case A2PACK_E_CORRUPT: return "A2PACK_E_CORRUPT";
    case A2PACK_E_CHECKSUM: return "A2PACK_E_CHECKSUM";
    case A2PACK_E_UNSUPPORTED: return "A2PACK_E_UNSUPPORTED";
    case A2PACK_E_OUT_OF_RANGE: return "A2PACK_E_OUT_OF_RANGE";
    case A2PACK_E_INVALID_ARGUMENT: return "A2PACK_E_INVALID_ARGUMENT";
    case A2PACK_E_NO_MEMORY: return "A2PACK_E_NO_MEMORY";
    case A2PACK_E_CLOSED: return "A2PACK_E_CLOSED";
    case A2PACK_E_INTERRUPTED: return "A2PACK_E_INTERRUPTED";
    case A2PACK_E_FULL: return "A2PACK_E_FULL";
    case A2PACK_E_INTERNAL: return "A2PACK_E_INTERNAL";
    default: return "A2PACK_E_UNKNOWN";
  }
}

A2PACK_EXPORT const char* a2pack_last_error(void) { return capi::t_error.message.c_str(); }
A2PACK_EXPORT a2pack_status a2pack_last_status(void) { return capi::t_error.status; }
A2PACK_EXPORT void a2pack_clear_error(void) { capi::clear_error(); }
A2PACK_EXPORT const char* a2pack_version(void) { return A2PACK_VERSION_STRING; }
A2PACK_EXPORT uint32_t a2pack_abi_version(void) { return A2PACK_ABI_NUMBER; }
A2PACK_EXPORT const char* a2pack_zstd_version(void) { return ZSTD_versionString(); }
A2PACK_EXPORT const char* a2pack_lz4_version(void) { return LZ4_versionString(); }
A2PACK_EXPORT void a2pack_free(void* p) { std::free(p); }
