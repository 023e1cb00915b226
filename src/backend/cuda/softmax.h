#pragma once
// Row softmax on the GPU.
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

// y[r, :] = softmax(scale * x[r, :])      x, y {rows, cols}; y may alias x; device pointers.
// -inf entries (masked) give 0; a row of only -inf gives all zeros, never NaN.
void softmax_f32(const float* x, float* y, int64_t rows, int64_t cols, float scale, cudaStream_t stream);

}  // namespace ds4::cuda
