// Shared by every file of the C ABI layer: turning C++ exceptions into
// a2pack_status plus the thread-local error message, argument checks, and
// copying option structs that begin with their own size.
#pragma once

#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <type_traits>

#include "a2pack.h"
#include "base/error.hpp"

#define A2PACK_EXPORT extern "C" __attribute__((visibility("default")))

namespace a2pack::capi {

void set_error(a2pack_status status, std::string message);
void clear_error();

// Run fn, mapping exceptions to a status. Every fallible API function is
// `return guard([&] { ... });`.
template <typename F>
a2pack_status guard(F&& fn) noexcept {
  try {
    fn();
    return A2PACK_OK;
  } catch (const Error& e) {
    set_error(e.status(), e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_error(A2PACK_E_NO_MEMORY, "out of memory");
    return A2PACK_E_NO_MEMORY;
  } catch (const std::length_error& e) {
    set_error(A2PACK_E_NO_MEMORY, std::string("allocation too large: ") + e.what());
    return A2PACK_E_NO_MEMORY;
  } catch (const std::system_error& e) {
    // What std::thread and std::async throw when the process is out of
    // threads or of memory for their stacks (ulimit -u or -v, a container's
    // pids limit): a resource the caller can give, not a bug.
    if (e.code() == std::errc::resource_unavailable_try_again ||
        e.code() == std::errc::not_enough_memory) {
      set_error(A2PACK_E_NO_MEMORY, std::string("out of threads or memory: ") + e.what());
      return A2PACK_E_NO_MEMORY;
    }
    set_error(A2PACK_E_INTERNAL, std::string("internal error: ") + e.what());
    return A2PACK_E_INTERNAL;
  } catch (const std::exception& e) {
    set_error(A2PACK_E_INTERNAL, std::string("internal error: ") + e.what());
    return A2PACK_E_INTERNAL;
  } catch (...) {
    set_error(A2PACK_E_INTERNAL, "internal error: unknown exception");
    return A2PACK_E_INTERNAL;
  }
}

// Null a handle out-parameter first, so a failed open never leaves the
// caller a stale pointer.
template <typename T>
void reset_out(T** out) {
  if (out) *out = nullptr;
}

// Fail with INVALID_ARGUMENT when p is null.
inline void require(const void* p, const char* name) {
  if (!p) fail(A2PACK_E_INVALID_ARGUMENT, "{} must not be NULL", name);
}

// The integer a C caller stored in an enum-typed field or argument. C lets
// any int live there, but in C++ loading an enum object whose value lies
// outside its enumerators' range is undefined (UBSan: "not a valid value for
// type"), so caller-supplied enums are read back through their bytes and
// checked as integers before anything converts them.
template <typename E>
long long enum_int(const E& e) {
  static_assert(std::is_enum_v<E>, "enum_int reads enums");
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<long long>(v);
}

// Copy a caller's option struct (which starts with `size_t size`) over the
// defaults, reading no more than the caller's size and no more than we know.
template <typename T>
T read_options(const T* user, void (*init)(T*)) {
  T opts;
  init(&opts);
  if (!user) return opts;
  if (user->size < sizeof(size_t))
    fail(A2PACK_E_INVALID_ARGUMENT, "options.size is {}; call the _options_init function first",
         user->size);
  size_t n = user->size < sizeof(T) ? user->size : sizeof(T);
  std::memcpy(static_cast<void*>(&opts), user, n);
  opts.size = sizeof(T);
  return opts;
}

// Fill a caller's output struct (starting with `size_t size`) up to its size.
template <typename T>
void write_out(T* out, const T& full) {
  require(out, "out");
  if (out->size < sizeof(size_t))
    fail(A2PACK_E_INVALID_ARGUMENT, "out->size is {}; set it to the struct's sizeof", out->size);
  size_t n = out->size < sizeof(T) ? out->size : sizeof(T);
  size_t caller_size = out->size;
  std::memcpy(static_cast<void*>(out), &full, n);
  out->size = caller_size;
}

// Copy bytes into library-owned memory that a2pack_free() releases.
uint8_t* owned_copy(const void* data, size_t len);
char* owned_string(const std::string& s);

// The body of a call that hands out owned bytes (a state, an encoding):
// clears the outputs, then under guard() checks them, runs `make` (which
// checks its own arguments and returns the bytes) and hands out a copy.
template <typename Make>
a2pack_status bytes_out(uint8_t** out_data, size_t* out_len, Make&& make) noexcept {
  if (out_data) *out_data = nullptr;
  if (out_len) *out_len = 0;
  return guard([&] {
    require(out_data, "out_data");
    require(out_len, "out_len");
    const std::string bytes = make();
    *out_data = owned_copy(bytes.data(), bytes.size());
    *out_len = bytes.size();
  });
}

}  // namespace a2pack::capi
