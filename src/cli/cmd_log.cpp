// a2pack log: inspect, decode and export data-logger folders (docs/logger.md).
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_write.hpp"
#include "command.hpp"
#include "python_exec.hpp"

namespace a2cli {
namespace {

// Decode limits (0 = the library's defaults; docs/logger.md, "Limits").
struct Limits {
  uint64_t frame_records = 0, frame_bytes = 0, records = 0, bytes = 0;
  uint64_t expansion = 0;
};

// A decoded folder, released on scope exit.
struct Data {
  a2pack_logger_data* h = nullptr;
  a2pack_logger_columns cols{};
  a2pack_logger_summary sum{};
  double seconds = 0;
  Data(const std::string& dir, bool strict, uint32_t jobs, const Limits& lim) {
    a2pack_logger_decode_options o;
    a2pack_logger_decode_options_init(&o);
    o.strict = strict;
    o.workers = jobs;
    o.max_frame_records = lim.frame_records;
    o.max_frame_bytes = lim.frame_bytes;
    o.max_records = lim.records;
    o.max_bytes = lim.bytes;
    o.max_expansion = lim.expansion;
    double t0 = now_seconds();
    check(a2pack_logger_decode(dir.c_str(), &o, &h));
    seconds = now_seconds() - t0;
    cols.size = sizeof cols;
    check(a2pack_logger_data_columns(h, &cols));
    sum.size = sizeof sum;
    check(a2pack_logger_data_summary(h, &sum));
  }
  ~Data() { a2pack_logger_data_close(h); }
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;

