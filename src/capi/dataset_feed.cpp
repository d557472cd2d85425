// C ABI of the feed section (src/feed): open over a dataset, next, batch
// views, stats, checkpoints. Named dataset_* so a build without the dataset
// capability leaves it out with the dataset's other files.
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "capi/api_table.hpp"
#include "capi/common.hpp"
#include "capi/priorities_handle.hpp"
#include "dataset/dataset.hpp"
#include "feed/columns.hpp"
#include "feed/feed.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

struct a2pack_feed {
  std::unique_ptr<feed::Feed> f;
};

namespace a2pack::capi {
std::shared_ptr<const dataset::Dataset> share_dataset(const a2pack_dataset* h);
const dataset::MixSampler& mix_of(const a2pack_dataset_mix* h);
}  // namespace a2pack::capi

namespace {

feed::Slot* slot_of(const a2pack_feed_batch* b) {
  return reinterpret_cast<feed::Slot*>(const_cast<a2pack_feed_batch*>(b));
}
a2pack_feed_batch* handle_of(feed::Slot* s) { return reinterpret_cast<a2pack_feed_batch*>(s); }

feed::Options convert(const a2pack_feed_options& o) {
  feed::Options r;
  r.batch_size = o.batch_size;
  r.depth = o.depth;
  r.threads = o.threads;
  r.slots = o.slots;
  if (o.columns >> A2PACK_FEED_COLUMN_COUNT)
    fail(A2PACK_E_INVALID_ARGUMENT, "feed options: columns 0x{:x} has bits beyond the {} columns",
         o.columns, static_cast<int>(A2PACK_FEED_COLUMN_COUNT));
  r.columns = o.columns;
  switch (capi::enum_int(o.moves_dtype)) {
    case A2PACK_FEED_DTYPE_U8: r.moves = feed::MovesType::kU8; break;
    case A2PACK_FEED_DTYPE_I32: r.moves = feed::MovesType::kI32; break;
    case A2PACK_FEED_DTYPE_I64: r.moves = feed::MovesType::kI64; break;
    default:
      fail(A2PACK_E_INVALID_ARGUMENT, "feed options: moves_dtype {} is not U8, I32 or I64",
           capi::enum_int(o.moves_dtype));
  }
  r.seed = o.seed;
  switch (o.shuffle) {
    case A2PACK_FEED_SHUFFLE_NONE: r.shuffle = false; break;
    case A2PACK_FEED_SHUFFLE_INDEX: r.shuffle_kind = dataset::Shuffle::kIndex; break;
    case A2PACK_FEED_SHUFFLE_STORED: r.shuffle_kind = dataset::Shuffle::kStored; break;
    default:
      fail(A2PACK_E_INVALID_ARGUMENT,
           "feed options: shuffle {} is not 0 (none), 1 (index shuffle) or 2 (stored "
           "permutation)", o.shuffle);
  }
  r.drop_last = o.drop_last != 0;
  r.rank = o.rank;
  r.world = o.world;
  r.epochs = o.epochs;
  r.start_epoch = o.start_epoch;
  switch (capi::enum_int(o.pin)) {
    case A2PACK_FEED_PIN_AUTO: r.pin = feed::Pin::kAuto; break;
    case A2PACK_FEED_PIN_OFF: r.pin = feed::Pin::kOff; break;
    case A2PACK_FEED_PIN_ON: r.pin = feed::Pin::kOn; break;
    default:
      fail(A2PACK_E_INVALID_ARGUMENT, "feed options: pin {} is not AUTO, OFF or ON",
           capi::enum_int(o.pin));
  }
  r.spare_consumer_cpu = o.spare_consumer_cpu != 0;
  r.live = o.live != 0;
  if (!(o.samples_per_insert >= 0) || !std::isfinite(o.samples_per_insert))
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed options: samples_per_insert {} must be finite and at least 0 (0: no limit)",
         o.samples_per_insert);
  r.samples_per_insert = o.samples_per_insert;
  r.min_size = o.min_size;
  r.rate_timeout_ms = o.rate_timeout_ms;
  return r;
}

