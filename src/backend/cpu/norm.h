#pragma once
// Row normalizations, f32. All take one row of n floats; call per row / per group.
#include <cstdint>

namespace ds4::cpu {

// y = x * rsqrt(mean(x^2) + eps) * (w_offset + w). w may be null (then scale = w_offset).
// Qwen/Gemma-style "zero-centered" norms store w - 1: pass w_offset = 1.
// y may alias x.
void rmsnorm_f32(const float* x, const float* w, float w_offset, int64_t n, float eps, float* y);

// Grouped RMSNorm: each contiguous group of `group` floats normalized on its own, with a
// full-width weight w[n] (hyper-connection streams: n = hc * hidden, group = hidden).
void rmsnorm_grouped_f32(const float* x, const float* w, float w_offset, int64_t n, int64_t group,
                         float eps, float* y);

// y = x * rsqrt(sum(x^2) + eps)  (FLA / HF l2norm convention: eps on the sum, not the mean).
void l2norm_f32(const float* x, int64_t n, float eps, float* y);

}  // namespace ds4::cpu
