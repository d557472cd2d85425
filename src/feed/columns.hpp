// What each feed column is: its name, element type and elements per row.
// The one table behind the ring's layout, the views a batch hands out and
// a2pack_feed_column_info_get, from which every binding takes its column
// names, dtypes and shapes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "a2pack.h"

namespace a2pack::feed {

struct ColumnSpec {
  const char* name;        // as the bindings spell it
  a2pack_feed_dtype dtype; // the moves column: its default type (the feed's moves_dtype wins)
  uint32_t ndim;           // of a batch's array: 1 ([rows]) or 2 ([rows, width])
  uint32_t width;          // elements per row
};

// In the order of a2pack_feed_column.
inline constexpr ColumnSpec kColumnSpecs[] = {
    {"exponents", A2PACK_FEED_DTYPE_U8, 2, 16},  {"moves", A2PACK_FEED_DTYPE_U8, 1, 1},
    {"legal", A2PACK_FEED_DTYPE_BOOL, 2, 4},     {"ev_values", A2PACK_FEED_DTYPE_F32, 2, 4},
    {"boards", A2PACK_FEED_DTYPE_U64, 1, 1},     {"run_ids", A2PACK_FEED_DTYPE_U32, 1, 1},
    {"step_indices", A2PACK_FEED_DTYPE_U16, 1, 1}, {"legal_mask", A2PACK_FEED_DTYPE_U8, 1, 1},
    {"indices", A2PACK_FEED_DTYPE_I64, 1, 1},    {"valid", A2PACK_FEED_DTYPE_BOOL, 1, 1},
    {"weights", A2PACK_FEED_DTYPE_F32, 1, 1},
};
static_assert(sizeof kColumnSpecs / sizeof kColumnSpecs[0] == A2PACK_FEED_COLUMN_COUNT);

inline constexpr size_t dtype_bytes(a2pack_feed_dtype t) {
  switch (t) {
    case A2PACK_FEED_DTYPE_U8:
    case A2PACK_FEED_DTYPE_BOOL: return 1;
    case A2PACK_FEED_DTYPE_U16: return 2;
    case A2PACK_FEED_DTYPE_U32:
    case A2PACK_FEED_DTYPE_I32:
    case A2PACK_FEED_DTYPE_F32: return 4;
    case A2PACK_FEED_DTYPE_U64:
    case A2PACK_FEED_DTYPE_I64: return 8;
  }
  return 0;
}

}  // namespace a2pack::feed
