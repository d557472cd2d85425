#include "bag/format.hpp"

namespace a2pack::bag {

bool is_bagz_path(const std::string& path) {
  static constexpr std::string_view kExt = ".bagz";
  return path.size() >= kExt.size() && path.compare(path.size() - kExt.size(), kExt.size(), kExt) == 0;
}

Compression effective_compression(Compression c, const std::string& path) {
  if (c != Compression::autodetect) return c;
  return is_bagz_path(path) ? Compression::zstd : Compression::none;
}

std::string limits_path(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return "limits." + path;
  return path.substr(0, slash + 1) + "limits." + path.substr(slash + 1);
}

}  // namespace a2pack::bag
