#pragma once
// RMS normalization on the GPU.
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight[:]     x, y {rows, dim}, weight {dim}
// weight may be null (an unweighted norm). y may alias x. All pointers are device pointers.
void rmsnorm_f32(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps,
                 cudaStream_t stream);
// The same over rows at strides (floats): row r reads x + r * x_stride, writes y + r * y_stride.
void rmsnorm_strided_f32(const float* x, int64_t x_stride, const float* weight, float* y, int64_t y_stride,
                         int64_t rows, int64_t dim, float eps, cudaStream_t stream);

}  // namespace ds4::cuda
