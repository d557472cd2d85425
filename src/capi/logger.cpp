// C ABI of the logger section: the data logger and its decoder.
#include "capi/api_table.hpp"
#include "capi/common.hpp"
#include "logger/decoder.hpp"
#include "logger/logger.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

struct a2pack_logger {
  logger::Logger core;
  template <typename... A>
  explicit a2pack_logger(A&&... a) : core(std::forward<A>(a)...) {}
};

struct a2pack_logger_data {
  logger::Decoded d;
};

A2PACK_EXPORT void a2pack_logger_options_init(a2pack_logger_options* o) {
  if (!o) return;
  logger::Options d;
  *o = {};
  o->size = sizeof *o;
  o->ring_bytes = d.ring_bytes;
  o->rotate_bytes = d.rotate_bytes;
  o->zstd_level = d.zstd_level;
  o->frame_bytes = d.frame_bytes;
  o->flush_interval_ms = d.flush_interval_ms;
  o->when_full = A2PACK_LOGGER_BLOCK;
  o->compress_literals = d.compress_literals;
}

A2PACK_EXPORT a2pack_status a2pack_logger_open(const char* dir, const a2pack_logger_options* opts,
                                               a2pack_logger** out) {
  if (out) *out = nullptr;
  return guard([&] {
    require(out, "out");
    require(dir, "dir");
    auto o = capi::read_options(opts, a2pack_logger_options_init);
    if (o.when_full > A2PACK_LOGGER_RETURN_FULL)
      fail(A2PACK_E_INVALID_ARGUMENT, "when_full must be A2PACK_LOGGER_BLOCK or "
           "A2PACK_LOGGER_RETURN_FULL, got {}", o.when_full);
    logger::Options lo;
    lo.ring_bytes = o.ring_bytes;
    lo.rotate_bytes = o.rotate_bytes;
    lo.zstd_level = o.zstd_level;
    lo.frame_bytes = o.frame_bytes;
    lo.flush_interval_ms = o.flush_interval_ms;
    lo.fail_when_full = o.when_full == A2PACK_LOGGER_RETURN_FULL;
    if (o.writer_threads > 64)
      fail(A2PACK_E_INVALID_ARGUMENT, "writer_threads must be at most 64, got {}", o.writer_threads);
    lo.writer_threads = o.writer_threads;
    if (o.compress_literals > 1)
      fail(A2PACK_E_INVALID_ARGUMENT, "compress_literals must be 0 or 1, got {}", o.compress_literals);
    lo.compress_literals = o.compress_literals != 0;
    *out = new a2pack_logger(std::string(dir), lo);
  });
}

A2PACK_EXPORT a2pack_status a2pack_logger_register_stream(a2pack_logger* h,
                                                          const char* labels_json,
                                                          double epoch_scale, double value_scale,
                                                          uint32_t flags, uint32_t* out_id) {
  return guard([&] {
    require(h, "logger");
    require(out_id, "out_stream_id");
    *out_id = h->core.register_stream(labels_json ? labels_json : "", epoch_scale, value_scale,
                                      flags);
  });
}

A2PACK_EXPORT a2pack_status a2pack_logger_record(a2pack_logger* h, uint32_t stream_id,
                                                 double epoch, const uint32_t* indices,
                                                 const double* values, size_t n) {
  return guard([&] {
    require(h, "logger");
    h->core.record(stream_id, epoch, indices, values, n);
  });
}

A2PACK_EXPORT a2pack_status a2pack_logger_record_batch(a2pack_logger* h, size_t n,
                                                       const uint32_t* stream_ids,
                                                       const double* epochs,
                                                       const uint64_t* offsets,
                                                       const uint32_t* indices,
                                                       const double* values, size_t* n_done) {
  if (n_done) *n_done = 0;
  size_t done = 0;
  a2pack_status st = guard([&] {
    require(h, "logger");
    if (n) {
      require(stream_ids, "stream_ids");
      require(epochs, "epochs");
      require(offsets, "offsets");
      if (offsets[n] != offsets[0]) {
        require(indices, "indices");
        require(values, "values");
      }
    }
    h->core.record_batch(n, stream_ids, epochs, offsets, indices, values, &done);
  });
  if (n_done) *n_done = done;
  return st;
}

A2PACK_EXPORT a2pack_status a2pack_logger_flush(a2pack_logger* h) {
  return guard([&] {
    require(h, "logger");
    h->core.flush();
  });
}

A2PACK_EXPORT a2pack_status a2pack_logger_finish(a2pack_logger* h) {
  return guard([&] {
    require(h, "logger");
    h->core.close();
  });
}

A2PACK_EXPORT a2pack_status a2pack_logger_close(a2pack_logger* h) {
  if (!h) return A2PACK_OK;
  // In a forked child the logger's threads do not exist and its locks may
  // be held: destroying it could hang, so the child leaks it.
  if (h->core.forked()) return A2PACK_OK;
  a2pack_status st = guard([&] { h->core.close(); });
  delete h;
  return st;
}

