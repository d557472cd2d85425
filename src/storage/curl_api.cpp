#include "storage/curl_api.hpp"

#include "storage/lazy_library.hpp"

namespace a2pack::storage {

namespace {

#ifdef A2PACK_CURL_DLOPEN
CurlApi load() {
  // libcurl's SONAME has been libcurl.so.4 since 2006 (its ABI 4); the
  // unversioned name covers installs that only ship the development link.
  void* lib = open_library({"libcurl.so.4", "libcurl.so"}, "object storage (s3://, gs://)",
                           "install libcurl (Debian/Ubuntu: apt-get install libcurl4; "
                           "RHEL/Rocky/Fedora: dnf install libcurl)");
  CurlApi api{};
  SymbolBinder bind(lib);
  bind("curl_global_init", api.global_init);
  bind("curl_easy_init", api.easy_init);
  bind("curl_easy_cleanup", api.easy_cleanup);
  bind("curl_easy_reset", api.easy_reset);
  bind("curl_easy_setopt", api.easy_setopt);
  bind("curl_easy_getinfo", api.easy_getinfo);
  bind("curl_easy_perform", api.easy_perform);
  bind("curl_easy_strerror", api.easy_strerror);
  bind("curl_slist_append", api.slist_append);
  bind("curl_slist_free_all", api.slist_free_all);
  if (!bind.missing().empty())
    fail(A2PACK_E_IO, "the libcurl that was loaded lacks {}; object storage needs libcurl 7.x or later",
         bind.missing());
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

const CurlApi& curl() { return lazily<CurlApi>(load); }

}  // namespace a2pack::storage