void require_parent(const a2pack_feed* f) {
  require(f, "feed");
  if (f->f->stamp().forked())
    fail(A2PACK_E_CLOSED, "feed: this process was forked from the one that opened the feed, and "
         "its producer threads are not here; open a new feed in this process");
}

}  // namespace

A2PACK_EXPORT void a2pack_feed_options_init(a2pack_feed_options* o) {
  if (!o) return;
  *o = a2pack_feed_options{};
  o->size = sizeof *o;
  o->batch_size = 4096;
  o->depth = 4;
  o->threads = 1;
  o->slots = 0;
  o->columns = A2PACK_FEED_COLUMNS_DEFAULT;
  o->moves_dtype = A2PACK_FEED_DTYPE_U8;
  o->seed = 0;
  o->shuffle = A2PACK_FEED_SHUFFLE_INDEX;
  o->drop_last = 0;
  o->rank = 0;
  o->world = 1;
  o->epochs = 0;
  o->start_epoch = 0;
  o->pin = A2PACK_FEED_PIN_AUTO;
  o->spare_consumer_cpu = 1;
  o->rate_timeout_ms = 60000;
}

A2PACK_EXPORT a2pack_status a2pack_feed_open(const a2pack_dataset* ds, const int64_t* indices,
                                             uint64_t n, const a2pack_feed_options* opts,
                                             a2pack_feed** out) {
  capi::reset_out(out);
  return guard([&] {
    require(ds, "dataset");
    require(out, "out");
    auto o = convert(capi::read_options(opts, a2pack_feed_options_init));
    std::vector<int64_t> idx;
    if (indices) idx.assign(indices, indices + n);
    auto f = std::make_unique<feed::Feed>(capi::share_dataset(ds), std::move(idx), !indices, o);
    *out = new a2pack_feed{std::move(f)};
  });
}

A2PACK_EXPORT void a2pack_feed_close(a2pack_feed* f) {
  if (!f) return;
  // In a forked child the producer threads cannot be joined (they are the
  // parent's) and the ring's lock may be held by one of them: the child's
  // copy is left alone, a leak of the child's address space only.
  if (f->f->stamp().forked()) return;
  delete f;
}

