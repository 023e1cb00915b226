#include "backend/cpu/activation.h"

#include <algorithm>

namespace ds4::cpu {

void silu_f32(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = silu(x[i]);
}

void sigmoid_f32(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = sigmoid(x[i]);
}

void swiglu_f32(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = silu(gate[i]) * up[i];
}

void softmax_f32(float* x, int64_t n) {
  if (n <= 0) return;
  const float m = *std::max_element(x, x + n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  const float inv = float(1.0 / s);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace ds4::cpu
