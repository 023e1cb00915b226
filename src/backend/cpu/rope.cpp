#include "backend/cpu/rope.h"

#include <cmath>

namespace ds4::cpu {

std::vector<float> rope_inv_freq(int64_t rot_dim, double theta) {
  std::vector<float> f(size_t(rot_dim / 2));
  for (int64_t i = 0; i < rot_dim / 2; ++i) {
    const float e = float(2 * i) / float(rot_dim);
    f[size_t(i)] = 1.0f / std::pow(float(theta), e);
  }
  return f;
}

void rope_f32(float* x, int64_t heads, int64_t head_dim, int64_t rot_dim, int64_t pos,
              const float* inv_freq, RopeStyle style, float scale) {
  const int64_t half = rot_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = float(pos) * inv_freq[i];  // f32 product, as HF's freqs
    const float c = std::cos(a) * scale, s = std::sin(a) * scale;
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + h * head_dim;
      const int64_t i0 = style == RopeStyle::kHalf ? i : 2 * i;
      const int64_t i1 = style == RopeStyle::kHalf ? i + half : 2 * i + 1;
      const float x0 = xh[i0], x1 = xh[i1];
      xh[i0] = x0 * c - x1 * s;
      xh[i1] = x1 * c + x0 * s;
    }
  }
}

}  // namespace ds4::cpu
