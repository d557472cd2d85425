// a2pack bag: Bagz / Säckli record files (info, cat, write, convert).
//
// convert moves run payloads, byte for byte, between three containers:
//   a folder of run files  <->  a .bag/.bagz (one record per run)  <->  a packfile
// The kind of each side is told by its name: a spec ending in .bag/.bagz (or
// holding "@N" / "@*") is a bag, a file starting with the packfile magic or
// named *.a2pack is a packfile, anything else is a folder of runs.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_write.hpp"
#include "command.hpp"

namespace a2cli {
namespace {

// ---------------------------------------------------------------- helpers

struct ReaderDeleter {
  void operator()(a2pack_bag_reader* r) const { a2pack_bag_reader_close(r); }
};
struct WriterDeleter {
  void operator()(a2pack_bag_writer* w) const { a2pack_bag_writer_close(w); }
};
struct BatchDeleter {
  void operator()(a2pack_bag_batch* b) const { a2pack_bag_batch_close(b); }
};
struct PackDeleter {
  void operator()(a2pack_pack* p) const { a2pack_pack_close(p); }
};
struct PackWriterDeleter {
  void operator()(a2pack_pack_writer* w) const { a2pack_pack_writer_close(w); }
};
using ReaderPtr = std::unique_ptr<a2pack_bag_reader, ReaderDeleter>;
using WriterPtr = std::unique_ptr<a2pack_bag_writer, WriterDeleter>;
using BatchPtr = std::unique_ptr<a2pack_bag_batch, BatchDeleter>;

struct BagFlags {
  bool separate = false;
  bool interleaved = false;
  std::string compression = "auto";  // auto | none | zstd
  int level = 0;
  std::string cache = "system";
  uint32_t jobs = 0;
  bool strict = false;
  uint64_t max_record_bytes = 0;  // 0 = the library's default
};

void add_bag_flags(CLI::App* c, BagFlags& f, bool writer) {
  c->add_flag("--separate", f.separate, "Limits in a separate limits.<name> file");
  choices(c->add_option("--compression", f.compression, "auto (by extension), none or zstd"),
          {"auto", "none", "zstd"});
  c->add_option("--workers,-j", f.jobs, "Threads (0 = all cores)");
  if (writer) {
    c->add_option("--level", f.level, "zstd level (0 = default 3)");
  } else {
    c->add_flag("--interleaved", f.interleaved, "Interleaved sharding layout");
    choices(c->add_option("--cache", f.cache, "Cache policy"), {"system", "drop", "direct"});
    c->add_flag("--strict", f.strict,
                "Fail on bytes no limit covers (separate limits) instead of warning");
    c->add_option("--max-record-bytes", f.max_record_bytes,
                  "Largest decoded record accepted (default 1 GiB)");
  }
}

a2pack_bag_compression compression_of(const std::string& s) {
  return s == "none" ? A2PACK_BAG_COMPRESSION_NONE
         : s == "zstd" ? A2PACK_BAG_COMPRESSION_ZSTD
                       : A2PACK_BAG_COMPRESSION_AUTO;
}

ReaderPtr open_reader(const std::string& spec, const BagFlags& f) {
  a2pack_bag_reader_options o;
  a2pack_bag_reader_options_init(&o);
  o.compression = compression_of(f.compression);
  o.limits_placement = f.separate ? A2PACK_BAG_LIMITS_SEPARATE : A2PACK_BAG_LIMITS_TAIL;
  o.sharding = f.interleaved ? A2PACK_BAG_SHARDING_INTERLEAVED : A2PACK_BAG_SHARDING_CONCATENATED;
  o.cache_policy = f.cache == "drop"     ? A2PACK_BAG_CACHE_DROP_AFTER_READ
                   : f.cache == "direct" ? A2PACK_BAG_CACHE_DIRECT_IO
                                         : A2PACK_BAG_CACHE_SYSTEM;
  o.max_parallelism = f.jobs;
  o.strict = f.strict ? 1 : 0;
  if (f.max_record_bytes) o.max_record_bytes = f.max_record_bytes;
  a2pack_bag_reader* r = nullptr;
  check(a2pack_bag_reader_open(spec.c_str(), &o, &r));
  // Warnings go to stderr: what is printed on stdout stays the records.
  if (const char* notes = a2pack_bag_reader_notes(r); *notes)
    status("a2pack: warning: {}", notes);
  return ReaderPtr(r);
}

WriterPtr open_writer(const std::string& path, const BagFlags& f) {
  a2pack_bag_writer_options o;
  a2pack_bag_writer_options_init(&o);
  o.compression = compression_of(f.compression);
  o.zstd_level = f.level;
  o.limits_placement = f.separate ? A2PACK_BAG_LIMITS_SEPARATE : A2PACK_BAG_LIMITS_TAIL;
  o.workers = f.jobs;
  a2pack_bag_writer* w = nullptr;
  check(a2pack_bag_writer_open(path.c_str(), &o, &w));
  return WriterPtr(w);
}

struct BatchView {
  BatchPtr batch;
  const uint8_t* data = nullptr;
  const uint64_t* offsets = nullptr;
  size_t n = 0;
};

BatchView view(a2pack_bag_batch* b) {
  BatchView v;
  v.batch.reset(b);
  a2pack_bag_batch_view(b, &v.data, &v.offsets, &v.n);
  return v;
}

BatchView read_range(const a2pack_bag_reader* r, uint64_t start, uint64_t count, uint32_t jobs) {
  a2pack_bag_batch* b = nullptr;
  check(a2pack_bag_reader_read_range(r, start, count, jobs, &b));
  return view(b);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_bag_spec(const std::string& s) {
  return ends_with(s, ".bag") || ends_with(s, ".bagz") || s.find(".bag,") != std::string::npos ||
         s.find(".bagz,") != std::string::npos;
}

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_packfile(const std::string& p) {
  if (ends_with(p, ".a2pack")) return true;
  // Only a regular file can be a packfile: peeking into a FIFO would block
  // (the library's own open refuses it with a clear error afterwards).
  struct stat st;
  if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::ifstream f(p, std::ios::binary);
  char magic[8] = {};
  return f.read(magic, 8) && std::memcmp(magic, "A2PACK\0\0", 8) == 0;
}

std::string read_whole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw CliError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)), kExitSystem);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Feeds records to a bag writer in batches of about 32 MiB.
class BatchFeeder {
 public:
  explicit BatchFeeder(a2pack_bag_writer* w) : w_(w) { offsets_.push_back(0); }
  void add(const uint8_t* p, size_t n) {
    data_.append(reinterpret_cast<const char*>(p), n);
    offsets_.push_back(data_.size());
    if (data_.size() >= (32u << 20)) drain();
  }
  void drain() {
    size_t n = offsets_.size() - 1;
    if (n) check(a2pack_bag_writer_write_batch(w_, reinterpret_cast<const uint8_t*>(data_.data()),
                                               offsets_.data(), n));
    data_.clear();
    offsets_.assign(1, 0);
  }

