#include "pack_util.hpp"

#include <charconv>

#include <fmt/format.h>

#include "command.hpp"

namespace a2cli {

PackPtr open_pack(const std::string& path) {
  a2pack_pack* p = nullptr;
  check(a2pack_pack_open(path.c_str(), nullptr, &p));
  return PackPtr(p);
}

namespace {
uint64_t parse_u64(const std::string& s, const std::string& whole) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    throw UsageError(fmt::format("--indices: '{}' in '{}' is not an entry index", s, whole));
  return v;
}
}  // namespace

std::vector<uint64_t> parse_indices(const std::string& text) {
  std::vector<uint64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    // Spaces around items are allowed ("0, 5, 42").
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (!part.empty()) {
      size_t dash = part.find('-');
      if (dash == std::string::npos) {
        out.push_back(parse_u64(part, text));
      } else {
        uint64_t lo = parse_u64(part.substr(0, dash), text), hi = parse_u64(part.substr(dash + 1), text);
        if (hi < lo) throw UsageError(fmt::format("--indices: empty range '{}'", part));
        if (hi - lo >= 10'000'000) throw UsageError(fmt::format("--indices: range '{}' is too long", part));
        for (uint64_t i = lo; i <= hi; ++i) out.push_back(i);
      }
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.empty()) throw UsageError("--indices: no entry index given");
  return out;
}

}  // namespace a2cli
