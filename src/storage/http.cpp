#include "storage/http.hpp"

#include "storage/curl_api.hpp"
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <strings.h>
#include <mutex>
#include <random>
#include <thread>

#include "base/error.hpp"
#include "storage/options.hpp"
#include "storage/redact.hpp"

namespace a2pack::storage {
namespace {

using Clock = std::chrono::steady_clock;

// ---- the handle pool
std::mutex g_pool_mu;
std::vector<CURL*>* g_pool = nullptr;

void init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    curl().global_init(CURL_GLOBAL_DEFAULT);
    g_pool = new std::vector<CURL*>();
    // The child's copy of the pool holds the parent's connections: forget
    // them (leaked on purpose: cleaning up could write to shared sockets).
    ::pthread_atfork(nullptr, nullptr, [] { g_pool = new std::vector<CURL*>(); });
  });
}

CURL* take_handle() {
  init_once();
  {
    std::lock_guard<std::mutex> l(g_pool_mu);
    if (!g_pool->empty()) {
      CURL* h = g_pool->back();
      g_pool->pop_back();
      return h;
    }
  }
  CURL* h = curl().easy_init();
  if (!h) fail(A2PACK_E_NO_MEMORY, "curl_easy_init failed");
  return h;
}

void give_handle(CURL* h) {
  std::lock_guard<std::mutex> l(g_pool_mu);
  if (g_pool->size() < 256) {
    g_pool->push_back(h);
    return;
  }
  curl().easy_cleanup(h);
}

struct Transfer {
  const HttpRequest* req;
  HttpResponse* resp;
  CURL* handle;
  bool overflow = false;
};

constexpr size_t kMaxErrorBody = 64u << 10;  // of an error response, kept for the message

size_t on_body(char* p, size_t, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  long code = 0;
  curl().easy_getinfo(t->handle, CURLINFO_RESPONSE_CODE, &code);
  if (t->req->sink && code >= 300) {
    // An error document, not the bytes asked for: keep its start for the message.
    t->resp->body.append(p, std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, t->resp->body.size())));
    return n;
  }
  if (t->req->sink) {
    if (n > t->req->sink_len - t->resp->sink_bytes) {
      t->overflow = true;
      return 0;  // abort: more than was asked for
    }
    std::memcpy(t->req->sink + t->resp->sink_bytes, p, n);
    t->resp->sink_bytes += n;
    return n;
  }
  if (n > t->req->max_body - t->resp->body.size()) {
    t->overflow = true;
    return 0;
  }
  t->resp->body.append(p, n);
  return n;
}

size_t on_header(char* p, size_t, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  std::string line(p, n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after 100 Continue, ...)
    t->resp->headers.clear();
    return n;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return n;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  size_t b = colon + 1, e = line.size();
  while (b < e && (line[b] == ' ' || line[b] == '\t')) ++b;
  while (e > b && (line[e - 1] == '\r' || line[e - 1] == '\n' || line[e - 1] == ' ')) --e;
  t->resp->headers[name] = line.substr(b, e - b);
  return n;
}

struct Attempt {
  HttpResponse resp;
  CURLcode code = CURLE_OK;
  std::string error;  // empty when a response arrived whole
  bool retryable = false;
};

