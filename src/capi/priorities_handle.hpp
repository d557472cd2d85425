// The priorities handle, shared by the priorities section and the feed
// that draws by them (both keep a reference).
#pragma once

#include <memory>

#include "a2pack.h"
#include "order/priorities.hpp"

struct a2pack_priorities {
  std::shared_ptr<a2pack::order::Priorities> p;
};
