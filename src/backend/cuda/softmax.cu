// Softmax: one thread block per row, max pass then exp-sum pass, then the write.
#include <cmath>

#include "backend/cuda/check.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/softmax.h"

namespace ds4::cuda {
namespace {

__global__ void softmax_kernel(const float* x, float* y, int64_t cols, float scale) {
  const float* xr = x + int64_t(blockIdx.x) * cols;
  float* yr = y + int64_t(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, scale * xr[i]);
  m = detail::block_reduce(m, detail::MaxOp{}, -INFINITY);
  // A fully masked row: subtracting -inf would make NaN; give zeros instead.
  const float shift = m == -INFINITY ? 0.f : m;
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += expf(scale * xr[i] - shift);
  s = detail::block_reduce(s, detail::SumOp{}, 0.f);
  const float inv = s > 0.f ? 1.f / s : 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = expf(scale * xr[i] - shift) * inv;
}

}  // namespace

void softmax_f32(const float* x, float* y, int64_t rows, int64_t cols, float scale, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int threads = cols >= 2048 ? 512 : 128;
  softmax_kernel<<<unsigned(rows), threads, 0, stream>>>(x, y, cols, scale);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
