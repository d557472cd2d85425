// The settings of a decoder kernel unit (kernels/decode.cpp and
// decode_bulk.cpp), from A2PACK_LOGGER_ISA, which CMakeLists.txt sets when it
// compiles each unit once per instruction set:
//   0  any CPU: A2PACK_LOGGER_NS generic
//   1  x86-64 with BMI1/2, AVX2 and FMA: A2PACK_LOGGER_NS fast; pext packs the
//      varint groups (A2PACK_LOGGER_PEXT), the value predictor runs four lanes
//      wide, FMA replaces divisions, and version 2 goes through the bulk
//      parser first (A2PACK_LOGGER_AVX2)
//   2  as 1, plus AVX-512 F, VL, BW and DQ: A2PACK_LOGGER_NS fast512,
//      A2PACK_LOGGER_AVX512
// A2PACK_LOGGER_FEATURES is the build's target region (target_region.hpp).
// On other CPUs than x86-64 builds 1 and 2 set nothing and their units
// compile to nothing. Then the headers the units use, included here, before
// any region: they stay portable.
#pragma once

#if !defined(A2PACK_LOGGER_ISA)
#error "compiled by CMakeLists.txt with A2PACK_LOGGER_ISA set"
#elif A2PACK_LOGGER_ISA == 0
#define A2PACK_LOGGER_NS generic
#elif A2PACK_LOGGER_ISA == 1 && defined(__x86_64__)
#define A2PACK_LOGGER_NS fast
#define A2PACK_LOGGER_FEATURES "bmi,bmi2,avx,avx2,fma"
#define A2PACK_LOGGER_PEXT 1
#define A2PACK_LOGGER_AVX2 1
#elif A2PACK_LOGGER_ISA == 2 && defined(__x86_64__)
#define A2PACK_LOGGER_NS fast512
#define A2PACK_LOGGER_FEATURES "bmi,bmi2,avx,avx2,fma,avx512f,avx512vl,avx512bw,avx512dq"
#define A2PACK_LOGGER_PEXT 1
#define A2PACK_LOGGER_AVX2 1
#define A2PACK_LOGGER_AVX512 1
#endif

#if defined(A2PACK_LOGGER_NS)
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/error.hpp"
#include "base/varint.hpp"
#include "logger/decoder.hpp"
#include "logger/encoder.hpp"  // FrameState: the bulk parser's predictor arena
#include "logger/format.hpp"
#include "logger/kernels/kernels.hpp"
#include "logger/kernels/target_region.hpp"
#endif
