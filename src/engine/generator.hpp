// Playing games and writing them as run files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "run/codec.hpp"

namespace a2pack::engine {

enum class Policy { expectimax = 0, greedy = 1, random = 2 };

struct GenOptions {
  Policy policy = Policy::expectimax;
  unsigned depth = 2;              // expectimax depth in moves
  run::Kind format = run::Kind::v2;
  unsigned jobs = 0;               // 0 = all cores
  uint64_t start_unix_s = 1755000000;
  uint32_t max_steps = 0;          // 0 = until game over
};

// Throws Error INVALID_ARGUMENT for an unknown policy or an expectimax depth
// outside 1..6 (play_game and generate_dir check this themselves).
void check_options(const GenOptions& opts);

// Play one game; deterministic in (options, seed).
run::Run play_game(const GenOptions& opts, uint64_t seed);

// Seed of run i of a generation with master seed `seed`.
uint64_t run_seed(uint64_t seed, uint64_t i);

// Play n games into dir/run-NNNNNN.a2run2 (atomic writes). progress(done,
// total) returns false to stop (then Error INTERRUPTED).
void generate_dir(const GenOptions& opts, const std::string& dir, uint64_t n, uint64_t seed,
                  const std::function<bool(uint64_t, uint64_t)>& progress);

}  // namespace a2pack::engine
