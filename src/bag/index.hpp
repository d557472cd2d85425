// Reverse indexes of a reader, as bagz's Index (first position of a record)
// and MultiIndex (every position). One structure serves both: the positions
// of each distinct record, ascending, in compressed-row form.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bag/reader.hpp"

namespace a2pack::bag {

class Index {
 public:
  // Index the records reader[indices[k]] for k < n and report positions k;
  // indices == nullptr means every record (positions = global indices).
  Index(const Reader& reader, const uint64_t* indices, uint64_t n, uint32_t workers);

  // Positions of records equal to key, ascending; empty when absent.
  std::span<const uint64_t> find(std::string_view key) const;
  uint64_t unique() const { return ids_.size(); }

 private:
  std::vector<PooledBuffer> keep_;  // record bytes the keys view
  std::unordered_map<std::string_view, uint64_t> ids_;
  std::vector<uint64_t> offsets_, positions_;
};

}  // namespace a2pack::bag
