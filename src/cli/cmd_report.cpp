// `a2pack report IN -o report.html`: a self-contained HTML report (plots and
// a board replay) of a packfile, dataset or logger folder, drawn by the
// Python package with matplotlib - see python_exec.hpp.
#include <memory>

#include "command.hpp"
#include "python_exec.hpp"

namespace a2cli {
namespace {

struct Args {
  std::string in, out, replay, python;
  bool json = false;
};

Registrar reg("report", [](CLI::App& app) {
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand(
      "report", "Write an HTML report (plots, board replay) of a pack, dataset or log folder");
  add_input(c, a->in, "input", "packfile, dataset or logger folder",
            "Packfile, dataset folder or logger folder");
  c->add_option("-o,--output", a->out, "Output .html file")->required();
  c->add_option("--replay", a->replay,
                "Comma-separated runs to replay (pack entries or dataset run ids); default the "
                "best, median and worst");
  c->add_option("--python", a->python, "Python interpreter with a2pack and matplotlib");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->callback([a] {
    require_input_exists(a->in);
    std::vector<std::string> args = {a->in, "-o", a->out};
    if (!a->replay.empty()) args.insert(args.end(), {"--replay", a->replay});
    if (a->json) args.push_back("--json");  // the Python side prints the summary
    exec_python_main(python_interpreter(a->python), "a2pack.report", args, "matplotlib");
  });
});

}  // namespace
}  // namespace a2cli
