#include "bag/shard.hpp"

#include <cstring>

#include "base/bytes.hpp"
#include "base/error.hpp"
#include "base/mapped_guard.hpp"
#include "base/path_prefix.hpp"

namespace a2pack::bag {

Shard::Shard(const std::string& spec, const ReaderOptions& o)
    : path_(strip_local_prefix(spec)),
      compressed_(effective_compression(o.compression, path_) == Compression::zstd) {
  const std::string& path = path_;
  records_ = std::make_unique<RecordFile>(path, o.access_pattern, o.cache_policy, o.refuse_direct_io);
  if (records_->object()) {
    load_remote_limits(o);
    return;
  }
  const uint64_t file_size = records_->size();
  if (o.limits_placement == LimitsPlacement::tail) {
    if (file_size == 0) return;  // bagz writes an empty file for zero records
    if (file_size < 8)
      fail(A2PACK_E_CORRUPT, "{}: {} bytes is too short to hold the tail limits (truncated file?)",
           path, file_size);
    // Limits keep the default cache policy: map the file for them unless the
    // records already are.
    const uint8_t* base;
    if (records_->is_mapped()) {
      base = records_->mapped();
    } else {
      limits_file_ = MappedFile(path);
      if (limits_file_.size() != file_size)
        fail(A2PACK_E_CORRUPT, "{}: file changed size while opening", path);
      base = limits_file_.data();
    }
    uint64_t start;
    guarded_read([&] { start = le::load<uint64_t>(base + file_size - 8); });  // mapped (mapped_guard.hpp)
    if (start > file_size - 8)
      fail(A2PACK_E_CORRUPT,
           "{}: the last limit says the limits start at offset {}, past the end of the {}-byte "
           "file (truncated or not a Bagz file?)",
           path, start, file_size);
    if ((file_size - start) % 8 != 0)
      fail(A2PACK_E_CORRUPT,
           "{}: the limits section [{}, {}) is not a whole number of 8-byte limits (truncated "
           "limits?)",
           path, start, file_size);
    count_ = (file_size - start) / 8;
    records_end_ = start;
    limits_ = base + start;
  } else {
    std::string lpath = limits_path(path);
    limits_file_ = MappedFile(lpath);
    uint64_t lsize = limits_file_.size();
    if (lsize % 8 != 0)
      fail(A2PACK_E_CORRUPT, "{}: {} bytes is not a whole number of 8-byte limits (truncated?)",
           lpath, lsize);
    count_ = lsize / 8;
    limits_ = limits_file_.data();
    records_end_ = 0;
    if (count_) guarded_read([&] { records_end_ = le::load<uint64_t>(limits_ + 8 * (count_ - 1)); });
    if (records_end_ > file_size)
      fail(A2PACK_E_CORRUPT,
           "{}: record {}: limit {} is past the records section ({} bytes in {})", lpath,
           count_ - 1, records_end_, file_size, path);
    if (records_end_ < file_size) {
      // bagz reads such a pair as the shorter bag it describes; a limits
      // file cut at an 8-byte boundary looks exactly like that, so say it.
      std::string msg = fmt::format(
          "{}: {} bytes after the last limit ({} of the file's {} bytes) belong to no record: "
          "is {} ({} limits) truncated?",
          path, file_size - records_end_, records_end_, file_size, lpath, count_);
      if (o.strict) fail(A2PACK_E_CORRUPT, "{} (strict mode)", msg);
      note_ = std::move(msg);
    }
  }
  if (o.limits_storage == LimitsStorage::in_memory && count_) {
    limits_mem_.resize(count_);
    guarded_copy(limits_mem_.data(), limits_, 8 * count_);
    limits_ = reinterpret_cast<const uint8_t*>(limits_mem_.data());
    limits_file_ = MappedFile();
    validate_all();
  }
}

uint64_t Shard::limit(uint64_t i) const { return le::load<uint64_t>(limits_ + 8 * i); }

void Shard::validate_all() const {
  uint64_t prev = 0;
  for (uint64_t i = 0; i < count_; ++i) {
    uint64_t l = limits_mem_[i];
    if (l < prev)
      fail(A2PACK_E_CORRUPT, "{}: record {}: limits decrease (record {} ends at {}, record {} at {})",
           path_, i, i - 1, prev, i, l);
    if (l > records_end_)
      fail(A2PACK_E_CORRUPT, "{}: record {}: limit {} is past the records section ({} bytes)", path_,
           i, l, records_end_);
    prev = l;
  }
}

void Shard::range(uint64_t i, uint64_t& begin, uint64_t& end) const {
  if (i >= count_)
    fail(A2PACK_E_OUT_OF_RANGE, "{}: record {} out of range [0, {})", path_, i, count_);
  begin = i ? limit(i - 1) : 0;
  end = limit(i);
  if (end < begin)
    fail(A2PACK_E_CORRUPT, "{}: record {}: limits decrease (record {} ends at {}, record {} at {})",
         path_, i, i - 1, begin, i, end);
  if (end > records_end_)
    fail(A2PACK_E_CORRUPT, "{}: record {}: limit {} is past the records section ({} bytes)", path_, i,
         end, records_end_);
}

}  // namespace a2pack::bag
