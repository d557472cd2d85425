#include "storage/curl_api.hpp"

#include <mutex>
#include <string>

#include "base/error.hpp"

#ifdef A2PACK_CURL_DLOPEN
#include <dlfcn.h>
#endif

namespace a2pack::storage {

namespace {

#ifdef A2PACK_CURL_DLOPEN
// libcurl's SONAME has been libcurl.so.4 since 2006 (its ABI 4); the
// unversioned name covers installs that only ship the development link.
constexpr const char* kLibraries[] = {"libcurl.so.4", "libcurl.so"};

template <typename Fn>
void bind(void* lib, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
}

CurlApi load() {
  void* lib = nullptr;
  std::string why;
  for (const char* name : kLibraries) {
    // Never unloaded: connections and handles live until the process ends.
    lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* e = ::dlerror();
    why += std::string(why.empty() ? "" : "; ") + (e ? e : name);
  }
  if (!lib)
    fail(A2PACK_E_IO,
         "object storage (s3://, gs://) needs libcurl, which could not be loaded ({}); "
         "install it (Debian/Ubuntu: apt-get install libcurl4)",
         why);
  CurlApi api{};
  std::string missing;
  bind(lib, "curl_global_init", api.global_init, missing);
  bind(lib, "curl_easy_init", api.easy_init, missing);
  bind(lib, "curl_easy_cleanup", api.easy_cleanup, missing);
  bind(lib, "curl_easy_reset", api.easy_reset, missing);
  bind(lib, "curl_easy_setopt", api.easy_setopt, missing);
  bind(lib, "curl_easy_getinfo", api.easy_getinfo, missing);
  bind(lib, "curl_easy_perform", api.easy_perform, missing);
  bind(lib, "curl_easy_strerror", api.easy_strerror, missing);
  bind(lib, "curl_slist_append", api.slist_append, missing);
  bind(lib, "curl_slist_free_all", api.slist_free_all, missing);
  if (!missing.empty())
    fail(A2PACK_E_IO, "the libcurl that was loaded lacks {}; object storage needs libcurl 7.x or later",
         missing);
  return api;
}
#else
CurlApi load() {
  return CurlApi{curl_global_init, curl_easy_init,    curl_easy_cleanup,
                 curl_easy_reset,  curl_easy_setopt,  curl_easy_getinfo,
                 curl_easy_perform, curl_easy_strerror, curl_slist_append,
                 curl_slist_free_all};
}
#endif

}  // namespace

const CurlApi& curl() {
  static std::once_flag once;
  static CurlApi api;
  static Error* failure = nullptr;  // a failed load fails every later call too
  std::call_once(once, [] {
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