 private:
  a2pack_bag_writer* w_;
  std::string data_;
  std::vector<uint64_t> offsets_;
};

// ---------------------------------------------------------------- info

struct InfoArgs {
  std::string spec;
  BagFlags flags;
  bool json = false;
};

// Mean decompressed record size over the first (up to) 1000 records, from
// the frame headers: nothing is decompressed. Returns the records sampled.
uint64_t sample_record_bytes(const a2pack_bag_reader* r, uint64_t n, uint32_t jobs, double* mean) {
  uint64_t k = std::min<uint64_t>(n, 1000);
  *mean = 0;
  if (!k) return 0;
  std::vector<uint64_t> idx(k), sizes(k);
  for (uint64_t i = 0; i < k; ++i) idx[i] = i;
  check(a2pack_bag_reader_sizes(r, idx.data(), k, jobs, sizes.data()));
  double total = 0;
  for (uint64_t s : sizes) total += static_cast<double>(s);
  *mean = total / static_cast<double>(k);
  return k;
}

void print_info_json(const InfoArgs& a, const a2pack_bag_reader* r, uint64_t n, uint64_t stored,
                     size_t shards) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < shards; ++i) {
    const char* path = nullptr;
    const char* mode = nullptr;
    uint64_t records = 0;
    int32_t compressed = 0;
    check(a2pack_bag_reader_shard_info(r, i, &path, &records, &compressed, &mode));
    list.push_back({{"path", path},
                    {"records", records},
                    {"compression", compressed ? "zstd" : "none"},
                    {"read_mode", mode}});
  }
  double mean = 0;
  uint64_t sampled = sample_record_bytes(r, n, a.flags.jobs, &mean);
  nlohmann::json j = {{"spec", a.spec},
                      {"records", n},
                      {"stored_bytes", stored},
                      {"shard_count", shards},
                      {"shards", list},
                      {"record_bytes_mean", mean},
                      {"records_sampled", sampled}};
  fmt::print("{}\n", j.dump(2));
}

