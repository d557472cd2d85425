#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "command.hpp"

namespace a2cli {

int exit_code_for(a2pack_status st) {
  switch (st) {
    case A2PACK_OK: return kExitOk;
    case A2PACK_E_INVALID_ARGUMENT: return kExitUsage;
    case A2PACK_E_IO:
    case A2PACK_E_NOT_FOUND:
    case A2PACK_E_NO_MEMORY:
    case A2PACK_E_FULL:
    case A2PACK_E_INTERRUPTED: return kExitSystem;
    case A2PACK_E_INTERNAL: return kExitInternal;
    default: return kExitDataProblem;  // corrupt, checksum, unsupported, out of range, closed
  }
}

void check(a2pack_status st) {
  if (st != A2PACK_OK) throw CliError(a2pack_last_error(), exit_code_for(st));
}

void print_skipped(const std::string& label, a2pack_status status, const std::string& message) {
  std::string why = message;
  if (why.size() > label.size() + 2 && why.compare(0, label.size(), label) == 0 &&
      why.compare(label.size(), 2, ": ") == 0)
    why.erase(0, label.size() + 2);
  fmt::print(stderr, "a2pack: skipped {} ({}): {}\n", label, a2pack_status_name(status), why);
}

Globals& globals() {
  static Globals g;
  return g;
}

std::vector<Registered>& registry() {
  static std::vector<Registered> r;
  return r;
}

Registrar::Registrar(const char* name, Setup setup) { registry().push_back({name, std::move(setup)}); }

static int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
double now_seconds() { return static_cast<double>(now_ns()) * 1e-9; }

std::string UsageFormatter::make_usage(const CLI::App* app, std::string) const {
  std::string path;
  for (const CLI::App* a = app; a; a = a->get_parent()) {
    const std::string n = a->get_parent() ? a->get_name() : "a2pack";
    path = path.empty() ? n : n + " " + path;
  }
  return CLI::Formatter::make_usage(app, path);
}

void add_output(CLI::App* c, std::string& out, const std::string& positional,
                const std::string& what, InputGroup* in) {
  auto* pos = c->add_option(positional, out, what + " (or -o/--output)");
  auto* opt = c->add_option("-o,--output", out, what);
  pos->excludes(opt);
  if (in) {
    in->output = &out;
    in->output_options = {pos, opt};
  }
}

void require_output(const std::string& out, const CLI::App* c) {
  if (out.empty())
    throw UsageError(fmt::format("{}: no output given: name it with -o/--output (or as the "
                                 "argument after the input)",
                                 c->get_name()));
}

// The venv of the clone this program was built in: a tool at
// <clone>/<build folder>/a2pack, where <clone> holds include/a2pack.h and
// .venv/bin/python (what `make` sets up). Empty for an installed tool.
static std::string checkout_venv_python() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  std::filesystem::path clone = exe.parent_path().parent_path();
  std::filesystem::path python = clone / ".venv" / "bin" / "python";
  if (std::filesystem::is_regular_file(clone / "include" / "a2pack.h", ec) &&
      ::access(python.c_str(), X_OK) == 0)
    return python.string();
  return {};
}

std::string default_python() {
  const char* env = std::getenv("A2PACK_PYTHON");
  if (env && *env) return env;
  std::string venv = checkout_venv_python();
  return venv.empty() ? "python3" : venv;
}

Progress::Progress(std::string label, bool enabled)
    : label_(std::move(label)), active_(enabled && !globals().quiet && ::isatty(2)), start_ns_(now_ns()) {}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t done, uint64_t total) {
  if (!active_) return;
  int64_t t = now_ns();
  if (done < total && t - last_draw_ns_ < 100'000'000) return;  // 10 redraws a second at most
  last_draw_ns_ = t;
  const int width = 30;
  double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  int filled = static_cast<int>(frac * width);
  double secs = static_cast<double>(t - start_ns_) * 1e-9;
  std::string eta = "";
  if (done && done < total) eta = fmt::format(" eta {:.0f}s", secs / frac - secs);
  fmt::print(stderr, "\r{} [{}{}] {}/{} {:.0f}s{}\x1b[K", label_, std::string(filled, '#'),
             std::string(width - filled, '.'), done, total, secs, eta);
  std::fflush(stderr);
}

void Progress::finish() {
  if (active_ && !finished_ && last_draw_ns_) fmt::print(stderr, "\n");
  finished_ = true;
}

int Progress::callback(void* self, uint64_t done, uint64_t total) {
  static_cast<Progress*>(self)->update(done, total);
  return 0;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) { b /= 1000; ++u; }
  return u ? fmt::format("{:.1f} {}", b, units[u]) : fmt::format("{:.0f} B", b);
}

std::string board_grid(uint64_t board, const std::string& indent) {
  std::string out;
  for (int r = 0; r < 4; ++r) {
    out += indent;
    for (int c = 0; c < 4; ++c) {
      unsigned e = (board >> (60 - 4 * (4 * r + c))) & 0xF;
      out += e ? fmt::format("{:>6}", 1u << e) : fmt::format("{:>6}", ".");
    }
    out += "\n";
  }
  return out;
}

}  // namespace a2cli
