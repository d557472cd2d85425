// HTTP on libcurl with the retry policy of every object-storage call.
//
// Connections are pooled: finished easy handles go back to a process-wide
// free list and keep their open connections, so the next request to the same
// server skips the TCP (and TLS) handshake. A forked child starts with an
// empty pool (its parent's sockets are not its own).
//
// One call = attempts until a response that is not worth retrying, under a
// total deadline (Settings::timeout_s). Retried: connection failures, resets,
// stalls and timeouts of one attempt, 408, 429 and 5xx (not 501), with
// exponential backoff and full jitter (100 ms doubling up to 5 s). Every
// error names the URL, the attempts made and the last failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace a2pack::storage {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  const uint8_t* body = nullptr;     // request body (PUT / POST)
  size_t body_len = 0;
  // The response body goes to [sink, sink + sink_len) when sink is set (a
  // longer body is an error, never a reallocation), else into
  // HttpResponse::body, which may grow to max_body bytes and no further.
  uint8_t* sink = nullptr;
  size_t sink_len = 0;
  size_t max_body = 64u << 20;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  size_t sink_bytes = 0;  // bytes written to the sink
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Called before each attempt to (re)sign or (re)authorize the request: a
// signature carries its time, a token may have expired.
using PrepareFn = std::function<void(HttpRequest&)>;

// Run `req` with retries (see above). Returns the final response, whatever
// its status (callers decide what a 404 or 412 means); throws Error(IO)
// naming `label` when no attempt got a response it could keep.
HttpResponse http_call(const HttpRequest& req, const PrepareFn& prepare, const std::string& label);

// One attempt with an explicit total time limit and no retries (the GCE
// metadata server probe, which must give up quickly).
HttpResponse http_once(const HttpRequest& req, double timeout_s, double connect_timeout_s);

// Percent-encode every byte but RFC 3986 unreserved ones (and '/' when
// keep_slash): what SigV4 and the GCS JSON API expect.
std::string url_encode(const std::string& s, bool keep_slash);

}  // namespace a2pack::storage
