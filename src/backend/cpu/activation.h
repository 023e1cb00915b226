#pragma once
// Elementwise activations and the row softmax, f32. Outputs may alias inputs.
#include <cmath>
#include <cstdint>

namespace ds4::cpu {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus (beta 1, threshold 20: linear above it).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void silu_f32(const float* x, int64_t n, float* y);
void sigmoid_f32(const float* x, int64_t n, float* y);
// y = silu(gate) * up  (SwiGLU; gate/up/y each n floats).
void swiglu_f32(const float* gate, const float* up, int64_t n, float* y);
// In place: x = softmax(x) over n entries (max-subtracted, f32 result, double sum).
void softmax_f32(float* x, int64_t n);

}  // namespace ds4::cpu
