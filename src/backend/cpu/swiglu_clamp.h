#pragma once
// Clamped SwiGLU (DeepSeek V4 / GLM 5.x `swiglu_limit`), f32:
//   y = silu(min(gate, limit)) * clamp(up, -limit, limit)
// The gate is clamped only from above: large negative gates already give silu ~ 0.
#include <cstdint>

namespace ds4::cpu {

void swiglu_clamp_f32(const float* gate, const float* up, int64_t n, float limit, float* y);

}  // namespace ds4::cpu
