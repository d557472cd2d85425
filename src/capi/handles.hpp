// The opaque handle types of the run section, shared by the capability
// layers' C API files that hand runs or batches out (pack, dataset).
#pragma once

#include "a2pack.h"
#include "run/batch.hpp"
#include "run/codec.hpp"

struct a2pack_run {
  a2pack::run::Run run;
};

struct a2pack_run_batch {
  a2pack::run::Batch batch;
};

namespace a2pack::capi {
// Wrap an owned Run / Batch into a new handle stored in *out.
void hand_out(run::Run&& r, a2pack_run** out);
void hand_out(run::Batch&& b, a2pack_run_batch** out);
}  // namespace a2pack::capi
