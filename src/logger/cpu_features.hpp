// Which build of the logger's encoder and decoder this CPU runs (both come
// in a portable build and one compiled for BMI2 + AVX2; see encoder.cpp and
// decoder.cpp).
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace a2pack::logger {

#if defined(__x86_64__)
// LZCNT (CPUID 0x80000001, ECX bit 5): asked of the CPU directly, since
// clang's __builtin_cpu_supports does not know the name.
inline bool cpu_has_lzcnt() {
  unsigned a, b, c, d;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 5));
}
#endif

// True when the CPU has BMI2, AVX2, LZCNT and FMA and runs pdep/pext at full
// speed: they are microcoded (slow) on AMD before Zen 3, where the portable
// builds are faster.
inline bool cpu_runs_fast_builds() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx2") &&
         cpu_has_lzcnt() && __builtin_cpu_supports("fma") &&
         !__builtin_cpu_is("znver1") && !__builtin_cpu_is("znver2") &&
         !__builtin_cpu_is("amdfam15h") && !__builtin_cpu_is("amdfam17h");
#else
  return false;
#endif
}

// True when the fast builds run and the CPU (and the OS, which must save the
// mask and 512-bit registers: libgcc's cpu check reads XCR0) has AVX-512 F,
// VL, BW and DQ: the decoder's bulk parser then has a build that decodes
// varints sixteen bytes at a time with mask registers and converts int64 to
// double in one instruction (decoder.cpp).
inline bool cpu_runs_avx512_builds() {
#if defined(__x86_64__)
  return cpu_runs_fast_builds() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

}  // namespace a2pack::logger
