// C ABI of the bag section: Bagz / Säckli record files.
#include <cstring>

#include "bag/index.hpp"
#include "bag/reader.hpp"
#include "bag/sharded_writer.hpp"
#include "bag/writer.hpp"
#include "capi/api_table.hpp"
#include "capi/common.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

struct a2pack_bag_writer {
  std::unique_ptr<bag::ShardedWriter> w;  // one file, or the N shards of "name@N.bagz"
};
struct a2pack_bag_reader {
  std::shared_ptr<const bag::Reader> r;
  std::string notes;  // Reader::notes(), kept for a2pack_bag_reader_notes
};
struct a2pack_bag_batch {
  bag::Batch b;
};
struct a2pack_bag_index {
  bag::Index idx;
};
struct a2pack_bag_pending {
  std::shared_ptr<const bag::Reader> reader;  // the pending read points into it
  bag::PendingRead p;
};

using a2pack::capi::reset_out;

namespace {

std::string dictionary(const uint8_t* p, size_t n) {
  if (n) require(p, "zstd_dictionary");
  return n ? std::string(reinterpret_cast<const char*>(p), n) : std::string();
}

// A caller's enum field, checked as the integer it holds (capi::enum_int).
template <typename E, typename Field>
E checked_enum(const Field& field, int max, const char* name) {
  const long long v = capi::enum_int(field);
  if (v < 0 || v > max) fail(A2PACK_E_INVALID_ARGUMENT, "{} = {} is not a valid value", name, v);
  return static_cast<E>(v);
}

bag::ReaderOptions reader_options(const a2pack_bag_reader_options* user) {
  auto o = capi::read_options(user, a2pack_bag_reader_options_init);
  bag::ReaderOptions r;
  r.compression = checked_enum<bag::Compression>(o.compression, 2, "compression");
  r.zstd.dictionary = dictionary(o.zstd_dictionary, o.zstd_dictionary_len);
  r.limits_placement = checked_enum<bag::LimitsPlacement>(o.limits_placement, 1, "limits_placement");
  r.limits_storage = checked_enum<bag::LimitsStorage>(o.limits_storage, 1, "limits_storage");
  r.access_pattern = checked_enum<bag::AccessPattern>(o.access_pattern, 2, "access_pattern");
  r.cache_policy = checked_enum<bag::CachePolicy>(o.cache_policy, 2, "cache_policy");
  r.sharding = checked_enum<bag::ShardingLayout>(o.sharding, 1, "sharding");
  r.max_parallelism = o.max_parallelism;
  r.max_record_bytes = o.max_record_bytes ? o.max_record_bytes : bag::kDefaultMaxRecordBytes;
  r.strict = o.strict != 0;
  return r;
}

const bag::Reader& reader_of(const a2pack_bag_reader* r) {
  require(r, "reader");
  return *r->r;
}

}  // namespace

// ---------------------------------------------------------------- writer

A2PACK_EXPORT void a2pack_bag_writer_options_init(a2pack_bag_writer_options* o) {
  if (!o) return;
  std::memset(static_cast<void*>(o), 0, sizeof *o);
  o->size = sizeof *o;
  o->compression = A2PACK_BAG_COMPRESSION_AUTO;
  o->limits_placement = A2PACK_BAG_LIMITS_TAIL;
  o->durable = 1;
  o->direct_io = 1;
}

