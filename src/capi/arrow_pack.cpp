// The packfile's index and statistics as Arrow record batches (copied: the
// on-disk index is row-wise), through the pack section's public functions,
// and a stream of its runs decoded a batch at a time.
#include <algorithm>

#include "capi/arrow_c.hpp"
#include "capi/common.hpp"
#include "capi/handles.hpp"
#include "pack/reader.hpp"

using namespace a2pack;
using namespace a2pack::capi::arrow;
using a2pack::capi::guard;
using a2pack::capi::require;

namespace {
void check(a2pack_status st) {
  if (st != A2PACK_OK) fail(st, "{}", a2pack_last_error());
}
}  // namespace

A2PACK_EXPORT a2pack_status a2pack_pack_export_arrow_entries(const a2pack_pack* pack,
                                                             ArrowSchema* out_schema,
                                                             ArrowArray* out_array) {
  return guard([&] {
    require(pack, "pack");
    require_out(out_schema, out_array);
    const uint64_t n = a2pack_pack_len(pack);
    Batch b;
    b.owner = std::make_shared<Owner>();
    Owner& o = *b.owner;
    auto* entry = o.alloc<uint64_t>(n);
    auto* offset = o.alloc<uint64_t>(n);
    auto* length = o.alloc<uint32_t>(n);
    auto* kind = o.alloc<uint16_t>(n);
    auto* flags = o.alloc<uint16_t>(n);
    auto* crc = o.alloc<uint32_t>(n);
    auto* raw = o.alloc<uint32_t>(n);
    for (uint64_t i = 0; i < n; ++i) {
      a2pack_pack_entry e{};
      e.size = sizeof e;
      check(a2pack_pack_entry_info(pack, i, &e));
      entry[i] = i;
      offset[i] = e.offset;
      length[i] = e.length;
      kind[i] = e.kind;
      flags[i] = e.flags;
      crc[i] = e.crc32c;
      raw[i] = e.raw_length;
    }
    const auto len = static_cast<int64_t>(n);
    b.length = len;
    b.columns.push_back(primitive("entry", "L", len, entry));
    b.columns.push_back(primitive("offset", "L", len, offset));
    b.columns.push_back(primitive("length", "I", len, length));
    b.columns.push_back(primitive("kind", "S", len, kind));
    b.columns.push_back(primitive("flags", "S", len, flags));
    b.columns.push_back(primitive("crc32c", "I", len, crc));
    b.columns.push_back(primitive("raw_length", "I", len, raw));
    export_batch(std::move(b), out_schema, out_array);
  });
}

A2PACK_EXPORT a2pack_status a2pack_pack_export_arrow_stats(a2pack_pack* pack, uint32_t workers,
                                                           ArrowSchema* out_schema,
                                                           ArrowArray* out_array,
                                                           ArrowSchema* out_hist_schema,
                                                           ArrowArray* out_hist_array) {
  return guard([&] {
    require(pack, "pack");
    require_out(out_schema, out_array);
    if ((out_hist_schema == nullptr) != (out_hist_array == nullptr))
      fail(A2PACK_E_INVALID_ARGUMENT, "out_hist_schema and out_hist_array must both be given or "
           "both be NULL");
    a2pack_pack_stats st{};
    st.size = sizeof st;
    check(a2pack_pack_stats_get(pack, workers, &st));
    Batch b;
    b.owner = std::make_shared<Owner>();
    Owner& o = *b.owner;
    auto u64 = [&](const char* name, uint64_t v) {
      auto* p = o.alloc<uint64_t>(1);
      *p = v;
      b.columns.push_back(primitive(name, "L", 1, p));
    };
    auto u32 = [&](const char* name, uint32_t v) {
      auto* p = o.alloc<uint32_t>(1);
      *p = v;
      b.columns.push_back(primitive(name, "I", 1, p));
    };
    b.length = 1;
    u64("count", st.count);
    u64("total_steps", st.total_steps);
    u32("min_len", st.min_len);
    u32("max_len", st.max_len);
    auto* mean = o.alloc<double>(1);
    *mean = st.mean_len;
    b.columns.push_back(primitive("mean_len", "g", 1, mean));
    u32("p50", st.p50);
    u32("p90", st.p90);
    u32("p99", st.p99);
    auto* from_block = o.alloc<uint8_t>(1);  // Arrow booleans are bits: bit 0
    *from_block = st.from_block ? 1 : 0;
    b.columns.push_back(primitive("from_block", "b", 1, from_block));

    Batch h;
    if (out_hist_schema) {
      a2pack_pack_histograms hist{};
      hist.size = sizeof hist;
      check(a2pack_pack_histograms_get(pack, workers, &hist));
      h.owner = std::make_shared<Owner>();
      const size_t n = hist.n_tiles;
      auto* tiles = h.owner->alloc<uint32_t>(n);
      auto* counts = h.owner->alloc<uint64_t>(n);
      for (size_t i = 0; i < n; ++i) {
        tiles[i] = hist.tile_values[i];
        counts[i] = hist.tile_counts[i];
      }
      h.length = static_cast<int64_t>(n);
      h.columns.push_back(primitive("highest_tile", "I", h.length, tiles));
      h.columns.push_back(primitive("runs", "L", h.length, counts));
    }
    ArrowSchema s{};
    ArrowArray a{};
    export_batch(std::move(b), &s, &a);
    if (out_hist_schema) {
      try {
        export_batch(std::move(h), out_hist_schema, out_hist_array);
      } catch (...) {
        s.release(&s);
        a.release(&a);
        throw;
      }
    }
    *out_schema = s;
    *out_array = a;
  });
}

