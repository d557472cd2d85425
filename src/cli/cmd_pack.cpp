// a2pack pack: every .a2run2 file under a folder into one packfile.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "pack_util.hpp"

namespace a2cli {
namespace {

struct PackArgs {
  std::string input, output;
  uint32_t align = 4096;
  std::string compress = "none";
  int32_t zstd_level = 3;
  int32_t lz4_level = 0;
  bool no_crc = false;
  bool entry_crc = true;  // upstream's --entry-crc (its default); --entry-crc=false = --no-crc
  uint32_t workers = 0;
  bool skip_bad = false;
  bool json = false;
};

void report_bad(void* /*user*/, const char* path, a2pack_status status, const char* message) {
  print_skipped(path, status, message);
}

void run_pack(const PackArgs& a) {
  a2pack_pack_writer_options o;
  a2pack_pack_writer_options_init(&o);
  o.align = a.align;
  o.entry_crc = !a.no_crc && a.entry_crc;
  o.compression = a.compress == "zstd"  ? A2PACK_PACK_COMPRESS_ZSTD
                  : a.compress == "lz4" ? A2PACK_PACK_COMPRESS_LZ4
                                        : A2PACK_PACK_COMPRESS_NONE;
  o.zstd_level = a.zstd_level;
  o.lz4_level = a.lz4_level;
  o.workers = a.workers;
  o.skip_bad = a.skip_bad;
  o.on_bad_input = &report_bad;
  a2pack_pack_build_summary s{};
  s.size = sizeof s;
  Progress bar("pack");
  double t0 = now_seconds();
  check(a2pack_pack_dir(a.input.c_str(), a.output.c_str(), &o, &Progress::callback, &bar, &s));
  bar.finish();
  double dt = now_seconds() - t0;
  if (a.json) {
    nlohmann::json j = {{"input", a.input},
                        {"output", a.output},
                        {"runs", s.entries},
                        {"input_bytes", s.input_bytes},
                        {"file_bytes", s.file_bytes},
                        {"compressed_entries", s.compressed_entries},
                        {"stored_bytes", s.stored_bytes},
                        {"skipped", s.skipped},
                        {"seconds", dt}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  status("packed {} runs from {} into {} ({} of runs, pack {}) in {:.2f}s ({}/s)\n", s.entries,
             a.input, a.output, human_bytes(static_cast<double>(s.input_bytes)),
             human_bytes(static_cast<double>(s.file_bytes)), dt,
             human_bytes(dt > 0 ? static_cast<double>(s.input_bytes) / dt : 0.0));
  if (s.compressed_entries)
    status("{}: {} of {} entries compressed, {} stored\n", a.compress, s.compressed_entries, s.entries,
               human_bytes(static_cast<double>(s.stored_bytes)));
  if (s.skipped) status("skipped {} bad input(s)\n", s.skipped);
}

Registrar reg("pack", [](CLI::App& app) {
  auto a = std::make_shared<PackArgs>();
  auto* c = app.add_subcommand("pack", "Pack every .a2run2 file under a folder into a packfile");
  add_input(c, a->input, "folder", "folder of runs", "Folder to walk recursively for *.a2run2");
  c->add_option("--output,-o", a->output, "Packfile to write (atomically)")->required();
  c->add_option("--align", a->align, "Payload alignment in bytes (power of two)");
  choices(c->add_option("--compress", a->compress,
                        "Per-entry compression: none, zstd (smaller) or lz4 (faster to read)"),
          {"none", "zstd", "lz4"});
  c->add_option("--zstd-level", a->zstd_level, "zstd level for --compress zstd");
  c->add_option("--lz4-level", a->lz4_level,
                "lz4 level for --compress lz4: 0 = fast (default), negative = faster, 3..12 = LZ4 HC");
  c->add_flag("--no-crc", a->no_crc, "Do not store per-entry CRC32C");
  c->add_flag("--entry-crc", a->entry_crc,
              "Store per-entry CRC32C (the default; upstream's flag, --entry-crc=false = --no-crc)");
  c->add_option("--workers,-j", a->workers, "Threads reading and checking runs (0 = all cores)");
  c->add_flag("--skip-bad", a->skip_bad, "Skip unreadable or corrupt runs instead of failing");
  c->add_flag("-q,--quiet,--no-progress", globals().quiet, "Print only data and errors (no progress, status lines or warnings)");
  c->add_flag("--json", a->json, "Print the summary as JSON (docs/cli.md)");
  c->callback([a] { run_pack(*a); });
});

}  // namespace
}  // namespace a2cli
