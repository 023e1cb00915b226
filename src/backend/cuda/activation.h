#pragma once
// Elementwise activations on the GPU.
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

// y[i] = x[i] * sigmoid(x[i])                                  {n}; y may alias x
void silu_f32(const float* x, float* y, int64_t n, cudaStream_t stream);
// y[i] = silu(gate[i]) * up[i]   (the gated FFN / expert MLP)   {n}; y may alias gate or up
void swiglu_f32(const float* gate, const float* up, float* y, int64_t n, cudaStream_t stream);

// Clamped SwiGLU (DeepSeek V4 / GLM 5.x swiglu_limit; CPU backend/cpu/swiglu_clamp.h) over
// rows of gu {rows, 2n} = [gate {n} | up {n}]: y {rows, n} = silu(min(gate, limit)) *
// clamp(up, -limit, limit). One row: a stacked gate|up projection; rows: MoE experts.
void swiglu_clamp_rows_f32(const float* gu, int64_t rows, int64_t n, float limit, float* y, cudaStream_t stream);
// The same with row strides (floats): row r reads gu + r * gu_stride, writes y + r * y_stride
// (a chunk's rows, each in its own scratch).
void swiglu_clamp_strided_f32(const float* gu, int64_t gu_stride, int64_t rows, int64_t n, float limit, float* y,
                              int64_t y_stride, cudaStream_t stream);

}  // namespace ds4::cuda
