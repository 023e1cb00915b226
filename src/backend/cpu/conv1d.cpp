#include "backend/cpu/conv1d.h"

#include <algorithm>
#include <vector>

namespace ds4::cpu {

void conv1d_causal_f32(const Conv1dArgs& a) {
  const int64_t s = (a.kernel - 1) * a.dilation, C = a.channels;
  // Row r of the virtual sequence: r < s reads the state, else input row r - s.
  auto row = [&](int64_t r) { return r < s ? a.state + r * C : a.x + (r - s) * C; };
  for (int64_t t = 0; t < a.n; ++t) {
    float* y = a.y + t * C;
    std::fill(y, y + C, 0.0f);
    for (int64_t j = 0; j < a.kernel; ++j) {
      const float* xr = row(t + j * a.dilation);
      for (int64_t c = 0; c < C; ++c) y[c] += a.w[c * a.kernel + j] * xr[c];
    }
  }
  if (s == 0) return;
  // New state = last s rows of concat(state, x).
  std::vector<float> tail(size_t(s * C));
  for (int64_t r = 0; r < s; ++r) std::copy_n(row(a.n + r), C, tail.data() + r * C);
  std::copy(tail.begin(), tail.end(), a.state);
}

}  // namespace ds4::cpu
