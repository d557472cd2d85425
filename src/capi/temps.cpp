// C ABI: removing the temporaries of killed writers (base/stale_temps.hpp).
#include <sys/stat.h>

#include <cerrno>

#include "base/file_io.hpp"
#include "base/stale_temps.hpp"
#include "capi/common.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

A2PACK_EXPORT a2pack_status a2pack_clean_temps(const char* path, a2pack_removed_fn fn, void* user,
                                               uint64_t* removed) {
  if (removed) *removed = 0;
  return guard([&] {
    require(path, "path");
    std::string p(path);
    if (p.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "empty path");
    struct stat st;
    std::vector<std::string> gone;
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      gone = remove_stale_temps_in(p);
    } else {
      std::string dir = parent_dir(p);
      if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        fail(A2PACK_E_NOT_FOUND, "{}: no such file or folder (nor its folder {})", p, dir);
      gone = remove_stale_temps(p);
    }
    if (removed) *removed = gone.size();
    if (fn)
      for (const auto& g : gone) fn(user, g.c_str());
  });
}
