// Dataset rows as Arrow record batches: a gather into fresh column buffers
// (the rows are stored row-wise, so any columnar form is one copy), and a
// stream over the whole dataset or a row selection that holds the rows.
#include <algorithm>

#include "capi/arrow_c.hpp"
#include "capi/common.hpp"
#include "dataset/dataset.hpp"

using namespace a2pack;
using namespace a2pack::capi::arrow;
using a2pack::capi::guard;
using a2pack::capi::require;

namespace {

constexpr size_t kDefaultChunkRows = 65536;

// Rows idx[0..n) (or first..first+n when idx is null) as one batch.
Batch gather(const dataset::Dataset& d, const int64_t* idx, size_t n, uint32_t workers) {
  Batch b;
  b.owner = std::make_shared<Owner>();
  Owner& o = *b.owner;
  dataset::ColumnsOut c;
  c.boards = o.alloc<uint64_t>(n);
  c.exponents = o.alloc<uint8_t>(n * 16);
  c.moves = o.alloc<uint8_t>(n);
  c.legal_mask = o.alloc<uint8_t>(n);
  c.ev_values = o.alloc<float>(n * 4);
  c.run_ids = o.alloc<uint32_t>(n);
  c.step_indices = o.alloc<uint16_t>(n);
  if (n) d.gather_columns(idx, n, c, workers);
  const auto len = static_cast<int64_t>(n);
  b.length = len;
  b.columns.push_back(primitive("board", "L", len, c.boards));
  b.columns.push_back(fixed_list("exponents", 16, len, primitive("", "C", len * 16, c.exponents)));
  b.columns.push_back(primitive("move", "C", len, c.moves));
  b.columns.push_back(primitive("legal_mask", "C", len, c.legal_mask));
  b.columns.push_back(fixed_list("ev_values", 4, len, primitive("", "f", len * 4, c.ev_values)));
  b.columns.push_back(primitive("run_id", "I", len, c.run_ids));
  b.columns.push_back(primitive("step_index", "S", len, c.step_indices));
  return b;
}

}  // namespace

A2PACK_EXPORT a2pack_status a2pack_dataset_export_arrow(const a2pack_dataset* ds,
                                                        const int64_t* idx, size_t n,
                                                        uint32_t workers,
                                                        ArrowSchema* out_schema,
                                                        ArrowArray* out_array) {
  return guard([&] {
    require(ds, "dataset");
    require_out(out_schema, out_array);
    if (n) require(idx, "idx");
    auto d = capi::share_dataset(ds);
    export_batch(gather(*d, idx, n, workers), out_schema, out_array);
  });
}

A2PACK_EXPORT a2pack_status a2pack_dataset_export_arrow_stream(const a2pack_dataset* ds,
                                                               const int64_t* idx, size_t n,
                                                               size_t chunk_rows, uint32_t workers,
                                                               ArrowArrayStream* out) {
  return guard([&] {
    require(ds, "dataset");
    require(out, "out");
    auto d = capi::share_dataset(ds);
    // The row order: the caller's indices (checked now, copied), or all rows.
    auto order = std::make_shared<std::vector<int64_t>>();
    uint64_t total = d->rows();
    if (idx) {
      const auto rows = static_cast<int64_t>(d->rows());
      for (size_t i = 0; i < n; ++i)
        if (idx[i] < 0 || idx[i] >= rows)
          fail(A2PACK_E_OUT_OF_RANGE, "idx[{}] = {} is outside the dataset's {} rows", i, idx[i],
               rows);
      order->assign(idx, idx + n);
      total = n;
    }
    const size_t chunk = chunk_rows ? chunk_rows : kDefaultChunkRows;
    Batch proto = gather(*d, nullptr, 0, 1);
    auto pos = std::make_shared<uint64_t>(0);
    auto scratch = std::make_shared<std::vector<int64_t>>();
    NextFn next = [d, order, total, chunk, pos, scratch, workers, use_idx = idx != nullptr](
                      Batch& b) {
      if (*pos >= total) return false;
      const size_t m = static_cast<size_t>(std::min<uint64_t>(chunk, total - *pos));
      const int64_t* rows;
      if (use_idx) {
        rows = order->data() + *pos;
      } else {
        scratch->resize(m);
        for (size_t i = 0; i < m; ++i) (*scratch)[i] = static_cast<int64_t>(*pos + i);
        rows = scratch->data();
      }
      b = gather(*d, rows, m, workers);
      *pos += m;
      return true;
    };
    export_stream(std::move(proto), std::move(next), out);
  });
}
