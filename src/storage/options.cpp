#include "storage/options.hpp"

#include <cstdlib>
#include <string>

namespace a2pack::storage {
namespace {

double env_double(const char* name, double dflt, double lo) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  return end && *end == '\0' && d >= lo ? d : dflt;
}

Settings load() {
  Settings s;
  s.timeout_s = env_double("A2PACK_STORAGE_TIMEOUT", s.timeout_s, 0.1);
  s.connect_timeout_s = env_double("A2PACK_STORAGE_CONNECT_TIMEOUT", s.connect_timeout_s, 0.05);
  s.stall_timeout_s = env_double("A2PACK_STORAGE_STALL_TIMEOUT", s.stall_timeout_s, 1);
  s.retries = static_cast<int>(env_double("A2PACK_STORAGE_RETRIES", s.retries, 0));
  s.parallelism = static_cast<uint32_t>(env_double("A2PACK_STORAGE_PARALLELISM", s.parallelism, 1));
  // S3 refuses parts under 5 MiB; GCS chunks are multiples of 256 KiB.
  double part = env_double("A2PACK_STORAGE_PART_SIZE", static_cast<double>(s.part_size), 5u << 20);
  s.part_size = static_cast<size_t>(part) / (256u << 10) * (256u << 10);
  if (const char* c = std::getenv("A2PACK_CACHE_DIR"); c && *c) {
    s.cache_dir = c;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    s.cache_dir = std::string(x) + "/a2pack";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    s.cache_dir = std::string(h) + "/.cache/a2pack";
  } else {
    s.cache_dir = "/tmp/a2pack-cache";
  }
  return s;
}

}  // namespace

Settings settings() { return load(); }

}  // namespace a2pack::storage
