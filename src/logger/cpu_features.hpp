// Which build of the logger's encoder and decoder this CPU runs (both come
// in a portable build and one compiled for BMI2 + AVX2; see encoder.cpp and
// decoder.cpp).
#pragma once

namespace a2pack::logger {

// True when the CPU has BMI2, AVX2, LZCNT and FMA and runs pdep/pext at full
// speed: they are microcoded (slow) on AMD before Zen 3, where the portable
// builds are faster.
inline bool cpu_runs_fast_builds() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("lzcnt") && __builtin_cpu_supports("fma") &&
         !__builtin_cpu_is("znver1") && !__builtin_cpu_is("znver2") &&
         !__builtin_cpu_is("amdfam15h") && !__builtin_cpu_is("amdfam17h");
#else
  return false;
#endif
}

}  // namespace a2pack::logger
