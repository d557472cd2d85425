// C ABI of the pack section: packfile reader, iterator, statistics,
// validation, JSONL export and writer.
#include <memory>
#include <mutex>

#include "capi/api_table.hpp"
#include "capi/common.hpp"
#include "capi/handles.hpp"
#include "pack/jsonl.hpp"
#include "pack/order.hpp"
#include "pack/reader.hpp"
#include "pack/writer.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

using a2pack::capi::reset_out;

namespace {

// Histograms flattened into the arrays a2pack_pack_histograms points at.
struct FlatHistograms {
  std::vector<uint32_t> tile_values;
  std::vector<uint64_t> tile_counts;
  std::vector<uint8_t> engine_present;
  std::vector<uint64_t> engine_offsets{0};
  std::string engine_bytes;
  std::vector<uint64_t> engine_counts;
};

}  // namespace

struct a2pack_pack {
  std::shared_ptr<pack::Reader> reader;
  std::mutex mu;
  std::unique_ptr<FlatHistograms> flat;
};

namespace a2pack::capi {
// The reader, shared: an Arrow stream over the pack (capi/arrow_pack.cpp)
// keeps it open after the handle is closed.
std::shared_ptr<const pack::Reader> share_pack(const a2pack_pack* h) { return h->reader; }
}  // namespace a2pack::capi

struct a2pack_pack_iter {
  std::shared_ptr<pack::Reader> reader;
  std::vector<uint64_t> order;
  size_t pos = 0;
  uint64_t batch_size = 256;
  uint32_t workers = 0;
  bool verify = true;
};

struct a2pack_pack_writer {
  std::unique_ptr<pack::Writer> writer;
  pack::WriterOptions opts;
  uint32_t workers = 0;
  bool skip_bad = false;
  pack::BadInputFn on_bad;
};

namespace {

const pack::Reader& reader_of(const a2pack_pack* p) {
  require(p, "pack");
  return *p->reader;
}

bool verify_for(const pack::Reader& r, uint32_t flags) {
  if (flags & ~uint32_t{A2PACK_PACK_NO_VERIFY})
    fail(A2PACK_E_INVALID_ARGUMENT, "unknown read flags {:#x}", flags);
  return r.options().verify_crc && !(flags & A2PACK_PACK_NO_VERIFY);
}

pack::ProgressFn progress_fn(a2pack_progress_fn fn, void* user) {
  if (!fn) return {};
  return [fn, user](uint64_t done, uint64_t total) { return fn(user, done, total) == 0; };
}

void check_indices(const uint64_t* indices, size_t n) {
  if (n) require(indices, "indices");
}

// ---- writer options
struct WriterConfig {
  pack::WriterOptions opts;
  uint32_t workers;
  bool skip_bad;
  pack::BadInputFn on_bad;
};

WriterConfig writer_config(const a2pack_pack_writer_options* user) {
  a2pack_pack_writer_options o = capi::read_options(user, a2pack_pack_writer_options_init);
  const long long compression = capi::enum_int(o.compression);
  if (compression != A2PACK_PACK_COMPRESS_NONE && compression != A2PACK_PACK_COMPRESS_ZSTD &&
      compression != A2PACK_PACK_COMPRESS_LZ4)
    fail(A2PACK_E_INVALID_ARGUMENT, "unknown compression {} (0 = none, 1 = zstd, 2 = lz4)",
         compression);
  WriterConfig c;
  c.opts.align = o.align;
  c.opts.entry_crc = o.entry_crc != 0;
  c.opts.compression = static_cast<pack::Compression>(compression);
  c.opts.zstd_level = o.zstd_level;
  c.opts.lz4_level = o.lz4_level;
  c.opts.expected_count = o.expected_count;
  c.workers = o.workers;
  c.skip_bad = o.skip_bad != 0;
  if (o.on_bad_input) {
    auto fn = o.on_bad_input;
    void* u = o.on_bad_input_user;
    c.on_bad = [fn, u](const std::string& path, const Error& e) {
      fn(u, path.c_str(), e.status(), e.what());
    };
  }
  return c;
}

void write_summary(a2pack_pack_build_summary* out, const pack::BuildSummary& s) {
  if (!out) return;
  a2pack_pack_build_summary full{};
  full.size = sizeof full;
  full.entries = s.entries;
  full.skipped = s.skipped;
  full.input_bytes = s.input_bytes;
  full.stored_bytes = s.stored_bytes;
  full.compressed_entries = s.compressed_entries;
  full.file_bytes = s.file_bytes;
  capi::write_out(out, full);
}

}  // namespace

