#pragma once
// Device versions of backend/cpu/quant_sim.h: round trips that simulate low-precision
// storage in f32 (antirez/ds4's FP8 KV rows and Hadamard + FP4 indexer rows of DeepSeek V4).
// Header-only __device__ functions over a row in shared memory (a warp per block of values,
// the whole thread block for the Hadamard transform).
#include <cstdint>

namespace ds4::cuda::detail {

// E4M3FN code i (0..126) -> value: exponent field 0 is subnormal (mant * 2^-9).
__device__ __forceinline__ float e4m3_value(int i) {
  const int e = (i >> 3) & 15, m = i & 7;
  return e == 0 ? float(m) * 0.001953125f : (1.0f + float(m) * 0.125f) * ldexpf(1.0f, e - 7);
}

// Nearest E4M3FN value, ties to the even code; |x| clamped to 448.
__device__ inline float e4m3fn_round(float x) {
  const float sign = x < 0 ? -1.0f : 1.0f, ax = fminf(fabsf(x), 448.0f);
  int lo = 0, hi = 126;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (e4m3_value(mid) <= ax) lo = mid;
    else hi = mid - 1;
  }
  int best = lo;
  if (best < 126) {
    const float d0 = fabsf(ax - e4m3_value(best)), d1 = fabsf(ax - e4m3_value(best + 1));
    if (d1 < d0 || (d1 == d0 && (best & 1))) ++best;
  }
  return sign * e4m3_value(best);
}

// Nearest E2M1 value (0, 0.5, 1, 1.5, 2, 3, 4, 6), ties to even; |x| clamped to 6.
__device__ inline float e2m1_round(float x) {
  const float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float sign = x < 0 ? -1.0f : 1.0f, ax = fminf(fabsf(x), 6.0f);
  int best = 0;
  float bd = ax;
  for (int i = 1; i < 8; ++i) {
    const float d = fabsf(ax - kValues[i]);
    if (d < bd || (d == bd && !(i & 1) && (best & 1))) best = i, bd = d;
  }
  return sign * kValues[best];
}

// One block of `block` values in place, by one whole warp (lanes split the values; the block's
// amax is exact in any order, every value is rounded on its own): scale = 2^ceil(log2(amax /
// fmax)) (amax floored), x = round(clamp(x / scale)) * scale. fp8: E4M3 (448, floor 1e-4),
// else E2M1 (6, floor 7.05e-38), as cpu::fp8_e4m3_roundtrip_f32 / fp4_e2m1_roundtrip_f32.
__device__ inline void roundtrip_block_warp(float* x, int64_t block, bool fp8) {
  const int lane = threadIdx.x % 32;
  const float fmax = fp8 ? 448.0f : 6.0f, floor_amax = fp8 ? 1e-4f : 7.052966104933725e-38f;
  float amax = 0.f;
  for (int64_t i = lane; i < block; i += 32) amax = fmaxf(amax, fabsf(x[i]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  amax = fmaxf(amax, floor_amax);
  const float scale = ldexpf(1.0f, int(ceilf(log2f(amax / fmax))));
  for (int64_t i = lane; i < block; i += 32) {
    const float v = fminf(fmaxf(x[i] / scale, -fmax), fmax);
    x[i] = (fp8 ? e4m3fn_round(v) : e2m1_round(v)) * scale;
  }
  __syncwarp();
}

// Unnormalized Walsh-Hadamard transform of n = 2^k values times 1/sqrt(n), in place (as
// cpu::hadamard_f32), by a whole thread block (blockDim.x >= n / 2), x in shared memory: each
// stage updates every pair once, as the serial loop does. Every thread calls; ends with a barrier.
__device__ inline void hadamard_block(float* x, int64_t n) {
  __syncthreads();
  for (int64_t h = 1; h < n; h *= 2) {
    const int64_t i = threadIdx.x;
    if (i < n / 2) {
      const int64_t b = (i / h) * 2 * h + i % h;
      const float a = x[b], c = x[b + h];
      x[b] = a + c;
      x[b + h] = a - c;
    }
    __syncthreads();
  }
  const float s = 1.0f / sqrtf(float(n));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) x[i] *= s;
  __syncthreads();
}

}  // namespace ds4::cuda::detail
