// Shared libraries that object storage needs, loaded on first use instead of
// linked (A2PACK_CURL_DLOPEN, the default build): libcurl pulls in some
// thirty libraries and libcrypto runs OpenSSL's initialisation, which cost
// every process that loads a2pack milliseconds at start (measured on the
// `a2pack` CLI: about 7 ms for libcurl, 1.2 ms for libcrypto) even when it
// never touches a bucket. The Python wheel links both normally, so auditwheel
// bundles them.
#pragma once

#include <initializer_list>
#include <mutex>
#include <string>

#include "base/error.hpp"

namespace a2pack::storage {

// Binds the entry points of a library opened with dlopen(); the names that
// are missing are collected for one error.
class SymbolBinder {
 public:
  explicit SymbolBinder(void* lib) : lib_(lib) {}
  template <typename Fn>
  void operator()(const char* name, Fn& fn) {
    fn = reinterpret_cast<Fn>(lookup(name));
    if (!fn) missing_ += std::string(missing_.empty() ? "" : ", ") + name;
  }
  const std::string& missing() const { return missing_; }

 private:
  void* lookup(const char* name);
  void* lib_;
  std::string missing_;
};

// dlopen() of the first of `sonames` that loads (never unloaded: handles
// from it live until the process ends). IO error naming `purpose`, every
// name tried and why, and `install_hint`, when none does.
void* open_library(std::initializer_list<const char*> sonames, const char* purpose,
                   const char* install_hint);

// A table of entry points built once by `load` (thread-safe); a failed
// load fails every later call with the same error.
template <typename Api, typename Load>
const Api& lazily(Load&& load) {
  static std::once_flag once;
  static Api api;
  static Error* failure = nullptr;
  std::call_once(once, [&] {
    try {
      api = load();
    } catch (const Error& e) {
      failure = new Error(e);
    }
  });
  if (failure) throw *failure;
  return api;
}

}  // namespace a2pack::storage
