#pragma once
// Depthwise causal 1-D convolution over time with a carried state, f32.
// For channel c and step t (x = concat(state, input) along time, state = the last
// (kernel-1)*dilation input rows):  y[t][c] = sum_j w[c][j] * x[t + j*dilation][c].
// This is torch's Conv1d(groups=channels, dilation) on the left-padded input, i.e. HF's
// causal_conv1d_fn / causal_conv1d_update; the activation is the caller's.
#include <cstdint>

namespace ds4::cpu {

struct Conv1dArgs {
  const float* x = nullptr;  // {n, channels}
  int64_t n = 0;
  int64_t channels = 0;
  const float* w = nullptr;  // {channels, kernel} (HF weight {channels, 1, kernel})
  int64_t kernel = 0;
  int64_t dilation = 1;
  float* state = nullptr;    // {(kernel-1)*dilation, channels}, oldest first; updated
  float* y = nullptr;        // {n, channels}; must not alias x
};

void conv1d_causal_f32(const Conv1dArgs& a);

}  // namespace ds4::cpu
