#pragma once
// Elementwise activations on the GPU.
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

// y[i] = x[i] * sigmoid(x[i])                                  {n}; y may alias x
void silu_f32(const float* x, float* y, int64_t n, cudaStream_t stream);
// y[i] = silu(gate[i]) * up[i]   (the gated FFN / expert MLP)   {n}; y may alias gate or up
void swiglu_f32(const float* gate, const float* up, float* y, int64_t n, cudaStream_t stream);

}  // namespace ds4::cuda