// ------------------------------------------------------------------ reader
A2PACK_EXPORT void a2pack_pack_options_init(a2pack_pack_options* o) {
  if (!o) return;
  pack::ReaderOptions d;
  *o = a2pack_pack_options{};
  o->size = sizeof *o;
  o->use_mmap = d.use_mmap;
  o->verify_crc = d.verify_crc;
}

A2PACK_EXPORT a2pack_status a2pack_pack_open(const char* path, const a2pack_pack_options* opts,
                                             a2pack_pack** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    require(path, "path");
    a2pack_pack_options o = capi::read_options(opts, a2pack_pack_options_init);
    pack::ReaderOptions ro;
    ro.use_mmap = o.use_mmap != 0;
    ro.verify_crc = o.verify_crc != 0;
    auto h = std::make_unique<a2pack_pack>();
    h->reader = std::make_shared<pack::Reader>(path, ro);
    *out = h.release();
  });
}

A2PACK_EXPORT void a2pack_pack_close(a2pack_pack* p) { delete p; }

A2PACK_EXPORT uint64_t a2pack_pack_len(const a2pack_pack* p) { return p ? p->reader->size() : 0; }

A2PACK_EXPORT a2pack_status a2pack_pack_entry_info(const a2pack_pack* p, uint64_t i,
                                                   a2pack_pack_entry* out) {
  return guard([&] {
    require(out, "out");
    const pack::Entry& e = reader_of(p).entry(i);
    a2pack_pack_entry full{};
    full.size = sizeof full;
    full.offset = e.offset;
    full.length = e.length;
    full.kind = e.kind;
    full.flags = e.flags;
    full.crc32c = e.crc;
    full.raw_length = pack::entry_compressed(e.flags) ? e.reserved : e.length;
    capi::write_out(out, full);
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_kind(const a2pack_pack* p, uint64_t i,
                                             a2pack_run_kind* out) {
  if (out) *out = A2PACK_RUN_KIND_UNKNOWN;
  return guard([&] {
    require(out, "out");
    *out = static_cast<a2pack_run_kind>(reader_of(p).kind(i));
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_get_slice(const a2pack_pack* p, uint64_t i, uint32_t flags,
                                                  const uint8_t** data, size_t* len) {
  if (data) *data = nullptr;
  if (len) *len = 0;
  return guard([&] {
    require(data, "data");
    require(len, "len");
    const pack::Reader& r = reader_of(p);
    const uint8_t* v = r.stored_view(i, verify_for(r, flags));
    *data = v;
    *len = r.entry(i).length;
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_read(const a2pack_pack* p, uint64_t i, uint32_t flags,
                                             uint8_t** out_data, size_t* out_len) {
  if (out_data) *out_data = nullptr;
  if (out_len) *out_len = 0;
  return guard([&] {
    require(out_data, "out_data");
    require(out_len, "out_len");
    const pack::Reader& r = reader_of(p);
    pack::EntryBytes b = r.payload(i, verify_for(r, flags));
    *out_data = capi::owned_copy(b.data, b.size);
    *out_len = b.size;
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_decode(const a2pack_pack* p, uint64_t i, uint32_t flags,
                                               a2pack_run** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    const pack::Reader& r = reader_of(p);
    capi::hand_out(r.decode(i, verify_for(r, flags)), out);
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_decode_runs(const a2pack_pack* p, const uint64_t* indices,
                                                    size_t n, uint32_t workers, uint32_t flags,
                                                    a2pack_run** out_runs) {
  if (out_runs)
    for (size_t k = 0; k < n; ++k) out_runs[k] = nullptr;
  return guard([&] {
    if (n) require(out_runs, "out_runs");
    check_indices(indices, n);
    const pack::Reader& r = reader_of(p);
    std::vector<run::Run> runs = r.decode_many(indices, n, workers, verify_for(r, flags));
    std::vector<std::unique_ptr<a2pack_run>> handles(n);
    for (size_t k = 0; k < n; ++k) handles[k] = std::make_unique<a2pack_run>(a2pack_run{std::move(runs[k])});
    for (size_t k = 0; k < n; ++k) out_runs[k] = handles[k].release();
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_decode_batch(const a2pack_pack* p, const uint64_t* indices,
                                                     size_t n, uint32_t workers, uint32_t flags,
                                                     a2pack_run_batch** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    check_indices(indices, n);
    const pack::Reader& r = reader_of(p);
    capi::hand_out(r.decode_batch(indices, n, workers, verify_for(r, flags)), out);
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_permutation(const a2pack_pack* p, int32_t shuffle,
                                                    uint64_t seed, uint64_t* out, size_t out_len) {
  return guard([&] {
    const pack::Reader& r = reader_of(p);
    if (out_len < r.size())
      fail(A2PACK_E_INVALID_ARGUMENT, "out has room for {} indices, the pack has {} entries",
           out_len, r.size());
    if (r.size()) require(out, "out");
    std::vector<uint64_t> order = pack::permutation(r.size(), shuffle != 0, seed);
    std::copy(order.begin(), order.end(), out);
  });
}

// ------------------------------------------------------------------ iterator
A2PACK_EXPORT void a2pack_pack_iter_options_init(a2pack_pack_iter_options* o) {
  if (!o) return;
  *o = a2pack_pack_iter_options{};
  o->size = sizeof *o;
  o->batch_size = 256;
}

A2PACK_EXPORT a2pack_status a2pack_pack_iter_open(a2pack_pack* p,
                                                  const a2pack_pack_iter_options* opts,
                                                  a2pack_pack_iter** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    const pack::Reader& r = reader_of(p);
    a2pack_pack_iter_options o = capi::read_options(opts, a2pack_pack_iter_options_init);
    if (o.batch_size == 0) fail(A2PACK_E_INVALID_ARGUMENT, "batch_size must be at least 1");
    auto it = std::make_unique<a2pack_pack_iter>();
    it->reader = p->reader;
    it->order = pack::permutation(r.size(), o.shuffle != 0, o.seed);
    it->batch_size = o.batch_size;
    it->workers = o.workers;
    it->verify = verify_for(r, o.flags);
    *out = it.release();
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_iter_next(a2pack_pack_iter* it, a2pack_run_batch** out,
                                                  const uint64_t** indices, size_t* n) {
  reset_out(out);
  if (indices) *indices = nullptr;
  if (n) *n = 0;
  return guard([&] {
    require(it, "iterator");
    require(out, "out");
    if (it->pos >= it->order.size()) return;
    size_t count = static_cast<size_t>(
        std::min<uint64_t>(it->batch_size, it->order.size() - it->pos));
    const uint64_t* idx = it->order.data() + it->pos;
    capi::hand_out(it->reader->decode_batch(idx, count, it->workers, it->verify), out);
    it->pos += count;
    if (indices) *indices = idx;
    if (n) *n = count;
  });
}

A2PACK_EXPORT void a2pack_pack_iter_close(a2pack_pack_iter* it) { delete it; }

// ------------------------------------------------------------------ stats
A2PACK_EXPORT a2pack_status a2pack_pack_stats_get(a2pack_pack* p, uint32_t workers,
                                                  a2pack_pack_stats* out) {
  return guard([&] {
    require(out, "out");
    pack::Reader::Stats s = reader_of(p).stats(workers);
    a2pack_pack_stats full{};
    full.size = sizeof full;
    full.count = s.stats.count;
    full.total_steps = s.stats.total_steps;
    full.min_len = s.stats.min_len;
    full.max_len = s.stats.max_len;
    full.mean_len = s.stats.mean_len;
    full.p50 = s.stats.p50;
    full.p90 = s.stats.p90;
    full.p99 = s.stats.p99;
    full.from_block = s.from_block;
    capi::write_out(out, full);
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_histograms_get(a2pack_pack* p, uint32_t workers,
                                                       a2pack_pack_histograms* out) {
  return guard([&] {
    require(out, "out");
    const pack::Histograms& h = reader_of(p).histograms(workers);
    std::lock_guard<std::mutex> lk(p->mu);
    if (!p->flat) {
      auto f = std::make_unique<FlatHistograms>();
      for (auto& t : h.tiles) {
        f->tile_values.push_back(t.value);
        f->tile_counts.push_back(t.count);
      }
      for (auto& e : h.engines) {
        f->engine_present.push_back(e.name.has_value());
        if (e.name) f->engine_bytes += *e.name;
        f->engine_offsets.push_back(f->engine_bytes.size());
        f->engine_counts.push_back(e.count);
      }
      p->flat = std::move(f);
    }
    const FlatHistograms& f = *p->flat;
    a2pack_pack_histograms full{};
    full.size = sizeof full;
    full.n_tiles = f.tile_values.size();
    full.tile_values = f.tile_values.data();
    full.tile_counts = f.tile_counts.data();
    full.n_engines = f.engine_counts.size();
    full.engine_present = f.engine_present.data();
    full.engine_offsets = f.engine_offsets.data();
    full.engine_bytes = f.engine_bytes.data();
    full.engine_counts = f.engine_counts.data();
    capi::write_out(out, full);
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_validate(a2pack_pack* p, int32_t full, uint32_t workers,
                                                 a2pack_progress_fn progress, void* user) {
  return guard([&] { reader_of(p).validate(full != 0, workers, progress_fn(progress, user)); });
}

A2PACK_EXPORT a2pack_status a2pack_pack_to_jsonl(a2pack_pack* p, const char* path,
                                                 a2pack_pack_jsonl_mode mode, uint32_t workers,
                                                 uint32_t flags, a2pack_progress_fn progress,
                                                 void* user, uint64_t* out_bytes) {
  if (out_bytes) *out_bytes = 0;
  return guard([&] {
    require(path, "path");
    const pack::Reader& r = reader_of(p);
    const long long m = capi::enum_int(mode);
    if (m != A2PACK_PACK_JSONL_RUNS && m != A2PACK_PACK_JSONL_STEPS)
      fail(A2PACK_E_INVALID_ARGUMENT, "unknown JSONL mode {}", m);
    pack::JsonlSummary s =
        pack::export_jsonl(r, path, static_cast<pack::JsonlMode>(m), workers,
                           verify_for(r, flags & ~uint32_t{A2PACK_PACK_DURABLE}),
                           progress_fn(progress, user),
                           (flags & A2PACK_PACK_DURABLE) != 0);
    if (out_bytes) *out_bytes = s.bytes;
  });
}

// ------------------------------------------------------------------ writer
A2PACK_EXPORT void a2pack_pack_writer_options_init(a2pack_pack_writer_options* o) {
  if (!o) return;
  pack::WriterOptions d;
  *o = a2pack_pack_writer_options{};
  o->size = sizeof *o;
  o->align = d.align;
  o->entry_crc = d.entry_crc;
  o->compression = static_cast<a2pack_pack_compression>(d.compression);
  o->zstd_level = d.zstd_level;
  o->expected_count = d.expected_count;
  o->lz4_level = d.lz4_level;
}

A2PACK_EXPORT a2pack_status a2pack_pack_writer_open(const char* path,
                                                    const a2pack_pack_writer_options* opts,
                                                    a2pack_pack_writer** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    require(path, "path");
    WriterConfig c = writer_config(opts);
    auto w = std::make_unique<a2pack_pack_writer>();
    w->writer = std::make_unique<pack::Writer>(path, c.opts);
    w->opts = c.opts;
    w->workers = c.workers;
    w->skip_bad = c.skip_bad;
    w->on_bad = std::move(c.on_bad);
    *out = w.release();
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_writer_add(a2pack_pack_writer* w, const uint8_t* data,
                                                   size_t len) {
  return guard([&] {
    require(w, "writer");
    if (len) require(data, "data");
    w->writer->add(data, len);
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_writer_add_file(a2pack_pack_writer* w, const char* path) {
  return guard([&] {
    require(w, "writer");
    require(path, "path");
    w->writer->add_file(path);
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_writer_add_files(a2pack_pack_writer* w,
                                                         const char* const* paths, size_t n,
                                                         a2pack_progress_fn progress, void* user) {
  return guard([&] {
    require(w, "writer");
    if (n) require(paths, "paths");
    std::vector<std::string> list(n);
    for (size_t k = 0; k < n; ++k) {
      if (!paths[k]) fail(A2PACK_E_INVALID_ARGUMENT, "paths[{}] is NULL", k);
      list[k] = paths[k];
    }
    w->writer->add_files(list, w->workers, w->skip_bad, w->on_bad, progress_fn(progress, user));
  });
}

A2PACK_EXPORT uint64_t a2pack_pack_writer_count(const a2pack_pack_writer* w) {
  return w ? w->writer->count() : 0;
}

A2PACK_EXPORT a2pack_status a2pack_pack_writer_finish(a2pack_pack_writer* w,
                                                      a2pack_pack_build_summary* out) {
  return guard([&] {
    require(w, "writer");
    if (out && out->size < sizeof(size_t))
      fail(A2PACK_E_INVALID_ARGUMENT, "out->size is {}; set it to the struct's sizeof", out->size);
    write_summary(out, w->writer->finish());
  });
}

A2PACK_EXPORT void a2pack_pack_writer_close(a2pack_pack_writer* w) { delete w; }

A2PACK_EXPORT a2pack_status a2pack_pack_dir(const char* input_dir, const char* output,
                                            const a2pack_pack_writer_options* opts,
                                            a2pack_progress_fn progress, void* user,
                                            a2pack_pack_build_summary* out) {
  return guard([&] {
    require(input_dir, "input_dir");
    require(output, "output");
    if (out && out->size < sizeof(size_t))
      fail(A2PACK_E_INVALID_ARGUMENT, "out->size is {}; set it to the struct's sizeof", out->size);
    WriterConfig c = writer_config(opts);
    write_summary(out, pack::pack_dir(input_dir, output, c.opts, c.workers, c.skip_bad, c.on_bad,
                                      progress_fn(progress, user)));
  });
}

// ------------------------------------------------------------------ api table
namespace a2pack::capi {
const a2pack_pack_api* pack_api_table() {
  static const a2pack_pack_api table = {
      sizeof(a2pack_pack_api),
      a2pack_pack_options_init,
      a2pack_pack_open,
      a2pack_pack_close,
      a2pack_pack_len,
      a2pack_pack_entry_info,
      a2pack_pack_kind,
      a2pack_pack_get_slice,
      a2pack_pack_read,
      a2pack_pack_decode,
      a2pack_pack_decode_runs,
      a2pack_pack_decode_batch,
      a2pack_pack_permutation,
      a2pack_pack_iter_options_init,
      a2pack_pack_iter_open,
      a2pack_pack_iter_next,
      a2pack_pack_iter_close,
      a2pack_pack_stats_get,
      a2pack_pack_histograms_get,
      a2pack_pack_validate,
      a2pack_pack_to_jsonl,
      a2pack_pack_writer_options_init,
      a2pack_pack_writer_open,
      a2pack_pack_writer_add,
      a2pack_pack_writer_add_file,
      a2pack_pack_writer_add_files,
      a2pack_pack_writer_count,
      a2pack_pack_writer_finish,
      a2pack_pack_writer_close,
      a2pack_pack_dir,
      a2pack_pack_entry_info_get,
  };
  return &table;
}
}  // namespace a2pack::capi

// The one spelling of each verb (`<noun>_info_get`, `_state_save`, `_state_load`,
// `_stats_get`); the first names stay as aliases.
A2PACK_EXPORT a2pack_status a2pack_pack_entry_info_get(const a2pack_pack *pack, uint64_t i,
                                                       a2pack_pack_entry *out) {
  return a2pack_pack_entry_info(pack, i, out);
}
