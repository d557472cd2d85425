#include "base/stale_temps.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/file_io.hpp"

namespace a2pack {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// Remove `path` if it is a regular file nobody holds the writer's lock on.
bool remove_if_abandoned(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool removed = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    // Still the same file under that name (not replaced since it was opened)?
    struct stat now;
    if (::lstat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev)
      removed = ::unlink(path.c_str()) == 0;
  }
  ::close(fd);  // releases the lock
  return removed;
}

std::vector<std::string> list_names(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> clean(const std::string& dir, const std::string* only_base) {
  std::vector<std::string> removed;
  for (const auto& name : list_names(dir)) {
    std::string base;
    long pid = temp_owner(name, &base);
    if (pid <= 0 || (only_base && base != *only_base) || process_alive(pid)) continue;
    std::string path = dir == "." ? name : dir + "/" + name;
    if (remove_if_abandoned(path)) removed.push_back(path);
  }
  return removed;
}

}  // namespace

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

long temp_owner(std::string_view name, std::string* base) {
  // "<base>.tmp-<pid>-<n>": find the last ".tmp-" and check what follows.
  auto at = name.rfind(".tmp-");
  if (at == std::string_view::npos || at == 0) return 0;
  std::string_view rest = name.substr(at + 5);
  auto dash = rest.find('-');
  if (dash == std::string_view::npos) return 0;
  std::string_view pid = rest.substr(0, dash), n = rest.substr(dash + 1);
  if (!all_digits(pid) || !all_digits(n)) return 0;
  if (base) *base = std::string(name.substr(0, at));
  long v = 0;
  for (char c : pid) v = v * 10 + (c - '0');
  return v;
}

std::vector<std::string> remove_stale_temps(const std::string& out) {
  std::string base = base_name(out);
  if (base.empty()) return {};
  return clean(parent_dir(out), &base);
}

std::vector<std::string> remove_stale_temps_in(const std::string& dir) {
  return clean(dir, nullptr);
}

}  // namespace a2pack
