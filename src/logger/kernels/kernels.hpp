// The logger's kernels: the record encoder and the frame parsers, each built
// once per instruction set (kernels/encode.cpp, decode.cpp, decode_bulk.cpp,
// compiled by CMakeLists.txt with A2PACK_LOGGER_ISA set), one namespace per
// build:
//   generic  any CPU
//   fast     x86-64 with BMI2 and AVX2 (and FMA for the decoder, LZCNT for
//            the encoder)
//   fast512  the decoder again with AVX-512 F, VL, BW and DQ
// encoder.cpp and decoder.cpp choose among them once, from what the CPU runs
// (logger/cpu_features.hpp). Not every build has every function: generic has
// no bulk parser, fast512 no encoder; what a build lacks is never called.
#pragma once

#include <cstddef>
#include <cstdint>

#include "logger/decoder.hpp"

namespace a2pack::logger {

// Where encode_body_v2 left its two regions.
struct BodyEnds {
  uint8_t* s;
  uint8_t* v;
};

// A malformed record `i` of a frame: throws A2PACK_E_CORRUPT naming it
// (decoder.cpp; compiled once, for any CPU).
[[noreturn]] void bad_record(uint32_t i, const char* what);

#define A2PACK_LOGGER_KERNELS(ns)                                                                  \
  namespace ns {                                                                                   \
  uint8_t* encode_body(uint8_t* p, uint32_t sid, uint64_t zz_delta, double value_scale,           \
                       const uint32_t* idx, const double* val, size_t n);                          \
  BodyEnds encode_body_v2(uint8_t* s, uint8_t* v, uint32_t sid, uint64_t zz_delta,               \
                          double value_scale, const uint32_t* idx, const double* val, size_t n,   \
                          const int64_t* pidx, const int64_t* pq, size_t pn, int64_t* qout,       \
                          int64_t* iout);                                                          \
  FrameCount decode_frame(const uint8_t* raw, size_t len, uint32_t n_records,                    \
                          const ScaleTable& scales, const FrameSink& out);                        \
  FrameCount decode_frame_v2(const uint8_t* raw, size_t len, uint32_t n_records,                 \
                             const ScaleTable& scales, const FrameSink& out);                     \
  FrameCount decode_frame_v2_best(const uint8_t* raw, size_t len, uint32_t n_records,            \
                                  const ScaleTable& scales, const FrameSink& out);                \
  bool decode_frame_v2_bulk(const uint8_t* raw, size_t len, uint32_t n_records,                  \
                            const ScaleTable& scales, const FrameSink& out, FrameCount& c);       \
  }
A2PACK_LOGGER_KERNELS(generic)
A2PACK_LOGGER_KERNELS(fast)
A2PACK_LOGGER_KERNELS(fast512)
#undef A2PACK_LOGGER_KERNELS

}  // namespace a2pack::logger