namespace {

constexpr size_t kDefaultBatchRuns = 1024;

// A decoded run batch's columns with `run` (index in the batch) replaced by
// `entry` (the pack entry), as uint64.
Batch pack_columns(run::Batch&& decoded, const uint64_t* ids, int layout) {
  a2pack_run_batch* h = nullptr;
  capi::hand_out(std::move(decoded), &h);
  Batch b;
  try {
    b = run_batch_columns(h, layout);
  } catch (...) {
    capi::release(h);
    throw;
  }
  capi::release(h);  // the columns hold the batch now
  const auto* run = static_cast<const uint32_t*>(b.columns[0].buffers[1]);
  auto* entry = b.owner->alloc<uint64_t>(static_cast<size_t>(b.length));
  for (int64_t i = 0; i < b.length; ++i) entry[i] = ids[run[i]];
  b.columns[0] = primitive("entry", "L", b.length, entry);
  return b;
}

}  // namespace

A2PACK_EXPORT a2pack_status a2pack_pack_export_arrow_stream(const a2pack_pack* pack,
                                                            a2pack_arrow_layout layout,
                                                            const uint64_t* entries, size_t n,
                                                            size_t batch_runs, uint32_t workers,
                                                            uint32_t flags,
                                                            ArrowArrayStream* out) {
  return guard([&] {
    require(pack, "pack");
    require(out, "out");
    long long l = capi::enum_int(layout);
    if (l != A2PACK_ARROW_STEPS && l != A2PACK_ARROW_RUNS)
      fail(A2PACK_E_INVALID_ARGUMENT, "layout is {}; expected A2PACK_ARROW_STEPS (0) or "
           "A2PACK_ARROW_RUNS (1)", l);
    if (flags & ~uint32_t{A2PACK_PACK_NO_VERIFY})
      fail(A2PACK_E_INVALID_ARGUMENT, "flags has unknown bits {:#x}", flags);
    auto reader = capi::share_pack(pack);
    const bool verify = reader->options().verify_crc && !(flags & A2PACK_PACK_NO_VERIFY);
    const uint64_t len = a2pack_pack_len(pack);
    auto order = std::make_shared<std::vector<uint64_t>>();
    if (entries) {
      for (size_t i = 0; i < n; ++i)
        if (entries[i] >= len)
          fail(A2PACK_E_OUT_OF_RANGE, "entries[{}] = {} is outside the pack's {} entries", i,
               entries[i], len);
      order->assign(entries, entries + n);
    } else {
      order->resize(len);
      for (uint64_t i = 0; i < len; ++i) (*order)[i] = i;
    }
    const size_t chunk = batch_runs ? batch_runs : kDefaultBatchRuns;
    const int lay = static_cast<int>(l);
    Batch proto = pack_columns(run::Batch{}, nullptr, lay);
    auto pos = std::make_shared<size_t>(0);
    NextFn next = [reader, order, chunk, pos, workers, verify, lay](Batch& b) {
      if (*pos >= order->size()) return false;
      const size_t m = std::min(chunk, order->size() - *pos);
      const uint64_t* ids = order->data() + *pos;
      b = pack_columns(reader->decode_batch(ids, m, workers, verify), ids, lay);
      *pos += m;
      return true;
    };
    export_stream(std::move(proto), std::move(next), out);
  });
}
