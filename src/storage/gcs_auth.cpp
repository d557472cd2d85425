#include "storage/gcs_auth.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "storage/crypto.hpp"
#include "storage/http.hpp"
#include "storage/redact.hpp"

namespace a2pack::storage {
namespace {

using Clock = std::chrono::system_clock;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

struct Token {
  std::string value;
  Clock::time_point expires{};
  std::string key;  // what the token is for (credentials file / "metadata")
};

std::mutex g_mu;
Token g_token;
int g_metadata_state = 0;  // 0 unknown, 1 available, -1 not available
std::string g_metadata_host;  // the host g_metadata_state is about

bool fresh(const Token& t, const std::string& key) {
  return t.key == key && !t.value.empty() && Clock::now() + std::chrono::minutes(5) < t.expires;
}

Token parse_token(const HttpResponse& r, const std::string& key, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("access_token") || !j["access_token"].is_string())
    fail_redacted(A2PACK_E_IO, "{}: the token response is not JSON with an access_token (HTTP {})",
                  where, r.status);
  Token t;
  t.value = j["access_token"].get<std::string>();
  remember_secret(t.value);
  long secs = j.contains("expires_in") && j["expires_in"].is_number() ? j["expires_in"].get<long>() : 3600;
  t.expires = Clock::now() + std::chrono::seconds(secs);
  t.key = key;
  return t;
}

Token service_account_token(const std::string& file) {
  std::ifstream in(file);
  if (!in)
    fail(A2PACK_E_NOT_FOUND, "GOOGLE_APPLICATION_CREDENTIALS={}: cannot read the credentials file", file);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    fail(A2PACK_E_INVALID_ARGUMENT, "GOOGLE_APPLICATION_CREDENTIALS={}: not a JSON object", file);
  std::string type = j.value("type", "");
  if (type != "service_account")
    fail(A2PACK_E_UNSUPPORTED,
         "GOOGLE_APPLICATION_CREDENTIALS={}: credentials of type \"{}\" are not supported (a2pack "
         "reads service-account keys, \"type\": \"service_account\")",
         file, type);
  std::string email = j.value("client_email", ""), key = j.value("private_key", "");
  std::string token_uri = j.value("token_uri", "https://oauth2.googleapis.com/token");
  if (email.empty() || key.empty())
    fail(A2PACK_E_INVALID_ARGUMENT, "GOOGLE_APPLICATION_CREDENTIALS={}: client_email or private_key missing", file);
  long now = static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count());
  nlohmann::json claims = {{"iss", email},
                           {"scope", "https://www.googleapis.com/auth/devstorage.read_write"},
                           {"aud", token_uri},
                           {"iat", now},
                           {"exp", now + 3600}};
  std::string unsigned_jwt = base64url(R"({"alg":"RS256","typ":"JWT"})") + "." + base64url(claims.dump());
  std::string jwt = unsigned_jwt + "." + base64url(rsa_sha256_sign(key, unsigned_jwt, file));
  std::string body = "grant_type=" + url_encode("urn:ietf:params:oauth:grant-type:jwt-bearer", false) +
                     "&assertion=" + jwt;
  HttpRequest req;
  req.method = "POST";
  req.url = token_uri;
  req.headers.push_back("Content-Type: application/x-www-form-urlencoded");
  req.body = reinterpret_cast<const uint8_t*>(body.data());
  req.body_len = body.size();
  std::string where = fmt::format("{} (token for {} from {})", token_uri, email, file);
  HttpResponse r = http_call(req, nullptr, where);
  if (r.status != 200)
    fail_redacted(A2PACK_E_IO, "{}: the token request was refused: HTTP {}: {}", where, r.status,
                  r.body.substr(0, 300));
  return parse_token(r, file, where);
}

std::string metadata_host() {
  std::string host = env("GCE_METADATA_HOST");
  return host.empty() ? "metadata.google.internal" : host;
}

// The metadata server's token, or an empty token when there is no server.
Token metadata_token() {
  const std::string host = metadata_host();
  HttpRequest req;
  req.url = "http://" + host + "/computeMetadata/v1/instance/service-accounts/default/token";
  req.headers.push_back("Metadata-Flavor: Google");
  try {
    HttpResponse r = http_once(req, 1.0, 0.5);
    if (r.status != 200) return Token();
    return parse_token(r, "metadata", req.url);
  } catch (const Error&) {
    return Token();
  }
}

}  // namespace

GcsAuth gcs_auth() {
  GcsAuth a;
  std::string emu = env("STORAGE_EMULATOR_HOST");
  if (!emu.empty()) {
    a.endpoint = emu.find("://") == std::string::npos ? "http://" + emu : emu;
    while (!a.endpoint.empty() && a.endpoint.back() == '/') a.endpoint.pop_back();
    a.source = "the emulator at STORAGE_EMULATOR_HOST=" + emu;
    return a;
  }
  a.endpoint = env("A2PACK_GCS_ENDPOINT");  // a private endpoint or test server, credentials kept
  if (a.endpoint.empty()) a.endpoint = "https://storage.googleapis.com";
  while (!a.endpoint.empty() && a.endpoint.back() == '/') a.endpoint.pop_back();
  std::lock_guard<std::mutex> l(g_mu);
  std::string file = env("GOOGLE_APPLICATION_CREDENTIALS");
  if (!file.empty()) {
    if (!fresh(g_token, file)) g_token = service_account_token(file);
    a.header = "Authorization: Bearer " + g_token.value;
    a.source = "the service account of GOOGLE_APPLICATION_CREDENTIALS=" + file;
    return a;
  }
  if (metadata_host() != g_metadata_host) {
    g_metadata_host = metadata_host();
    g_metadata_state = 0;
    if (g_token.key == "metadata") g_token = Token();
  }
  if (g_metadata_state >= 0) {
    if (!fresh(g_token, "metadata")) {
      Token t = metadata_token();
      if (t.value.empty()) {
        g_metadata_state = -1;
      } else {
        g_metadata_state = 1;
        g_token = t;
      }
    }
    if (g_metadata_state == 1) {
      a.header = "Authorization: Bearer " + g_token.value;
      a.source = "the GCE metadata server's default service account";
      return a;
    }
  }
  a.source = "no credentials (anonymous: GOOGLE_APPLICATION_CREDENTIALS is not set and no GCE "
             "metadata server answered)";
  return a;
}

}  // namespace a2pack::storage
