#include "pack_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

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

void write_file_atomic(const std::string& path, const void* data, size_t len) {
  // The writers' temporary name (OUT.tmp-PID-N), so `a2pack clean` knows
  // what a killed extract left.
  static uint64_t counter = 0;
  std::string tmp = fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw CliError(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)), kExitSystem);
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::write(fd, p + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw CliError(fmt::format("{}: write failed: {}", tmp, std::strerror(err)), kExitSystem);
    }
    done += static_cast<size_t>(n);
  }
  int err = ::fsync(fd) != 0 ? errno : 0;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    throw CliError(fmt::format("{}: cannot write: {}", path, std::strerror(err)), kExitSystem);
  }
}

}  // namespace a2cli
