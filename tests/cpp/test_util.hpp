// Helpers shared by the C++ test files.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
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

}  // namespace a2test
