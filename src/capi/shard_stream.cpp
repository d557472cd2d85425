// C API: shard streams over sharded datasets (feed/shard_stream.hpp).
#include <memory>

#include "a2pack.h"
#include "capi/api_table.hpp"
#include "capi/columns.hpp"
#include "capi/common.hpp"
#include "feed/shard_stream.hpp"

using namespace a2pack;
using capi::guard;
using capi::require;

struct a2pack_shard_stream {
  std::unique_ptr<feed::ShardStream> s;
};

A2PACK_EXPORT void a2pack_shard_stream_options_init(a2pack_shard_stream_options* o) {
  if (!o) return;
  *o = a2pack_shard_stream_options{};
  o->size = sizeof *o;
  o->budget_bytes = uint64_t{1} << 30;
  o->batch_size = 4096;
  o->world = 1;
  o->verify_crc = 1;
  o->prefetch = 1;
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_open(const char* dir,
                                                     const a2pack_shard_stream_options* opts,
                                                     a2pack_shard_stream** out) {
  if (out) *out = nullptr;
  return guard([&] {
    require(dir, "dir");
    require(out, "out");
    const auto o = capi::read_options(opts, a2pack_shard_stream_options_init);
    feed::ShardStreamOptions so;
    so.budget_bytes = o.budget_bytes;
    so.batch_size = static_cast<size_t>(o.batch_size);
    so.seed = o.seed;
    so.rank = o.rank;
    so.world = o.world;
    so.window = o.window_shards;
    so.drop_last = o.drop_last != 0;
    so.verify_crc = o.verify_crc != 0;
    so.prefetch = o.prefetch != 0;
    *out = new a2pack_shard_stream{feed::ShardStream::open(dir, so)};
  });
}

A2PACK_EXPORT void a2pack_shard_stream_close(a2pack_shard_stream* s) { delete s; }

A2PACK_EXPORT a2pack_status a2pack_shard_stream_get_info(const a2pack_shard_stream* s,
                                                         a2pack_shard_stream_info* out) {
  return guard([&] {
    require(s, "stream");
    const auto& st = *s->s;
    a2pack_shard_stream_info i{};
    i.size = sizeof i;
    i.rows = st.manifest().rows;
    i.runs = st.manifest().runs;
    i.shards = st.manifest().shards.size();
    i.max_shard_bytes = st.max_shard_bytes();
    i.window_shards = st.sampler().window();
    i.epoch = st.epoch();
    i.next_batch = st.next_batch();
    i.batches = st.plan().batches;
    i.rank_shards = st.plan().shards.size();
    i.rank_rows = st.plan().rows;
    capi::write_out(out, i);
  });
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_set_epoch(a2pack_shard_stream* s, uint64_t epoch) {
  return guard([&] {
    require(s, "stream");
    s->s->set_epoch(epoch);
  });
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_next(a2pack_shard_stream* s,
                                                     const a2pack_dataset_columns* out,
                                                     int64_t* idx, size_t* n) {
  if (n) *n = 0;
  return guard([&] {
    require(s, "stream");
    require(out, "out");
    require(n, "n");
    *n = s->s->next(capi::columns_out(out), idx);
  });
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_batch_indices(a2pack_shard_stream* s, uint64_t b,
                                                              int64_t* out, size_t* n) {
  if (n) *n = 0;
  return guard([&] {
    require(s, "stream");
    require(out, "out");
    require(n, "n");
    *n = s->s->batch_indices(b, out);
  });
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_save_state(const a2pack_shard_stream* s,
                                                           uint8_t** out_data, size_t* out_len) {
  return capi::bytes_out(out_data, out_len, [&] {
    require(s, "stream");
    return s->s->save_state();
  });
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_load_state(a2pack_shard_stream* s,
                                                           const void* data, size_t len) {
  return guard([&] {
    require(s, "stream");
    require(data, "data");
    s->s->load_state(data, len);
  });
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_get_stats(const a2pack_shard_stream* s,
                                                          a2pack_shard_stream_stats* out) {
  return guard([&] {
    require(s, "stream");
    const auto st = s->s->stats();
    a2pack_shard_stream_stats o{};
    o.size = sizeof o;
    o.batches = st.batches;
    o.loads = st.loads;
    o.evictions = st.evictions;
    o.bytes_read = st.bytes_read;
    o.resident_bytes = st.resident_bytes;
    o.resident_shards = st.resident_shards;
    o.load_wait_s = st.load_wait_s;
    o.load_s = st.load_s;
    capi::write_out(out, o);
  });
}

// The one spelling of each verb (`<noun>_info_get`, `_state_save`, `_state_load`,
// `_stats_get`); the first names stay as aliases.
A2PACK_EXPORT a2pack_status a2pack_shard_stream_info_get(const a2pack_shard_stream *s,
                                                         a2pack_shard_stream_info *out) {
  return a2pack_shard_stream_get_info(s, out);
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_state_save(const a2pack_shard_stream *s,
                                                           uint8_t **out_data, size_t *out_len) {
  return a2pack_shard_stream_save_state(s, out_data, out_len);
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_state_load(a2pack_shard_stream *s,
                                                           const void *data, size_t len) {
  return a2pack_shard_stream_load_state(s, data, len);
}

A2PACK_EXPORT a2pack_status a2pack_shard_stream_stats_get(const a2pack_shard_stream *s,
                                                          a2pack_shard_stream_stats *out) {
  return a2pack_shard_stream_get_stats(s, out);
}

namespace a2pack::capi {
const a2pack_shard_stream_api* shard_stream_api_table() {
  static const a2pack_shard_stream_api table = {
      sizeof(a2pack_shard_stream_api),
      a2pack_shard_stream_options_init,
      a2pack_shard_stream_open,
      a2pack_shard_stream_close,
      a2pack_shard_stream_info_get,
      a2pack_shard_stream_set_epoch,
      a2pack_shard_stream_next,
      a2pack_shard_stream_batch_indices,
      a2pack_shard_stream_state_save,
      a2pack_shard_stream_state_load,
      a2pack_shard_stream_stats_get,
      a2pack_shard_stream_get_info,
      a2pack_shard_stream_save_state,
      a2pack_shard_stream_load_state,
      a2pack_shard_stream_get_stats,
  };
  return &table;
}
}  // namespace a2pack::capi
