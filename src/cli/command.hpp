// The a2pack CLI: a thin client of the public C API (include/a2pack.h only).
// Each subcommand lives in its own cmd_*.cpp and registers itself here, so
// adding a command never edits a shared list.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "a2pack.h"

namespace a2cli {

// Thrown by commands for a one-line error on stderr and exit status 1.
struct CliError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throw CliError with a2pack_last_error() unless st is A2PACK_OK.
void check(a2pack_status st);

// Global flags every command may read.
struct Globals {
  bool quiet = false;
};
Globals& globals();

// A subcommand: `setup` adds it to the app (add_subcommand) and sets its
// callback, which CLI11 runs when that subcommand was chosen.
using Setup = std::function<void(CLI::App& app)>;
struct Registrar {
  Registrar(const char* name, Setup setup);
};
struct Registered {
  const char* name;
  Setup setup;
};
std::vector<Registered>& registry();

// A progress bar on stderr, drawn only when stderr is a terminal and --quiet
// was not given. Usable as an a2pack_progress_fn through `callback`.
class Progress {
 public:
  Progress(std::string label, bool enabled = true);
  ~Progress();
  void update(uint64_t done, uint64_t total);
  void finish();
  static int callback(void* self, uint64_t done, uint64_t total);

 private:
  std::string label_;
  bool active_;
  int64_t last_draw_ns_ = 0;
  int64_t start_ns_;
  bool finished_ = false;
};

// Monotonic seconds, for throughput reports.
double now_seconds();

// "12.3 MB" style sizes.
std::string human_bytes(double bytes);

// A board drawn as a 4x4 grid of tile values.
std::string board_grid(uint64_t board, const std::string& indent = "  ");

}  // namespace a2cli
