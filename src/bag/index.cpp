#include "bag/index.hpp"

#include "base/error.hpp"

namespace a2pack::bag {
namespace {
constexpr uint64_t kChunk = 1u << 16;  // records read per batch while building
}

Index::Index(const Reader& reader, const uint64_t* indices, uint64_t n, uint32_t workers) {
  std::vector<uint64_t> id_of(n);
  std::vector<uint64_t> idx;
  for (uint64_t start = 0; start < n; start += kChunk) {
    uint64_t m = std::min(kChunk, n - start);
    Batch b;
    if (indices) {
      b = reader.read(indices + start, m, workers);
    } else {
      b = reader.read_range(start, m, workers);
    }
    bool used = false;
    for (uint64_t k = 0; k < m; ++k) {
      auto [it, inserted] = ids_.try_emplace(b.record(k), ids_.size());
      used |= inserted;
      id_of[start + k] = it->second;
    }
    if (used) keep_.push_back(std::move(b.data));
  }
  // Counting sort of positions by id keeps each id's positions ascending.
  offsets_.assign(ids_.size() + 1, 0);
  for (uint64_t id : id_of) ++offsets_[id + 1];
  for (size_t i = 1; i < offsets_.size(); ++i) offsets_[i] += offsets_[i - 1];
  positions_.resize(n);
  std::vector<uint64_t> fill(offsets_.begin(), offsets_.end() - 1);
  for (uint64_t k = 0; k < n; ++k) positions_[fill[id_of[k]]++] = k;
}

std::span<const uint64_t> Index::find(std::string_view key) const {
  auto it = ids_.find(key);
  if (it == ids_.end()) return {};
  return {positions_.data() + offsets_[it->second], offsets_[it->second + 1] - offsets_[it->second]};
}

}  // namespace a2pack::bag
