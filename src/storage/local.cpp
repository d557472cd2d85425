// Local files as a storage backend: positional reads, the atomic writer
// every format uses, and a folder listing. (Capabilities keep their own
// faster local paths - mmap, O_DIRECT - and use this only through the
// common interface.)
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "storage/backends.hpp"

namespace a2pack::storage {
namespace {

class LocalRead final : public ReadObject {
 public:
  explicit LocalRead(const std::string& path) : fd_(path) {
    url_ = path;
    struct stat st;
    if (::fstat(fd_.fd(), &st) != 0) fail_errno("stat", path, errno);
    if (S_ISDIR(st.st_mode)) fail(A2PACK_E_INVALID_ARGUMENT, "{}: is a folder, not a file", path);
    size_ = static_cast<uint64_t>(st.st_size);
    version_ = fmt::format("{}-{}-{}", st.st_ino, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  }
  ~LocalRead() override { drain(); }

 protected:
  void fetch(uint64_t offset, size_t len, uint8_t* dst) const override { fd_.pread_exact(dst, len, offset); }

 private:
  ReadFd fd_;
};

class LocalWrite final : public WriteObject {
 public:
  LocalWrite(const std::string& path, bool durable) : file_(path), durable_(durable) { url_ = path; }
  void write(const void* data, size_t len) override {
    file_.write(data, len);
    written_ += len;
  }
  void commit() override { file_.commit(durable_); }
  void abort() noexcept override {}  // the AtomicFile removes its temporary file

 private:
  AtomicFile file_;
  bool durable_;
};

}  // namespace

std::unique_ptr<ReadObject> local_open_read(const std::string& path) {
  return std::make_unique<LocalRead>(path);
}

std::unique_ptr<WriteObject> local_open_write(const std::string& path, bool durable) {
  return std::make_unique<LocalWrite>(path, durable);
}

void local_remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail_errno("remove", path, errno);
}

std::vector<std::string> local_list(const std::string& prefix) {
  auto slash = prefix.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : prefix.substr(0, slash);
  std::string stem = slash == std::string::npos ? prefix : prefix.substr(slash + 1);
  if (dir.empty()) dir = "/";
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    fail_errno("list", dir, errno);
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || name.rfind(stem, 0) != 0) continue;
    out.push_back(slash == std::string::npos ? name : prefix.substr(0, slash + 1) + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace a2pack::storage
