// Streams: the sidecar files `streams/<id>.json` and the table the hot path
// reads stream scales from while other threads register new streams.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "logger/encoder.hpp"

namespace a2pack::logger {

// Everything a sidecar holds.
struct StreamMeta {
  uint32_t id = 0;
  StreamInfo info;
  std::string labels_json;  // a JSON object, compact
};

// Sidecar path of a stream inside a logger folder.
std::string sidecar_path(const std::string& dir, uint32_t id);

// Write a stream's sidecar atomically (temporary file, fsync, rename, fsync
// of streams/). `labels_json` must be a JSON object (checked; the compact
// form is stored). Returns the compact labels.
std::string write_sidecar(const std::string& dir, uint32_t id, const StreamInfo& info,
                          const std::string& labels_json);

// CRC32C of what steers decoding, in canonical bytes: stream id (u32), epoch
// and value scale (the IEEE-754 bits, u64 each), sort (u8), little-endian.
// Sidecars store it as "scales_crc32c" so one flipped bit in a scale
// ("1e-06" -> "1e-07") is detected instead of silently rescaling a stream.
uint32_t scales_crc(uint32_t id, const StreamInfo& info);

// Parse one sidecar; throws CORRUPT naming the file on anything malformed
// (missing field, bad scale, id not matching the file name), CHECKSUM when
// its "scales_crc32c" does not match its scales (sidecars written before the
// check have none and are read unchecked). A sidecar without "labels" (the
// single-folder layout's reference writer may keep labels at the top level) takes its other keys
// as labels.
StreamMeta read_sidecar(const std::string& path, uint32_t expected_id);

// Ids of the sidecars in <dir>/streams (names "<digits>.json" only; leftover
// temporary files are ignored), ascending. Missing folder → empty.
std::vector<uint32_t> list_sidecars(const std::string& dir);

// Registered streams, readable without a lock: ids below count() whose slot
// was filled are valid. Storage is allocated in blocks that never move, so a
// reader holding a pointer is never invalidated by a registration.
class StreamTable {
 public:
  StreamTable();
  ~StreamTable();
  StreamTable(const StreamTable&) = delete;
  StreamTable& operator=(const StreamTable&) = delete;

  // The stream, or nullptr when `id` is not registered. Lock-free.
  const StreamInfo* find(uint32_t id) const {
    if (id >= count_.load(std::memory_order_acquire)) return nullptr;
    const Slot& s = blocks_[id / kBlock].load(std::memory_order_relaxed)[id % kBlock];
    return s.valid ? &s.info : nullptr;
  }
  uint32_t count() const { return count_.load(std::memory_order_acquire); }

  // Publish stream `id` (>= count(); ids between are left unregistered).
  // Callers serialise registrations themselves.
  void publish(uint32_t id, const StreamInfo& info);

 private:
  static constexpr uint32_t kBlock = 1024;
  static constexpr uint32_t kBlocks = kMaxStreams / kBlock;
  struct Slot {
    StreamInfo info;
    bool valid = false;
  };
  std::unique_ptr<std::atomic<Slot*>[]> blocks_;
  std::atomic<uint32_t> count_{0};
};

}  // namespace a2pack::logger
