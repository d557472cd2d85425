// What the logger tests record and expect back.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "logger/decoder.hpp"

namespace a2test {

// One sparse-vector record of a stream.
struct Rec {
  uint32_t stream = 0;
  double epoch = 0;
  std::vector<uint32_t> idx;
  std::vector<double> val;
};

// Decodes `dir` on one worker in a forked child that may map at most
// `limit` bytes more than it inherited (a container's memory limit), so a
// decoder that sized anything from a frame's claims fails there. Counted
// from what the child has (the test binary's other tests may have left
// threads and mappings behind), not from zero. Returns the child's exit
// status: 0 when ok(decoded) held, 1 when it did not, 2 when decoding threw,
// -1 when the child did not exit.
template <typename Ok>
int decode_under_address_limit(const std::string& dir, uint64_t limit, Ok ok) {
  pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    unsigned long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const uint64_t have = uint64_t{pages} * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    rlimit lim{have + limit, have + limit};
    ::setrlimit(RLIMIT_AS, &lim);
    try {
      a2pack::logger::DecodeOptions one;
      one.workers = 1;
      ::_exit(ok(a2pack::logger::decode_dir(dir, one)) ? 0 : 1);
    } catch (...) {
      ::_exit(2);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace a2test
