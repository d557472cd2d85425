// The caller's a2pack_dataset_columns (read up to its size) as the gather's
// column pointers; shared by the dataset's and the shard stream's calls.
#pragma once

#include "a2pack.h"
#include "dataset/columns.hpp"

namespace a2pack::capi {
dataset::ColumnsOut columns_out(const a2pack_dataset_columns* out);
}
