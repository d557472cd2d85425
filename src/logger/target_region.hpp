// Regions of code compiled for extra instruction sets (the logger's "fast"
// builds of encode_body.inc / decode_body.inc), for GCC and for clang: GCC
// takes `#pragma GCC target`, which clang ignores; clang takes a pushed
// target attribute for every function in the region.
#pragma once

#define A2PACK_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define A2PACK_TARGET_BEGIN(features) \
  A2PACK_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define A2PACK_TARGET_END A2PACK_PRAGMA(clang attribute pop)
#else
#define A2PACK_TARGET_BEGIN(features) A2PACK_PRAGMA(GCC push_options) A2PACK_PRAGMA(GCC target(features))
#define A2PACK_TARGET_END A2PACK_PRAGMA(GCC pop_options)
#endif
