// Storage round trips against values worked out by hand from the format definitions
// (E4M3FN: 3 mantissa bits, bias 7, max 448; E2M1: {0, .5, 1, 1.5, 2, 3, 4, 6}).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/quant_sim.h"
#include "core/error.h"

using namespace ds4::cpu;

TEST(QuantSim, E4m3Rounding) {
  EXPECT_EQ(e4m3fn_round(1.0f), 1.0f);
  EXPECT_EQ(e4m3fn_round(1.0625f), 1.0f);    // tie 1.0 (even code) / 1.125
  EXPECT_EQ(e4m3fn_round(1.1875f), 1.25f);   // tie 1.125 (odd) / 1.25 (even)
  EXPECT_EQ(e4m3fn_round(1.1f), 1.125f);
  EXPECT_EQ(e4m3fn_round(-300.0f), -288.0f); // 256 * (1 + 1/8) = 288, next 320
  EXPECT_EQ(e4m3fn_round(1000.0f), 448.0f);  // clamp
  EXPECT_EQ(e4m3fn_round(0.005859375f), 0.005859375f);  // subnormal 3 * 2^-9
  EXPECT_EQ(e4m3fn_round(0.0f), 0.0f);
}

TEST(QuantSim, E2m1Rounding) {
  EXPECT_EQ(e2m1_round(2.5f), 2.0f);   // tie: even code
  EXPECT_EQ(e2m1_round(5.0f), 4.0f);   // tie 4 / 6
  EXPECT_EQ(e2m1_round(0.25f), 0.0f);  // tie 0 / 0.5
  EXPECT_EQ(e2m1_round(-1.3f), -1.5f);
  EXPECT_EQ(e2m1_round(9.0f), 6.0f);
}

TEST(QuantSim, BlockScalesArePowersOfTwo) {
  // amax 300 -> scale 2^ceil(log2(300/448)) = 1: plain E4M3 rounding
  std::vector<float> x(64, 0.0f);
  x[0] = 300.0f;
  x[1] = 1.1f;
  fp8_e4m3_roundtrip_f32(x.data(), 64, 64);
  EXPECT_EQ(x[0], 288.0f);
  EXPECT_EQ(x[1], 1.125f);
  // amax 3 -> scale 2^ceil(log2(0.5)) = 0.5: 2.5 / 0.5 = 5 -> tie 4 -> 2.0
  std::vector<float> y(32, 0.0f);
  y[0] = 3.0f;
  y[1] = 2.5f;
  fp4_e2m1_roundtrip_f32(y.data(), 32, 32);
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_THROW(fp4_e2m1_roundtrip_f32(y.data(), 31, 32), ds4::Error);
}

TEST(QuantSim, HadamardIsOrthonormal) {
  float a[4] = {1, 0, 0, 0}, b[4] = {1, 1, 1, 1};
  hadamard_f32(a, 4);
  hadamard_f32(b, 4);
  for (float v : a) EXPECT_FLOAT_EQ(v, 0.5f);
  EXPECT_FLOAT_EQ(b[0], 2.0f);
  EXPECT_FLOAT_EQ(b[1], 0.0f);
  EXPECT_FLOAT_EQ(b[3], 0.0f);
  EXPECT_THROW(hadamard_f32(a, 3), ds4::Error);
}
