// Each capability's C API file defines the accessor for its own sub-table of
// a2pack_api_table (see the "api table" section of a2pack.h).
#pragma once

#include "a2pack.h"

namespace a2pack::capi {
const a2pack_pack_api* pack_api_table();
const a2pack_dataset_api* dataset_api_table();
const a2pack_bag_api* bag_api_table();
const a2pack_logger_api* logger_api_table();
const a2pack_arrow_api* arrow_api_table();
const a2pack_feed_api* feed_api_table();
const a2pack_shard_stream_api* shard_stream_api_table();
const a2pack_priorities_api* priorities_api_table();
}  // namespace a2pack::capi
