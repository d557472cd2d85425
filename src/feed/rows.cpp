#include "feed/rows.hpp"

#include "base/crc32c.hpp"
#include "dataset/shards.hpp"

namespace a2pack::feed {

namespace {

class DatasetRows final : public Rows {
 public:
  explicit DatasetRows(std::shared_ptr<const dataset::Dataset> ds) : ds_(std::move(ds)) {
    if (const auto& m = ds_->manifest(); m) crc_ = m->steps_crc32c;
  }
  uint64_t rows() const override { return ds_->rows(); }
  const std::string& dir() const override { return ds_->dir(); }
  uint32_t rows_crc() const override { return crc_; }
  uint32_t prefix_crc(uint64_t n) const override {
    if (n == ds_->rows()) return crc_;
    if (n > ds_->rows() || !ds_->data()) return 0;
    return crc32c::compute(ds_->data(), static_cast<size_t>(n * dataset::kRowBytes));
  }
  void gather(const int64_t* idx, size_t n, const dataset::ColumnsOut& out,
              uint32_t workers) const override {
    ds_->gather_columns(idx, n, out, workers);
  }

 private:
  std::shared_ptr<const dataset::Dataset> ds_;
  uint32_t crc_ = 0;
};

class ShardRows final : public Rows {
 public:
  explicit ShardRows(std::shared_ptr<const dataset::ShardCache> c) : c_(std::move(c)) {}
  uint64_t rows() const override { return c_->rows(); }
  const std::string& dir() const override { return c_->dir(); }
  uint32_t rows_crc() const override { return c_->layout()->manifest.steps_crc32c; }
  // The shards' own CRCs combined: O(shards), no row read. 0 (no match)
  // unless a shard ends at row n.
  uint32_t prefix_crc(uint64_t n) const override {
    const auto l = c_->layout();
    const size_t count = dataset::shards_ending_at(l->manifest.shards, n);
    return count == SIZE_MAX ? 0 : dataset::combined_crc(l->manifest.shards, count);
  }
  void gather(const int64_t* idx, size_t n, const dataset::ColumnsOut& out,
              uint32_t) const override {
    c_->gather_columns(idx, n, out);
  }
  void want(const order::Residency& r) const override {
    if (r.now.empty() && r.next.empty()) return;
    c_->want(spans(r.now), spans(r.next));
  }

 private:
  static std::vector<dataset::RowSpanRef> spans(const std::vector<order::RowSpan>& v) {
    std::vector<dataset::RowSpanRef> out;
    out.reserve(v.size());
    for (const auto& s : v) out.push_back({s.first, s.count});
    return out;
  }
  std::shared_ptr<const dataset::ShardCache> c_;
};

}  // namespace

std::shared_ptr<const Rows> dataset_rows(std::shared_ptr<const dataset::Dataset> ds) {
  return std::make_shared<DatasetRows>(std::move(ds));
}

std::shared_ptr<const Rows> shard_rows(std::shared_ptr<const dataset::ShardCache> shards) {
  return std::make_shared<ShardRows>(std::move(shards));
}

}  // namespace a2pack::feed
