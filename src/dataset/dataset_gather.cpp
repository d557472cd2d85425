// Gathering rows by index: checked first, then copied on one thread or,
// for large batches, split into chunks the workers claim, with prefetching;
// rows of a mapping are read under a guard so that a file cut short under
// it fails the batch with an error naming it.
#include <cstring>

#include "base/error.hpp"
#include "base/mapped_guard.hpp"
#include "base/worker_pool.hpp"
#include "dataset/dataset.hpp"
#include "dataset/gather.hpp"
#include "dataset/row.hpp"
#include "dataset/team.hpp"

namespace a2pack::dataset {

namespace {

// Below this many rows a gather stays on the calling thread: waking workers
// costs more than the copy.
constexpr size_t kMinRowsPerWorker = 1024;
// A split gather's chunks: 8 per thread (256 rows of a 4 096-row batch on 2
// threads) measured up to 10 % faster than 4 (512 rows) and than 16 or 32,
// whose extra claims (an atomic on a line both cores write) cost more than
// the closer finish saves. Never below 4 prefetch distances.
constexpr size_t kChunksPerThread = 8;
constexpr size_t kMinChunkRows = 4 * kPrefetchAhead;

// Rows per chunk of a split gather: small, so the threads finish close
// together (gather_chunks keeps prefetching across chunk boundaries, so a
// boundary costs one claim, not a drained prefetch window).
size_t chunk_rows(size_t n, unsigned threads) {
  size_t per = n / (kChunksPerThread * static_cast<size_t>(threads));
  return std::max<size_t>(per, kMinChunkRows);
}

}  // namespace

// ---------------------------------------------------------------- gather
unsigned Dataset::check_gather(const int64_t* idx, size_t n, uint32_t workers) const {
  if (size_t bad = first_out_of_range(idx, n, rows_); bad != n)
    fail(A2PACK_E_OUT_OF_RANGE, "{}: index {} (position {} of the batch) is outside the {} rows",
         dir_, idx[bad], bad, rows_);
  unsigned w = resolve_workers(workers);
  size_t max_w = n / kMinRowsPerWorker;
  if (w > max_w) w = static_cast<unsigned>(std::max<size_t>(max_w, 1));
  return w;
}

namespace {
// Every row of a checked batch to emit(i, row), on w threads. Rows of a
// mapping are read under a guard on each thread (mapped_guard.hpp), so a
// steps.npy cut short under the mapping fails the batch with an error
// naming it; the gather loops themselves are plain copies into the
// caller's buffers, as a guard requires.
template <typename Emit>
void gather_on(const uint8_t* base, const int64_t* idx, size_t n, unsigned w, bool mapped,
               const Emit& emit) {
  if (w <= 1) {
    if (mapped)
      guarded_read([&] { gather_all(base, idx, n, emit); });
    else
      gather_all(base, idx, n, emit);
    return;
  }
  size_t per = chunk_rows(n, w);
  MapFault fault;
  run_claiming((n + per - 1) / per, w, [&](const ChunkClaim& claim) {
    if (mapped)
      fault.record(guarded_fault([&] { gather_chunks(base, idx, n, per, claim, emit); }));
    else
      gather_chunks(base, idx, n, per, claim, emit);
  });
  fault.raise_if_any();
}
}  // namespace

void Dataset::gather(const int64_t* idx, size_t n, uint8_t* out, uint32_t workers) const {
  gather_on(data_, idx, n, check_gather(idx, n, workers), mapped_,
            [out](size_t i, const uint8_t* row) { std::memcpy(out + i * kRowBytes, row, kRowBytes); });
}


void Dataset::gather_columns(const int64_t* idx, size_t n, const ColumnsOut& out,
                             uint32_t workers) const {
  gather_on(data_, idx, n, check_gather(idx, n, workers), mapped_,
            [&out](size_t i, const uint8_t* row) { emit_columns(i, row, out); });
}

void Dataset::read_rows(uint64_t first, uint64_t count, uint8_t* out) const {
  const uint8_t* src = data_ + first * kRowBytes;
  if (mapped_)
    guarded_copy(out, src, static_cast<size_t>(count * kRowBytes));
  else
    std::memcpy(out, src, static_cast<size_t>(count * kRowBytes));
}

}  // namespace a2pack::dataset
