// One Bagz file (a shard): where its records and limits are, validated.
//
// Opening checks the framing (TAIL: the last u64 points inside the file and
// leaves a whole number of u64 limits; SEPARATE: the limits file holds whole
// u64s and its last limit fits the records file). With IN_MEMORY limits every
// limit is checked at open; with ON_DISK limits each lookup checks the two it
// reads, so opening a huge file stays O(1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bag/format.hpp"
#include "bag/record_file.hpp"
#include "base/file_io.hpp"

namespace a2pack::bag {

class Shard {
 public:
  Shard(const std::string& path, const ReaderOptions& options);

  const std::string& path() const { return path_; }
  uint64_t count() const { return count_; }
  // Size of the records section (= the last limit).
  uint64_t records_bytes() const { return records_end_; }
  bool compressed() const { return compressed_; }
  const RecordFile& records() const { return *records_; }
  // A warning found at open ("" when none): bytes of the records file that no
  // limit covers (separate placement; strict mode makes it an error).
  const std::string& note() const { return note_; }

  // Byte range [begin, end) of record i (i < count()) in the records
  // section. CORRUPT naming the file and record when the limits are wrong.
  void range(uint64_t i, uint64_t& begin, uint64_t& end) const;

 private:
  uint64_t limit(uint64_t i) const;
  void validate_all() const;
  // A records file in object storage: its limits fetched once into memory
  // and checked (shard_remote.cpp).
  void load_remote_limits(const ReaderOptions& o);

  std::string path_;
  bool compressed_;
  std::unique_ptr<RecordFile> records_;
  MappedFile limits_file_;          // the limits' own mapping (default cache policy)
  const uint8_t* limits_ = nullptr; // count_ little-endian u64s
  std::vector<uint64_t> limits_mem_;
  uint64_t count_ = 0;
  uint64_t records_end_ = 0;
  std::string note_;
};

}  // namespace a2pack::bag