A2PACK_EXPORT a2pack_status a2pack_bag_writer_open(const char* path,
                                                   const a2pack_bag_writer_options* user,
                                                   a2pack_bag_writer** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    require(path, "path");
    auto o = capi::read_options(user, a2pack_bag_writer_options_init);
    bag::WriterOptions w;
    w.compression = checked_enum<bag::Compression>(o.compression, 2, "compression");
    w.zstd.level = o.zstd_level;
    w.zstd.dictionary = dictionary(o.zstd_dictionary, o.zstd_dictionary_len);
    w.limits_placement = checked_enum<bag::LimitsPlacement>(o.limits_placement, 1, "limits_placement");
    w.workers = o.workers;
    w.durable = o.durable != 0;
    w.direct_io = o.direct_io != 0;
    *out = new a2pack_bag_writer{std::make_unique<bag::ShardedWriter>(path, w)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_writer_write(a2pack_bag_writer* w, const uint8_t* data,
                                                    size_t len) {
  return guard([&] {
    require(w, "writer");
    if (len) require(data, "data");
    w->w->write(data, len);
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_writer_write_batch(a2pack_bag_writer* w,
                                                          const uint8_t* data,
                                                          const uint64_t* offsets, size_t n) {
  return guard([&] {
    require(w, "writer");
    if (!n) return;
    require(offsets, "offsets");
    if (offsets[n] != offsets[0]) require(data, "data");
    w->w->write_batch(data, offsets, n);
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_writer_flush(a2pack_bag_writer* w) {
  return guard([&] {
    require(w, "writer");
    w->w->flush();
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_writer_commit(a2pack_bag_writer* w) {
  return guard([&] {
    require(w, "writer");
    w->w->commit();
  });
}

A2PACK_EXPORT uint64_t a2pack_bag_writer_count(const a2pack_bag_writer* w) {
  return w ? w->w->count() : 0;
}

A2PACK_EXPORT void a2pack_bag_writer_close(a2pack_bag_writer* w) { delete w; }

// ---------------------------------------------------------------- reader

A2PACK_EXPORT void a2pack_bag_reader_options_init(a2pack_bag_reader_options* o) {
  if (!o) return;
  std::memset(static_cast<void*>(o), 0, sizeof *o);
  o->size = sizeof *o;
  o->max_record_bytes = A2PACK_BAG_DEFAULT_MAX_RECORD_BYTES;
  o->compression = A2PACK_BAG_COMPRESSION_AUTO;
  o->limits_placement = A2PACK_BAG_LIMITS_TAIL;
  o->limits_storage = A2PACK_BAG_LIMITS_ON_DISK;
  o->access_pattern = A2PACK_BAG_ACCESS_SYSTEM;
  o->cache_policy = A2PACK_BAG_CACHE_SYSTEM;
  o->sharding = A2PACK_BAG_SHARDING_CONCATENATED;
}

A2PACK_EXPORT a2pack_status a2pack_bag_reader_open(const char* spec,
                                                   const a2pack_bag_reader_options* opts,
                                                   a2pack_bag_reader** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    require(spec, "spec");
    std::shared_ptr<const bag::Reader> r = bag::Reader::open(spec, reader_options(opts));
    std::string notes = r->notes();
    *out = new a2pack_bag_reader{std::move(r), std::move(notes)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_reader_open_paths(const char* const* paths, size_t n,
                                                         const a2pack_bag_reader_options* opts,
                                                         a2pack_bag_reader** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    if (n) require(paths, "paths");
    std::vector<std::string> v;
    for (size_t i = 0; i < n; ++i) {
      if (!paths[i]) fail(A2PACK_E_INVALID_ARGUMENT, "paths[{}] must not be NULL", i);
      v.emplace_back(paths[i]);
    }
    auto r = std::make_shared<const bag::Reader>(v, reader_options(opts));
    std::string notes = r->notes();
    *out = new a2pack_bag_reader{std::move(r), std::move(notes)};
  });
}

A2PACK_EXPORT void a2pack_bag_reader_close(a2pack_bag_reader* r) { delete r; }

A2PACK_EXPORT uint64_t a2pack_bag_reader_count(const a2pack_bag_reader* r) {
  return r ? r->r->size() : 0;
}

A2PACK_EXPORT uint64_t a2pack_bag_reader_stored_bytes(const a2pack_bag_reader* r) {
  return r ? r->r->records_bytes() : 0;
}

A2PACK_EXPORT size_t a2pack_bag_reader_shard_count(const a2pack_bag_reader* r) {
  return r ? r->r->shard_count() : 0;
}

A2PACK_EXPORT a2pack_status a2pack_bag_reader_shard_info(const a2pack_bag_reader* r, size_t i,
                                                         const char** path, uint64_t* records,
                                                         int32_t* compressed, const char** mode) {
  if (path) *path = nullptr;
  if (mode) *mode = nullptr;
  return guard([&] {
    const bag::Reader& rd = reader_of(r);
    if (i >= rd.shard_count())
      fail(A2PACK_E_OUT_OF_RANGE, "shard {} out of range [0, {})", i, rd.shard_count());
    const bag::Shard& s = rd.shard(i);
    if (path) *path = s.path().c_str();
    if (records) *records = s.count();
    if (compressed) *compressed = s.compressed();
    if (mode) *mode = s.records().mode().c_str();
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_reader_read(const a2pack_bag_reader* r,
                                                   const uint64_t* indices, size_t n,
                                                   uint32_t workers, a2pack_bag_batch** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    const bag::Reader& rd = reader_of(r);
    if (n) require(indices, "indices");
    *out = new a2pack_bag_batch{rd.read(indices, n, workers)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_reader_read_range(const a2pack_bag_reader* r,
                                                         uint64_t start, uint64_t count,
                                                         uint32_t workers, a2pack_bag_batch** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    *out = new a2pack_bag_batch{reader_of(r).read_range(start, count, workers)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_reader_prepare(const a2pack_bag_reader* r,
                                                      const uint64_t* indices, size_t n,
                                                      uint32_t workers, a2pack_bag_pending** out,
                                                      const uint64_t** sizes) {
  reset_out(out);
  if (sizes) *sizes = nullptr;
  return guard([&] {
    require(out, "out");
    require(sizes, "sizes");
    const bag::Reader& rd = reader_of(r);
    if (n) require(indices, "indices");
    auto p = std::make_unique<a2pack_bag_pending>(
        a2pack_bag_pending{r->r, rd.prepare(indices, n, workers)});
    *sizes = p->p.sizes().data();
    *out = p.release();
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_pending_fill(a2pack_bag_pending* p, uint8_t* const* dests) {
  return guard([&] {
    require(p, "pending");
    if (p->p.size() == 0) return;
    require(dests, "dests");
    for (size_t k = 0; k < p->p.size(); ++k)
      if (p->p.sizes()[k] && !dests[k])
        fail(A2PACK_E_INVALID_ARGUMENT, "dests[{}] is NULL for a record of {} bytes", k,
             p->p.sizes()[k]);
    p->p.fill(dests);
  });
}

A2PACK_EXPORT void a2pack_bag_pending_close(a2pack_bag_pending* p) { delete p; }

A2PACK_EXPORT a2pack_status a2pack_bag_reader_spans(const a2pack_bag_reader* r,
                                                    const uint64_t* indices, size_t n,
                                                    uint32_t* shards, uint64_t* begins,
                                                    uint64_t* ends) {
  return guard([&] {
    const bag::Reader& rd = reader_of(r);
    if (!n) return;
    require(indices, "indices");
    require(shards, "shards");
    require(begins, "begins");
    require(ends, "ends");
    rd.spans(indices, n, shards, begins, ends);
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_reader_spans_range(const a2pack_bag_reader* r,
                                                          uint64_t start, uint64_t count,
                                                          uint32_t* shards, uint64_t* begins,
                                                          uint64_t* ends) {
  return guard([&] {
    const bag::Reader& rd = reader_of(r);
    if (count) {
      require(shards, "shards");
      require(begins, "begins");
      require(ends, "ends");
    }
    rd.spans_range(start, count, shards, begins, ends);
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_reader_shard_map(const a2pack_bag_reader* r, size_t i,
                                                        const uint8_t** base, uint64_t* size) {
  if (base) *base = nullptr;
  if (size) *size = 0;
  return guard([&] {
    const bag::Reader& rd = reader_of(r);
    require(base, "base");
    require(size, "size");
    if (i >= rd.shard_count())
      fail(A2PACK_E_OUT_OF_RANGE, "shard {} out of range [0, {})", i, rd.shard_count());
    if (!rd.zero_copy())
      fail(A2PACK_E_UNSUPPORTED,
           "the reader's shards are not all mapped and uncompressed (cache policy SYSTEM, no zstd)");
    const bag::Shard& s = rd.shard(i);
    *base = s.records().mapped();
    *size = s.records_bytes();
  });
}

A2PACK_EXPORT void a2pack_bag_batch_view(const a2pack_bag_batch* b, const uint8_t** data,
                                         const uint64_t** offsets, size_t* n) {
  if (data) *data = b ? b->b.data.get() : nullptr;
  if (offsets) *offsets = b ? b->b.offsets.data() : nullptr;
  if (n) *n = b ? b->b.size() : 0;
}

A2PACK_EXPORT void a2pack_bag_batch_close(a2pack_bag_batch* b) { delete b; }

// ---------------------------------------------------------------- index

A2PACK_EXPORT a2pack_status a2pack_bag_index_build(const a2pack_bag_reader* r,
                                                   const uint64_t* indices, uint64_t n,
                                                   uint32_t workers, a2pack_bag_index** out) {
  reset_out(out);
  return guard([&] {
    require(out, "out");
    const bag::Reader& rd = reader_of(r);
    if (!indices) n = rd.size();
    *out = new a2pack_bag_index{bag::Index(rd, indices, n, workers)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_bag_index_find(const a2pack_bag_index* idx, const uint8_t* key,
                                                  size_t len, const uint64_t** positions,
                                                  uint64_t* count) {
  if (positions) *positions = nullptr;
  if (count) *count = 0;
  return guard([&] {
    require(idx, "index");
    require(positions, "positions");
    require(count, "count");
    if (len) require(key, "key");
    auto span = idx->idx.find({reinterpret_cast<const char*>(key), len});
    *positions = span.data();
    *count = span.size();
  });
}

A2PACK_EXPORT uint64_t a2pack_bag_index_unique(const a2pack_bag_index* idx) {
  return idx ? idx->idx.unique() : 0;
}

A2PACK_EXPORT void a2pack_bag_index_close(a2pack_bag_index* idx) { delete idx; }

// ---------------------------------------------------------------- notes, sizes

A2PACK_EXPORT const char* a2pack_bag_reader_notes(const a2pack_bag_reader* r) {
  return r ? r->notes.c_str() : "";
}

A2PACK_EXPORT a2pack_status a2pack_bag_reader_sizes(const a2pack_bag_reader* r,
                                                    const uint64_t* indices, size_t n,
                                                    uint32_t workers, uint64_t* sizes) {
  return guard([&] {
    const bag::Reader& rd = reader_of(r);
    if (!n) return;
    require(indices, "indices");
    require(sizes, "sizes");
    rd.sizes(indices, n, sizes, workers);
  });
}

// ---------------------------------------------------------------- table

namespace a2pack::capi {
const a2pack_bag_api* bag_api_table() {
  static const a2pack_bag_api table = {
      sizeof(a2pack_bag_api),
      a2pack_bag_writer_options_init,
      a2pack_bag_writer_open,
      a2pack_bag_writer_write,
      a2pack_bag_writer_write_batch,
      a2pack_bag_writer_flush,
      a2pack_bag_writer_commit,
      a2pack_bag_writer_count,
      a2pack_bag_writer_close,
      a2pack_bag_reader_options_init,
      a2pack_bag_reader_open,
      a2pack_bag_reader_open_paths,
      a2pack_bag_reader_close,
      a2pack_bag_reader_count,
      a2pack_bag_reader_stored_bytes,
      a2pack_bag_reader_shard_count,
      a2pack_bag_reader_shard_info,
      a2pack_bag_reader_read,
      a2pack_bag_reader_read_range,
      a2pack_bag_reader_spans,
      a2pack_bag_reader_spans_range,
      a2pack_bag_reader_shard_map,
      a2pack_bag_batch_view,
      a2pack_bag_batch_close,
      a2pack_bag_index_build,
      a2pack_bag_index_find,
      a2pack_bag_index_unique,
      a2pack_bag_index_close,
      a2pack_bag_reader_prepare,
      a2pack_bag_pending_fill,
      a2pack_bag_pending_close,
      a2pack_bag_reader_notes,
      a2pack_bag_reader_sizes,
      a2pack_bag_reader_shard_info_get,
  };
  return &table;
}
}  // namespace a2pack::capi

// The one spelling of each verb (`<noun>_info_get`, `_state_save`, `_state_load`,
// `_stats_get`); the first names stay as aliases.
A2PACK_EXPORT a2pack_status a2pack_bag_reader_shard_info_get(const a2pack_bag_reader *r, size_t i,
                                                             const char **path, uint64_t *records,
                                                             int32_t *compressed,
                                                             const char **mode) {
  return a2pack_bag_reader_shard_info(r, i, path, records, compressed, mode);
}
