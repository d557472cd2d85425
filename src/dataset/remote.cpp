// Opening a dataset in object storage (s3://bucket/ds, gs://bucket/ds).
//
// The small files (metadata.db, manifest.json, and an append journal or any
// other object directly under the folder) are fetched into a local cache folder keyed by the URL and
// the objects' versions (S3 ETag, GCS generation), under
// Settings::cache_dir/datasets, so a second open of an unchanged dataset
// fetches nothing but the rows. steps.npy is streamed into RAM with parallel
// ranged reads (a memfd: memory, never the disk). The dataset is then opened
// by the ordinary code through a private folder of links to these, so every
// check - NPY header, row counts against metadata.db and manifest.json, the
// rows' CRC32C - is the same as for a local dataset; messages name the URL.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/path_prefix.hpp"
#include "dataset/dataset.hpp"
#include "storage/crypto.hpp"
#include "storage/object_store.hpp"
#include "storage/options.hpp"

namespace a2pack::dataset {
namespace {

namespace fs = std::filesystem;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// Fetch `url` into `dest` unless it is there already (atomic: a partial
// download never sits under the final name).
void fetch_to_cache(const storage::ReadObject& obj, const std::string& dest) {
  std::error_code ec;
  if (fs::exists(dest, ec) && fs::file_size(dest, ec) == obj.size()) return;
  std::vector<uint8_t> bytes = obj.read_all(0, static_cast<size_t>(obj.size()));
  write_file_atomic(dest, bytes.data(), bytes.size());
}

// An anonymous in-memory file holding the whole object, fetched in parallel
// ranges straight into its pages.
int fetch_to_memfd(const storage::ReadObject& obj) {
  int fd = ::memfd_create("a2pack-steps.npy", MFD_CLOEXEC);
  if (fd < 0) fail_errno("memfd_create for", obj.url(), errno);
  const uint64_t size = obj.size();
  try {
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) fail_errno("size the in-memory copy of", obj.url(), errno);
    if (size) {
      void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) fail_errno("map the in-memory copy of", obj.url(), errno);
      try {
        storage::ReadRange r{0, static_cast<size_t>(size), static_cast<uint8_t*>(p)};
        obj.read_many(&r, 1);
      } catch (...) {
        ::munmap(p, size);
        throw;
      }
      ::munmap(p, size);
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

struct TempDir {
  std::string path;
  TempDir(const std::string& parent) {
    fs::create_directories(parent);
    std::string tmpl = parent + "/open-XXXXXX";
    if (!::mkdtemp(tmpl.data())) fail_errno("create a folder in", parent, errno);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);  // links and the lock only: the cache stays
  }
};

}  // namespace

std::unique_ptr<Dataset> Dataset::open_remote(const std::string& dir_in, const OpenOptions& o) {
  std::string url = parse_path(dir_in).url();
  while (!url.empty() && url.back() == '/') url.pop_back();
  try {
    // Every object directly under the folder: steps.npy, metadata.db,
    // manifest.json and whatever else is there (an append journal, a stray
    // file), so the ordinary open sees the same names it would see locally
    // and applies the same rules to them.
    std::unique_ptr<storage::ReadObject> steps;
    std::vector<std::pair<std::string, std::unique_ptr<storage::ReadObject>>> small;
    for (const auto& path : storage::list(url + "/")) {
      const std::string name = path.substr(url.size() + 1);
      if (name.empty() || name.find('/') != std::string::npos) continue;  // a subfolder
      if (name == "steps.npy")
        steps = storage::open_read(path);
      else
        small.emplace_back(name, storage::open_read(path));
    }
    if (!steps) fail(A2PACK_E_NOT_FOUND, "{}/steps.npy: missing from the dataset folder", url);
    std::sort(small.begin(), small.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string versions;
    for (const auto& [name, obj] : small)
      versions += name + "|" + obj->version() + "|" + std::to_string(obj->size()) + "\n";
    const std::string root = storage::settings().cache_dir + "/datasets";
    const std::string cache = root + "/" + storage::sha256_hex(url).substr(0, 16) + "-" +
                              storage::sha256_hex(versions).substr(0, 16);
    fs::create_directories(cache);
    for (const auto& [name, obj] : small) fetch_to_cache(*obj, cache + "/" + name);

    int fd = fetch_to_memfd(*steps);
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    TempDir view(root);
    auto link = [&](const std::string& target, const std::string& name) {
      fs::create_symlink(target, view.path + "/" + name);
    };
    // The small files are hard links to the cache (the same file system):
    // a dataset's own files are never read through a symbolic link.
    for (const auto& [name, obj] : small) fs::create_hard_link(cache + "/" + name, view.path + "/" + name);
    link("/proc/self/fd/" + std::to_string(fd), "steps.npy");
    try {
      std::unique_ptr<Dataset> ds = open(view.path, o);
      ds->dir_ = url;
      for (auto& n : ds->notes_) n = replace_all(n, view.path, url);
      return ds;
    } catch (const Error& e) {
      throw Error(e.status(), replace_all(e.what(), view.path, url));
    }
  } catch (const fs::filesystem_error& e) {
    fail(A2PACK_E_IO, "{}: the local cache: {}", url, e.what());
  }
}

}  // namespace a2pack::dataset
