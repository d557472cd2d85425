// `a2pack to-parquet IN OUT`: a packfile or dataset folder as Parquet (steps
// or runs), written by the Python package (pyarrow) over the library's Arrow
// export - see python_exec.hpp for why it runs Python.
#include <memory>

#include "command.hpp"
#include "python_exec.hpp"

namespace a2cli {
namespace {

struct Args {
  std::string in, out, layout = "steps", python;
  uint64_t row_group_size = 1 << 20;
  std::vector<int64_t> run_ids;
  int64_t min_score = -1, max_score = -1;
  bool json = false;
};

Registrar reg("to-parquet", [](CLI::App& app) {
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand(
      "to-parquet", "Write a packfile or dataset as Parquet (DuckDB/Polars-readable; runs Python)");
  InputGroup& in = add_input(c, a->in, "input", "packfile or dataset folder", "Packfile or dataset folder");
  add_output(c, a->out, "out", "Output .parquet file", &in);
  choices(c->add_option("--layout", a->layout, "steps (one row per step) or runs (one row per run)"),
          {"steps", "runs"});
  c->add_option("--row-group-size", a->row_group_size, "Rows per Parquet row group")
      ->check(CLI::PositiveNumber);
  c->add_option("--run-ids", a->run_ids, "Only these runs (dataset run ids or pack entries)")
      ->delimiter(',');
  c->add_option("--min-score", a->min_score, "Only runs with max_score >= this");
  c->add_option("--max-score", a->max_score, "Only runs with max_score <= this");
  c->add_option("--python", a->python, "Python interpreter with a2pack and pyarrow");
  c->add_flag("-q,--quiet,--no-progress", globals().quiet, "Print only data and errors (no progress, status lines or warnings)");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->callback([a, c] {
    require_output(a->out, c);
    require_input_exists(a->in);
    std::vector<std::string> args = {a->in, a->out, "--layout", a->layout, "--row-group-size",
                                     std::to_string(a->row_group_size)};
    if (!a->run_ids.empty()) {
      std::string ids;
      for (auto id : a->run_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
      args.insert(args.end(), {"--run-ids", ids});
    }
    if (a->min_score >= 0) args.insert(args.end(), {"--min-score", std::to_string(a->min_score)});
    if (a->max_score >= 0) args.insert(args.end(), {"--max-score", std::to_string(a->max_score)});
    if (globals().quiet) args.push_back("--quiet");
    if (a->json) args.push_back("--json");  // the Python side prints the summary
    exec_python_main(python_interpreter(a->python), "a2pack.to_parquet", args, "pyarrow");
  });
});

}  // namespace
}  // namespace a2cli
