// Bagz / Säckli record files (docs/bag.md): the options both sides of the
// format share, and the naming rules (compression by extension, the sibling
// "limits.<basename>" file of separate placement).
//
// The layout itself is small: the records concatenated (each a zstd frame in
// a compressed file, empty records stay empty), then one u64 little-endian
// end offset per record, either appended to the same file (TAIL: the last 8
// bytes are where the limits begin) or in the sibling limits file (SEPARATE).
#pragma once

#include <cstdint>
#include <string>

namespace a2pack::bag {

enum class Compression : uint8_t { autodetect = 0, none = 1, zstd = 2 };
enum class LimitsPlacement : uint8_t { tail = 0, separate = 1 };
enum class LimitsStorage : uint8_t { on_disk = 0, in_memory = 1 };
enum class AccessPattern : uint8_t { system = 0, random = 1, sequential = 2 };
enum class CachePolicy : uint8_t { system = 0, drop_after_read = 1, direct_io = 2 };
enum class ShardingLayout : uint8_t { concatenated = 0, interleaved = 1 };

// zstd settings. level 0 is zstd's default (3), as in bagz. A non-empty
// dictionary is handed to zstd as is: a trained dictionary (zstd magic) or raw
// content, exactly what bagz does with its `dictionary` string.
struct ZstdSettings {
  int level = 0;
  std::string dictionary;
};

struct WriterOptions {
  Compression compression = Compression::autodetect;
  ZstdSettings zstd;
  LimitsPlacement limits_placement = LimitsPlacement::tail;
  uint32_t workers = 0;  // threads compressing a write_batch; 0 = all cores
  // fsync before the rename at commit (and start writeback as records are
  // written); false = rename only, as bagz (which never fsyncs).
  bool durable = true;
  // Whole 1 MiB blocks of the records file bypass the page cache (O_DIRECT,
  // where the filesystem allows it; base/background_writer.hpp).
  bool direct_io = true;
};

// Default largest decoded size of one compressed record (1 GiB): a frame
// header claiming more is refused before anything is allocated, so a small
// hostile file cannot make a reader allocate gigabytes. Raise it per reader.
inline constexpr uint64_t kDefaultMaxRecordBytes = uint64_t{1} << 30;

struct ReaderOptions {
  Compression compression = Compression::autodetect;
  ZstdSettings zstd;  // level unused when reading
  LimitsPlacement limits_placement = LimitsPlacement::tail;
  LimitsStorage limits_storage = LimitsStorage::on_disk;
  AccessPattern access_pattern = AccessPattern::system;
  CachePolicy cache_policy = CachePolicy::system;
  ShardingLayout sharding = ShardingLayout::concatenated;
  uint32_t max_parallelism = 0;  // threads for batch reads; 0 = all cores
  // Largest decoded size of a compressed record (see kDefaultMaxRecordBytes).
  uint64_t max_record_bytes = kDefaultMaxRecordBytes;
  // A separate-limits records file that continues past its last limit is an
  // error (CORRUPT) instead of a note (Shard::note()). The records read are
  // the same either way: those the limits describe, as bagz reads them.
  bool strict = false;
  // Tests only: act as if the filesystem refused O_DIRECT, to exercise the
  // buffered fallback of DIRECT_IO on filesystems that accept it.
  bool refuse_direct_io = false;
};

// True when `path` names a compressed file: the ".bagz" extension.
bool is_bagz_path(const std::string& path);

// Resolve autodetect for one file.
Compression effective_compression(Compression c, const std::string& path);

// "dir/limits.name.bag" for "dir/name.bag".
std::string limits_path(const std::string& path);

}  // namespace a2pack::bag
