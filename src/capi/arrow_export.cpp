// Turning arrow::Column trees into the spec's C structs, and the arrow
// section's api table. See capi/arrow_c.hpp.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "capi/api_table.hpp"
#include "capi/arrow_c.hpp"
#include "capi/common.hpp"

namespace a2pack::capi::arrow {

namespace {

// Buffers the spec requires to exist even when empty (data and offsets of a
// zero-length column: one offset of 0) point here rather than at NULL, which
// some consumers refuse.
alignas(64) const uint8_t kZeros[64] = {};

// ---------------------------------------------------------------- schema
struct SchemaPriv {
  std::string name, format;
  std::unique_ptr<ArrowSchema[]> child_store;
  std::vector<ArrowSchema*> child_ptrs;
};

void release_schema(ArrowSchema* s) {
  if (!s || !s->release) return;
  auto* p = static_cast<SchemaPriv*>(s->private_data);
  for (auto* c : p->child_ptrs)
    if (c->release) c->release(c);
  delete p;
  s->release = nullptr;
}

void fill_schema(const std::string& name, const std::string& format, bool nullable,
                 const std::vector<Column>& children, ArrowSchema* s) {
  auto p = std::make_unique<SchemaPriv>();
  p->name = name;
  p->format = format;
  p->child_store.reset(new ArrowSchema[children.size()]());
  for (size_t i = 0; i < children.size(); ++i) {
    const Column& c = children[i];
    fill_schema(c.name, c.format, c.nullable, c.children, &p->child_store[i]);
    p->child_ptrs.push_back(&p->child_store[i]);
  }
  s->format = p->format.c_str();
  s->name = p->name.c_str();
  s->metadata = nullptr;
  s->flags = nullable ? ARROW_FLAG_NULLABLE : 0;
  s->n_children = static_cast<int64_t>(children.size());
  s->children = p->child_ptrs.empty() ? nullptr : p->child_ptrs.data();
  s->dictionary = nullptr;
  s->release = release_schema;
  s->private_data = p.release();
}

// ---------------------------------------------------------------- array
struct ArrayPriv {
  std::shared_ptr<Owner> owner;  // every node holds it: children may be moved out
  std::vector<const void*> buffers;
  std::unique_ptr<ArrowArray[]> child_store;
  std::vector<ArrowArray*> child_ptrs;
};

void release_array(ArrowArray* a) {
  if (!a || !a->release) return;
  auto* p = static_cast<ArrayPriv*>(a->private_data);
  for (auto* c : p->child_ptrs)
    if (c->release) c->release(c);
  delete p;
  a->release = nullptr;
}

void fill_array(const Column& c, const std::shared_ptr<Owner>& owner, ArrowArray* a) {
  auto p = std::make_unique<ArrayPriv>();
  p->owner = owner;
  p->buffers = c.buffers;
  for (size_t i = 1; i < p->buffers.size(); ++i)
    if (!p->buffers[i]) p->buffers[i] = kZeros;
  p->child_store.reset(new ArrowArray[c.children.size()]());
  for (size_t i = 0; i < c.children.size(); ++i) {
    fill_array(c.children[i], owner, &p->child_store[i]);
    p->child_ptrs.push_back(&p->child_store[i]);
  }
  a->length = c.length;
  a->null_count = c.null_count;
  a->offset = 0;
  a->n_buffers = static_cast<int64_t>(p->buffers.size());
  a->n_children = static_cast<int64_t>(c.children.size());
  a->buffers = p->buffers.empty() ? nullptr : p->buffers.data();
  a->children = p->child_ptrs.empty() ? nullptr : p->child_ptrs.data();
  a->dictionary = nullptr;
  a->release = release_array;
  a->private_data = p.release();
}

Column as_struct(Batch& b) {
  Column s;
  s.format = "+s";
  s.length = b.length;
  s.buffers = {nullptr};
  s.children = std::move(b.columns);
  return s;
}

// ---------------------------------------------------------------- stream
struct StreamPriv {
  Column schema;  // the prototype's struct column (names and formats)
  NextFn next;
  std::string error;
};

int stream_get_schema(ArrowArrayStream* st, ArrowSchema* out) {
  auto* p = static_cast<StreamPriv*>(st->private_data);
  try {
    fill_schema("", "+s", false, p->schema.children, out);
    return 0;
  } catch (const std::exception& e) {
    p->error = e.what();
    return ENOMEM;
  }
}

int stream_get_next(ArrowArrayStream* st, ArrowArray* out) {
  auto* p = static_cast<StreamPriv*>(st->private_data);
  try {
    Batch b;
    if (!p->next || !p->next(b)) {
      p->next = nullptr;  // ended: keep answering "no more"
      std::memset(out, 0, sizeof *out);  // release == NULL marks the end
      return 0;
    }
    if (!b.owner) b.owner = std::make_shared<Owner>();
    fill_array(as_struct(b), b.owner, out);
    return 0;
  } catch (const std::exception& e) {
    p->error = e.what();
    return EIO;
  }
}

const char* stream_get_last_error(ArrowArrayStream* st) {
  auto* p = static_cast<StreamPriv*>(st->private_data);
  return p->error.empty() ? nullptr : p->error.c_str();
}

void stream_release(ArrowArrayStream* st) {
  if (!st || !st->release) return;
  delete static_cast<StreamPriv*>(st->private_data);
  st->release = nullptr;
}

}  // namespace

void* Owner::alloc_bytes(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  keep_.push_back(std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); }));
  return p;
}

