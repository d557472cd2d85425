#include "bag/sharded_writer.hpp"

#include "bag/shard_spec.hpp"
#include "base/error.hpp"

namespace a2pack::bag {

std::vector<std::string> writer_paths(const std::string& spec) {
  if (spec.find(',') != std::string::npos)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: a writer writes one spec (name.bagz or name@N.bagz), not a list", spec);
  const auto slash = spec.find_last_of('/');
  const auto at = spec.find_last_of('@');
  if (at != std::string::npos && (slash == std::string::npos || at > slash) &&
      spec.compare(at, 2, "@*") == 0)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: '@*' lets a reader find the shard count; a writer needs it: name@N.bagz", spec);
  return expand_spec(spec);  // "@N" -> the N shard names; anything else -> itself
}

ShardedWriter::ShardedWriter(const std::string& spec, const WriterOptions& options) {
  for (const auto& p : writer_paths(spec)) shards_.push_back(std::make_unique<Writer>(p, options));
}

void ShardedWriter::write(const uint8_t* data, size_t len) {
  shards_[count_ % shards_.size()]->write(data, len);
  ++count_;
}

void ShardedWriter::write_batch(const uint8_t* data, const uint64_t* offsets, size_t n) {
  if (shards_.size() == 1) {
    shards_[0]->write_batch(data, offsets, n);
    count_ += n;
    return;
  }
  // Dealt one record at a time: a shard's records are not contiguous in the
  // batch, and each shard's writer buffers them anyway.
  for (size_t i = 0; i < n; ++i)
    write(data + (offsets[i] - offsets[0]), static_cast<size_t>(offsets[i + 1] - offsets[i]));
}

void ShardedWriter::flush() {
  for (auto& s : shards_) s->flush();
}

void ShardedWriter::commit() {
  for (auto& s : shards_) s->commit();
}

}  // namespace a2pack::bag
