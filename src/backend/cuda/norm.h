#pragma once
// RMS normalization on the GPU.
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight[:]     x, y {rows, dim}, weight {dim}
// weight may be null (an unweighted norm). y may alias x. All pointers are device pointers.
void rmsnorm_f32(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps,
                 cudaStream_t stream);
// The same with row strides (floats): row r of x at x + r * x_stride, of y at y + r * y_stride
// (the rows of a multi-row forward's per-row scratch). Each row's bits equal the dense call's.
void rmsnorm_f32(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps,
                 cudaStream_t stream, int64_t x_stride, int64_t y_stride);

}  // namespace ds4::cuda
