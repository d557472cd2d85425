// Writes "name@N.bagz" as bagz names its shards (name-00000-of-0000N.bagz
// ...), the records dealt round-robin - record i to shard i mod N, the order
// Beam's sharded file sinks use when one worker writes - so that a sharded
// Reader (and bagz's) reads them back in the order written. A spec without
// an "@N" part is one plain file. Each shard is an atomic Writer: nothing
// appears before commit(), which commits the shards in order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bag/writer.hpp"

namespace a2pack::bag {

// The files a writer spec names: the N shard names of "dir/name@N.ext", or
// the path itself. "@*" (the count found on disk, a reader's form) and
// several comma-separated specs are refused: a writer must be told N.
std::vector<std::string> writer_paths(const std::string& spec);

class ShardedWriter {
 public:
  ShardedWriter(const std::string& spec, const WriterOptions& options);

  void write(const uint8_t* data, size_t len);
  void write_batch(const uint8_t* data, const uint64_t* offsets, size_t n);
  void flush();
  void commit();
  uint64_t count() const { return count_; }
  size_t shard_count() const { return shards_.size(); }

 private:
  std::vector<std::unique_ptr<Writer>> shards_;
  uint64_t count_ = 0;
};

}  // namespace a2pack::bag
