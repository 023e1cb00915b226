// RMS norm: one thread block per row; the sum of squares is accumulated in f32.
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/norm.h"
#include "backend/cuda/reduce.cuh"

namespace ds4::cuda {
namespace {

__global__ void rmsnorm_kernel(const float* x, const float* __restrict__ w, float* y, int64_t dim, float eps,
                               int64_t x_stride, int64_t y_stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const float* xr = x + int64_t(blockIdx.x) * x_stride;
  float* yr = y + int64_t(blockIdx.x) * y_stride;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
  ss = detail::block_reduce(ss, detail::SumOp{}, 0.f);
  const float inv = rsqrtf(ss / float(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = w ? xr[i] * inv * w[i] : xr[i] * inv;
}

}  // namespace

void rmsnorm_strided_f32(const float* x, int64_t x_stride, const float* weight, float* y, int64_t y_stride,
                         int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  const int threads = dim >= 1024 ? 512 : 128;
  ds4::cuda::gemv_detail::launch_small(rmsnorm_kernel, dim3(unsigned(rows)), threads, 0, stream, x, weight, y, dim, eps,
                                       x_stride, y_stride);
}

void rmsnorm_f32(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps,
                 cudaStream_t stream) {
  rmsnorm_strided_f32(x, dim, weight, y, dim, rows, dim, eps, stream);
}

}  // namespace ds4::cuda
