// Shared by the fuzz targets: a private scratch folder per process, and
// writing a fuzzer's input to a file there (the packfile, record-file and
// logger readers take paths, as users call them).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fuzz {

inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("A2PACK_FUZZ_TMP");
    if (!base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string d = std::string(base) + "/a2pack-fuzz-" + std::to_string(getpid());
    mkdir(d.c_str(), 0700);
    return d;
  }();
  return dir;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t len) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) { std::perror(path.c_str()); std::abort(); }
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, data + done, len - done);
    if (n <= 0) { std::perror(path.c_str()); std::abort(); }
    done += static_cast<size_t>(n);
  }
  close(fd);
}

// A failed call must leave a message; a status without one is a bug.
inline void expect_message(int status, const char* (*last_error)()) {
  if (status != 0) {
    const char* m = last_error();
    if (!m || !*m) { std::fprintf(stderr, "status %d without a message\n", status); std::abort(); }
  }
}

}  // namespace fuzz
