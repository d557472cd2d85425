// Settings of every object-storage operation, read from the environment at
// each operation
// (so the C API, the CLI and Python all honour them with no new parameters):
//   A2PACK_STORAGE_TIMEOUT          total deadline of one operation, seconds
//                                   (all its retries included; default 120)
//   A2PACK_STORAGE_CONNECT_TIMEOUT  connecting to the server, seconds (default 10)
//   A2PACK_STORAGE_STALL_TIMEOUT    a request that receives nothing for this
//                                   long is abandoned and retried (default 30)
//   A2PACK_STORAGE_RETRIES          attempts after the first (default 8)
//   A2PACK_STORAGE_PARALLELISM      concurrent requests of one batch read (default 32)
//   A2PACK_STORAGE_PART_SIZE        upload part / chunk size, bytes (default 16 MiB)
//   A2PACK_CACHE_DIR                local cache for dataset metadata
//                                   (default $XDG_CACHE_HOME/a2pack or ~/.cache/a2pack)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace a2pack::storage {

struct Settings {
  double timeout_s = 120;
  double connect_timeout_s = 10;
  double stall_timeout_s = 30;
  int retries = 8;
  uint32_t parallelism = 32;
  size_t part_size = 16u << 20;
  std::string cache_dir;
};

// The settings now (a few getenv calls).
Settings settings();

}  // namespace a2pack::storage
