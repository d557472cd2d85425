// Checks of a ranged GET's response shared by the S3 and GCS backends: a
// server that answers with other bytes than were asked for (another range, a
// short body, another object size) is an error, never silently used.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/error.hpp"
#include "storage/http.hpp"

namespace a2pack::storage {

// A Content-Length / size field; IO naming `url` when it is not a number.
inline uint64_t parse_length(const std::string& s, const std::string& url) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
    fail(A2PACK_E_IO, "{}: the server gave no usable object size (\"{}\")", url, s);
  return std::strtoull(s.c_str(), nullptr, 10);
}

inline void check_range_response(const HttpResponse& r, uint64_t offset, size_t len, uint64_t size,
                                 const std::string& url) {
  if (r.status == 200) {
    // The whole object: only right when the whole object was asked for.
    if (offset != 0 || len != size)
      fail(A2PACK_E_IO, "{}: the server ignored the Range of bytes {}-{} and sent the whole object",
           url, offset, offset + len - 1);
  } else {
    const std::string cr = r.header("content-range");
    unsigned long long a = 0, b = 0, total = 0;
    if (std::sscanf(cr.c_str(), "bytes %llu-%llu/%llu", &a, &b, &total) != 3)
      fail(A2PACK_E_IO, "{}: reading bytes {}-{}: the response has no usable Content-Range (\"{}\")",
           url, offset, offset + len - 1, cr);
    if (total != size)
      fail(A2PACK_E_IO,
           "{}: the object changed since it was opened (it was {} bytes, the server now says {})",
           url, size, total);
    if (a != offset || b != offset + len - 1)
      fail(A2PACK_E_IO, "{}: asked for bytes {}-{}, the server sent bytes {}-{} (Content-Range \"{}\")",
           url, offset, offset + len - 1, a, b, cr);
  }
  if (r.sink_bytes != len)
    fail(A2PACK_E_IO, "{}: asked for {} bytes at offset {}, the server sent {}", url, len, offset,
         r.sink_bytes);
}

}  // namespace a2pack::storage
