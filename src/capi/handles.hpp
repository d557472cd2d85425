// The opaque handle types of the run section, shared by the capability
// layers' C API files that hand runs or batches out (pack, dataset).
#pragma once

#include <atomic>

#include "a2pack.h"
#include "run/batch.hpp"
#include "run/codec.hpp"

struct a2pack_run {
  a2pack::run::Run run;
};

struct a2pack_run_batch {
  a2pack::run::Batch batch;
  // Holders: the caller's handle plus each live Arrow export of the batch
  // (capi/arrow_run.cpp), whose release callbacks drop theirs; the last one
  // frees the batch (a2pack_run_batch_close).
  std::atomic<uint32_t> refs{1};
};

namespace a2pack::capi {
// Wrap an owned Run / Batch into a new handle stored in *out.
void hand_out(run::Run&& r, a2pack_run** out);
void hand_out(run::Batch&& b, a2pack_run_batch** out);
// Take / drop one hold on a batch handle (see a2pack_run_batch::refs).
void retain(const a2pack_run_batch* b);
void release(const a2pack_run_batch* b);
}  // namespace a2pack::capi
