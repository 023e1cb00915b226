#include "backend/cpu/rope_yarn.h"

#include <algorithm>
#include <cmath>

namespace ds4::cpu {

std::vector<float> rope_yarn_inv_freq(int64_t rot_dim, double theta, const YarnParams& y) {
  const double dim = double(rot_dim);
  auto corr_dim = [&](double rotations) {
    return dim * std::log(double(y.original_max_positions) / (rotations * 2 * M_PI)) / (2 * std::log(theta));
  };
  const double low = std::max(std::floor(corr_dim(y.beta_fast)), 0.0);
  double high = std::min(std::ceil(corr_dim(y.beta_slow)), dim - 1);
  if (low == high) high += 0.001;  // HF: prevent a zero-width ramp
  std::vector<float> f(size_t(rot_dim / 2));
  for (int64_t i = 0; i < rot_dim / 2; ++i) {
    // f32 throughout, as HF computes these tensors.
    const float pos_freq = std::pow(float(theta), float(2 * i) / float(rot_dim));
    const float extrap = 1.0f / pos_freq;
    const float interp = 1.0f / (float(y.factor) * pos_freq);
    const float ramp = std::clamp((float(i) - float(low)) / float(high - low), 0.0f, 1.0f);
    const float extrap_factor = 1.0f - ramp;
    f[size_t(i)] = interp * (1.0f - extrap_factor) + extrap * extrap_factor;
  }
  return f;
}

}  // namespace ds4::cpu