  a2pack_logger_stream_info stream(size_t i) const {
    a2pack_logger_stream_info s;
    s.size = sizeof s;
    check(a2pack_logger_data_stream(h, i, &s));
    return s;
  }
  a2pack_logger_problem problem(size_t i) const {
    a2pack_logger_problem p;
    p.size = sizeof p;
    check(a2pack_logger_data_problem(h, i, &p));
    return p;
  }
  // Problems go to stderr: the data printed on stdout stays clean.
  void report_problems() const {
    for (size_t i = 0; i < sum.problems; ++i) {
      auto p = problem(i);
      if (p.note)
        status("a2pack: note: {}: {}\n", p.path, p.message);
      else
        status("a2pack: warning: {}: offset {}: {} ({})\n", p.path, p.offset,
                   p.message, a2pack_status_name(p.status));
    }
  }
};

struct CommonArgs {
  std::string dir;
  bool strict = false;
  uint32_t jobs = 0;
  Limits limits;
};

void add_common(CLI::App* c, CommonArgs& a) {
  add_input(c, a.dir, "dir", "logger folder",
            "Logger folder: segments/ and streams/, or the single-folder layout (NNNNN.seg.zst "
            "beside streams/)");
  c->add_flag("--strict", a.strict,
              "Fail on the first problem (damaged frame, missing segment, sidecar checksum) or "
              "note instead of skipping it");
  c->add_option("--workers,-j", a.jobs, "Decode threads (0 = all cores)");
  c->add_option("--max-frame-records", a.limits.frame_records,
                "Skip frames of more records (default 2^24)");
  c->add_option("--max-frame-bytes", a.limits.frame_bytes,
                "Skip frames that decompress to more bytes (default 2^28)");
  c->add_option("--max-records", a.limits.records,
                "Decode at most this many records (default 2^30)");
  c->add_option("--max-bytes", a.limits.bytes,
                "Decompress at most this many frame bytes (default 2^35)");
  c->add_option("--max-expansion", a.limits.expansion,
                "Skip frames that decompress to more than this many times their size on disk "
                "(default 1024)");
}

// ---------------------------------------------------------------- info

struct InfoArgs {
  CommonArgs c;
  bool json = false;
};

void run_info(const InfoArgs& a) {
  Data d(a.c.dir, a.c.strict, a.c.jobs, a.c.limits);
  std::map<uint32_t, uint64_t> per_stream;
  for (size_t r = 0; r < d.cols.n_records; ++r) ++per_stream[d.cols.stream_ids[r]];
  double rate = d.seconds > 0 ? static_cast<double>(d.sum.raw_bytes) / d.seconds : 0;
  if (a.json) {
    nlohmann::json j = {{"dir", a.c.dir},
                        {"segments", d.sum.segments},
                        {"file_bytes", d.sum.file_bytes},
                        {"frames", d.sum.frames},
                        {"bad_frames", d.sum.bad_frames},
                        {"raw_bytes", d.sum.raw_bytes},
                        {"records", d.sum.records},
                        {"values", d.sum.values},
                        {"decode_seconds", d.seconds}};
    nlohmann::json streams = nlohmann::json::array();
    for (size_t i = 0; i < d.sum.streams; ++i) {
      auto s = d.stream(i);
      streams.push_back({{"stream_id", s.stream_id},
                         {"epoch_scale", s.epoch_scale},
                         {"value_scale", s.value_scale},
                         {"sort", (s.flags & A2PACK_LOGGER_SORT) != 0},
                         {"records", per_stream[s.stream_id]},
                         {"labels", nlohmann::json::parse(s.labels_json)}});
    }
    j["streams"] = streams;
    nlohmann::json problems = nlohmann::json::array();
    for (size_t i = 0; i < d.sum.problems; ++i) {
      auto p = d.problem(i);
      problems.push_back({{"path", p.path},
                          {"offset", p.offset},
                          {"status", a2pack_status_name(p.status)},
                          {"note", p.note != 0},
                          {"message", p.message}});
    }
    j["problems"] = problems;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("{}\n", a.c.dir);
  fmt::print("  segments   {} ({})\n", d.sum.segments, human_bytes(static_cast<double>(d.sum.file_bytes)));
  fmt::print("  frames     {} good, {} skipped\n", d.sum.frames, d.sum.bad_frames);
  fmt::print("  records    {}  ({} non-zeros, {:.1f} per record)\n", d.sum.records, d.sum.values,
             d.sum.records ? static_cast<double>(d.sum.values) / static_cast<double>(d.sum.records) : 0.0);
  fmt::print("  encoded    {} before compression, {:.2f} bytes/record on disk, ratio {:.2f}\n",
             human_bytes(static_cast<double>(d.sum.raw_bytes)),
             d.sum.records ? static_cast<double>(d.sum.file_bytes) / static_cast<double>(d.sum.records) : 0.0,
             d.sum.file_bytes ? static_cast<double>(d.sum.raw_bytes) / static_cast<double>(d.sum.file_bytes) : 0.0);
  fmt::print("  decoded in {:.3f}s ({}/s of frames)\n", d.seconds, human_bytes(rate));
  fmt::print("  streams    {}\n", d.sum.streams);
  for (size_t i = 0; i < d.sum.streams; ++i) {
    auto s = d.stream(i);
    fmt::print("    {:>5}  {:>10} records  epoch_scale {:<8} value_scale {:<8}{} {}\n", s.stream_id,
               per_stream[s.stream_id], s.epoch_scale, s.value_scale,
               (s.flags & A2PACK_LOGGER_SORT) ? " sort" : "", s.labels_json);
  }
  if (d.sum.problems > d.sum.notes)
    fmt::print("  problems   {} (listed on stderr)\n", d.sum.problems - d.sum.notes);
  if (d.sum.notes) fmt::print("  notes      {} (listed on stderr)\n", d.sum.notes);
  d.report_problems();
}

// ---------------------------------------------------------------- decode

struct DecodeArgs {
  CommonArgs c;
  std::vector<uint32_t> streams;
  uint64_t limit = 0;
};

// One record per line as JSON: {"stream_id":..,"epoch":..,"indices":[..],"values":[..]}.
// Floats in their shortest round-trip form.
void run_decode(const DecodeArgs& a) {
  Data d(a.c.dir, a.c.strict, a.c.jobs, a.c.limits);
  std::set<uint32_t> want(a.streams.begin(), a.streams.end());
  std::string line;
  uint64_t printed = 0;
  for (size_t r = 0; r < d.cols.n_records; ++r) {
    if (!want.empty() && !want.count(d.cols.stream_ids[r])) continue;
    if (a.limit && printed == a.limit) break;
    line.clear();
    fmt::format_to(std::back_inserter(line), "{{\"stream_id\":{},\"epoch\":{},\"indices\":[",
                   d.cols.stream_ids[r], d.cols.epochs[r]);
    uint64_t b = d.cols.offsets[r], e = d.cols.offsets[r + 1];
    for (uint64_t k = b; k < e; ++k)
      fmt::format_to(std::back_inserter(line), "{}{}", k > b ? "," : "", d.cols.indices[k]);
    line += "],\"values\":[";
    for (uint64_t k = b; k < e; ++k)
      fmt::format_to(std::back_inserter(line), "{}{}", k > b ? "," : "", d.cols.values[k]);
    line += "]}\n";
    write_stdout(line.data(), line.size());
    ++printed;
  }
  std::fflush(stdout);
  d.report_problems();
}

// ---------------------------------------------------------------- to-parquet

struct ParquetArgs {
  std::string dir, out, python = default_python();
  bool strict = false;
  bool json = false;
  bool label_columns = false;
};

// Parquet is written by the Python package (pyarrow), which this library
// does not link (no Arrow C++ on the build machines): the command runs
// `a2pack.logger.main(["to-parquet", DIR, OUT])` in `--python` (python3),
// which loads the same liba2pack as this process (python_exec.hpp).
void run_to_parquet(const ParquetArgs& a) {
  std::vector<std::string> args = {"to-parquet", a.dir, a.out};
  if (a.strict) args.push_back("--strict");
  if (a.label_columns) args.push_back("--label-columns");
  if (a.json) args.push_back("--json");  // the Python side prints the summary
  exec_python_main(a.python, "a2pack.logger", args, "pyarrow");
}

Registrar reg("log", [](CLI::App& app) {
  auto* log = app.add_subcommand("log", "Data-logger folders: sparse-vector records in zstd segments");
  log->require_subcommand(1);

  auto ia = std::make_shared<InfoArgs>();
  auto* info = log->add_subcommand("info", "Segments, frames, records, streams and damage of a folder");
  add_common(info, ia->c);
  info->add_flag("--json", ia->json, "Print the summary as JSON (docs/cli.md)");
  info->callback([ia] { run_info(*ia); });

  auto da = std::make_shared<DecodeArgs>();
  auto* dec = log->add_subcommand("decode", "Print records as JSON lines (stream_id, epoch, indices, values)");
  add_common(dec, da->c);
  dec->add_option("--stream,-s", da->streams, "Only these stream ids")->delimiter(',');
  dec->add_option("--limit,-n", da->limit, "Print at most this many records");
  dec->callback([da] { run_decode(*da); });

  auto pa = std::make_shared<ParquetArgs>();
  auto* pq = log->add_subcommand(
      "to-parquet", "Write stream_id, epoch, indices, values as Parquet (runs the Python package)");
  InputGroup& in = add_input(pq, pa->dir, "dir", "logger folder", "Logger folder");
  add_output(pq, pa->out, "out", "Output .parquet file", &in);
  pq->add_option("--python", pa->python, "Python interpreter with a2pack and pyarrow");
  pq->add_flag("--strict", pa->strict, "Fail on the first damaged frame");
  pq->add_flag("--json", pa->json, "Print the summary as JSON (docs/cli.md)");
  pq->add_flag("--label-columns", pa->label_columns,
               "Add a dictionary-encoded label_<key> column per stream label key");
  pq->callback([pa, pq] {
    require_output(pa->out, pq);
    require_input_exists(pa->dir);
    run_to_parquet(*pa);
  });
});

}  // namespace
}  // namespace a2cli
