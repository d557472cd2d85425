#include "storage/redact.hpp"

#include <algorithm>
#include <mutex>
#include <regex>
#include <vector>

namespace a2pack::storage {
namespace {

constexpr size_t kMinSecret = 8;
constexpr size_t kMaxSecrets = 64;  // a process reloads the same few; oldest go first
constexpr const char* kHidden = "***";
// Longer messages are cut first: std::regex recurses once per character of
// a match, and a message is for a person, not a copy of a server's body.
constexpr size_t kMaxMessage = 4096;

std::mutex g_mu;
std::vector<std::string>& secrets() {
  static auto* v = new std::vector<std::string>();  // outlives static destructors
  return *v;
}

const std::regex& userinfo_re() {
  // scheme://userinfo@ : userinfo stops at the first '/', '?', '#' or space,
  // so "s3://bucket/name@8.bagz" keeps its '@'.
  static const std::regex re(R"(([A-Za-z][A-Za-z0-9+.\-]{0,15}://)[^/?#@\s"'<>]*@)");
  return re;
}

// The name of a header or query parameter that carries a credential, its
// separator (": ", "=", "\": \"", the ">" of an XML element) and its value:
// an Authorization value (which has spaces) up to the end of the line, a
// quote or a tag; a token up to the next space or query parameter.
const std::regex& authorization_re() {
  static const std::regex re(R"(((?:proxy-)?authorization)(["']?\s*[:=>]\s*["']?)[^\r\n"'<>]+)",
                             std::regex::icase);
  return re;
}
const std::regex& token_re() {
  static const std::regex re(
      R"((x-amz-security-token|x-amz-signature|x-amz-credential|x-goog-signature|)"
      R"(x-goog-credential|upload_id|access_token|aws_secret_access_key|aws_session_token))"
      R"((["']?\s*[:=>]\s*["']?)[^\s"'<>&,;]+)",
      std::regex::icase);
  return re;
}

// Credential parts that appear without their header's name.
const std::regex& parts_re() {
  static const std::regex re(R"((\b(?:Credential|Signature)=|\bBearer\s+)[^\s,&"'<>]+)",
                             std::regex::icase);
  return re;
}

}  // namespace

std::string strip_userinfo(const std::string& url) {
  return std::regex_replace(url, userinfo_re(), "$1");
}

void remember_secret(const std::string& value) {
  if (value.size() < kMinSecret) return;
  std::lock_guard<std::mutex> l(g_mu);
  auto& v = secrets();
  if (std::find(v.begin(), v.end(), value) != v.end()) return;
  if (v.size() == kMaxSecrets) v.erase(v.begin());
  v.push_back(value);
}

std::string redact(const std::string& text) {
  std::string out = text.size() <= kMaxMessage
                        ? text
                        : text.substr(0, kMaxMessage) +
                              fmt::format("... ({} more bytes not shown)", text.size() - kMaxMessage);
  {
    std::lock_guard<std::mutex> l(g_mu);
    for (const auto& s : secrets())
      for (size_t pos = out.find(s); pos != std::string::npos; pos = out.find(s, pos + 3))
        out.replace(pos, s.size(), kHidden);
  }
  out = std::regex_replace(out, userinfo_re(), "$1");
  out = std::regex_replace(out, authorization_re(), std::string("$1$2") + kHidden);
  out = std::regex_replace(out, token_re(), std::string("$1$2") + kHidden);
  out = std::regex_replace(out, parts_re(), std::string("$1") + kHidden);
  return out;
}

}  // namespace a2pack::storage
