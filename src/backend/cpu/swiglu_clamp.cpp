#include "backend/cpu/swiglu_clamp.h"

#include <algorithm>

#include "backend/cpu/activation.h"

namespace ds4::cpu {

void swiglu_clamp_f32(const float* gate, const float* up, int64_t n, float limit, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = silu(std::min(gate[i], limit)) * std::clamp(up[i], -limit, limit);
}

}  // namespace ds4::cpu
