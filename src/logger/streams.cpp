#include "logger/streams.hpp"

#include <dirent.h>

#include <cerrno>
#include <cmath>
#include <algorithm>
#include <bit>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"

namespace a2pack::logger {

using nlohmann::json;

std::string sidecar_path(const std::string& dir, uint32_t id) {
  return fmt::format("{}/streams/{}.json", dir, id);
}

uint32_t scales_crc(uint32_t id, const StreamInfo& info) {
  uint8_t b[21];
  le::store<uint32_t>(b, id);
  le::store<uint64_t>(b + 4, std::bit_cast<uint64_t>(info.epoch_scale));
  le::store<uint64_t>(b + 12, std::bit_cast<uint64_t>(info.value_scale));
  b[20] = (info.flags & kStreamSort) != 0;
  return crc32c::compute(b, sizeof b);
}

std::string write_sidecar(const std::string& dir, uint32_t id, const StreamInfo& info,
                          const std::string& labels_json) {
  json labels;
  try {
    labels = json::parse(labels_json.empty() ? std::string("{}") : labels_json);
  } catch (const json::exception& e) {
    fail(A2PACK_E_INVALID_ARGUMENT, "labels are not valid JSON: {}", e.what());
  }
  if (!labels.is_object())
    fail(A2PACK_E_INVALID_ARGUMENT, "labels must be a JSON object, got {}", labels.type_name());
  json doc = {{"format", "a2pack-logger-stream"},
              {"version", 1},
              {"stream_id", id},
              {"epoch_scale", info.epoch_scale},
              {"value_scale", info.value_scale},
              {"sort", (info.flags & kStreamSort) != 0},
              {"scales_crc32c", scales_crc(id, info)},
              {"labels", labels}};
  std::string text;
  try {
    text = doc.dump(2) + "\n";
  } catch (const json::exception& e) {  // invalid UTF-8 inside a label
    fail(A2PACK_E_INVALID_ARGUMENT, "labels cannot be stored: {}", e.what());
  }
  write_file_atomic(sidecar_path(dir, id), text.data(), text.size());
  return labels.dump();
}

StreamMeta read_sidecar(const std::string& path, uint32_t expected_id) {
  auto bytes = read_file(path);
  json doc;
  try {
    doc = json::parse(bytes.begin(), bytes.end());
  } catch (const json::exception& e) {
    fail(A2PACK_E_CORRUPT, "{}: not valid JSON: {}", path, e.what());
  }
  auto need = [&](const char* key) -> const json& {
    if (!doc.is_object() || !doc.contains(key))
      fail(A2PACK_E_CORRUPT, "{}: missing field \"{}\"", path, key);
    return doc[key];
  };
  StreamMeta m;
  const json& id = need("stream_id");
  const json& es = need("epoch_scale");
  const json& vs = need("value_scale");
  json labels;
  if (doc.contains("labels")) {
    labels = doc["labels"];
  } else {
    // The single-folder layout's reference writer may keep labels beside the scales.
    labels = json::object();
    for (auto& [k, v] : doc.items())
      if (k != "stream_id" && k != "epoch_scale" && k != "value_scale" && k != "sort" &&
          k != "format" && k != "version" && k != "scales_crc32c")
        labels[k] = v;
  }
  if (!id.is_number_unsigned() || id.get<uint64_t>() != expected_id)
    fail(A2PACK_E_CORRUPT, "{}: stream_id {} does not match the file name", path, id.dump());
  if (!es.is_number() || !vs.is_number())
    fail(A2PACK_E_CORRUPT, "{}: epoch_scale and value_scale must be numbers", path);
  if (!labels.is_object()) fail(A2PACK_E_CORRUPT, "{}: labels must be an object", path);
  m.id = expected_id;
  m.info.epoch_scale = es.get<double>();
  m.info.value_scale = vs.get<double>();
  try {
    check_scales(m.info.epoch_scale, m.info.value_scale);
  } catch (const Error& e) {
    fail(A2PACK_E_CORRUPT, "{}: {}", path, e.what());
  }
  if (doc.contains("sort")) {
    if (!doc["sort"].is_boolean()) fail(A2PACK_E_CORRUPT, "{}: sort must be a boolean", path);
    if (doc["sort"].get<bool>()) m.info.flags |= kStreamSort;
  }
  if (doc.contains("scales_crc32c")) {
    const json& c = doc["scales_crc32c"];
    if (!c.is_number_unsigned() || c.get<uint64_t>() > UINT32_MAX)
      fail(A2PACK_E_CORRUPT, "{}: scales_crc32c must be an unsigned 32-bit integer", path);
    uint32_t want = scales_crc(m.id, m.info);
    if (c.get<uint64_t>() != want)
      fail(A2PACK_E_CHECKSUM,
           "{}: scales_crc32c mismatch (stored {}, computed {} over stream_id {}, epoch_scale {}, "
           "value_scale {}, sort {}): the sidecar was damaged, its stream's records are skipped "
           "rather than decoded at a wrong scale",
           path, c.get<uint64_t>(), want, m.id, m.info.epoch_scale, m.info.value_scale,
           (m.info.flags & kStreamSort) != 0);
  }
  m.labels_json = labels.dump();
  return m;
}

std::vector<uint32_t> list_sidecars(const std::string& dir) {
  std::vector<uint32_t> ids;
  std::string folder = dir + "/streams";
  DIR* d = ::opendir(folder.c_str());
  if (!d) {
    if (errno == ENOENT) return ids;
    fail_errno("open folder", folder, errno);
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.size() > 15 || name.compare(name.size() - 5, 5, ".json") != 0)
      continue;
    std::string digits = name.substr(0, name.size() - 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    if (digits.size() > 1 && digits[0] == '0') continue;  // not a name we write
    uint64_t v = std::strtoull(digits.c_str(), nullptr, 10);
    if (v < kMaxStreams) ids.push_back(static_cast<uint32_t>(v));
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  return ids;
}

StreamTable::StreamTable() : blocks_(new std::atomic<Slot*>[kBlocks]) {
  for (uint32_t i = 0; i < kBlocks; ++i) blocks_[i].store(nullptr, std::memory_order_relaxed);
}

StreamTable::~StreamTable() {
  for (uint32_t i = 0; i < kBlocks; ++i) delete[] blocks_[i].load(std::memory_order_relaxed);
}

void StreamTable::publish(uint32_t id, const StreamInfo& info) {
  if (id >= kMaxStreams)
    fail(A2PACK_E_OUT_OF_RANGE, "at most {} streams can be registered", kMaxStreams);
  uint32_t b = id / kBlock;
  Slot* block = blocks_[b].load(std::memory_order_relaxed);
  if (!block) {
    block = new Slot[kBlock];
    blocks_[b].store(block, std::memory_order_relaxed);
  }
  block[id % kBlock] = {info, true};
  // The release store makes the slot (and its block pointer) visible to any
  // reader whose acquire load of count_ sees the new count.
  if (id + 1 > count_.load(std::memory_order_relaxed))
    count_.store(id + 1, std::memory_order_release);
}

}  // namespace a2pack::logger
