#include "backend/cpu/norm.h"

#include <cmath>

namespace ds4::cpu {

void rmsnorm_f32(const float* x, const float* w, float w_offset, int64_t n, float eps, float* y) {
  // Accumulate in double: cheap for one row and keeps long rows (hc*hidden = 10k) exact
  // enough that the result does not depend on the summation order of other backends.
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float r = float(1.0 / std::sqrt(ss / double(n) + double(eps)));
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * r) * (w_offset + w[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * r) * w_offset;
  }
}

void rmsnorm_grouped_f32(const float* x, const float* w, float w_offset, int64_t n, int64_t group,
                         float eps, float* y) {
  for (int64_t g = 0; g < n; g += group) rmsnorm_f32(x + g, w ? w + g : nullptr, w_offset, group, eps, y + g);
}

void l2norm_f32(const float* x, int64_t n, float eps, float* y) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float r = float(1.0 / std::sqrt(ss + double(eps)));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r;
}

}  // namespace ds4::cpu
