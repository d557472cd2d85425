// C ABI: a feed batch's columns as DLPack tensors that hold the batch
// (a2pack_feed_batch_dlpack). Each tensor is a view of its ring slot with a
// reference to the batch of its own, released by its deleter: the slot goes
// back to the producers when the last array over any column goes, whichever
// library holds it. Named dataset_* as the feed's other files.
#include <memory>
#include <vector>

#include "a2pack.h"
#include "base/error.hpp"
#include "capi/common.hpp"
#include "feed/ring.hpp"

using a2pack::capi::guard;
using a2pack::capi::require;

namespace {

// One tensor and what it owns: its shape, and its reference to the batch.
struct Column {
  DLManagedTensorVersioned t{};
  int64_t shape[3] = {0, 0, 0};
  a2pack_feed_batch* batch = nullptr;
};

void delete_column(DLManagedTensorVersioned* t) {
  if (!t) return;
  auto* c = static_cast<Column*>(t->manager_ctx);
  a2pack_feed_batch_release(c->batch);
  delete c;
}

DLDataType dl_type(a2pack_feed_dtype d) {
  switch (d) {
    case A2PACK_FEED_DTYPE_U8: return {kDLUInt, 8, 1};
    case A2PACK_FEED_DTYPE_BOOL: return {kDLBool, 8, 1};
    case A2PACK_FEED_DTYPE_U16: return {kDLUInt, 16, 1};
    case A2PACK_FEED_DTYPE_U32: return {kDLUInt, 32, 1};
    case A2PACK_FEED_DTYPE_U64: return {kDLUInt, 64, 1};
    case A2PACK_FEED_DTYPE_I32: return {kDLInt, 32, 1};
    case A2PACK_FEED_DTYPE_I64: return {kDLInt, 64, 1};
    case A2PACK_FEED_DTYPE_F32: return {kDLFloat, 32, 1};
  }
  return {kDLUInt, 8, 1};  // not reached: the column table has no other type
}

// Where an empty column's tensor points: DLPack asks for an aligned,
// non-null pointer even over no element.
alignas(64) const uint8_t kNoRow[64] = {};

}  // namespace

A2PACK_EXPORT a2pack_status a2pack_feed_batch_dlpack(a2pack_feed_batch* b,
                                                     const a2pack_feed_column* columns, size_t n,
                                                     DLManagedTensorVersioned** out) {
  if (out)
    for (size_t i = 0; i < n; ++i) out[i] = nullptr;
  // The columns' views first (they check the batch and each column): then
  // nothing can fail but memory, and no reference is taken before that.
  std::vector<a2pack_feed_column_view> views;
  a2pack_status st = guard([&] {
    require(b, "batch");
    if (n) {
      require(columns, "columns");
      require(out, "out");
    }
    views.resize(n);
  });
  for (size_t i = 0; st == A2PACK_OK && i < n; ++i) {
    views[i].size = sizeof views[i];
    st = a2pack_feed_batch_column(b, columns[i], &views[i]);
  }
  if (st != A2PACK_OK) return st;
  return guard([&] {
    const uint64_t unit = reinterpret_cast<const a2pack::feed::Slot*>(b)->ring->unit_rows;
    std::vector<std::unique_ptr<Column>> made(n);
    for (size_t i = 0; i < n; ++i) {
      const a2pack_feed_column_view& v = views[i];
      auto c = std::make_unique<Column>();
      DLTensor& t = c->t.dl_tensor;
      t.data = v.data ? v.data : const_cast<uint8_t*>(kNoRow);
      t.device = {v.pinned ? kDLCUDAHost : kDLCPU, 0};
      t.dtype = dl_type(v.dtype);
      int32_t d = 0;
      if (unit > 1) {
        c->shape[d++] = static_cast<int64_t>(v.rows / unit);
        c->shape[d++] = static_cast<int64_t>(unit);
      } else {
        c->shape[d++] = static_cast<int64_t>(v.rows);
      }
      if (v.ndim == 2) c->shape[d++] = static_cast<int64_t>(v.width);
      t.ndim = d;
      t.shape = c->shape;
      t.strides = nullptr;
      c->t.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
      c->t.manager_ctx = c.get();
      c->t.deleter = delete_column;
      c->batch = b;
      made[i] = std::move(c);
    }
    for (size_t i = 0; i < n; ++i) {
      a2pack_feed_batch_retain(b);
      out[i] = &made[i].release()->t;
    }
  });
}
