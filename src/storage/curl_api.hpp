// libcurl's entry points as one table, loaded on first use in the default
// build (storage/lazy_library.hpp says why).
#pragma once

#include <curl/curl.h>

namespace a2pack::storage {

struct CurlApi {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL* h);
  void (*easy_reset)(CURL* h);
  CURLcode (*easy_setopt)(CURL* h, CURLoption option, ...);
  CURLcode (*easy_getinfo)(CURL* h, CURLINFO info, ...);
  CURLcode (*easy_perform)(CURL* h);
  const char* (*easy_strerror)(CURLcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* s);
  void (*slist_free_all)(curl_slist* list);
};

// The table, loading libcurl on the first call (thread-safe). A missing
// libcurl is an IO error saying which library was looked for and how to
// install it, raised by the first remote operation (local paths never ask).
const CurlApi& curl();

}  // namespace a2pack::storage
