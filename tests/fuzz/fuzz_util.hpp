// Shared by the fuzz targets: a private scratch folder per process, writing a
// fuzzer's input to a file there (the packfile, record-file, logger and
// dataset readers take paths, as users call them), reading seed files, and
// the check every failed call gets.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <a2pack.h>

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

// The whole of a file, or "" when it cannot be opened.
inline std::string read_file(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
    std::fclose(f);
  }
  return s;
}

// A failed call must leave a message; a status without one is a bug.
inline void expect_message(a2pack_status status) {
  if (status != A2PACK_OK) {
    const char* m = a2pack_last_error();
    if (!m || !*m) { std::fprintf(stderr, "status %d without a message\n", status); std::abort(); }
  }
}

}  // namespace fuzz
