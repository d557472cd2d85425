#include "dataset/build_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "dataset/journal.hpp"
#include "dataset/manifest.hpp"

namespace a2pack::dataset {

namespace {

std::atomic<uint64_t> g_counter{0};

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool all_digits(const std::string& s, size_t from, size_t to) {
  if (to <= from || to - from > 18) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(from),
                     s.begin() + static_cast<std::ptrdiff_t>(to),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// The pid in `name` when it is exactly "<base>.tmp-<pid>-<n>" or
// "<base>.old-<pid>-<n>", else 0.
long leftover_pid(const std::string& name, const std::string& base) {
  if (name.size() <= base.size() + 5 || name.compare(0, base.size(), base) != 0) return 0;
  const size_t at = base.size();
  if (name.compare(at, 5, ".tmp-") != 0 && name.compare(at, 5, ".old-") != 0) return 0;
  const size_t dash = name.find('-', at + 5);
  if (dash == std::string::npos || !all_digits(name, at + 5, dash) ||
      !all_digits(name, dash + 1, name.size()))
    return 0;
  return std::stol(name.substr(at + 5, dash - at - 5));
}

std::string marker_text(const std::string& as) {
  return "a2pack build folder " + as +
         "\nMade by an a2pack dataset build; a later build of the same dataset removes this "
         "folder once the build that made it is gone.\n";
}

// The entries of the folder open as `dfd`, sorted.
std::vector<std::string> entries(int dfd, const std::string& path) {
  int d2 = ::dup(dfd);
  if (d2 < 0) fail_errno("list", path, errno);
  DIR* d = ::fdopendir(d2);
  if (!d) {
    int err = errno;
    ::close(d2);
    fail_errno("list", path, err);
  }
  ::rewinddir(d);
  std::vector<std::string> out;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      out.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// "" when the folder open as `dfd` holds a2pack's marker naming it `name`.
std::string marker_problem(int dfd, const std::string& name) {
  int fd = ::openat(dfd, kFolderMarker, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return fmt::format("it holds no {} file, the mark a2pack puts in the folders it makes",
                       kFolderMarker);
  const std::string want = marker_text(name);
  std::string got(want.size() + 1, '\0');
  struct stat st;
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = ::read(fd, got.data(), got.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(want.size()) || got.compare(0, want.size(), want) != 0)
    return fmt::format("its {} is not the mark a2pack writes for a folder of that name",
                       kFolderMarker);
  return "";
}

// The names in the folder open as `dfd` that a2pack would not remove: a
// folder, or a file that is not one of a dataset folder's.
std::vector<std::string> foreign_entries(int dfd, const std::vector<std::string>& names) {
  std::vector<std::string> odd;
  for (const auto& n : names) {
    struct stat st;
    if (::fstatat(dfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    if (S_ISDIR(st.st_mode)) odd.push_back(printable(n) + "/");
    else if (!is_dataset_file_name(n)) odd.push_back(printable(n));
  }
  return odd;
}

std::string list_some(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 3; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 3) s += fmt::format(" and {} more", names.size() - 3);
  return s;
}

// With `dfd` open on folder `path`: remove every entry, then the folder,
// when it holds nothing but dataset files; "" when done, else why not (and
// then nothing was removed, unless removing itself failed part way).
std::string remove_entries_and_folder(int dfd, const std::string& path) {
  const std::vector<std::string> names = entries(dfd, path);
  if (auto odd = foreign_entries(dfd, names); !odd.empty())
    return fmt::format("it holds {}, which a2pack did not write", list_some(odd));
  for (const auto& n : names)
    if (::unlinkat(dfd, n.c_str(), 0) != 0 && errno != ENOENT)
      return fmt::format("cannot remove {}: {}", printable(n), std::strerror(errno));
  // Only the folder opened: not one put under its name meanwhile.
  struct stat a, b;
  if (::fstat(dfd, &a) != 0 || ::lstat(path.c_str(), &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino)
    return "it was replaced while being removed";
  if (::rmdir(path.c_str()) != 0)
    return fmt::format("cannot remove the folder: {}", std::strerror(errno));
  return "";
}

int open_folder(const std::string& path) {
  return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

bool starts_with(const std::vector<uint8_t>& head, const char* magic, size_t n) {
  return head.size() >= n && std::memcmp(head.data(), magic, n) == 0;
}

// The first `n` bytes of `path` (fewer when it is shorter; none when it
// cannot be read).
std::vector<uint8_t> head_of(const std::string& path, size_t n) {
  std::vector<uint8_t> out(n);
  int fd = open_for_reading(path);
  if (fd < 0) return {};
  ssize_t got = ::pread(fd, out.data(), n, 0);
  ::close(fd);
  out.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return out;
}

}  // namespace

bool is_dataset_file_name(const std::string& name) {
  return name == "steps.npy" || name == "metadata.db" || name == "manifest.json" ||
         name == kJournalName || name == "metadata.db-journal" || name == "metadata.db-wal" ||
         name == "metadata.db-shm" || shard_index(name) || is_temp_name(name);
}

void write_folder_marker(const std::string& dir, const std::string& as) {
  const std::string path = dir + "/" + kFolderMarker;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno("create", path, errno);
  const std::string text = marker_text(as);
  try {
    write_all(fd, text.data(), text.size(), path);
    if (::fsync(fd) != 0) fail_errno("fsync", path, errno);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  fsync_dir(dir);
}

void remove_folder_marker(const std::string& dir) {
  const std::string path = dir + "/" + kFolderMarker;
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return;
    fail_errno("remove", path, errno);
  }
  fsync_dir(dir);
}

std::string why_not_replaceable(const std::string& out) {
  int dfd = open_folder(out);
  if (dfd < 0) fail_errno("open folder", out, errno);
  std::vector<std::string> names, odd;
  try {
    names = entries(dfd, out);
    odd = foreign_entries(dfd, names);
  } catch (...) {
    ::close(dfd);
    throw;
  }
  ::close(dfd);
  if (names.empty()) return "";
  if (!odd.empty())
    return fmt::format("it holds {}, which a dataset folder does not (a dataset holds steps.npy, "
                       "metadata.db and manifest.json)",
                       list_some(odd));
  auto has = [&](const char* n) { return std::binary_search(names.begin(), names.end(), n); };
  if (has("manifest.json")) {
    try {
      read_manifest(out);
    } catch (const Error& e) {
      return fmt::format("its manifest.json is not an a2pack dataset manifest ({})", e.what());
    }
    return "";
  }
  // Upstream's layout: no manifest, steps.npy and metadata.db.
  if (!has("steps.npy") || !has("metadata.db"))
    return fmt::format("it has no manifest.json and no {} (upstream's datasets hold steps.npy "
                       "and metadata.db)",
                       has("steps.npy") ? "metadata.db" : "steps.npy");
  if (!starts_with(head_of(out + "/steps.npy", 6), "\x93NUMPY", 6))
    return "it has no manifest.json and its steps.npy is not an NPY file";
  if (!starts_with(head_of(out + "/metadata.db", 16), "SQLite format 3", 16))
    return "it has no manifest.json and its metadata.db is not an SQLite database";
  return "";
}

void clean_leftover_folders(const std::string& out, const NoteFn& note) {
  const std::string parent = parent_dir(out);
  const std::string base = base_name(out);
  std::vector<std::string> names;
  try {
    names = list_dir(parent);
  } catch (const Error&) {
    return;  // cleaning is best effort; the build reports a folder it cannot use
  }
  for (const auto& name : names) {
    const long pid = leftover_pid(name, base);
    if (pid <= 0 || process_alive(pid)) continue;
    const std::string path = parent + "/" + name;
    int dfd = open_folder(path);
    if (dfd < 0) continue;  // a file or a link: not a folder a build made
    std::string why;
    if (::flock(dfd, LOCK_EX | LOCK_NB) != 0) {
      ::close(dfd);
      continue;  // in use (a build in another PID namespace, or a reader)
    }
    try {
      why = marker_problem(dfd, name);
      if (why.empty()) why = remove_entries_and_folder(dfd, path);
    } catch (const Error& e) {
      why = e.what();
    }
    ::close(dfd);
    if (!note) continue;
    if (why.empty())
      note(fmt::format("removed {}, left by an a2pack build that did not finish (process {} is "
                       "gone)",
                       printable(path), pid));
    else
      note(fmt::format("left {} alone: {}", printable(path), why));
  }
}

std::string remove_build_folder(const std::string& dir) {
  int dfd = open_folder(dir);
  if (dfd < 0) return fmt::format("cannot open it: {}", std::strerror(errno));
  std::string why;
  try {
    why = remove_entries_and_folder(dfd, dir);
  } catch (const Error& e) {
    why = e.what();
  }
  ::close(dfd);
  return why;
}

TempFolder::TempFolder(const std::string& out) {
  // mkdir rather than mkdtemp: the folder becomes the dataset, so it gets the
  // usual permissions (0777 less the umask), not mkdtemp's 0700.
  for (;;) {
    path_ = fmt::format("{}.tmp-{}-{}", out, ::getpid(), g_counter.fetch_add(1));
    if (::mkdir(path_.c_str(), 0777) == 0) break;
    if (errno != EEXIST) fail_errno("create folder", path_, errno);
  }
  fd_ = open_folder(path_);
  // Locked while this build lives, so that no other build takes it for a
  // leftover, whatever the pid in its name means there; marked first thing,
  // so that if this process dies, the next build knows the folder for its own.
  if (fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::rmdir(path_.c_str());
    fail_errno("open folder", path_, err);
  }
  try {
    write_folder_marker(path_, base_name(path_));
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    throw;
  }
}

TempFolder::~TempFolder() {
  if (fd_ < 0) return;  // released
  ::close(fd_);
  // Only files this build wrote are in it.
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void TempFolder::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace a2pack::dataset