void run_info(const InfoArgs& a) {
  ReaderPtr r = open_reader(a.spec, a.flags);
  uint64_t n = a2pack_bag_reader_count(r.get());
  uint64_t stored = a2pack_bag_reader_stored_bytes(r.get());
  size_t shards = a2pack_bag_reader_shard_count(r.get());
  if (a.json) return print_info_json(a, r.get(), n, stored, shards);
  fmt::print("spec            {}\n", a.spec);
  fmt::print("records         {}\n", n);
  fmt::print("stored bytes    {} ({})\n", stored, human_bytes(static_cast<double>(stored)));
  fmt::print("bytes/record    {:.1f}\n", n ? static_cast<double>(stored) / static_cast<double>(n) : 0.0);
  fmt::print("shards          {}\n", shards);
  for (size_t i = 0; i < shards && i < 20; ++i) {
    const char* path = nullptr;
    const char* mode = nullptr;
    uint64_t records = 0;
    int32_t compressed = 0;
    check(a2pack_bag_reader_shard_info(r.get(), i, &path, &records, &compressed, &mode));
    fmt::print("  {:>5}  {:>10} records  {:<4}  {:<12}  {}\n", i, records,
               compressed ? "zstd" : "none", mode, path);
  }
  if (shards > 20) fmt::print("  ... {} more shards\n", shards - 20);
  double mean = 0;
  if (uint64_t k = sample_record_bytes(r.get(), n, a.flags.jobs, &mean))
    fmt::print("record bytes    {:.1f} on average over the first {} records\n", mean, k);
}

// ---------------------------------------------------------------- cat

struct CatArgs {
  std::string spec;
  BagFlags flags;
  std::vector<int64_t> indices;
  int64_t start = 0;
  int64_t count = -1;
  bool hex = false;
  bool lengths = false;
};

// Hex of p[0, n) written a piece at a time through one small buffer, so
// memory does not grow with the record (a 200 MiB record is 400 MiB of hex).
void write_hex(const uint8_t* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char buf[64 << 10];
  for (size_t i = 0; i < n;) {
    size_t m = std::min(n - i, sizeof buf / 2);
    for (size_t j = 0; j < m; ++j) {
      buf[2 * j] = kDigits[p[i + j] >> 4];
      buf[2 * j + 1] = kDigits[p[i + j] & 15];
    }
    write_stdout(buf, 2 * m);
    i += m;
  }
}

void print_record(const CatArgs& a, uint64_t index, const uint8_t* p, size_t n) {
  if (a.lengths) {
    fmt::print("{}\t{}\n", index, n);
  } else if (a.hex) {
    fmt::print("{}\t", index);
    write_hex(p, n);
    write_stdout("\n", 1);
  } else {
    write_stdout(p, n);
  }
}

// Most stored bytes a batch of `bag cat` holds (a single larger record is
// read alone): records are printed from batches of this size, never from the
// whole range at once.
constexpr uint64_t kCatBatchStored = 32u << 20;

// The read-only mappings of every shard when all are mapped and stored as
// they are (records are then printed straight from them, nothing copied);
// empty otherwise.
std::vector<const uint8_t*> shard_maps(const a2pack_bag_reader* r) {
  std::vector<const uint8_t*> maps(a2pack_bag_reader_shard_count(r));
  for (size_t i = 0; i < maps.size(); ++i) {
    uint64_t size = 0;
    if (a2pack_bag_reader_shard_map(r, i, &maps[i], &size) != A2PACK_OK) {
      a2pack_clear_error();
      return {};
    }
  }
  return maps;
}

// Prints records idx, in order: from the mappings when there are some, else
// read (and decoded) in batches of about kCatBatchStored stored bytes.
void print_records(const CatArgs& a, const a2pack_bag_reader* r,
                   const std::vector<const uint8_t*>& maps, const std::vector<uint64_t>& idx) {
  const size_t n = idx.size();
  std::vector<uint32_t> shard(n);
  std::vector<uint64_t> begin(n), end(n);
  check(a2pack_bag_reader_spans(r, idx.data(), n, shard.data(), begin.data(), end.data()));
  if (!maps.empty()) {
    for (size_t k = 0; k < n; ++k)
      print_record(a, idx[k], maps[shard[k]] + begin[k], static_cast<size_t>(end[k] - begin[k]));
    return;
  }
  for (size_t k0 = 0; k0 < n;) {
    size_t k1 = k0 + 1;
    uint64_t stored = end[k0] - begin[k0];
    for (; k1 < n && stored + (end[k1] - begin[k1]) <= kCatBatchStored; ++k1)
      stored += end[k1] - begin[k1];
    a2pack_bag_batch* b = nullptr;
    check(a2pack_bag_reader_read(r, idx.data() + k0, k1 - k0, a.flags.jobs, &b));
    BatchView v = view(b);
    for (size_t k = 0; k < v.n; ++k)
      print_record(a, idx[k0 + k], v.data + v.offsets[k], v.offsets[k + 1] - v.offsets[k]);
    k0 = k1;
  }
}

