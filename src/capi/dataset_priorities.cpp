// C ABI of the priorities section (order/priorities.hpp). Named dataset_*
// so a build without the dataset capability leaves it out with the feed.
#include <memory>

#include "capi/api_table.hpp"
#include "capi/common.hpp"
#include "capi/priorities_handle.hpp"

using namespace a2pack;
using a2pack::capi::guard;
using a2pack::capi::require;

A2PACK_EXPORT a2pack_status a2pack_priorities_open(uint64_t n, double alpha, double beta,
                                                   float initial, a2pack_priorities** out) {
  capi::reset_out(out);
  return guard([&] {
    require(out, "out");
    *out = new a2pack_priorities{std::make_shared<order::Priorities>(n, alpha, beta, initial)};
  });
}

A2PACK_EXPORT a2pack_status a2pack_priorities_load(const char* path, double alpha, double beta,
                                                   uint64_t expected_n, a2pack_priorities** out) {
  capi::reset_out(out);
  return guard([&] {
    require(path, "path");
    require(out, "out");
    *out = new a2pack_priorities{
        std::shared_ptr<order::Priorities>(order::Priorities::load(path, alpha, beta, expected_n))};
  });
}

A2PACK_EXPORT a2pack_status a2pack_priorities_save(const a2pack_priorities* p, const char* path) {
  return guard([&] {
    require(p, "priorities");
    require(path, "path");
    p->p->save(path);
  });
}

A2PACK_EXPORT a2pack_status a2pack_priorities_update(a2pack_priorities* p, const int64_t* indices,
                                                     const float* values, size_t n) {
  return guard([&] {
    require(p, "priorities");
    if (n) {
      require(indices, "indices");
      require(values, "values");
    }
    p->p->update(indices, values, n);
  });
}

A2PACK_EXPORT a2pack_status a2pack_priorities_get(const a2pack_priorities* p,
                                                  const int64_t* indices, size_t n, float* out) {
  return guard([&] {
    require(p, "priorities");
    if (n) {
      require(indices, "indices");
      require(out, "out");
    }
    p->p->get(indices, n, out);
  });
}

A2PACK_EXPORT a2pack_status a2pack_priorities_info_get(const a2pack_priorities* p,
                                                       a2pack_priorities_info* out) {
  return guard([&] {
    require(p, "priorities");
    a2pack_priorities_info i{};
    i.size = sizeof i;
    i.rows = p->p->size();
    i.alpha = p->p->alpha();
    i.beta = p->p->beta();
    i.total = p->p->total();
    i.bytes = p->p->bytes();
    capi::write_out(out, i);
  });
}

A2PACK_EXPORT void a2pack_priorities_close(a2pack_priorities* p) { delete p; }

namespace a2pack::capi {
const a2pack_priorities_api* priorities_api_table() {
  static const a2pack_priorities_api table = {
      sizeof(a2pack_priorities_api), a2pack_priorities_open,   a2pack_priorities_load,
      a2pack_priorities_save,        a2pack_priorities_update, a2pack_priorities_get,
      a2pack_priorities_info_get,    a2pack_priorities_close,
  };
  return &table;
}
}  // namespace a2pack::capi