A2PACK_EXPORT a2pack_status a2pack_feed_next_timeout(a2pack_feed* f, int64_t timeout_ms,
                                                     a2pack_feed_batch** out, int32_t* ended) {
  capi::reset_out(out);
  if (ended) *ended = 0;
  return guard([&] {
    require_parent(f);
    require(out, "out");
    bool end = false;
    feed::Slot* s = f->f->next(std::chrono::milliseconds(timeout_ms < 0 ? -1 : timeout_ms), &end);
    *out = s ? handle_of(s) : nullptr;
    if (ended) *ended = end ? 1 : 0;
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_next(a2pack_feed* f, a2pack_feed_batch** out) {
  return a2pack_feed_next_timeout(f, -1, out, nullptr);
}

A2PACK_EXPORT void a2pack_feed_batch_retain(a2pack_feed_batch* b) {
  if (b) slot_of(b)->refs.fetch_add(1, std::memory_order_relaxed);
}

A2PACK_EXPORT void a2pack_feed_batch_release(a2pack_feed_batch* b) {
  if (b) feed::Ring::release(slot_of(b));
}

A2PACK_EXPORT a2pack_status a2pack_feed_batch_get_info(const a2pack_feed_batch* b,
                                                       a2pack_feed_batch_info* out) {
  return guard([&] {
    require(b, "batch");
    const feed::Slot* s = slot_of(b);
    a2pack_feed_batch_info i{};
    i.size = sizeof i;
    i.epoch = s->epoch;
    i.batch = s->batch;
    i.rows = s->rows;
    i.global_rows = s->global_rows;
    i.sequence = s->sequence;
    capi::write_out(out, i);
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_advance(a2pack_feed* f, a2pack_feed_batch* const* release,
                                                size_t release_count, int64_t timeout_ms,
                                                a2pack_feed_batch** out,
                                                a2pack_feed_batch_info* info, int32_t* ended) {
  if (release)
    for (size_t i = 0; i < release_count; ++i) a2pack_feed_batch_release(release[i]);
  const a2pack_status st = a2pack_feed_next_timeout(f, timeout_ms, out, ended);
  if (st == A2PACK_OK && info && out && *out) return a2pack_feed_batch_get_info(*out, info);
  return st;
}

A2PACK_EXPORT a2pack_status a2pack_feed_batch_column(const a2pack_feed_batch* b,
                                                     a2pack_feed_column column,
                                                     a2pack_feed_column_view* out) {
  return guard([&] {
    require(b, "batch");
    const long long c = capi::enum_int(column);
    if (c < 0 || c >= A2PACK_FEED_COLUMN_COUNT)
      fail(A2PACK_E_INVALID_ARGUMENT, "feed: column {} is not an a2pack_feed_column", c);
    const feed::Slot* s = slot_of(b);
    const feed::Ring& r = *s->ring;
    if (!r.has(static_cast<size_t>(c)))
      fail(A2PACK_E_NOT_FOUND, "feed: column {} was not selected when the feed was opened", c);
    const feed::ColumnSpec& spec = feed::kColumnSpecs[c];
    const a2pack_feed_dtype dtype = c == A2PACK_FEED_MOVES ? r.moves_dtype : spec.dtype;
    a2pack_feed_column_view v{};
    v.size = sizeof v;
    v.data = s->rows ? s->base + r.offset(static_cast<size_t>(c)) : nullptr;
    v.dtype = dtype;
    v.ndim = spec.ndim;
    v.rows = s->rows;
    v.width = spec.width;
    v.nbytes = s->rows * spec.width * feed::dtype_bytes(dtype);
    v.pinned = r.pinned() ? 1 : 0;
    capi::write_out(out, v);
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_column_info_get(a2pack_feed_column column,
                                                       a2pack_feed_column_info* out) {
  return guard([&] {
    const long long c = capi::enum_int(column);
    if (c < 0 || c >= A2PACK_FEED_COLUMN_COUNT)
      fail(A2PACK_E_INVALID_ARGUMENT, "feed: column {} is not an a2pack_feed_column", c);
    const feed::ColumnSpec& spec = feed::kColumnSpecs[c];
    a2pack_feed_column_info i{};
    i.size = sizeof i;
    i.name = spec.name;
    i.dtype = spec.dtype;
    i.ndim = spec.ndim;
    i.width = spec.width;
    i.itemsize = static_cast<uint32_t>(feed::dtype_bytes(spec.dtype));
    i.is_default = (A2PACK_FEED_COLUMNS_DEFAULT >> c) & 1;
    i.always = c == A2PACK_FEED_INDICES;
    capi::write_out(out, i);
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_stats_get(const a2pack_feed* f, a2pack_feed_stats* out) {
  return guard([&] {
    require_parent(f);
    feed::Stats st = f->f->stats();
    a2pack_feed_stats o{};
    o.size = sizeof o;
    o.batches_served = st.batches_served;
    o.rows_served = st.rows_served;
    o.consumer_wait_ns = st.consumer_wait_ns;
    o.producer_idle_ns = st.producer_idle_ns;
    o.producer_busy_ns = st.producer_busy_ns;
    o.epoch = st.epoch;
    o.next_batch = st.next_batch;
    o.batches_per_epoch = st.batches_per_epoch;
    o.slot_bytes = st.slot_bytes;
    o.threads = st.threads;
    o.depth = st.depth;
    o.slots = st.slots;
    o.held = st.held;
    o.ready = st.ready;
    o.pinned = st.pinned ? 1 : 0;
    o.seed = st.seed;
    o.spared_cpu = st.spared_cpu;
    capi::write_out(out, o);
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_state(const a2pack_feed* f, uint8_t** out_data,
                                              size_t* out_len) {
  return capi::bytes_out(out_data, out_len, [&] {
    require_parent(f);
    return f->f->save_state();
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_load_state(a2pack_feed* f, const void* data, size_t len) {
  return guard([&] {
    require_parent(f);
    require(data, "data");
    f->f->load_state(data, len);
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_open_mix(const a2pack_dataset* ds,
                                                 const a2pack_dataset_mix* mix,
                                                 uint64_t first_batch,
                                                 const a2pack_feed_options* opts,
                                                 a2pack_feed** out) {
  capi::reset_out(out);
  return guard([&] {
    require(ds, "dataset");
    require(mix, "mix");
    require(out, "out");
    auto o = convert(capi::read_options(opts, a2pack_feed_options_init));
    auto f = std::make_unique<feed::Feed>(capi::share_dataset(ds), capi::mix_of(mix), first_batch, o);
    *out = new a2pack_feed{std::move(f)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_refresh(a2pack_feed* f, uint64_t* rows) {
  return guard([&] {
    require_parent(f);
    const uint64_t n = f->f->refresh();
    if (rows) *rows = n;
  });
}

A2PACK_EXPORT void a2pack_feed_shards_options_init(a2pack_feed_shards_options* o) {
  if (!o) return;
  *o = a2pack_feed_shards_options{};
  o->size = sizeof *o;
  const feed::ShardOptions d;
  o->budget_bytes = d.budget_bytes;
  o->window = d.window;
  o->verify_crc = d.verify_crc ? 1 : 0;
  o->huge_pages = d.huge_pages ? 1 : 0;
  o->prefetch = d.prefetch ? 1 : 0;
}

A2PACK_EXPORT a2pack_status a2pack_feed_open_shards(const char* dir,
                                                    const a2pack_feed_shards_options* shards,
                                                    const a2pack_feed_options* opts,
                                                    a2pack_feed** out) {
  capi::reset_out(out);
  return guard([&] {
    require(dir, "dir");
    require(out, "out");
    const auto o = convert(capi::read_options(opts, a2pack_feed_options_init));
    const auto so = capi::read_options(shards, a2pack_feed_shards_options_init);
    feed::ShardOptions r;
    r.budget_bytes = so.budget_bytes;
    r.window = so.window;
    r.verify_crc = so.verify_crc != 0;
    r.huge_pages = so.huge_pages != 0;
    r.prefetch = so.prefetch != 0;
    *out = new a2pack_feed{feed::Feed::over_shards(dir, r, o)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_batch_indices(a2pack_feed* f, uint64_t epoch,
                                                      uint64_t batch, int64_t* out, size_t* n) {
  if (n) *n = 0;
  return guard([&] {
    require_parent(f);
    require(n, "n");
    *n = out ? f->f->batch_indices({epoch, batch}, out) : f->f->order().max_rows();
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_seek(a2pack_feed* f, uint64_t epoch, uint64_t batch) {
  return guard([&] {
    require_parent(f);
    f->f->seek({epoch, batch});
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_shards_info_get(const a2pack_feed* f, uint64_t epoch,
                                                        a2pack_feed_shards_info* out) {
  return guard([&] {
    require(f, "feed");
    const feed::ShardsInfo si = f->f->shards_info(epoch);
    a2pack_feed_shards_info i{};
    i.size = sizeof i;
    i.rows = si.manifest.rows;
    i.runs = si.manifest.runs;
    i.shards = si.manifest.shards.size();
    i.max_shard_bytes = si.max_shard_bytes;
    i.window_shards = si.window_shards;
    i.batches = si.batches;
    i.rank_shards = si.rank_shards;
    i.rank_rows = si.rank_rows;
    i.loads = si.cache.loads;
    i.evictions = si.cache.evictions;
    i.bytes_read = si.cache.bytes_read;
    i.resident_bytes = si.cache.resident_bytes;
    i.resident_shards = si.cache.resident_shards;
    i.load_wait_s = si.cache.load_wait_s;
    i.load_s = si.cache.load_s;
    capi::write_out(out, i);
  });
}

A2PACK_EXPORT void a2pack_feed_replay_options_init(a2pack_feed_replay_options* o) {
  if (!o) return;
  *o = a2pack_feed_replay_options{};
  o->size = sizeof *o;
  const order::ReplayOrder::Options d;
  o->window = d.window;
  o->stride = d.stride;
  o->pad_short = d.pad_short ? 1 : 0;
  o->replacement = d.replacement ? 1 : 0;
  o->recent = d.recent;
  o->priorities = nullptr;
}

A2PACK_EXPORT a2pack_status a2pack_feed_open_replay(const a2pack_dataset* ds,
                                                    const a2pack_feed_replay_options* replay,
                                                    const a2pack_feed_options* opts,
                                                    a2pack_feed** out) {
  capi::reset_out(out);
  return guard([&] {
    require(ds, "dataset");
    require(out, "out");
    const auto o = convert(capi::read_options(opts, a2pack_feed_options_init));
    const auto ro = capi::read_options(replay, a2pack_feed_replay_options_init);
    order::ReplayOrder::Options r;
    r.window = ro.window;
    r.stride = ro.stride;
    r.pad_short = ro.pad_short != 0;
    r.replacement = ro.replacement != 0;
    r.recent = ro.recent;
    if (ro.priorities) r.priorities = ro.priorities->p;
    *out = new a2pack_feed{feed::Feed::over_replay(capi::share_dataset(ds), r, o)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_set_weights(a2pack_feed* f, const double* weights,
                                                    size_t n) {
  return guard([&] {
    require_parent(f);
    if (n) require(weights, "weights");
    f->f->set_weights(std::vector<double>(weights, weights + n));
  });
}

A2PACK_EXPORT a2pack_status a2pack_feed_put_back(a2pack_feed* f, a2pack_feed_batch** batch) {
  return guard([&] {
    require_parent(f);
    require(batch, "batch");
    if (!*batch) return;
    f->f->put_back(slot_of(*batch));
    *batch = nullptr;  // the reference is the feed's again
  });
}

A2PACK_EXPORT void a2pack_feed_batch_release_cells(a2pack_feed_batch** const* cells, size_t n) {
  if (!cells) return;
  for (size_t i = 0; i < n; ++i)
    if (cells[i])
      if (a2pack_feed_batch* b = __atomic_exchange_n(cells[i], nullptr, __ATOMIC_ACQ_REL))
        a2pack_feed_batch_release(b);
}

namespace a2pack::capi {
const a2pack_feed_api* feed_api_table() {
  static const a2pack_feed_api table = {
      sizeof(a2pack_feed_api),
      a2pack_feed_options_init,
      a2pack_feed_open,
      a2pack_feed_close,
      a2pack_feed_next,
      a2pack_feed_next_timeout,
      a2pack_feed_batch_retain,
      a2pack_feed_batch_release,
      a2pack_feed_batch_get_info,
      a2pack_feed_batch_column,
      a2pack_feed_stats_get,
      a2pack_feed_state,
      a2pack_feed_load_state,
      a2pack_feed_open_mix,
      a2pack_feed_set_weights,
      a2pack_feed_advance,
      a2pack_feed_put_back,
      a2pack_feed_batch_release_cells,
      a2pack_feed_batch_info_get,
      a2pack_feed_state_save,
      a2pack_feed_state_load,
      a2pack_feed_shards_options_init,
      a2pack_feed_open_shards,
      a2pack_feed_replay_options_init,
      a2pack_feed_open_replay,
      a2pack_feed_refresh,
      a2pack_feed_column_info_get,
      a2pack_feed_batch_indices,
      a2pack_feed_seek,
      a2pack_feed_shards_info_get,
      a2pack_feed_batch_dlpack,
  };
  return &table;
}
}  // namespace a2pack::capi

// The one spelling of each verb (`<noun>_info_get`, `_state_save`, `_state_load`,
// `_stats_get`); the first names stay as aliases.
A2PACK_EXPORT a2pack_status a2pack_feed_batch_info_get(const a2pack_feed_batch *b,
                                                       a2pack_feed_batch_info *out) {
  return a2pack_feed_batch_get_info(b, out);
}

A2PACK_EXPORT a2pack_status a2pack_feed_state_save(const a2pack_feed *f, uint8_t **out_data,
                                                   size_t *out_len) {
  return a2pack_feed_state(f, out_data, out_len);
}

A2PACK_EXPORT a2pack_status a2pack_feed_state_load(a2pack_feed *f, const void *data, size_t len) {
  return a2pack_feed_load_state(f, data, len);
}