Attempt attempt(const HttpRequest& req, long timeout_ms, long connect_ms, long stall_s) {
  Attempt a;
  CURL* h = take_handle();
  curl().easy_reset(h);
  Transfer t{&req, &a.resp, h};
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_slist* hdrs = nullptr;
  for (const auto& s : req.headers) hdrs = curl().slist_append(hdrs, s.c_str());
  hdrs = curl().slist_append(hdrs, "Expect:");  // no 100-continue round trip
  // curl would label a body form data, which servers may then parse as a form.
  if (req.body_len || req.method == "PUT" || req.method == "POST") {
    bool typed = false;
    for (const auto& h : req.headers) typed |= h.size() > 13 && strncasecmp(h.c_str(), "content-type:", 13) == 0;
    if (!typed) hdrs = curl().slist_append(hdrs, "Content-Type: application/octet-stream");
  }
  curl().easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl().easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl().easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl().easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl().easy_setopt(h, CURLOPT_TIMEOUT_MS, std::max(1L, timeout_ms));
  curl().easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, std::min(connect_ms, timeout_ms)));
  // A transfer that moves nothing for stall_s seconds is abandoned (and retried).
  curl().easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl().easy_setopt(h, CURLOPT_LOW_SPEED_TIME, stall_s);
  curl().easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl().easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl().easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl().easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl().easy_setopt(h, CURLOPT_HEADERDATA, &t);
  if (req.method == "HEAD") {
    curl().easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method == "PUT" || req.method == "POST") {
    curl().easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body_len));
    curl().easy_setopt(h, CURLOPT_POSTFIELDS, req.body ? reinterpret_cast<const char*>(req.body) : "");
    curl().easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else if (req.method != "GET") {
    curl().easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  a.code = curl().easy_perform(h);
  if (a.code == CURLE_OK) curl().easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a.resp.status);
  curl().slist_free_all(hdrs);
  if (a.code == CURLE_OK) {
    give_handle(h);
  } else {
    curl().easy_cleanup(h);  // its connection may be half-used: do not pool it
  }
  if (t.overflow) {
    a.error = req.sink ? fmt::format("the server sent more than the {} bytes asked for", req.sink_len)
                       : fmt::format("the response is larger than {} bytes", req.max_body);
    a.retryable = false;
    return a;
  }
  if (a.code != CURLE_OK) {
    a.error = fmt::format("{} ({})", curl().easy_strerror(a.code), errbuf[0] ? errbuf : "no detail");
    switch (a.code) {
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
      case CURLE_COULDNT_CONNECT:
      case CURLE_OPERATION_TIMEDOUT:
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_PARTIAL_FILE:
      case CURLE_GOT_NOTHING:
      case CURLE_WEIRD_SERVER_REPLY:
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_HTTP2:
      case CURLE_HTTP2_STREAM:
        a.retryable = true;
        break;
      default:
        a.retryable = false;
    }
    return a;
  }
  long s = a.resp.status;
  if (s == 408 || s == 429 || (s >= 500 && s != 501)) {
    a.retryable = true;
    a.error = fmt::format("HTTP {}", s);
  }
  return a;
}

}  // namespace

HttpResponse http_call(const HttpRequest& req_in, const PrepareFn& prepare, const std::string& label) {
  const Settings st = settings();
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(st.timeout_s));
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string last;
  int attempts = 0;
  for (;;) {
    auto now = Clock::now();
    long left_ms = static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count());
    if (left_ms <= 0) break;
    HttpRequest req = req_in;
    if (prepare) prepare(req);
    ++attempts;
    Attempt a = attempt(req, left_ms, static_cast<long>(st.connect_timeout_s * 1000),
                        std::max(1L, static_cast<long>(st.stall_timeout_s)));
    if (a.error.empty()) return std::move(a.resp);
    last = a.error;
    if (a.resp.status && !a.retryable) return std::move(a.resp);
    if (!a.retryable) {
      fail_redacted(A2PACK_E_IO, "{}: {} {} failed: {}", label, req.method, req.url, a.error);
    }
    if (attempts > st.retries) break;
    // Full jitter: a random pause in [0, min(5 s, 100 ms * 2^attempt)).
    double cap = std::min(5.0, 0.1 * static_cast<double>(1u << std::min(attempts, 10)));
    double pause = std::uniform_real_distribution<double>(0, cap)(rng);
    auto wake = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(pause));
    if (wake >= deadline) break;
    std::this_thread::sleep_until(wake);
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  fail_redacted(A2PACK_E_IO,
                "{}: {} {} gave up after {} attempt{} in {:.1f} s (deadline {} s, "
                "A2PACK_STORAGE_TIMEOUT): {}",
                label, req_in.method, req_in.url, attempts, attempts == 1 ? "" : "s", secs,
                st.timeout_s, last.empty() ? "no time left" : last);
}

HttpResponse http_once(const HttpRequest& req, double timeout_s, double connect_timeout_s) {
  Attempt a = attempt(req, static_cast<long>(timeout_s * 1000),
                      static_cast<long>(connect_timeout_s * 1000), 1);
  if (!a.error.empty() && !a.resp.status)
    fail_redacted(A2PACK_E_IO, "{} {} failed: {}", req.method, req.url, a.error);
  return std::move(a.resp);
}

std::string url_encode(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3 / 2);
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

}  // namespace a2pack::storage
