#pragma once
// YaRN inverse frequencies (HF modeling_rope_utils._compute_yarn_parameters, truncate=true;
// ggml/ds4 rope_yarn_corr_dims + rope_yarn_ramp give the same blend): low-frequency pairs
// are interpolated by `factor`, high-frequency pairs extrapolated, a linear ramp between
// the correction dims of beta_fast / beta_slow. Feed the result to rope_f32.
#include <cstdint>
#include <vector>

namespace ds4::cpu {

struct YarnParams {
  double factor = 1.0;
  int64_t original_max_positions = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

std::vector<float> rope_yarn_inv_freq(int64_t rot_dim, double theta, const YarnParams& y);

}  // namespace ds4::cpu
