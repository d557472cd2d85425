// The Arrow C Data Interface inside the C API layer: a small tree of columns
// (format string, buffers, children) turned into ArrowSchema / ArrowArray /
// ArrowArrayStream structs whose release callbacks free what the export owns.
//
// Hand-written on purpose: the spec asks producers to copy its three structs
// (they are in a2pack.h, guarded as the spec says) and nothing else of Arrow
// is needed to fill them; linking Arrow C++ (or nanoarrow, not packaged by
// Debian) for this would add a large dependency to every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "a2pack.h"

namespace a2pack::dataset {
class Dataset;
}
namespace a2pack::pack {
class Reader;
}

namespace a2pack::capi {

// The rows of a dataset handle, shared (defined in capi/dataset.cpp).
std::shared_ptr<const dataset::Dataset> share_dataset(const a2pack_dataset* h);
// The reader of a pack handle, shared (defined in capi/pack.cpp).
std::shared_ptr<const pack::Reader> share_pack(const a2pack_pack* h);

namespace arrow {

// Whatever keeps an export's buffers valid: owned copies, a batch handle's
// hold, a taken bag batch. Released with the last of the export's arrays
// (children moved out by a consumer hold it too).
class Owner {
 public:
  // A fresh zero-filled buffer of n elements, 64-byte aligned (Arrow's
  // recommended alignment), freed with the owner.
  template <typename T>
  T* alloc(size_t n) {
    return static_cast<T*>(alloc_bytes(n * sizeof(T)));
  }
  void keep(std::shared_ptr<const void> p) { keep_.push_back(std::move(p)); }

 private:
  void* alloc_bytes(size_t bytes);
  std::vector<std::shared_ptr<const void>> keep_;
};

struct Column {
  std::string name;
  std::string format;            // the spec's format string ("L", "+w:16", ...)
  int64_t length = 0;
  int64_t null_count = 0;
  bool nullable = false;
  std::vector<const void*> buffers;  // validity (may be null) first, as the spec orders them
  std::vector<Column> children;
};

// Primitive column over `data` (a fixed-width type of `format`).
Column primitive(std::string name, const char* format, int64_t length, const void* data);
// fixed_size_list<child>[size] of `length` lists; child has length*size values.
Column fixed_list(std::string name, int size, int64_t length, Column child);
// large_list<child> with int64 offsets (length + 1 of them).
Column large_list(std::string name, int64_t length, const int64_t* offsets, Column child);
// large_binary ("Z") or large_utf8 ("U"); validity may be null.
Column large_bytes(std::string name, const char* format, int64_t length, const uint8_t* validity,
                   int64_t null_count, const int64_t* offsets, const void* data);

// One record batch: a struct array with these columns.
struct Batch {
  int64_t length = 0;
  std::vector<Column> columns;
  std::shared_ptr<Owner> owner;
};

// Fill schema and array from `b`. Throws before filling anything on failure.
void export_batch(Batch&& b, ArrowSchema* schema, ArrowArray* array);

// A stream: `next` fills the next batch and returns true, or returns false at
// the end; it may throw (the message becomes get_last_error, the return EIO).
// `prototype` gives the schema (its buffers are not read).
using NextFn = std::function<bool(Batch&)>;
void export_stream(Batch&& prototype, NextFn next, ArrowArrayStream* out);

// Column validity bitmap of n bits set where present[i] != 0; returns the
// number of nulls through *nulls.
const uint8_t* validity_from(Owner& o, const uint8_t* present, size_t n, int64_t* nulls);

// The columns of a run batch in layout A2PACK_ARROW_STEPS or _RUNS
// (capi/arrow_run.cpp); the batch holds the handle.
Batch run_batch_columns(const a2pack_run_batch* h, int layout);

// Schema and array must be writable and not already hold an export.
void require_out(const ArrowSchema* s, const ArrowArray* a);

}  // namespace arrow
}  // namespace a2pack::capi