A2PACK_EXPORT a2pack_status a2pack_logger_stats_get(const a2pack_logger* h,
                                                    a2pack_logger_stats* out) {
  return guard([&] {
    require(h, "logger");
    require(out, "out");
    logger::Stats s = h->core.stats();
    a2pack_logger_stats f{};
    f.size = sizeof f;
    f.records = s.records;
    f.values = s.values;
    f.raw_bytes = s.raw_bytes;
    f.frames = s.frames;
    f.file_bytes = s.file_bytes;
    f.segments = s.segments;
    f.full_events = s.full_events;
    f.queued_bytes = s.queued_bytes;
    f.max_queued_bytes = s.max_queued_bytes;
    f.flushes = s.flushes;
    capi::write_out(out, f);
  });
}

// ------------------------------------------------------------------ decoding

A2PACK_EXPORT void a2pack_logger_decode_options_init(a2pack_logger_decode_options* o) {
  if (!o) return;
  *o = {};
  o->size = sizeof *o;
}

A2PACK_EXPORT a2pack_status a2pack_logger_decode(const char* dir,
                                                 const a2pack_logger_decode_options* opts,
                                                 a2pack_logger_data** out) {
  if (out) *out = nullptr;
  return guard([&] {
    require(out, "out");
    require(dir, "dir");
    auto o = capi::read_options(opts, a2pack_logger_decode_options_init);
    logger::DecodeOptions d;
    d.workers = o.workers;
    d.strict = o.strict != 0;
    if (o.max_frame_records) d.max_frame_records = o.max_frame_records;
    if (o.max_frame_bytes) d.max_frame_bytes = o.max_frame_bytes;
    if (o.max_records) d.max_records = o.max_records;
    if (o.max_bytes) d.max_bytes = o.max_bytes;
    if (o.max_expansion) d.max_expansion = o.max_expansion;
    *out = new a2pack_logger_data{logger::decode_dir(dir, d)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_logger_data_columns(const a2pack_logger_data* h,
                                                       a2pack_logger_columns* out) {
  return guard([&] {
    require(h, "data");
    require(out, "out");
    const auto& d = h->d;
    a2pack_logger_columns c{};
    c.size = sizeof c;
    c.n_records = d.stream_ids.size();
    c.n_values = d.indices.size();
    c.stream_ids = d.stream_ids.data();
    c.epochs = d.epochs.data();
    c.offsets = d.offsets.data();
    c.indices = d.indices.data();
    c.values = d.values.data();
    capi::write_out(out, c);
  });
}

A2PACK_EXPORT a2pack_status a2pack_logger_data_summary(const a2pack_logger_data* h,
                                                       a2pack_logger_summary* out) {
  return guard([&] {
    require(h, "data");
    require(out, "out");
    const auto& d = h->d;
    a2pack_logger_summary s{};
    s.size = sizeof s;
    s.segments = d.segments;
    s.frames = d.frames;
    s.bad_frames = d.bad_frames;
    s.file_bytes = d.file_bytes;
    s.raw_bytes = d.raw_bytes;
    s.records = d.stream_ids.size();
    s.values = d.indices.size();
    s.streams = d.streams.size();
    s.problems = d.problems.size();
    for (const auto& p : d.problems) s.notes += p.note;
    capi::write_out(out, s);
  });
}

A2PACK_EXPORT a2pack_status a2pack_logger_data_stream(const a2pack_logger_data* h, size_t i,
                                                      a2pack_logger_stream_info* out) {
  return guard([&] {
    require(h, "data");
    require(out, "out");
    if (i >= h->d.streams.size())
      fail(A2PACK_E_OUT_OF_RANGE, "stream {} out of range: {} streams", i, h->d.streams.size());
    const auto& m = h->d.streams[i];
    a2pack_logger_stream_info s{};
    s.size = sizeof s;
    s.stream_id = m.id;
    s.flags = m.info.flags;
    s.epoch_scale = m.info.epoch_scale;
    s.value_scale = m.info.value_scale;
    s.labels_json = m.labels_json.c_str();
    capi::write_out(out, s);
  });
}

A2PACK_EXPORT a2pack_status a2pack_logger_data_problem(const a2pack_logger_data* h, size_t i,
                                                       a2pack_logger_problem* out) {
  return guard([&] {
    require(h, "data");
    require(out, "out");
    if (i >= h->d.problems.size())
      fail(A2PACK_E_OUT_OF_RANGE, "problem {} out of range: {} problems", i,
           h->d.problems.size());
    const auto& p = h->d.problems[i];
    a2pack_logger_problem s{};
    s.size = sizeof s;
    s.status = p.status;
    s.offset = p.offset;
    s.path = p.path.c_str();
    s.message = p.message.c_str();
    s.note = p.note;
    capi::write_out(out, s);
  });
}

A2PACK_EXPORT void a2pack_logger_data_close(a2pack_logger_data* h) { delete h; }

namespace a2pack::capi {
const a2pack_logger_api* logger_api_table() {
  static const a2pack_logger_api table = {
      sizeof(a2pack_logger_api),
      a2pack_logger_options_init,
      a2pack_logger_open,
      a2pack_logger_register_stream,
      a2pack_logger_record,
      a2pack_logger_record_batch,
      a2pack_logger_flush,
      a2pack_logger_finish,
      a2pack_logger_close,
      a2pack_logger_stats_get,
      a2pack_logger_decode_options_init,
      a2pack_logger_decode,
      a2pack_logger_data_columns,
      a2pack_logger_data_summary,
      a2pack_logger_data_stream,
      a2pack_logger_data_problem,
      a2pack_logger_data_close,
  };
  return &table;
}
}  // namespace a2pack::capi
