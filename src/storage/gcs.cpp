// Google Cloud Storage over its JSON API (transport libcurl, auth in
// gcs_auth.cpp).
//
// Reads: the object's metadata pins size and generation; ranged GETs ask for
// that generation (generation=G and ifGenerationMatch=G), so a replaced object
// is an error naming it, and the x-goog-generation of each response is
// checked where the server sends one. Writes: a resumable upload session,
// fed in chunks of Settings::part_size (a multiple of 256 KiB) and finalized
// at commit(); small objects are one upload at commit(). An unfinished
// session never becomes an object; abort() cancels it.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "storage/backends.hpp"
#include "storage/gcs_auth.hpp"
#include "storage/http.hpp"
#include "storage/options.hpp"
#include "storage/range_check.hpp"
#include "storage/redact.hpp"

namespace a2pack::storage {
namespace {

// Authorization is fetched (and a token refreshed) before every attempt.
PrepareFn authorize() {
  return [](HttpRequest& r) {
    GcsAuth a = gcs_auth();
    if (!a.header.empty()) r.headers.push_back(a.header);
  };
}

std::string object_path(const std::string& bucket, const std::string& name) {
  return "/storage/v1/b/" + url_encode(bucket, false) + "/o/" + url_encode(name, false);
}

[[noreturn]] void fail_response(const std::string& label, const std::string& what, const HttpResponse& r) {
  std::string msg;
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object())
    msg = j["error"].value("message", "");
  if (msg.empty()) msg = r.body;
  msg = msg.substr(0, 300);  // quoted, never what it echoed of the credentials (redact.hpp)
  std::string hint;
  if (r.status == 401 || r.status == 403) hint = " (credentials: " + gcs_auth().source + ")";
  fail_redacted(r.status == 404 ? A2PACK_E_NOT_FOUND : A2PACK_E_IO, "{}: {}: HTTP {}{}{}{}", label,
                what, r.status, msg.empty() ? "" : ": ", msg, hint);
}

nlohmann::json parse_json(const HttpResponse& r, const std::string& label) {
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    fail(A2PACK_E_IO, "{}: the server's response is not a JSON object", label);
  return j;
}

class GcsRead final : public ReadObject {
 public:
  explicit GcsRead(const ParsedPath& p) : bucket_(p.bucket), name_(p.key) {
    url_ = p.url();
    remote_ = true;
    if (name_.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "{}: no object name after the bucket", url_);
    endpoint_ = gcs_auth().endpoint;
    HttpRequest req;
    req.url = endpoint_ + object_path(bucket_, name_);
    HttpResponse r = http_call(req, authorize(), url_);
    if (r.status == 404) fail(A2PACK_E_NOT_FOUND, "{}: no such object (HTTP 404)", url_);
    if (r.status != 200) fail_response(url_, "opening", r);
    nlohmann::json j = parse_json(r, url_);
    size_ = parse_length(j.value("size", ""), url_);
    version_ = j.value("generation", "");
  }
  ~GcsRead() override { drain(); }

 protected:
  void fetch(uint64_t offset, size_t len, uint8_t* dst) const override {
    HttpRequest req;
    req.url = endpoint_ + object_path(bucket_, name_) + "?alt=media";
    if (!version_.empty()) req.url += "&generation=" + version_ + "&ifGenerationMatch=" + version_;
    req.headers.push_back(fmt::format("Range: bytes={}-{}", offset, offset + len - 1));
    req.sink = dst;
    req.sink_len = len;
    HttpResponse r = http_call(req, authorize(), url_);
    std::string gen = r.header("x-goog-generation");
    if (r.status == 412 || r.status == 404 || (!gen.empty() && !version_.empty() && gen != version_))
      fail(A2PACK_E_IO,
           "{}: the object changed since it was opened (generation {} is gone: HTTP {}); reopen it "
           "to read the new version",
           url_, version_, r.status);
    if (r.status != 206 && r.status != 200)
      fail_response(url_, fmt::format("reading {} bytes at offset {}", len, offset), r);
    check_range_response(r, offset, len, size_, url_);
  }

 private:
  std::string bucket_, name_, endpoint_;
};

class GcsWrite final : public WriteObject {
 public:
  explicit GcsWrite(const ParsedPath& p) : bucket_(p.bucket), name_(p.key), chunk_(settings().part_size) {
    url_ = p.url();
    if (name_.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "{}: no object name after the bucket", url_);
    endpoint_ = gcs_auth().endpoint;
    buf_.reserve(chunk_);
  }
  ~GcsWrite() override {
    if (!committed_) abort();
  }

  void write(const void* data, size_t len) override {
    check_usable();
    const uint8_t* p = static_cast<const uint8_t*>(data);
    while (len) {
      size_t n = std::min(len, chunk_ - buf_.size());
      buf_.insert(buf_.end(), p, p + n);
      p += n;
      len -= n;
      written_ += n;
      if (buf_.size() == chunk_) guarded([&] { send(false); });
    }
  }

