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
  // A message that begins with the context already says it (a pack entry's
  // error names "file: entry N" itself): once is enough.
  const std::string what = e.what();
  if (what.size() > context.size() + 1 && what.compare(0, context.size(), context) == 0 &&
      what.compare(context.size(), 2, ": ") == 0)
    throw Error(e.status(), what);
  throw Error(e.status(), fmt::format("{}: {}", context, what));
}

}  // namespace a2pack
