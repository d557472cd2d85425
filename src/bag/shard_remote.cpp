// Limits of a record file in object storage. A lookup per record would be a
// request per record, so the limits are always fetched whole at open (one
// ranged read for TAIL placement after the 8-byte pointer, the limits object
// for SEPARATE) and checked like LimitsStorage::in_memory; the on-disk
// option is a local-only hint.
#include <cstring>

#include "bag/shard.hpp"
#include "base/bytes.hpp"
#include "base/error.hpp"
#include "storage/object_store.hpp"

namespace a2pack::bag {

void Shard::load_remote_limits(const ReaderOptions& o) {
  const storage::ReadObject& obj = *records_->object();
  const uint64_t file_size = obj.size();
  std::vector<uint8_t> raw;
  if (o.limits_placement == LimitsPlacement::tail) {
    if (file_size == 0) return;  // bagz writes an empty object for zero records
    if (file_size < 8)
      fail(A2PACK_E_CORRUPT, "{}: {} bytes is too short to hold the tail limits (truncated file?)",
           path_, file_size);
    uint8_t last[8];
    obj.read(file_size - 8, 8, last);
    uint64_t start = le::load<uint64_t>(last);
    if (start > file_size - 8)
      fail(A2PACK_E_CORRUPT,
           "{}: the last limit says the limits start at offset {}, past the end of the {}-byte "
           "file (truncated or not a Bagz file?)",
           path_, start, file_size);
    if ((file_size - start) % 8 != 0)
      fail(A2PACK_E_CORRUPT,
           "{}: the limits section [{}, {}) is not a whole number of 8-byte limits (truncated "
           "limits?)",
           path_, start, file_size);
    raw = obj.read_all(start, static_cast<size_t>(file_size - start));
    records_end_ = start;
  } else {
    const std::string lpath = limits_path(path_);
    auto lobj = storage::open_read(lpath);
    if (lobj->size() % 8 != 0)
      fail(A2PACK_E_CORRUPT, "{}: {} bytes is not a whole number of 8-byte limits (truncated?)",
           lpath, lobj->size());
    raw = lobj->read_all(0, static_cast<size_t>(lobj->size()));
    records_end_ = raw.empty() ? 0 : le::load<uint64_t>(raw.data() + raw.size() - 8);
    if (records_end_ > file_size)
      fail(A2PACK_E_CORRUPT, "{}: record {}: limit {} is past the records section ({} bytes in {})",
           lpath, raw.size() / 8 - 1, records_end_, file_size, path_);
    if (records_end_ < file_size) {
      std::string msg = fmt::format(
          "{}: {} bytes after the last limit ({} of the file's {} bytes) belong to no record: "
          "is {} ({} limits) truncated?",
          path_, file_size - records_end_, records_end_, file_size, lpath, raw.size() / 8);
      if (o.strict) fail(A2PACK_E_CORRUPT, "{} (strict mode)", msg);
      note_ = std::move(msg);
    }
  }
  count_ = raw.size() / 8;
  if (!count_) return;
  limits_mem_.resize(count_);
  std::memcpy(limits_mem_.data(), raw.data(), raw.size());
  limits_ = reinterpret_cast<const uint8_t*>(limits_mem_.data());
  validate_all();
}

}  // namespace a2pack::bag