// --lengths: sizes from the frame headers, nothing decompressed.
void print_lengths(const a2pack_bag_reader* r, const std::vector<uint64_t>& idx, uint32_t jobs) {
  std::vector<uint64_t> sizes(idx.size());
  check(a2pack_bag_reader_sizes(r, idx.data(), idx.size(), jobs, sizes.data()));
  std::string out;
  for (size_t k = 0; k < idx.size(); ++k) out += fmt::format("{}\t{}\n", idx[k], sizes[k]);
  write_stdout(out.data(), out.size());
}

void run_cat(const CatArgs& a) {
  ReaderPtr r = open_reader(a.spec, a.flags);
  uint64_t n = a2pack_bag_reader_count(r.get());
  if (!a.indices.empty()) {
    std::vector<uint64_t> idx;
    for (int64_t i : a.indices) {
      int64_t j = i < 0 ? i + static_cast<int64_t>(n) : i;
      if (j < 0 || static_cast<uint64_t>(j) >= n)
        throw CliError(fmt::format("index {} out of range [-{}, {})", i, n, n));
      idx.push_back(static_cast<uint64_t>(j));
    }
    if (a.lengths) return print_lengths(r.get(), idx, a.flags.jobs);
    return print_records(a, r.get(), shard_maps(r.get()), idx);
  }
  uint64_t start = static_cast<uint64_t>(std::max<int64_t>(0, a.start));
  uint64_t end = a.count < 0 ? n : std::min<uint64_t>(n, start + static_cast<uint64_t>(a.count));
  const std::vector<const uint8_t*> maps = a.lengths ? std::vector<const uint8_t*>{} : shard_maps(r.get());
  for (uint64_t s = start; s < end; s += 4096) {
    std::vector<uint64_t> idx(std::min<uint64_t>(4096, end - s));
    for (size_t k = 0; k < idx.size(); ++k) idx[k] = s + k;
    if (a.lengths)
      print_lengths(r.get(), idx, a.flags.jobs);
    else
      print_records(a, r.get(), maps, idx);
  }
}

// ---------------------------------------------------------------- write

struct WriteArgs {
  std::string out;
  std::vector<std::string> inputs;
  BagFlags flags;
  bool json = false;
};

