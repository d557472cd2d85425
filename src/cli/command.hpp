// The a2pack CLI: a thin client of the public C API (include/a2pack.h only).
// Each subcommand lives in its own cmd_*.cpp and registers itself here, so
// adding a command never edits a shared list.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "a2pack.h"

namespace a2cli {

// The tool's exit statuses, documented in `a2pack --help` and the README.
enum ExitCode : int {
  kExitOk = 0,
  kExitDataProblem = 1,  // the input is damaged or a check found problems
  kExitUsage = 2,        // bad command line: unknown flag, missing or invalid value
  kExitSystem = 3,       // the system failed: file not found, I/O, memory, network
  kExitInternal = 4,     // a bug in a2pack
};

// Thrown by commands for a one-line error on stderr; the exit status says
// what kind of failure it was (a data problem unless told otherwise).
struct CliError : std::runtime_error {
  explicit CliError(const std::string& what, int exit_code = kExitDataProblem)
      : std::runtime_error(what), exit_code(exit_code) {}
  int exit_code;
};

// A command line the command cannot act on (exit status 2).
struct UsageError : CliError {
  explicit UsageError(const std::string& what) : CliError(what, kExitUsage) {}
};

// The exit status for a library status.
int exit_code_for(a2pack_status st);

// Throw CliError with a2pack_last_error() unless st is A2PACK_OK.
void check(a2pack_status st);

// Global flags every command may read.
struct Globals {
  bool quiet = false;
};
Globals& globals();

// A status line ("wrote ...", "packed ...", "OK: ...") or a warning or note:
// on stderr, as upstream's tool prints them, so stdout carries only data
// (reports, JSON, records); -q/--quiet silences them (errors still print).
template <typename... T>
void status(fmt::format_string<T...> f, T&&... args) {
  if (globals().quiet) return;
  fmt::print(stderr, f, std::forward<T>(args)...);
}

// "a2pack: skipped LABEL (STATUS): WHY" on stderr for an input --skip-bad
// skipped; the library's message, which begins with the label itself, names
// it once.
void print_skipped(const std::string& label, a2pack_status status, const std::string& message);

// CLI11's help with usage lines that name the whole command path.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override;
};

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

// The output of a command that writes one file: `-o/--output PATH`, or the
// positional argument named `positional` after the inputs (input before
// output, as in `cp`). Call require_output() in the callback. `in`: the
// command's input, when it may be named by an option (`-i IN OUT`).
struct InputGroup;
void add_output(CLI::App* c, std::string& out, const std::string& positional,
                const std::string& what, InputGroup* in = nullptr);
// UsageError naming the command when no output was given either way.
void require_output(const std::string& out, const CLI::App* c);

// The one thing a command reads: the positional argument `name` (`a2pack
// stats P.a2pack`), or -i/--input (without -i where the command uses it for
// something else: `short_i` false), or the command's older spellings
// (`older`, e.g. "--packfile" or "-d,--dataset"); all bound to `value`. Once:
// check_inputs() (run by main after parsing, before any command) refuses it
// given twice, and, when `required`, not given. `what` names it in those
// errors ("packfile", "dataset folder") and `help` in --help.
struct InputGroup {
  CLI::App* app = nullptr;
  std::string* value = nullptr;
  std::string what;
  CLI::Option* positional = nullptr;
  std::vector<CLI::Option*> named;  // -i/--input and the older spellings; more may be added
  bool required = true;
  // A command whose output may be positional too (`bag convert -i IN OUT`):
  // the output positional and -o/--output. With the input named and OUT
  // given, OUT lands in the input's positional; check_inputs moves it.
  std::string* output = nullptr;
  std::vector<CLI::Option*> output_options;
};
InputGroup& add_input(CLI::App* c, std::string& value, const std::string& name,
                      const std::string& what, const std::string& help,
                      const std::string& older = "", bool short_i = true, bool required = true);
// Before parsing `args` (in order): the argument is required of the chosen
// command unless an option names the input. CLI11 then keeps a word for it
// from a list option before it (`bag cat -i 1 2 B.bagz`), as it does for
// any required argument, and reports it missing (input_missing below).
void prepare_inputs(CLI::App& root, const std::vector<std::string>& args);
// UsageError for an input given twice or a required one missing, in the
// commands that were chosen (`root` is the tool's top-level app).
void check_inputs(const CLI::App& root);
// "no packfile given: name it as the argument (a2pack stats PACKFILE) or
// with -i/--input/--packfile" when `positional` is a command's input
// argument; empty otherwise.
std::string input_missing(const CLI::Option* positional);

// An option (or positional) that takes one of `values`: checked (the error
// names the values) and completed by the shell scripts. `refused` values are
// accepted by the parser but not completed: the command refuses them with a
// message of its own.
CLI::Option* choices(CLI::Option* opt, std::vector<std::string> values,
                     std::vector<std::string> refused = {});
// Values the completion scripts offer for an option checked otherwise (a
// small range: `--depth`).
CLI::Option* complete_values(CLI::Option* opt, std::vector<std::string> values);
// What completion offers for opt's value: empty for anything (file names).
const std::vector<std::string>& completion_values(const CLI::Option* opt);

// The Python interpreter that Python-backed commands (Parquet export,
// reports) run: $A2PACK_PYTHON (the wheel's console script sets it to its
// own interpreter), else the venv of the clone a tool in a clone's build
// folder was built in (.venv/bin/python, as `make` makes it), else python3
// from PATH.
std::string default_python();

// The .a2run2 files in `dir` (and its subfolders when `recursive`; links
// to folders are not followed), sorted. Throws CliError when `dir` is
// missing, not a folder or cannot be read.
std::vector<std::string> list_run_files(const std::string& dir, bool recursive);

// Monotonic seconds, for throughput reports.
double now_seconds();

// "12.3 MB" style sizes.
std::string human_bytes(double bytes);

// A board drawn as a 4x4 grid of tile values.
std::string board_grid(uint64_t board, const std::string& indent = "  ");

}  // namespace a2cli
