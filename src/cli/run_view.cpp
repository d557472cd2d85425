#include "run_view.hpp"

#include <fmt/format.h>

#include <array>
#include <vector>

#include "command.hpp"

namespace a2cli {

std::string steps_mismatch(const a2pack_run* run) {
  a2pack_run_meta m{};
  m.size = sizeof m;
  check(a2pack_run_get_meta(run, &m));
  const size_t n = a2pack_run_step_count(run);
  if (m.steps == n) return {};
  return fmt::format("meta.steps {} but the run stores {} steps", m.steps, n);
}
namespace {

struct Counts {
  std::array<uint64_t, 4> moves{};
  uint64_t with_branches = 0;
  uint64_t first_board = 0, last_board = 0;
};

Counts count(const a2pack_run* run) {
  size_t n = a2pack_run_step_count(run);
  std::vector<uint64_t> boards(n);
  std::vector<uint8_t> moves(n), present(n);
  check(a2pack_run_get_steps(run, 0, n, boards.data(), moves.data(), nullptr, nullptr,
                             present.data()));
  Counts c;
  for (size_t i = 0; i < n; ++i) {
    c.moves[moves[i] & 3]++;
    c.with_branches += present[i];
  }
  c.first_board = n ? boards[0] : a2pack_run_final_board(run);
  c.last_board = a2pack_run_final_board(run);
  return c;
}

a2pack_run_meta meta_of(const a2pack_run* run) {
  a2pack_run_meta m{};
  m.size = sizeof m;
  check(a2pack_run_get_meta(run, &m));
  return m;
}

const char* kind_name(a2pack_run_kind k) {
  return k == A2PACK_RUN_V1 ? "v1" : k == A2PACK_RUN_V2 ? "v2" : "unknown";
}

}  // namespace

nlohmann::json run_summary_json(const a2pack_run* run) {
  a2pack_run_meta m = meta_of(run);
  Counts c = count(run);
  nlohmann::json j;
  j["kind"] = kind_name(a2pack_run_source_kind(run));
  j["meta"] = {{"steps", m.steps},
               {"start_unix_s", m.start_unix_s},
               {"elapsed_s", m.elapsed_s},
               {"max_score", m.max_score},
               {"highest_tile", m.highest_tile},
               {"engine", m.has_engine ? nlohmann::json(std::string(m.engine, m.engine_len))
                                       : nlohmann::json(nullptr)}};
  j["step_count"] = a2pack_run_step_count(run);
  j["steps_with_branches"] = c.with_branches;
  j["moves"] = {{"UP", c.moves[0]}, {"DOWN", c.moves[1]}, {"LEFT", c.moves[2]}, {"RIGHT", c.moves[3]}};
  j["first_board"] = fmt::format("{:#018x}", c.first_board);
  j["final_board"] = fmt::format("{:#018x}", c.last_board);
  j["final_score"] = a2pack_board_score(c.last_board);
  return j;
}

std::string run_summary_text(const a2pack_run* run) {
  a2pack_run_meta m = meta_of(run);
  Counts c = count(run);
  std::string s;
  s += fmt::format("kind          {}\n", kind_name(a2pack_run_source_kind(run)));
  s += fmt::format("steps         {} (meta.steps {})\n", a2pack_run_step_count(run), m.steps);
  s += fmt::format("start_unix_s  {}\n", m.start_unix_s);
  s += fmt::format("elapsed_s     {:.4f}\n", m.elapsed_s);
  s += fmt::format("max_score     {}\n", m.max_score);
  s += fmt::format("highest_tile  {}\n", m.highest_tile);
  s += fmt::format("engine        {}\n",
                   m.has_engine ? std::string(m.engine, m.engine_len) : std::string("(none)"));
  s += fmt::format("branches      {} of {} steps\n", c.with_branches, a2pack_run_step_count(run));
  s += fmt::format("moves         Up {} / Down {} / Left {} / Right {}\n", c.moves[0], c.moves[1],
                   c.moves[2], c.moves[3]);
  s += fmt::format("first board   {:#018x}\n", c.first_board);
  s += board_grid(c.first_board, "    ");
  s += fmt::format("final board   {:#018x} (score {})\n", c.last_board,
                   a2pack_board_score(c.last_board));
  s += board_grid(c.last_board, "    ");
  return s;
}

}  // namespace a2cli
