// C ABI of the mixing sampler (dataset section): weighted batches over
// several index sources, checkpointable, any rank's part of any batch.
#include <string>
#include <vector>

#include "capi/common.hpp"
#include "dataset/mix_sampler.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

struct a2pack_dataset_mix {
  dataset::MixSampler m;
};

namespace a2pack::capi {
// For the feed (dataset_feed.cpp), which copies a caller's mix.
const dataset::MixSampler& mix_of(const a2pack_dataset_mix* h) { return h->m; }
}  // namespace a2pack::capi

A2PACK_EXPORT a2pack_status a2pack_dataset_mix_open(const a2pack_dataset_mix_source* sources,
                                                    const double* weights, size_t n_sources,
                                                    uint64_t seed, size_t batch_size,
                                                    a2pack_dataset_mix** out) {
  if (out) *out = nullptr;
  return guard([&] {
    require(out, "out");
    require(sources, "sources");
    require(weights, "weights");
    std::vector<dataset::MixSampler::Source> src(n_sources);
    for (size_t i = 0; i < n_sources; ++i) {
      src[i].identity = sources[i].indices == nullptr;
      src[i].n = sources[i].n;
      if (sources[i].indices)
        src[i].indices.assign(sources[i].indices, sources[i].indices + sources[i].n);
    }
    *out = new a2pack_dataset_mix{dataset::MixSampler(
        std::move(src), std::vector<double>(weights, weights + n_sources), seed, batch_size)};
  });
}

A2PACK_EXPORT void a2pack_dataset_mix_close(a2pack_dataset_mix* m) { delete m; }

A2PACK_EXPORT a2pack_status a2pack_dataset_mix_batch(a2pack_dataset_mix* m, uint64_t b,
                                                     uint32_t rank, uint32_t world,
                                                     int64_t* out_indices, uint32_t* out_sources,
                                                     size_t* out_n) {
  if (out_n) *out_n = 0;
  return guard([&] {
    require(m, "mix");
    require(out_n, "out_n");
    *out_n = m->m.fill_part(b, rank, world, out_indices, out_sources);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_mix_counts(const a2pack_dataset_mix* m, uint64_t b,
                                                      uint64_t* out_counts) {
  return guard([&] {
    require(m, "mix");
    require(out_counts, "out_counts");
    m->m.batch_counts(b, out_counts);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_mix_consumed(const a2pack_dataset_mix* m, uint64_t b,
                                                        uint64_t* out_consumed) {
  return guard([&] {
    require(m, "mix");
    require(out_consumed, "out_consumed");
    for (size_t i = 0; i < m->m.source_count(); ++i) out_consumed[i] = m->m.consumed(i, b);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_mix_get_weights(const a2pack_dataset_mix* m,
                                                           double* out_weights) {
  return guard([&] {
    require(m, "mix");
    require(out_weights, "out_weights");
    const auto& w = m->m.weights();
    std::copy(w.begin(), w.end(), out_weights);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_mix_set_weights(a2pack_dataset_mix* m,
                                                           const double* weights, size_t n,
                                                           uint64_t from_batch) {
  return guard([&] {
    require(m, "mix");
    require(weights, "weights");
    m->m.set_weights(std::vector<double>(weights, weights + n), from_batch);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_mix_state(const a2pack_dataset_mix* m,
                                                     uint64_t next_batch, uint8_t** out_data,
                                                     size_t* out_len) {
  return capi::bytes_out(out_data, out_len, [&] {
    require(m, "mix");
    return m->m.save_state(next_batch);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_mix_load_state(a2pack_dataset_mix* m,
                                                          const void* data, size_t len,
                                                          uint64_t* out_next_batch) {
  return guard([&] {
    require(m, "mix");
    require(data, "data");
    const uint64_t next = m->m.load_state(data, len);
    if (out_next_batch) *out_next_batch = next;
  });
}

// The one spelling of each verb (`<noun>_info_get`, `_state_save`, `_state_load`,
// `_stats_get`); the first names stay as aliases.
A2PACK_EXPORT a2pack_status a2pack_dataset_mix_state_save(const a2pack_dataset_mix *m,
                                                          uint64_t next_batch, uint8_t **out_data,
                                                          size_t *out_len) {
  return a2pack_dataset_mix_state(m, next_batch, out_data, out_len);
}

A2PACK_EXPORT a2pack_status a2pack_dataset_mix_state_load(a2pack_dataset_mix *m, const void *data,
                                                          size_t len, uint64_t *out_next_batch) {
  return a2pack_dataset_mix_load_state(m, data, len, out_next_batch);
}
