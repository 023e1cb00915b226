// RMS norm: one thread block per row; the sum of squares is accumulated in f32.
#include "backend/cuda/check.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/reduce.cuh"

namespace ds4::cuda {
namespace {

__global__ void rmsnorm_kernel(const float* x, const float* __restrict__ w, float* y, int64_t dim,
                               float eps, int64_t xs, int64_t ys) {
  const float* xr = x + int64_t(blockIdx.x) * xs;
  float* yr = y + int64_t(blockIdx.x) * ys;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
  ss = detail::block_reduce(ss, detail::SumOp{}, 0.f);
  const float inv = rsqrtf(ss / float(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = w ? xr[i] * inv * w[i] : xr[i] * inv;
}

}  // namespace

void rmsnorm_f32(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps,
                 cudaStream_t stream) {
  rmsnorm_f32(x, weight, y, rows, dim, eps, stream, dim, dim);
}

void rmsnorm_f32(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps,
                 cudaStream_t stream, int64_t x_stride, int64_t y_stride) {
  if (rows <= 0 || dim <= 0) return;
  const int threads = dim >= 1024 ? 512 : 128;  // by dim only: a row's sum order never depends on rows
  rmsnorm_kernel<<<unsigned(rows), threads, 0, stream>>>(x, weight, y, dim, eps, x_stride, y_stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
