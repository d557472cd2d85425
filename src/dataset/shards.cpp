#include "dataset/shards.hpp"

#include <algorithm>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "dataset/npy.hpp"
#include "dataset/row.hpp"

namespace a2pack::dataset {

ShardWriter::ShardWriter(std::string dir, size_t first_index, uint64_t first_row,
                         uint64_t shard_rows)
    : dir_(std::move(dir)), shard_rows_(shard_rows), row_(first_row), next_index_(first_index) {
  if (shard_rows == 0) fail(A2PACK_E_INVALID_ARGUMENT, "shard_rows must be at least 1");
}

void ShardWriter::open_next() {
  if (next_index_ > 99999)
    fail(A2PACK_E_UNSUPPORTED,
         "{}: a dataset holds at most 100000 shards (steps-00000.npy .. steps-99999.npy); use "
         "larger shards",
         dir_);
  cur_.file = shard_file_name(next_index_++);
  open_ = std::make_unique<TempFile>(dir_ + "/" + cur_.file);
  const std::string hdr = npy_header(0);
  open_->write(hdr.data(), hdr.size());
  cur_.first_row = row_;
  cur_.rows = cur_.runs = 0;
  cur_.crc32c = 0;
}

void ShardWriter::close_open() {
  const std::string hdr = npy_header(cur_.rows);
  open_->pwrite(hdr.data(), hdr.size(), 0);
  open_->sync();
  files_.push_back(std::move(open_));
  done_.push_back(cur_);
}

void ShardWriter::put(const uint8_t* p, const uint64_t* ends, size_t k) {
  size_t j = 0;
  while (j < k) {
    if (!open_) open_next();
    // The runs [j, e) that still fit this shard (at least one when it is empty).
    size_t e = j;
    while (e < k && (cur_.rows + (ends[e + 1] - ends[j]) <= shard_rows_ ||
                     (e == j && cur_.rows == 0)))
      ++e;
    const uint64_t a = ends[j], b = ends[e];
    if (b > a) {
      const uint8_t* q = p + a * kRowBytes;
      const size_t bytes = static_cast<size_t>((b - a) * kRowBytes);
      open_->write(q, bytes);
      cur_.crc32c = crc32c::extend(cur_.crc32c, q, bytes);
    }
    // Runs of no rows (skipped ones) count nowhere.
    for (size_t x = j; x < e; ++x) cur_.runs += ends[x + 1] > ends[x] ? 1 : 0;
    cur_.rows += b - a;
    row_ += b - a;
    j = e;
    if (j < k) close_open();  // the next run does not fit
  }
}

void ShardWriter::finish() {
  if (open_ && cur_.rows) close_open();
  open_.reset();
}

void ShardWriter::install() {
  for (size_t i = 0; i < files_.size(); ++i) {
    files_[i]->install();
    if (i == 0 && files_.size() > 1) crash_point("shards:first-installed");
  }
  files_.clear();
}

void read_shard(const std::string& dir, const ShardRecord& r, uint8_t* dst, bool check_crc) {
  ReadFd f(dir + "/" + r.file);
  NpyInfo info = read_npy_info(f);
  if (info.rows != r.rows)
    fail(A2PACK_E_CORRUPT, "{}: holds {} rows but manifest.json records {} for it", f.path(),
         info.rows, r.rows);
  constexpr uint64_t kChunk = uint64_t{8} << 20;
  const uint64_t bytes = r.rows * kRowBytes;
  uint32_t crc = 0;
  for (uint64_t off = 0; off < bytes; off += kChunk) {
    const size_t n = static_cast<size_t>(std::min(kChunk, bytes - off));
    f.pread_exact(dst + off, n, info.data_offset + off);
    if (check_crc) crc = crc32c::extend(crc, dst + off, n);
  }
  if (check_crc && crc != r.crc32c)
    fail(A2PACK_E_CHECKSUM,
         "{}: CRC32C of its {} rows is {:#010x} but manifest.json records {:#010x} (the shard was "
         "changed or damaged)",
         f.path(), r.rows, crc, r.crc32c);
}

size_t shard_of_row(const std::vector<ShardRecord>& shards, uint64_t row) {
  auto it = std::upper_bound(shards.begin(), shards.end(), row,
                             [](uint64_t v, const ShardRecord& s) { return v < s.first_row; });
  return static_cast<size_t>(it - shards.begin()) - 1;
}

size_t shards_ending_at(const std::vector<ShardRecord>& shards, uint64_t rows) {
  if (rows == 0) return 0;
  if (shards.empty() || shards.back().first_row + shards.back().rows < rows) return SIZE_MAX;
  const size_t last = shard_of_row(shards, rows - 1);
  return shards[last].first_row + shards[last].rows == rows ? last + 1 : SIZE_MAX;
}

uint32_t combined_crc(const std::vector<ShardRecord>& shards, size_t count) {
  uint32_t crc = 0;
  for (size_t i = 0; i < count && i < shards.size(); ++i)
    crc = crc32c::combine(crc, shards[i].crc32c, shards[i].rows * kRowBytes);
  return crc;
}

void check_combined_crc(const std::string& dir, const Manifest& m) {
  const uint32_t crc = combined_crc(m.shards, m.shards.size());
  if (crc != m.steps_crc32c)
    fail(A2PACK_E_CORRUPT,
         "{}/manifest.json: its shards' CRCs combine to {:#010x}, but steps_crc32c is {:#010x}",
         dir, crc, m.steps_crc32c);
}

}  // namespace a2pack::dataset
