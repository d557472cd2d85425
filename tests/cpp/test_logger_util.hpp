// What the logger tests record and expect back.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
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

// Decodes `dir` on one worker in a forked child whose address space is
// limited to `limit` bytes (a container's memory limit), so a decoder that
// sized anything from a frame's claims fails there. Returns the child's exit
// status: 0 when ok(decoded) held, 1 when it did not, 2 when decoding threw,
// -1 when the child did not exit.
template <typename Ok>
int decode_under_address_limit(const std::string& dir, uint64_t limit, Ok ok) {
  pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    rlimit lim{limit, limit};
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
