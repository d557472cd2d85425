// a2pack_bag_batch_export_arrow: a bag batch's records as one large_binary
// column, zero-copy - the export takes the batch handle and closes it in its
// release (through the bag section's public functions only).
#include "capi/arrow_c.hpp"
#include "capi/common.hpp"

using namespace a2pack::capi::arrow;
using a2pack::capi::guard;
using a2pack::capi::require;

A2PACK_EXPORT a2pack_status a2pack_bag_batch_export_arrow(a2pack_bag_batch* batch,
                                                          ArrowSchema* out_schema,
                                                          ArrowArray* out_array) {
  return guard([&] {
    require(batch, "batch");
    require_out(out_schema, out_array);
    const uint8_t* data = nullptr;
    const uint64_t* offsets = nullptr;
    size_t n = 0;
    a2pack_bag_batch_view(batch, &data, &offsets, &n);
    Batch b;
    b.owner = std::make_shared<Owner>();
    b.length = static_cast<int64_t>(n);
    // Record offsets are uint64 byte offsets into one buffer (far below
    // 2^63), so they are Arrow's int64 large_binary offsets as they are.
    b.columns.push_back(large_bytes("record", "Z", b.length, nullptr, 0,
                                    reinterpret_cast<const int64_t*>(offsets), data));
    // Taken last: if anything above threw, the batch is still the caller's.
    b.owner->keep(std::shared_ptr<const void>(
        batch, [](const void* p) { a2pack_bag_batch_close(static_cast<a2pack_bag_batch*>(const_cast<void*>(p))); }));
    export_batch(std::move(b), out_schema, out_array);
  });
}