  void commit() override {
    if (committed_) return;
    check_usable();
    guarded([&] {
      if (session_.empty()) {
        HttpRequest req;
        req.method = "POST";
        req.url = endpoint_ + "/upload/storage/v1/b/" + url_encode(bucket_, false) +
                  "/o?uploadType=media&name=" + url_encode(name_, false);
        req.headers.push_back("Content-Type: application/octet-stream");
        req.body = buf_.data();
        req.body_len = buf_.size();
        HttpResponse r = http_call(req, authorize(), url_);
        if (r.status != 200 && r.status != 201) fail_response(url_, "uploading", r);
      } else {
        send(true);
      }
    });
    committed_ = true;
  }

  void abort() noexcept override {
    if (committed_ || aborted_) return;
    aborted_ = true;
    if (session_.empty()) return;
    try {
      HttpRequest req;
      req.method = "DELETE";
      req.url = session_;
      http_call(req, authorize(), url_);  // GCS answers 499 for a cancelled session
    } catch (...) {
      // An unfinished session expires on its own and never becomes an object.
    }
  }

 private:
  template <typename F>
  void guarded(F&& f) {
    try {
      f();
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

  void check_usable() const {
    if (failed_) fail(A2PACK_E_IO, "{}: an earlier upload of this writer failed", url_);
    if (aborted_) fail(A2PACK_E_CLOSED, "{}: the writer was aborted", url_);
  }

  void start() {
    HttpRequest req;
    req.method = "POST";
    req.url = endpoint_ + "/upload/storage/v1/b/" + url_encode(bucket_, false) +
              "/o?uploadType=resumable&name=" + url_encode(name_, false);
    req.headers.push_back("Content-Type: application/json");
    static const char kEmpty[] = "{}";
    req.body = reinterpret_cast<const uint8_t*>(kEmpty);
    req.body_len = 2;
    HttpResponse r = http_call(req, authorize(), url_);
    if (r.status != 200 && r.status != 201) fail_response(url_, "starting a resumable upload", r);
    session_ = r.header("location");
    if (session_.empty())
      fail(A2PACK_E_IO, "{}: starting a resumable upload: the response has no Location", url_);
  }

  // Send buf_ as the next chunk (the last one when `final`).
  void send(bool final) {
    if (session_.empty()) start();
    HttpRequest req;
    req.method = "PUT";
    req.url = session_;
    const uint64_t first = sent_, end = sent_ + buf_.size();
    if (buf_.empty())
      req.headers.push_back(fmt::format("Content-Range: bytes */{}", end));
    else
      req.headers.push_back(fmt::format("Content-Range: bytes {}-{}/{}", first, end - 1,
                                        final ? std::to_string(end) : std::string("*")));
    req.body = buf_.data();
    req.body_len = buf_.size();
    HttpResponse r = http_call(req, authorize(), url_);
    if (final) {
      if (r.status != 200 && r.status != 201) fail_response(url_, "finishing the resumable upload", r);
    } else if (r.status != 308) {
      fail_response(url_, fmt::format("uploading bytes {}-{}", first, end - 1), r);
    } else {
      // The server says how much it kept ("bytes=0-LAST"); a chunk it did
      // not take whole is an error rather than a silent gap.
      std::string range = r.header("range");
      unsigned long long a = 0, last = 0;
      if (!range.empty() && (std::sscanf(range.c_str(), "bytes=%llu-%llu", &a, &last) != 2 || last + 1 != end))
        fail_redacted(A2PACK_E_IO, "{}: the server kept bytes \"{}\" of the {} sent", url_,
                      range.substr(0, 100), end);
    }
    sent_ = end;
    buf_.clear();
  }

  std::string bucket_, name_, endpoint_, session_;
  size_t chunk_;
  std::vector<uint8_t> buf_;
  uint64_t sent_ = 0;
  bool committed_ = false, failed_ = false, aborted_ = false;
};

}  // namespace

std::unique_ptr<ReadObject> gcs_open_read(const ParsedPath& p) { return std::make_unique<GcsRead>(p); }
std::unique_ptr<WriteObject> gcs_open_write(const ParsedPath& p) { return std::make_unique<GcsWrite>(p); }

void gcs_remove(const ParsedPath& p) {
  const std::string label = p.url();
  HttpRequest req;
  req.method = "DELETE";
  req.url = gcs_auth().endpoint + "/storage/v1/b/" + url_encode(p.bucket, false) + "/o/" + url_encode(p.key, false);
  HttpResponse r = http_call(req, authorize(), label);
  if (r.status != 204 && r.status != 200 && r.status != 404) fail_response(label, "deleting", r);
}

std::vector<std::string> gcs_list(const ParsedPath& p) {
  const std::string endpoint = gcs_auth().endpoint, label = p.url();
  std::vector<std::string> names;
  std::string token;
  for (;;) {
    HttpRequest req;
    req.url = endpoint + "/storage/v1/b/" + url_encode(p.bucket, false) + "/o?prefix=" + url_encode(p.key, false);
    if (!token.empty()) req.url += "&pageToken=" + url_encode(token, false);
    HttpResponse r = http_call(req, authorize(), label);
    if (r.status != 200) fail_response(label, "listing", r);
    nlohmann::json j = parse_json(r, label);
    if (j.contains("items") && j["items"].is_array())
      for (const auto& it : j["items"])
        if (it.is_object() && it.contains("name") && it["name"].is_string()) names.push_back(it["name"]);
    token = j.value("nextPageToken", "");
    if (token.empty()) break;
  }
  return names;
}

}  // namespace a2pack::storage
