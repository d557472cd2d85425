// Amazon S3 (and S3-compatible stores) over its REST API, signed with AWS
// Signature Version 4 (hashes and HMACs from OpenSSL, transport libcurl).
//
// Reads: HEAD pins size and ETag; ranged GETs carry If-Match with that ETag,
// so a replaced object answers 412 and the read fails naming it. Writes:
// multipart upload (parts of Settings::part_size, two in flight), completed
// at commit(); small objects are one PUT at commit(). An abandoned or failed
// writer aborts the multipart upload, which deletes its parts. With
// reserve_first_part() the first part waits for a head known only at the end
// (object_store.hpp) and is sent last as part 1.
//
// Responses are XML; the few fields read (Code, Message, UploadId, Key,
// NextContinuationToken) are picked out by tag below, which is simpler than
// adding an XML library for four flat, machine-written fields.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <deque>
#include <future>
#include <map>

#include "base/error.hpp"
#include "storage/aws_config.hpp"
#include "storage/backends.hpp"
#include "storage/crypto.hpp"
#include "storage/http.hpp"
#include "storage/options.hpp"
#include "storage/range_check.hpp"
#include "storage/redact.hpp"

namespace a2pack::storage {
namespace {

std::string xml_unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out.push_back(s[i]);
      continue;
    }
    auto semi = s.find(';', i);
    if (semi == std::string::npos) {
      out.push_back(s[i]);
      continue;
    }
    std::string ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") out.push_back('&');
    else if (ent == "lt") out.push_back('<');
    else if (ent == "gt") out.push_back('>');
    else if (ent == "quot") out.push_back('"');
    else if (ent == "apos") out.push_back('\'');
    else if (ent.size() > 1 && ent[0] == '#') {
      unsigned long cp = ent[1] == 'x' ? std::strtoul(ent.c_str() + 2, nullptr, 16)
                                       : std::strtoul(ent.c_str() + 1, nullptr, 10);
      if (cp < 0x80) out.push_back(static_cast<char>(cp));
      else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    } else {
      out.append(s, i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

// Every <tag>text</tag> in document order, unescaped.
std::vector<std::string> xml_all(const std::string& body, const std::string& tag) {
  std::vector<std::string> out;
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  size_t pos = 0;
  for (;;) {
    auto b = body.find(open, pos);
    if (b == std::string::npos) break;
    b += open.size();
    auto e = body.find(close, b);
    if (e == std::string::npos) break;
    out.push_back(xml_unescape(body.substr(b, e - b)));
    pos = e + close.size();
  }
  return out;
}

std::string xml_first(const std::string& body, const std::string& tag) {
  auto v = xml_all(body, tag);
  return v.empty() ? std::string() : v[0];
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// An endpoint's parts: "scheme://", "user:pass@" (or "") and "host[:port]".
struct Endpoint {
  std::string scheme, userinfo, host;
};

Endpoint split_endpoint(const std::string& endpoint) {
  Endpoint e;
  auto p = endpoint.find("://");
  std::string rest = p == std::string::npos ? endpoint : endpoint.substr(p + 3);
  e.scheme = p == std::string::npos ? std::string() : endpoint.substr(0, p + 3);
  std::string authority = rest.substr(0, rest.find('/'));
  auto at = authority.rfind('@');
  if (at != std::string::npos) {
    e.userinfo = authority.substr(0, at + 1);
    authority.erase(0, at + 1);
  }
  e.host = authority;
  return e;
}

bool dns_bucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

class S3Client {
 public:
  S3Client() : cfg_(load_aws_config()) {}
  const AwsConfig& config() const { return cfg_; }

  struct Call {
    std::string method = "GET";
    std::string bucket, key;
    bool bucket_level = false;  // the request is on the bucket (list)
    std::map<std::string, std::string> query;
    std::vector<std::string> headers;
    const uint8_t* body = nullptr;
    size_t body_len = 0;
    uint8_t* sink = nullptr;
    size_t sink_len = 0;
  };

  HttpResponse call(const Call& c, const std::string& label) const {
    // The signature covers the Host header curl sends: the endpoint's host,
    // without any user info (which stays in the URL, for curl to use).
    const Endpoint ep = split_endpoint(cfg_.endpoint);
    std::string host = ep.host;
    std::string uri;
    const bool virtual_host = !cfg_.path_style && dns_bucket(c.bucket);
    if (virtual_host) {
      host = c.bucket + "." + host;
      uri = "/" + (c.bucket_level ? std::string() : url_encode(c.key, true));
    } else {
      uri = "/" + c.bucket + (c.bucket_level ? std::string() : "/" + url_encode(c.key, true));
    }
    std::string query;
    for (const auto& [k, v] : c.query) {  // std::map: sorted, as SigV4 wants
      if (!query.empty()) query += '&';
      query += url_encode(k, false) + "=" + url_encode(v, false);
    }
    HttpRequest req;
    req.method = c.method;
    req.url = ep.scheme + ep.userinfo + host + uri + (query.empty() ? "" : "?" + query);
    req.headers = c.headers;
    req.body = c.body;
    req.body_len = c.body_len;
    req.sink = c.sink;
    req.sink_len = c.sink_len;
    if (cfg_.anonymous) return http_call(req, nullptr, label);
    const std::string payload_hash = sha256_hex(c.body ? c.body : reinterpret_cast<const uint8_t*>(""), c.body_len);
    auto sign = [this, host, uri, query, payload_hash](HttpRequest& r) {
      std::time_t now = std::time(nullptr);
      std::tm tm{};
      gmtime_r(&now, &tm);
      char amz_date[32], date[16];
      std::strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
      std::strftime(date, sizeof date, "%Y%m%d", &tm);
      std::string canon_headers = "host:" + host + "\nx-amz-content-sha256:" + payload_hash +
                                  "\nx-amz-date:" + amz_date + "\n";
      std::string signed_headers = "host;x-amz-content-sha256;x-amz-date";
      if (!cfg_.session_token.empty()) {
        canon_headers += "x-amz-security-token:" + cfg_.session_token + "\n";
        signed_headers += ";x-amz-security-token";
      }
      std::string canonical = r.method + "\n" + uri + "\n" + query + "\n" + canon_headers + "\n" +
                              signed_headers + "\n" + payload_hash;
      std::string scope = std::string(date) + "/" + cfg_.region + "/s3/aws4_request";
      std::string to_sign = "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" + scope + "\n" +
                            sha256_hex(canonical);
      std::string k = hmac_sha256("AWS4" + cfg_.secret_key, date);
      k = hmac_sha256(k, cfg_.region);
      k = hmac_sha256(k, "s3");
      k = hmac_sha256(k, "aws4_request");
      std::string sig = to_hex(hmac_sha256(k, to_sign));
      r.headers.push_back("x-amz-date: " + std::string(amz_date));
      r.headers.push_back("x-amz-content-sha256: " + payload_hash);
      if (!cfg_.session_token.empty()) r.headers.push_back("x-amz-security-token: " + cfg_.session_token);
      r.headers.push_back("Authorization: AWS4-HMAC-SHA256 Credential=" + cfg_.access_key + "/" + scope +
                          ", SignedHeaders=" + signed_headers + ", Signature=" + sig);
    };
    return http_call(req, sign, label);
  }

  // An error for a response that was not what the caller wanted.
  [[noreturn]] void fail_response(const std::string& label, const std::string& what,
                                  const HttpResponse& r) const {
    // The server's words are quoted (shortened), never what it echoed of
    // the request's credentials (redact.hpp).
    std::string code = xml_first(r.body, "Code").substr(0, 100);
    std::string msg = xml_first(r.body, "Message").substr(0, 300);
    std::string detail = code.empty() ? "" : fmt::format(" {}{}{}", code, msg.empty() ? "" : ": ", msg);
    std::string hint;
    if (r.status == 401 || r.status == 403) {
      hint = cfg_.anonymous
                 ? fmt::format(" (no AWS credentials were found - AWS_ACCESS_KEY_ID/"
                               "AWS_SECRET_ACCESS_KEY, or profile \"{}\" of ~/.aws/credentials - so "
                               "the request was sent unsigned)",
                               cfg_.profile)
                 : fmt::format(" (credentials from {}; region {}; endpoint {})", cfg_.source,
                               cfg_.region, cfg_.endpoint);
    }
    fail_redacted(r.status == 404 ? A2PACK_E_NOT_FOUND : A2PACK_E_IO, "{}: {}: HTTP {}{}{}", label,
                  what, r.status, detail, hint);
  }

 private:
  AwsConfig cfg_;
};

class S3Read final : public ReadObject {
 public:
  explicit S3Read(const ParsedPath& p) : bucket_(p.bucket), key_(p.key) {
    url_ = p.url();
    remote_ = true;
    if (key_.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "{}: no object name after the bucket", url_);
    S3Client::Call c;
    c.method = "HEAD";
    c.bucket = bucket_;
    c.key = key_;
    HttpResponse r = client_.call(c, url_);
    if (r.status == 404) fail(A2PACK_E_NOT_FOUND, "{}: no such object (HTTP 404)", url_);
    if (r.status != 200) client_.fail_response(url_, "opening", r);
    size_ = parse_length(r.header("content-length"), url_);
    version_ = r.header("etag");
  }
  ~S3Read() override { drain(); }

 protected:
  void fetch(uint64_t offset, size_t len, uint8_t* dst) const override {
    S3Client::Call c;
    c.bucket = bucket_;
    c.key = key_;
    c.headers.push_back(fmt::format("Range: bytes={}-{}", offset, offset + len - 1));
    if (!version_.empty()) c.headers.push_back("If-Match: " + version_);
    c.sink = dst;
    c.sink_len = len;
    HttpResponse r = client_.call(c, url_);
    if (r.status == 412 || r.status == 404)
      fail(A2PACK_E_IO,
           "{}: the object changed since it was opened (ETag {} no longer matches: HTTP {}); "
           "reopen it to read the new version",
           url_, version_, r.status);
    if (r.status != 206 && r.status != 200) client_.fail_response(url_, fmt::format("reading {} bytes at offset {}", len, offset), r);
    check_range_response(r, offset, len, size_, url_);
  }

 private:
  S3Client client_;
  std::string bucket_, key_;
};

class S3Write final : public WriteObject {
 public:
  explicit S3Write(const ParsedPath& p) : bucket_(p.bucket), key_(p.key), part_size_(settings().part_size) {
    url_ = p.url();
    if (key_.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "{}: no object name after the bucket", url_);
    buf_.reserve(part_size_);
  }
  ~S3Write() override {
    if (!committed_) abort();
  }

  void write(const void* data, size_t len) override {
    check_usable();
    const uint8_t* p = static_cast<const uint8_t*>(data);
    while (len) {
      size_t n = std::min(len, part_size_ - buf_.size());
      buf_.insert(buf_.end(), p, p + n);
      p += n;
      len -= n;
      written_ += n;
      if (buf_.size() == part_size_) {
        if (hold_first_ && first_.empty()) {
          first_ = std::move(buf_);  // part 1, sent with the head at commit
          buf_ = std::vector<uint8_t>();
          buf_.reserve(part_size_);
        } else {
          send_part();
        }
      }
    }
  }

  // Parts are numbered by the caller, so part 1 can be the last one sent:
  // it is kept in memory (one part plus the head) until commit_with_head().
  bool reserve_first_part() override {
    if (written_ || hold_first_)
      fail(A2PACK_E_INTERNAL, "{}: reserve_first_part after writing", url_);
    hold_first_ = true;
    etags_.emplace_back();  // part 1's slot; write() sends parts from 2 on
    return true;
  }

  void commit_with_head(const void* head, size_t len) override {
    if (committed_) return;
    if (!hold_first_) WriteObject::commit_with_head(head, len);
    check_usable();
    const auto* h = static_cast<const uint8_t*>(head);
    auto part1 = std::make_shared<std::vector<uint8_t>>(h, h + len);
    part1->insert(part1->end(), first_.begin(), first_.end());
    first_ = std::vector<uint8_t>();
    written_ += len;
    hold_first_ = false;
    if (upload_id_.empty()) {
      // No part sent yet: commit() PUTs head + body in one request.
      part1->insert(part1->end(), buf_.begin(), buf_.end());
      buf_ = std::move(*part1);
    } else {
      try {
        // A whole part stands behind the head, so part 1 meets S3's
        // minimum part size although it is sent last.
        send_data(1, std::move(part1));
      } catch (...) {
        failed_ = true;
        throw;
      }
    }
    commit();
  }

  void commit() override {
    if (committed_) return;
    if (hold_first_) return commit_with_head(nullptr, 0);
    check_usable();
    try {
      if (upload_id_.empty()) {
        S3Client::Call c;
        c.method = "PUT";
        c.bucket = bucket_;
        c.key = key_;
        c.body = buf_.data();
        c.body_len = buf_.size();
        HttpResponse r = client_.call(c, url_);
        if (r.status != 200) client_.fail_response(url_, "uploading", r);
      } else {
        if (!buf_.empty() || parts_.empty()) send_part();
        wait_parts(0);
        std::string xml = "<CompleteMultipartUpload>";
        for (size_t i = 0; i < etags_.size(); ++i)
          xml += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", i + 1,
                             xml_escape(etags_[i]));
        xml += "</CompleteMultipartUpload>";
        S3Client::Call c;
        c.method = "POST";
        c.bucket = bucket_;
        c.key = key_;
        c.query["uploadId"] = upload_id_;
        c.headers.push_back("Content-Type: application/xml");
        c.body = reinterpret_cast<const uint8_t*>(xml.data());
        c.body_len = xml.size();
        HttpResponse r = client_.call(c, url_);
        // S3 may answer 200 with an <Error> body when completing fails late.
        if (r.status != 200 || r.body.find("<Error>") != std::string::npos)
          client_.fail_response(url_, "completing the multipart upload", r);
      }
    } catch (...) {
      failed_ = true;
      throw;
    }
    committed_ = true;
  }

  void abort() noexcept override {
    if (committed_ || aborted_) return;
    aborted_ = true;
    for (auto& part : inflight_) {
      try {
        part.second.wait();
      } catch (...) {
      }
    }
    if (upload_id_.empty()) return;
    try {
      S3Client::Call c;
      c.method = "DELETE";
      c.bucket = bucket_;
      c.key = key_;
      c.query["uploadId"] = upload_id_;
      client_.call(c, url_);
    } catch (...) {
      // Nothing more can be done: the parts stay until the bucket's
      // lifecycle rule for incomplete uploads removes them.
    }
  }

 private:
  void check_usable() const {
    if (failed_) fail(A2PACK_E_IO, "{}: an earlier upload of this writer failed", url_);
    if (aborted_) fail(A2PACK_E_CLOSED, "{}: the writer was aborted", url_);
  }

  void start() {
    S3Client::Call c;
    c.method = "POST";
    c.bucket = bucket_;
    c.key = key_;
    c.query["uploads"] = "";
    HttpResponse r = client_.call(c, url_);
    if (r.status != 200) client_.fail_response(url_, "starting a multipart upload", r);
    upload_id_ = xml_first(r.body, "UploadId");
    if (upload_id_.empty())
      fail(A2PACK_E_IO, "{}: starting a multipart upload: the response has no UploadId", url_);
  }

  // Upload buf_ as the next part, at most two parts in flight.
  void send_part() {
    try {
      if (upload_id_.empty()) start();
      const size_t number = etags_.size() + 1;
      etags_.emplace_back();
      auto data = std::make_shared<std::vector<uint8_t>>(std::move(buf_));
      buf_ = std::vector<uint8_t>();
      buf_.reserve(part_size_);
      send_data(number, std::move(data));
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

  // Upload `data` as part `number` (its slot in etags_ exists), at most two
  // parts in flight.
  void send_data(size_t number, std::shared_ptr<std::vector<uint8_t>> data) {
    {
      wait_parts(1);
      parts_.push_back(number);
      inflight_.emplace_back(number, std::async(std::launch::async, [this, data, number] {
        S3Client::Call c;
        c.method = "PUT";
        c.bucket = bucket_;
        c.key = key_;
        c.query["partNumber"] = std::to_string(number);
        c.query["uploadId"] = upload_id_;
        c.body = data->data();
        c.body_len = data->size();
        HttpResponse r = client_.call(c, url_);
        if (r.status != 200) client_.fail_response(url_, fmt::format("uploading part {}", number), r);
        std::string etag = r.header("etag");
        if (etag.empty()) fail(A2PACK_E_IO, "{}: part {}: the response has no ETag", url_, number);
        return etag;
      }));
    }
  }

  // Wait until at most `keep` parts are in flight; the first failure throws.
  void wait_parts(size_t keep) {
    while (inflight_.size() > keep) {
      auto [number, f] = std::move(inflight_.front());
      inflight_.pop_front();
      etags_[number - 1] = f.get();
    }
  }

  S3Client client_;
  std::string bucket_, key_;
  size_t part_size_;
  std::vector<uint8_t> buf_;
  std::string upload_id_;
  std::vector<size_t> parts_;
  std::vector<std::string> etags_;  // filled as parts finish (by wait_parts, on this thread)
  std::deque<std::pair<size_t, std::future<std::string>>> inflight_;
  bool committed_ = false, failed_ = false, aborted_ = false;
  bool hold_first_ = false;     // reserve_first_part(): part 1 waits for the head
  std::vector<uint8_t> first_;  // its body bytes (one part) meanwhile
};

}  // namespace

std::unique_ptr<ReadObject> s3_open_read(const ParsedPath& p) { return std::make_unique<S3Read>(p); }
std::unique_ptr<WriteObject> s3_open_write(const ParsedPath& p) { return std::make_unique<S3Write>(p); }

void s3_remove(const ParsedPath& p) {
  S3Client client;
  S3Client::Call c;
  c.method = "DELETE";
  c.bucket = p.bucket;
  c.key = p.key;
  const std::string label = p.url();
  HttpResponse r = client.call(c, label);
  // S3 answers 204 whether or not the key existed; other stores 404.
  if (r.status != 204 && r.status != 200 && r.status != 404) client.fail_response(label, "deleting", r);
}

std::vector<std::string> s3_list(const ParsedPath& p) {
  S3Client client;
  std::vector<std::string> keys;
  std::string token;
  const std::string label = p.url();
  for (;;) {
    S3Client::Call c;
    c.bucket = p.bucket;
    c.bucket_level = true;
    c.query["list-type"] = "2";
    c.query["prefix"] = p.key;
    if (!token.empty()) c.query["continuation-token"] = token;
    HttpResponse r = client.call(c, label);
    if (r.status != 200) client.fail_response(label, "listing", r);
    for (auto& k : xml_all(r.body, "Key")) keys.push_back(std::move(k));
    token = xml_first(r.body, "NextContinuationToken");
    if (xml_first(r.body, "IsTruncated") != "true" || token.empty()) break;
  }
  return keys;
}

}  // namespace a2pack::storage
