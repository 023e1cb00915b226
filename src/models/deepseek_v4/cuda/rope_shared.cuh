#pragma once
// Internal to the CUDA DeepSeek V4 kernels (attention.cu, dspark.cu): the interleaved rope of a
// head's tail in shared memory, the CPU's rope_f32 (cpu::RopeStyle::kInterleaved).
#include <cstdint>

namespace ds4::deepseek_v4::cuda {

// Rotates the tail pairs (2i, 2i+1) of one row in shared memory by angle p * inv_freq[i] (the
// f32 product, as on the CPU; cosf / sinf are full-range accurate). Every thread calls.
__device__ inline void rope_shared(float* row, int64_t hd, int64_t rot, const float* inv, int64_t p) {
  float* t = row + (hd - rot);
  for (int64_t i = threadIdx.x; i < rot / 2; i += blockDim.x) {
    const float a = float(p) * inv[i];
    const float c = cosf(a), s = sinf(a);
    const float x0 = t[2 * i], x1 = t[2 * i + 1];
    t[2 * i] = x0 * c - x1 * s;
    t[2 * i + 1] = x1 * c + x0 * s;
  }
  __syncthreads();
}

}  // namespace ds4::deepseek_v4::cuda
