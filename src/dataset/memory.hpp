// Memory for a dataset's rows, and CRC32C combination for checking them in
// parallel chunks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace a2pack::dataset {

// Anonymous memory aligned to 2 MiB (so every 32-byte row sits inside one
// cache line, and transparent huge pages can back it: random gathers then miss
// the TLB far less). Pages are not touched until written.
class RowMemory {
 public:
  RowMemory() = default;
  RowMemory(size_t bytes, bool huge_pages);
  ~RowMemory();
  RowMemory(RowMemory&& o) noexcept;
  RowMemory& operator=(RowMemory&& o) noexcept;
  RowMemory(const RowMemory&) = delete;
  RowMemory& operator=(const RowMemory&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool huge_pages() const { return huge_; }

 private:
  void reset() noexcept;
  uint8_t* map_ = nullptr;  // the whole mapping (alignment slack included)
  size_t map_len_ = 0;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool huge_ = false;
};

// CRC32C of A||B from crc(A), crc(B) and len(B) (zlib's GF(2) method), so

}  // namespace a2pack::dataset
