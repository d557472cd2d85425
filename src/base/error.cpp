#include "base/error.hpp"

#include <cerrno>
#include <cstring>

namespace a2pack {

void fail_errno(const std::string& what, const std::string& path, int err) {
  a2pack_status st = A2PACK_E_IO;
  if (err == ENOENT || err == ENOTDIR) st = A2PACK_E_NOT_FOUND;
  if (err == ENOMEM) st = A2PACK_E_NO_MEMORY;
  if (err == EINTR) st = A2PACK_E_INTERRUPTED;
  throw Error(st, fmt::format("{}: {}: {}", path, what, std::strerror(err)));
}

void rethrow_with_context(const Error& e, const std::string& context) {
  throw Error(e.status(), fmt::format("{}: {}", context, e.what()));
}

}  // namespace a2pack
