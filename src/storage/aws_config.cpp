#include "storage/aws_config.hpp"

#include <cstdlib>
#include <fstream>
#include <map>

#include "storage/redact.hpp"

namespace a2pack::storage {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// One section of an INI file as the AWS tools write them ("[name]", "key = value").
std::map<std::string, std::string> ini_section(const std::string& file, const std::string& section) {
  std::map<std::string, std::string> out;
  std::ifstream in(file);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      inside = trim(t.substr(1, t.size() - 2)) == section;
      continue;
    }
    if (!inside) continue;
    auto eq = t.find('=');
    if (eq == std::string::npos) continue;
    out[trim(t.substr(0, eq))] = trim(t.substr(eq + 1));
  }
  return out;
}

std::string home_file(const char* var, const char* rel) {
  std::string v = env(var);
  if (!v.empty()) return v;
  std::string home = env("HOME");
  return home.empty() ? std::string() : home + "/" + rel;
}

std::string fmt_source(const std::string& file, const std::string& profile) {
  return file + " [" + profile + "]";
}

}  // namespace

AwsConfig load_aws_config() {
  AwsConfig c;
  c.profile = env("AWS_PROFILE");
  if (c.profile.empty()) c.profile = "default";
  const std::string cred_file = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  const std::string conf_file = home_file("AWS_CONFIG_FILE", ".aws/config");
  auto creds = cred_file.empty() ? std::map<std::string, std::string>() : ini_section(cred_file, c.profile);
  auto conf = conf_file.empty()
                  ? std::map<std::string, std::string>()
                  : ini_section(conf_file, c.profile == "default" ? "default" : "profile " + c.profile);

  if (!env("AWS_ACCESS_KEY_ID").empty() && !env("AWS_SECRET_ACCESS_KEY").empty()) {
    c.access_key = env("AWS_ACCESS_KEY_ID");
    c.secret_key = env("AWS_SECRET_ACCESS_KEY");
    c.session_token = env("AWS_SESSION_TOKEN");
    c.source = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY";
  } else {
    for (auto* m : {&creds, &conf}) {
      if (m->count("aws_access_key_id") && m->count("aws_secret_access_key")) {
        c.access_key = (*m)["aws_access_key_id"];
        c.secret_key = (*m)["aws_secret_access_key"];
        c.session_token = m->count("aws_session_token") ? (*m)["aws_session_token"] : "";
        c.source = fmt_source(m == &creds ? cred_file : conf_file, c.profile);
        break;
      }
    }
  }
  std::string nosign = env("AWS_NO_SIGN_REQUEST");
  c.anonymous = c.access_key.empty() || nosign == "true" || nosign == "1";

  c.region = env("AWS_REGION");
  if (c.region.empty()) c.region = env("AWS_DEFAULT_REGION");
  if (c.region.empty() && conf.count("region")) c.region = conf["region"];
  if (c.region.empty()) c.region = "us-east-1";

  c.endpoint = env("AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = env("AWS_ENDPOINT_URL");
  if (c.endpoint.empty() && conf.count("endpoint_url")) c.endpoint = conf["endpoint_url"];
  if (c.endpoint.empty()) {
    c.endpoint = "https://s3." + c.region + ".amazonaws.com";
  } else {
    c.path_style = true;
    if (c.endpoint.find("://") == std::string::npos) c.endpoint = "https://" + c.endpoint;
    while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  }
  // Whatever prints an error from here on hides these (redact.hpp).
  for (const std::string* v : {&c.access_key, &c.secret_key, &c.session_token}) remember_secret(*v);
  const std::string bare = strip_userinfo(c.endpoint);
  if (bare != c.endpoint) {
    const std::string user = c.endpoint.substr(c.endpoint.find("://") + 3,
                                               c.endpoint.size() - bare.size());
    if (auto colon = user.find(':'); colon != std::string::npos)
      remember_secret(user.substr(colon + 1, user.size() - colon - 2));  // the password
  }
  return c;
}

}  // namespace a2pack::storage
