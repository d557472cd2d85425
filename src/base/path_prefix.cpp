#include "base/path_prefix.hpp"

#include "base/error.hpp"

namespace a2pack {
namespace {

// "s3:" or "gs:" after an optional leading '/', followed by at least one '/'.
bool match_scheme(std::string_view p, std::string_view scheme, std::string_view& rest) {
  if (!p.empty() && p.front() == '/') p.remove_prefix(1);
  if (p.substr(0, scheme.size()) != scheme) return false;
  p.remove_prefix(scheme.size());
  if (p.empty() || p.front() != '/') return false;
  while (!p.empty() && p.front() == '/') p.remove_prefix(1);
  rest = p;
  return true;
}

}  // namespace

std::string ParsedPath::url() const {
  switch (scheme) {
    case PathScheme::s3: return "s3://" + bucket + "/" + key;
    case PathScheme::gs: return "gs://" + bucket + "/" + key;
    default: return local;
  }
}

ParsedPath parse_path(std::string_view path) {
  ParsedPath out;
  std::string_view rest;
  bool s3 = match_scheme(path, "s3:", rest);
  if (s3 || match_scheme(path, "gs:", rest)) {
    out.scheme = s3 ? PathScheme::s3 : PathScheme::gs;
    auto slash = rest.find('/');
    out.bucket = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) out.key = std::string(rest.substr(slash + 1));
    if (out.bucket.empty())
      fail(A2PACK_E_INVALID_ARGUMENT, "{}: no bucket name after the {} prefix", path,
           s3 ? "s3://" : "gs://");
    return out;
  }
  out.local = strip_local_prefix(path);
  return out;
}

bool is_remote_path(std::string_view path) {
  std::string_view rest;
  return match_scheme(path, "s3:", rest) || match_scheme(path, "gs:", rest);
}

std::string strip_local_prefix(std::string_view path) {
  // "/posix:/tmp/x" is what pathlib.Path("/posix:/tmp") / "x" gives; bagz
  // accepts it as "posix:/tmp/x".
  std::string_view p = path;
  if (!p.empty() && p.front() == '/') p.remove_prefix(1);
  if (p.substr(0, 6) == "posix:") return std::string(p.substr(6));
  if (p.substr(0, 3) == "fs:") return std::string(p.substr(3));
  return std::string(path);
}

}  // namespace a2pack
