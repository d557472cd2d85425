// Regions of code compiled for extra instruction sets (the logger's kernels,
// kernels/*.cpp), for GCC and for clang: GCC takes `#pragma GCC target`,
// which clang ignores; clang takes a pushed target attribute for every
// function in the region.
//
// Why a region and not -mavx2 for the whole unit: a unit compiled with -m
// flags compiles every inline function it instantiates from shared headers
// (the standard library, fmt, base/) for those instructions too, and the
// linker keeps one copy of each for the whole library, which may then be
// the AVX2 one called from the portable code. Inside a region only the
// code defined there is compiled for it; the headers a kernel unit includes
// before its region stay portable.
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
