// a2pack_logger_data_export_arrow: decoded log records as an Arrow record
// batch, copied once (the export outlives the data handle).
#include <cstring>

#include "capi/arrow_c.hpp"
#include "capi/common.hpp"

using namespace a2pack;
using namespace a2pack::capi::arrow;
using a2pack::capi::guard;
using a2pack::capi::require;

A2PACK_EXPORT a2pack_status a2pack_logger_data_export_arrow(const a2pack_logger_data* data,
                                                            ArrowSchema* out_schema,
                                                            ArrowArray* out_array) {
  return guard([&] {
    require(data, "data");
    require_out(out_schema, out_array);
    a2pack_logger_columns c{};
    c.size = sizeof c;
    if (a2pack_logger_data_columns(data, &c) != A2PACK_OK)
      fail(a2pack_last_status(), "{}", a2pack_last_error());
    Batch b;
    b.owner = std::make_shared<Owner>();
    Owner& o = *b.owner;
    const size_t n = c.n_records, v = c.n_values;
    auto* streams = o.alloc<uint32_t>(n);
    auto* epochs = o.alloc<double>(n);
    auto* offsets = o.alloc<int64_t>(n + 1);
    auto* indices = o.alloc<uint32_t>(v);
    auto* values = o.alloc<double>(v);
    if (n) {
      std::memcpy(streams, c.stream_ids, n * sizeof *streams);
      std::memcpy(epochs, c.epochs, n * sizeof *epochs);
      std::memcpy(offsets, c.offsets, (n + 1) * sizeof *offsets);
    }
    if (v) {
      std::memcpy(indices, c.indices, v * sizeof *indices);
      std::memcpy(values, c.values, v * sizeof *values);
    }
    const auto len = static_cast<int64_t>(n), vals = static_cast<int64_t>(v);
    b.length = len;
    b.columns.push_back(primitive("stream_id", "I", len, streams));
    b.columns.push_back(primitive("epoch", "g", len, epochs));
    b.columns.push_back(large_list("indices", len, offsets, primitive("", "I", vals, indices)));
    b.columns.push_back(large_list("values", len, offsets, primitive("", "g", vals, values)));
    export_batch(std::move(b), out_schema, out_array);
  });
}
