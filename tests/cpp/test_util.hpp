// Helpers shared by the C++ test files.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "../capi/capi_test_util.hpp"
#include "base/error.hpp"

namespace a2test {

// The status `f` fails with (A2PACK_OK when it does not throw); the message
// goes to `msg` when given.
inline a2pack_status status_of(const std::function<void()>& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const a2pack::Error& e) {
    if (msg) *msg = e.what();
    return e.status();
  }
  return A2PACK_OK;
}

// The upstream fixture and whole-file reads: the C API tests' helpers
// (public header only), shared.
using capitest::fixture_bytes;
using capitest::fixture_path;
using capitest::read_bytes;

inline void write_bytes(const std::string& path, const void* data, size_t len) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(len));
}

// A fresh temporary folder removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "a2pack-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : throw std::runtime_error("mkdtemp failed");
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Hostile folders for the tests of writers (tests/python/hostile_fs.py is
// the Python side): symbolic links planted at the temporary names
// "<final_name>.tmp-<pid>-<n>" a writer will try, and a snapshot of what lies
// outside the writer's folder to compare before and after.

// Links dir/<final_name>.tmp-<pid>-<n> -> target for n in [first, first + count).
inline std::vector<std::string> plant_links_at_temp_names(const std::string& dir,
                                                          const std::string& final_name,
                                                          const std::string& target,
                                                          uint64_t first = 0, uint64_t count = 16,
                                                          long pid = ::getpid()) {
  std::vector<std::string> links;
  for (uint64_t n = first; n < first + count; ++n) {
    std::string link = dir + "/" + final_name + ".tmp-" + std::to_string(pid) + "-" + std::to_string(n);
    std::filesystem::create_symlink(target, link);
    links.push_back(link);
  }
  return links;
}

// Every entry under `root`, links not followed: relative path -> "file:" and
// the bytes, "link:" and the target, or "dir".
inline std::map<std::string, std::string> tree_snapshot(const std::string& root) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    std::string rel = fs::relative(e.path(), root).string();
    if (e.is_symlink()) {
      out[rel] = "link:" + fs::read_symlink(e.path()).string();
    } else if (e.is_directory()) {
      out[rel] = "dir";
    } else {
      std::ifstream f(e.path(), std::ios::binary);
      out[rel] = "file:" + std::string(std::istreambuf_iterator<char>(f), {});
    }
  }
  return out;
}

}  // namespace a2test
