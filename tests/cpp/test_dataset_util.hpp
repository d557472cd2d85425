// Helpers shared by the dataset test files: hand-made runs written as
// .a2run2 folders, and the expected rows computed independently of the
// library's row code (docs/dataset.md read literally).
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "run/codec.hpp"
#include "test_util.hpp"

namespace dstest {

// Run fn in a forked child with A2PACK_TEST_CRASH_AT=point (the library's
// crash points _exit there, as a power cut would); its exit code: the
// crash code, 1 for an exception, 0 when it ran to the end.
inline int run_child(const char* point, const std::function<void()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("A2PACK_TEST_CRASH_AT", point, 1);
    try {
      fn();
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

using a2pack::run::Run;

// A run of n steps. branches: 0 none, 1 all, 2 every other step.
inline Run make_run(uint64_t seed, size_t n, int branches = 1, const char* engine = "test") {
  std::mt19937_64 g(seed);
  Run r;
  r.meta.steps = static_cast<uint32_t>(n);
  r.meta.start_unix_s = 1700000000 + seed;
  r.meta.elapsed_s = 0.5f + static_cast<float>(seed);
  r.meta.max_score = 1000 + seed * 100;
  r.meta.highest_tile = 1u << (7 + seed % 4);
  if (engine) r.meta.engine = engine;
  r.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r.boards[i] = g();
    r.moves[i] = static_cast<uint8_t>(g() % 4);
    bool present = branches == 1 || (branches == 2 && i % 2 == 0);
    r.present[i] = present;
    if (!present) continue;
    uint8_t mask = static_cast<uint8_t>(g() % 16) | static_cast<uint8_t>(1u << r.moves[i]);
    r.legal[i] = mask;
    for (unsigned k = 0; k < 4; ++k) {
      if (!(mask >> k & 1)) continue;
      // Some values outside [0, 1] to exercise the clamp.
      float v = static_cast<float>(static_cast<int>(g() % 1400) - 200) / 1000.0f;
      r.values[4 * i + k] = v;
    }
  }
  r.final_board = g();
  return r;
}

inline void write_runs(const std::string& dir, const std::vector<Run>& runs, size_t first = 0) {
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string bytes = a2pack::run::encode_v2(runs[i]);
    char name[64];
    std::snprintf(name, sizeof name, "/run-%06zu.a2run2", first + i);
    a2pack::write_file_atomic(dir + name, bytes.data(), bytes.size());
  }
}

// The row docs/dataset.md prescribes for step i of run r with id `id`.
struct ExpectedRow {
  uint64_t board;
  uint8_t move, legal;
  float ev[4];
  uint32_t run_id;
  uint16_t step_index;
};

inline ExpectedRow expected_row(const Run& r, size_t i, uint32_t id) {
  ExpectedRow e{};
  e.board = r.boards[i];
  e.move = r.moves[i];
  e.run_id = id;
  e.step_index = static_cast<uint16_t>(i);
  if (r.present[i]) {
    e.legal = r.legal[i];
    for (unsigned k = 0; k < 4; ++k) {
      if (!(e.legal >> k & 1)) continue;
      float v = r.values[4 * i + k];
      e.ev[k] = k == e.move ? 1.0f : (v < 0 ? 0.0f : v > 1 ? 1.0f : v);
    }
  } else {
    e.legal = static_cast<uint8_t>(1u << e.move);
    e.ev[e.move] = 1.0f;
  }
  return e;
}

// Compare one 32-byte row, field by field at the documented offsets.
inline void expect_row(const uint8_t* row, const ExpectedRow& e, const std::string& where) {
  uint64_t board;
  float ev[4];
  uint32_t run_id;
  uint16_t step;
  std::memcpy(&board, row + 0, 8);
  std::memcpy(ev, row + 10, 16);
  std::memcpy(&run_id, row + 26, 4);
  std::memcpy(&step, row + 30, 2);
  EXPECT_EQ(board, e.board) << where;
  EXPECT_EQ(row[8], e.move) << where;
  EXPECT_EQ(row[9], e.legal) << where;
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ev[k], e.ev[k]) << where << " ev[" << k << "]";
  EXPECT_EQ(run_id, e.run_id) << where;
  EXPECT_EQ(step, e.step_index) << where;
}

inline std::string slurp(const std::string& path) {
  auto b = a2test::read_bytes(path);
  return std::string(b.begin(), b.end());
}

// The library error `f` throws, or an A2PACK_OK one when it throws none.
inline a2pack::Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const a2pack::Error& e) {
    return e;
  }
  return a2pack::Error(A2PACK_OK, "");
}

}  // namespace dstest