void run_write(const WriteArgs& a) {
  std::vector<std::string> files;
  for (const auto& in : a.inputs) {
    if (is_dir(in)) {
      auto v = list_run_files(in, false);
      files.insert(files.end(), v.begin(), v.end());
    } else {
      files.push_back(in);
    }
  }
  double t0 = now_seconds();
  WriterPtr w = open_writer(a.out, a.flags);
  BatchFeeder feed(w.get());
  uint64_t bytes = 0;
  Progress bar("write");
  for (size_t i = 0; i < files.size(); ++i) {
    std::string s = read_whole(files[i]);
    bytes += s.size();
    feed.add(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    bar.update(i + 1, files.size());
  }
  feed.drain();
  check(a2pack_bag_writer_commit(w.get()));
  bar.finish();
  double dt = now_seconds() - t0;
  if (a.json) {
    nlohmann::json j = {{"output", a.out}, {"records", files.size()}, {"bytes", bytes},
                        {"seconds", dt}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  status("wrote {} records ({}) to {} in {:.2f}s\n", files.size(),
             human_bytes(static_cast<double>(bytes)), a.out, dt);
}

// ---------------------------------------------------------------- convert

struct ConvertArgs {
  std::string in, out;
  BagFlags in_flags, out_flags;
  bool pack_zstd = false;
  bool pack_lz4 = false;
  bool json = false;
};

// Runs sink(data, len) with a data problem it reports (CliError other than a
// system error) given the place of the payload: "IN: record I: ...".
template <typename Sink>
void feed_one(Sink& sink, const std::string& where, const uint8_t* data, size_t len) {
  try {
    sink(data, len);
  } catch (const CliError& e) {
    if (e.exit_code == kExitSystem) throw;
    throw CliError(fmt::format("{}: {}", where, e.what()), e.exit_code);
  }
}

// Calls sink(data, len) for every run payload of the input, in order.
template <typename Sink>
uint64_t for_each_payload(const ConvertArgs& a, Sink&& sink) {
  if (is_dir(a.in)) {
    auto files = list_run_files(a.in, false);
    if (files.empty()) throw CliError(fmt::format("{}: no .a2run2 files", a.in));
    for (const auto& f : files) {
      std::string s = read_whole(f);
      feed_one(sink, f, reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
    return files.size();
  }
  if (!is_bag_spec(a.in) && is_packfile(a.in)) {
    a2pack_pack* p = nullptr;
    check(a2pack_pack_open(a.in.c_str(), nullptr, &p));
    std::unique_ptr<a2pack_pack, PackDeleter> pack(p);
    uint64_t n = a2pack_pack_len(p);
    for (uint64_t i = 0; i < n; ++i) {
      uint8_t* data = nullptr;
      size_t len = 0;
      check(a2pack_pack_read(p, i, 0, &data, &len));
      std::unique_ptr<uint8_t, void (*)(void*)> own(data, a2pack_free);
      feed_one(sink, fmt::format("{}: entry {}", a.in, i), data, len);
    }
    return n;
  }
  ReaderPtr r = open_reader(a.in, a.in_flags);
  uint64_t n = a2pack_bag_reader_count(r.get());
  for (uint64_t s = 0; s < n; s += 4096) {
    BatchView v = read_range(r.get(), s, std::min<uint64_t>(4096, n - s), a.in_flags.jobs);
    for (size_t k = 0; k < v.n; ++k)
      feed_one(sink, fmt::format("{}: record {}", a.in, s + k), v.data + v.offsets[k],
               v.offsets[k + 1] - v.offsets[k]);
  }
  return n;
}

void run_convert(const ConvertArgs& a) {
  double t0 = now_seconds();
  uint64_t n = 0, bytes = 0;
  if (is_bag_spec(a.out)) {
    WriterPtr w = open_writer(a.out, a.out_flags);
    BatchFeeder feed(w.get());
    n = for_each_payload(a, [&](const uint8_t* p, size_t len) {
      feed.add(p, len);
      bytes += len;
    });
    feed.drain();
    check(a2pack_bag_writer_commit(w.get()));
  } else if (ends_with(a.out, ".a2pack")) {
    a2pack_pack_writer_options o;
    a2pack_pack_writer_options_init(&o);
    o.compression = a.pack_zstd  ? A2PACK_PACK_COMPRESS_ZSTD
                    : a.pack_lz4 ? A2PACK_PACK_COMPRESS_LZ4
                                 : A2PACK_PACK_COMPRESS_NONE;
    o.workers = a.out_flags.jobs;
    a2pack_pack_writer* pw = nullptr;
    check(a2pack_pack_writer_open(a.out.c_str(), &o, &pw));
    std::unique_ptr<a2pack_pack_writer, PackWriterDeleter> w(pw);
    n = for_each_payload(a, [&](const uint8_t* p, size_t len) {
      check(a2pack_pack_writer_add(pw, p, len));
      bytes += len;
    });
    check(a2pack_pack_writer_finish(pw, nullptr));
  } else {
    // A folder of runs, numbered like `a2pack gen` names them.
    if (::mkdir(a.out.c_str(), 0755) != 0 && errno != EEXIST)
      throw CliError(fmt::format("{}: cannot create folder: {}", a.out, std::strerror(errno)),
                     kExitSystem);
    // Each run is written whole under a temporary name and renamed into
    // place (never a short file under a run's name); the folder is synced
    // once at the end rather than each of possibly millions of files.
    n = for_each_payload(a, [&](const uint8_t* p, size_t len) {
      // As a packfile refuses it: no run file is empty.
      if (len == 0)
        throw CliError(fmt::format("empty run payload: a run file cannot be empty (the runs "
                                   "before it, {}, are in {})",
                                   n, a.out));
      write_file_atomic(fmt::format("{}/run-{:06d}.a2run2", a.out, n), p, len,
                        /*durable=*/false);
      ++n;
      bytes += len;
    });
    sync_folder(a.out);
  }
  double dt = now_seconds() - t0;
  if (a.json) {
    nlohmann::json j = {{"input", a.in}, {"output", a.out}, {"runs", n}, {"bytes", bytes},
                        {"seconds", dt}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  status("converted {} runs ({}) from {} to {} in {:.2f}s\n", n,
             human_bytes(static_cast<double>(bytes)), a.in, a.out, dt);
}

// ---------------------------------------------------------------- registration

Registrar reg("bag", [](CLI::App& app) {
  auto* bag = app.add_subcommand("bag", "Bagz / Säckli record files (.bag, .bagz)");
  bag->require_subcommand(1);

  auto ia = std::make_shared<InfoArgs>();
  auto* info = bag->add_subcommand("info", "Shards, records and sizes of a bag spec");
  add_input(info, ia->spec, "spec", "bag spec", "File, name@N.bagz, name@*.bagz or a comma list");
  add_bag_flags(info, ia->flags, false);
  info->add_flag("--json", ia->json, "Print the summary as JSON (docs/cli.md)");
  info->callback([ia] { run_info(*ia); });

  auto ca = std::make_shared<CatArgs>();
  auto* cat = bag->add_subcommand("cat", "Print records (raw bytes, hex or lengths)");
  // -i is --index here, as it always was: the spec is the argument or --input.
  add_input(cat, ca->spec, "spec", "bag spec", "Bag spec", "", /*short_i=*/false);
  cat->add_option("--index,-i", ca->indices, "Record indices (negative from the end)")
      ->delimiter(',');
  cat->add_option("--start", ca->start, "First record of a range");
  cat->add_option("--count,-n", ca->count, "Records in the range (default: to the end)");
  cat->add_flag("--hex", ca->hex, "One line per record: index, tab, hex bytes");
  cat->add_flag("--lengths", ca->lengths, "One line per record: index, tab, length");
  add_bag_flags(cat, ca->flags, false);
  cat->callback([ca] { run_cat(*ca); });

  auto wa = std::make_shared<WriteArgs>();
  auto* write = bag->add_subcommand("write", "Write files (or folders of runs) as records");
  write->add_option("-o,--output", wa->out, "Output .bag or .bagz (name@N.bagz: N shards)");
  write->add_option("inputs", wa->inputs,
                    "Files, one record each, or folders of .a2run2 runs (without -o, the first "
                    "argument is the output, as in earlier versions)")
      ->required();
  add_bag_flags(write, wa->flags, true);
  write->add_flag("--json", wa->json, "Print the summary as JSON (docs/cli.md)");
  write->callback([wa] {
    if (wa->out.empty()) {  // the older `bag write OUT INPUTS...`
      if (wa->inputs.size() < 2)
        throw UsageError("bag write: no output given: bag write INPUTS... -o OUT.bagz");
      wa->out = wa->inputs.front();
      wa->inputs.erase(wa->inputs.begin());
    }
    run_write(*wa);
  });

  auto va = std::make_shared<ConvertArgs>();
  auto* conv = bag->add_subcommand(
      "convert", "Copy run payloads byte for byte between a folder of runs, a bag and a packfile");
  InputGroup& in = add_input(conv, va->in, "input", "input (folder of runs, packfile or bag spec)",
                             "Folder of runs, packfile, or bag spec");
  add_output(conv, va->out, "output", "Output .bag/.bagz, .a2pack, or folder of runs", &in);
  conv->add_flag("--in-separate", va->in_flags.separate, "Input bag has separate limits");
  conv->add_flag("--in-interleaved", va->in_flags.interleaved, "Input shards are interleaved");
  conv->add_flag("--separate", va->out_flags.separate, "Output bag with separate limits");
  choices(conv->add_option("--compression", va->out_flags.compression,
                           "Output bag: auto, none or zstd"),
          {"auto", "none", "zstd"});
  conv->add_option("--level", va->out_flags.level, "Output bag zstd level (0 = default 3)");
  auto* pack_zstd =
      conv->add_flag("--pack-zstd", va->pack_zstd, "Output packfile entries compressed with zstd");
  conv->add_flag("--pack-lz4", va->pack_lz4, "Output packfile entries compressed with lz4")
      ->excludes(pack_zstd);
  conv->add_option("--workers,-j", va->out_flags.jobs, "Threads (0 = all cores)");
  conv->add_flag("--json", va->json, "Print the summary as JSON (docs/cli.md)");
  conv->callback([va, conv] {
    require_output(va->out, conv);
    va->in_flags.jobs = va->out_flags.jobs;
    run_convert(*va);
  });
});

}  // namespace
}  // namespace a2cli
