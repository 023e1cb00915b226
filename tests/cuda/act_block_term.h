#pragma once
// Test helper: ds4::dot_act's f32 term of one weight block (the unit every act kernel's f32 sum
// is made of), so a test can emulate a kernel's order of the sum over blocks on the host.
#include <cstdint>

#include "core/act_quant.h"
#include "core/weight.h"

namespace ds4::cuda_test {

// Block b of row r of hw (host view) dotted with the matching block of x alone.
inline float act_block_term(const WeightMatrix& hw, int64_t r, const ActQ8View& x, int64_t b) {
  const int64_t bv = act_values_per_scale(x.block);
  WeightMatrix one = hw;
  one.rows = 1;
  one.cols = bv;
  one.data = static_cast<const uint8_t*>(hw.data) + r * hw.row_stride_bytes() + b * one.row_stride_bytes();
  ActQ8View xb = x;
  xb.n = bv;
  xb.q = x.q + b * bv;
  xb.d = x.d + b;
  if (x.bsums) xb.bsums = x.bsums + b * (bv / kActQ8KSumBlock);
  return dot_act(one, 0, xb);
}

}  // namespace ds4::cuda_test
