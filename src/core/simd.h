#pragma once
// Run-time choice of the CPU kernel path. The level is the best the CPU supports (CPUID),
// unless the environment variable DS4_SIMD=scalar|avx2|avx512 forces one (never above what
// the CPU has). Kernels compiled for a higher level use __attribute__((target)), so one
// binary runs everywhere.
#include <cstdint>

namespace ds4 {

enum class SimdLevel : int { Scalar = 0, Avx2 = 1, Avx512 = 2 };

SimdLevel simd_level();
SimdLevel simd_supported();  // best level the CPU supports
// Overrides the level for this process (tests run every path); clamped to simd_supported().
void set_simd_level(SimdLevel level);
const char* simd_level_name(SimdLevel level);

#define DS4_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define DS4_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

// f32 dot products. dot4 computes four rows against one x (x loaded once).
float dot_f32(const float* a, const float* b, int64_t n);
void dot4_f32(const float* w0, const float* w1, const float* w2, const float* w3, const float* x, int64_t n,
              float out[4]);
// Four rows against two inputs: out[r] = w[r].x0, out[4 + r] = w[r].x1, each bit-identical
// to what dot4_f32 gives for that pair.
void dot4x2_f32(const float* const w[4], const float* x0, const float* x1, int64_t n, float out[8]);

}  // namespace ds4