Column primitive(std::string name, const char* format, int64_t length, const void* data) {
  Column c;
  c.name = std::move(name);
  c.format = format;
  c.length = length;
  c.buffers = {nullptr, data};
  return c;
}

Column fixed_list(std::string name, int size, int64_t length, Column child) {
  Column c;
  c.name = std::move(name);
  c.format = "+w:" + std::to_string(size);
  c.length = length;
  c.buffers = {nullptr};
  child.name = "item";
  c.children.push_back(std::move(child));
  return c;
}

Column large_list(std::string name, int64_t length, const int64_t* offsets, Column child) {
  Column c;
  c.name = std::move(name);
  c.format = "+L";
  c.length = length;
  c.buffers = {nullptr, offsets};
  child.name = "item";
  c.children.push_back(std::move(child));
  return c;
}

Column large_bytes(std::string name, const char* format, int64_t length, const uint8_t* validity,
                   int64_t null_count, const int64_t* offsets, const void* data) {
  Column c;
  c.name = std::move(name);
  c.format = format;
  c.length = length;
  c.null_count = validity ? null_count : 0;
  c.nullable = validity != nullptr;
  c.buffers = {validity, offsets, data};
  return c;
}

const uint8_t* validity_from(Owner& o, const uint8_t* present, size_t n, int64_t* nulls) {
  uint8_t* bits = o.alloc<uint8_t>((n + 7) / 8);
  int64_t missing = 0;
  for (size_t i = 0; i < n; ++i) {
    if (present[i])
      bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
    else
      ++missing;
  }
  *nulls = missing;
  return bits;
}

void require_out(const ArrowSchema* s, const ArrowArray* a) {
  require(s, "out_schema");
  require(a, "out_array");
}

void export_batch(Batch&& b, ArrowSchema* schema, ArrowArray* array) {
  if (!b.owner) b.owner = std::make_shared<Owner>();
  std::shared_ptr<Owner> owner = std::move(b.owner);
  Column root = as_struct(b);
  ArrowSchema s{};
  fill_schema("", "+s", false, root.children, &s);
  try {
    fill_array(root, owner, array);
  } catch (...) {
    s.release(&s);
    throw;
  }
  *schema = s;  // moved: the caller's struct now owns it
}

void export_stream(Batch&& prototype, NextFn next, ArrowArrayStream* out) {
  require(out, "out");
  auto p = std::make_unique<StreamPriv>();
  p->schema = as_struct(prototype);
  p->next = std::move(next);
  out->get_schema = stream_get_schema;
  out->get_next = stream_get_next;
  out->get_last_error = stream_get_last_error;
  out->release = stream_release;
  out->private_data = p.release();
}

}  // namespace a2pack::capi::arrow

// ---------------------------------------------------------------- api table
namespace a2pack::capi {
const a2pack_arrow_api* arrow_api_table() {
  static const a2pack_arrow_api table = {
      sizeof(a2pack_arrow_api),
      a2pack_run_batch_export_arrow,
      a2pack_dataset_export_arrow,
      a2pack_dataset_export_arrow_stream,
      a2pack_pack_export_arrow_entries,
      a2pack_pack_export_arrow_stats,
      a2pack_bag_batch_export_arrow,
      a2pack_logger_data_export_arrow,
      a2pack_pack_export_arrow_stream,
  };
  return &table;
}
}  // namespace a2pack::capi
