#include "bag/shard_spec.hpp"

#include <glob.h>

#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/path_prefix.hpp"
#include "storage/object_store.hpp"

namespace a2pack::bag {
namespace {

constexpr uint64_t kMaxShards = 1000000;  // a bound so "@99999999999" cannot allocate wildly

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// Glob metacharacters in the literal part must not act as wildcards.
std::string glob_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// `@*` over a bucket: the count from the names listed under "<base>-00000-of-".
uint64_t count_from_listing(const std::string& spec, const std::string& base, const std::string& suffix) {
  const std::string prefix = base + "-00000-of-";
  uint64_t count = 0;
  for (const auto& f : storage::list(prefix)) {
    // list() spells the scheme canonically; compare from the "-00000-of-" on.
    auto at = f.rfind("-00000-of-");
    if (at == std::string::npos || f.size() < at + 10 + suffix.size() ||
        f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string mid = f.substr(at + 10, f.size() - at - 10 - suffix.size());
    if (!all_digits(mid) || mid.size() > 12) continue;
    uint64_t n = std::strtoull(mid.c_str(), nullptr, 10);
    if (count && n != count)
      fail(A2PACK_E_INVALID_ARGUMENT, "{}: shard 0 exists with two different counts ({} and {})",
           spec, count, n);
    count = n;
  }
  if (!count) fail(A2PACK_E_NOT_FOUND, "{}: no object matches {}*{}", spec, prefix, suffix);
  return count;
}

uint64_t count_from_disk(const std::string& spec, const std::string& base, const std::string& suffix) {
  if (storage::is_remote(base)) return count_from_listing(spec, base, suffix);
  std::string pattern = glob_escape(base) + "-00000-of-*" + glob_escape(suffix);
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> found;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) found.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  uint64_t count = 0;
  std::string prefix = base + "-00000-of-";
  for (const auto& f : found) {
    if (f.size() < prefix.size() + suffix.size()) continue;
    std::string mid = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
    if (!all_digits(mid) || mid.size() > 12) continue;
    uint64_t n = std::strtoull(mid.c_str(), nullptr, 10);
    if (count && n != count)
      fail(A2PACK_E_INVALID_ARGUMENT, "{}: shard 0 exists with two different counts ({} and {})",
           spec, count, n);
    count = n;
  }
  if (!count) fail(A2PACK_E_NOT_FOUND, "{}: no file matches {}", spec, pattern);
  return count;
}

void expand_one(const std::string& spec, std::vector<std::string>& out) {
  std::string path = strip_local_prefix(spec);  // "posix:/x", "/posix:/x" (base/path_prefix.hpp)
  if (path.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "empty file name in spec");
  auto slash = path.find_last_of('/');
  auto at = path.find_last_of('@');
  if (at == std::string::npos || (slash != std::string::npos && at < slash)) {
    out.push_back(path);
    return;
  }
  // The shard count runs from '@' to the first '.' after it (or the end).
  auto dot = path.find('.', at);
  std::string count_text = path.substr(at + 1, dot == std::string::npos ? std::string::npos : dot - at - 1);
  std::string base = path.substr(0, at);
  std::string suffix = dot == std::string::npos ? "" : path.substr(dot);
  uint64_t count;
  if (count_text == "*") {
    count = count_from_disk(spec, base, suffix);
  } else if (all_digits(count_text) && count_text.size() <= 12) {
    count = std::strtoull(count_text.c_str(), nullptr, 10);
    if (count == 0) fail(A2PACK_E_INVALID_ARGUMENT, "{}: a sharded spec needs at least 1 shard", spec);
  } else {
    out.push_back(path);  // an '@' that is part of an ordinary name
    return;
  }
  if (count > kMaxShards)
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: {} shards is more than the {} supported", spec, count, kMaxShards);
  for (uint64_t i = 0; i < count; ++i) out.push_back(shard_name(base, i, count, suffix));
}

}  // namespace

std::string shard_name(const std::string& base, uint64_t index, uint64_t count,
                       const std::string& suffix) {
  return fmt::format("{}-{:05d}-of-{:05d}{}", base, index, count, suffix);
}

std::vector<std::string> expand_spec(const std::string& spec) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    auto comma = spec.find(',', start);
    expand_one(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start), out);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace a2pack::bag
