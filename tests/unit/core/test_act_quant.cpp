// ds4's activation quantization (core/act_quant.h): the quantizers on hand-computed blocks
// (exact bytes), dot_act against a double-precision reference over the dequantized weights
// and activations, and matmul_act against dot_act bit for bit, threaded or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/act_quant.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/synthetic_weights.h"
#include "core/thread_pool.h"
#include "core/weight.h"

using namespace ds4;

namespace {

struct Q8_0Out {
  std::vector<int8_t> q = std::vector<int8_t>(32);
  float d = -1;
};
Q8_0Out q8_0(const std::vector<float>& x) {
  Q8_0Out o;
  quantize_act_q8_0(x.data(), 32, o.q.data(), &o.d);
  return o;
}

struct Q8KOut {
  std::vector<int8_t> q = std::vector<int8_t>(256);
  std::vector<int16_t> bsums = std::vector<int16_t>(16);
  float d = -1;
};
Q8KOut q8_k(const std::vector<float>& x) {
  Q8KOut o;
  quantize_act_q8_k(x.data(), 256, o.q.data(), &o.d, o.bsums.data());
  return o;
}

// The values ds4's formulas give, written out in the plainest way (nearbyint under the default
// rounding mode is lrintf's ties-to-even).
int8_t ref_round(float v) { return int8_t(std::clamp(std::nearbyint(v), -128.0f, 127.0f)); }

}  // namespace

TEST(ActQuant, Q8_0RoundsTiesToEven) {
  // amax 127 gives d = 1 and 1/d = 1 exactly, so q is lrintf(x) itself.
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 1.5f, 126.5f, -127.0f, 0.49f, -1.5f};
  const int8_t want[] = {127, 2, 4, -2, 0, 2, 126, -127, 0, -2};  // round-half-away would give 3, -3, -1, 127, ...
  std::copy(std::begin(in), std::end(in), x.begin());
  const Q8_0Out o = q8_0(x);
  EXPECT_EQ(o.d, 1.0f);
  for (size_t i = 0; i < std::size(want); ++i) EXPECT_EQ(o.q[i], want[i]) << "value " << in[i];
  for (size_t i = std::size(want); i < 32; ++i) EXPECT_EQ(o.q[i], 0);
}

TEST(ActQuant, Q8_0ScaleIsAmaxOver127WhateverTheSign) {
  std::vector<float> x(32, 0.0f);
  x[7] = -3.0f, x[8] = 1.0f, x[9] = 0.75f;
  const Q8_0Out o = q8_0(x);
  EXPECT_EQ(o.d, 3.0f / 127.0f);
  const float inv = 1.0f / (3.0f / 127.0f);
  EXPECT_EQ(o.q[7], -127);
  EXPECT_EQ(o.q[8], ref_round(1.0f * inv));  // 42.33 -> 42
  EXPECT_EQ(o.q[8], 42);
  EXPECT_EQ(o.q[9], ref_round(0.75f * inv));  // 31.75 -> 32
  EXPECT_EQ(o.q[9], 32);
}

TEST(ActQuant, AllZeroBlocksHaveZeroScaleAndQuants) {
  const Q8_0Out a = q8_0(std::vector<float>(32, 0.0f));
  EXPECT_EQ(a.d, 0.0f);
  for (int8_t v : a.q) EXPECT_EQ(v, 0);
  std::vector<float> z(256, 0.0f);
  z[3] = -0.0f;  // -0 has |x| = 0: still the all-zero block
  const Q8KOut k = q8_k(z);
  EXPECT_EQ(k.d, 0.0f);
  for (int8_t v : k.q) EXPECT_EQ(v, 0);
  for (int16_t s : k.bsums) EXPECT_EQ(s, 0);
}

TEST(ActQuant, Q8KMapsTheSignedMaxToMinus127) {
  // Negative max -127: iscale = -127 / -127 = 1, d = 1, q = lrintf(x).
  std::vector<float> x(256, 0.0f);
  x[5] = -127.0f, x[6] = 2.5f, x[7] = -3.5f, x[20] = 100.0f, x[255] = 0.5f;
  Q8KOut o = q8_k(x);
  EXPECT_EQ(o.d, 1.0f);
  EXPECT_EQ(o.q[5], -127);
  EXPECT_EQ(o.q[6], 2);
  EXPECT_EQ(o.q[7], -4);
  EXPECT_EQ(o.q[20], 100);
  EXPECT_EQ(o.q[255], 0);
  EXPECT_EQ(o.bsums[0], -127 + 2 - 4);
  EXPECT_EQ(o.bsums[1], 100);
  for (int j = 2; j < 16; ++j) EXPECT_EQ(o.bsums[j], 0);
  // Positive max 127: iscale = -1, d = -1, every q flips sign (ties still go to even).
  for (float& v : x) v = -v;
  o = q8_k(x);
  EXPECT_EQ(o.d, -1.0f);
  EXPECT_EQ(o.q[5], -127);
  EXPECT_EQ(o.q[6], 2);   // lrintf(-1 * -2.5)
  EXPECT_EQ(o.q[7], -4);  // lrintf(-1 * 3.5) = -4
  EXPECT_EQ(o.q[20], 100);
}

TEST(ActQuant, Q8KTakesTheFirstOfEqualMagnitudes) {
  std::vector<float> x(256, 0.0f);
  x[0] = 4.0f, x[1] = -4.0f, x[2] = 1.0f;
  Q8KOut o = q8_k(x);
  const float iscale = -127.0f / 4.0f;
  EXPECT_EQ(o.d, 1.0f / iscale);
  EXPECT_EQ(o.q[0], -127);
  EXPECT_EQ(o.q[1], 127);
  EXPECT_EQ(o.q[2], ref_round(iscale * 1.0f));  // -31.75 -> -32
  EXPECT_EQ(o.q[2], -32);
  std::swap(x[0], x[1]);  // now -4 comes first: the scale's sign follows it
  o = q8_k(x);
  EXPECT_EQ(o.d, -1.0f / iscale);
  EXPECT_EQ(o.q[0], -127);
  EXPECT_EQ(o.q[1], 127);
  EXPECT_EQ(o.q[2], 32);
}

// Random rows over 60 orders of magnitude against the plain reference, and the range: the
// largest |x| of a block always lands on +-127, so for finite input the clamp at -128 (kept
// from ds4 for non-finite rows) is never reached and no quant is -128.
TEST(ActQuant, RandomRowsMatchThePlainFormulasAndStayWithin127) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float mag : {1e-30f, 1e-3f, 1.0f, 7.0f, 1e30f}) {
    std::vector<float> x(1024);
    for (float& v : x) v = nd(rng) * mag;
    std::vector<int8_t> q(1024), qk(1024);
    std::vector<float> d(1024 / 32), dk(1024 / 256);
    std::vector<int16_t> bs(1024 / 16);
    quantize_act_q8_0(x.data(), 1024, q.data(), d.data());
    quantize_act_q8_k(x.data(), 1024, qk.data(), dk.data(), bs.data());
    for (int64_t b = 0; b < 1024 / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(b * 32 + i)]));
      ASSERT_EQ(d[size_t(b)], amax / 127.0f);
      for (int i = 0; i < 32; ++i) {
        const size_t k = size_t(b * 32 + i);
        ASSERT_EQ(q[k], ref_round(x[k] * (1.0f / d[size_t(b)]))) << "mag " << mag << " index " << k;
        ASSERT_GE(q[k], -127);
        if (std::fabs(x[k]) == amax) {
          ASSERT_EQ(std::abs(q[k]), 127);
        }
      }
    }
    for (int64_t b = 0; b < 1024 / 256; ++b) {
      const float* xb = x.data() + b * 256;
      const size_t at = size_t(std::max_element(xb, xb + 256, [](float a, float c) { return std::fabs(a) < std::fabs(c); }) - xb);
      const float iscale = -127.0f / xb[at];
      ASSERT_EQ(dk[size_t(b)], 1.0f / iscale);
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) {
          const size_t k = size_t(b * 256 + j * 16 + i);
          ASSERT_EQ(qk[k], ref_round(iscale * x[k])) << "mag " << mag << " index " << k;
          ASSERT_GE(qk[k], -127);
          sum += qk[k];
        }
        ASSERT_EQ(bs[size_t(b * 16 + j)], sum);
      }
      ASSERT_EQ(qk[size_t(b * 256) + at], -127);
    }
  }
}

TEST(ActQuant, RejectsPartialBlocksAndFloatWeights) {
  std::vector<float> x(256, 1.0f);
  std::vector<int8_t> q(256);
  std::vector<float> d(8);
  std::vector<int16_t> bs(16);
  EXPECT_THROW(quantize_act_q8_0(x.data(), 40, q.data(), d.data()), InputError);
  EXPECT_THROW(quantize_act_q8_k(x.data(), 128, q.data(), d.data(), bs.data()), InputError);
  EXPECT_THROW(quantize_act_rows(ActBlock::kNone, x.data(), 256, 1), InputError);
  std::vector<float> wf(256, 0.5f);
  WeightMatrix w{DType::F32, 1, 256, wf.data()};
  float y = 0;
  EXPECT_THROW(matmul_act(w, x.data(), 1, &y), InputError);
  EXPECT_EQ(act_block_for(DType::F32), ActBlock::kNone);
  EXPECT_EQ(act_block_for(DType::Q4_K), ActBlock::kNone);
  EXPECT_EQ(act_block_for(DType::Q8_0), ActBlock::kQ8_0);
  EXPECT_EQ(act_block_for(DType::Q2_K), ActBlock::kQ8_K);
  EXPECT_EQ(act_block_for(DType::IQ2_XXS), ActBlock::kQ8_K);
  // Activation blocks of the wrong kind or length for the weights.
  std::vector<uint8_t> wq(size_t(row_bytes(DType::Q8_0, 256)));
  fill_synthetic(DType::Q8_0, 1, 256, 1, {}, wq.data());
  const WeightMatrix q8w{DType::Q8_0, 1, 256, wq.data()};
  const ActQ8Rows k = quantize_act_rows(ActBlock::kQ8_K, x.data(), 256, 1);
  EXPECT_THROW(dot_act(q8w, 0, k.row(0)), InputError);
  const ActQ8Rows short_row = quantize_act_rows(ActBlock::kQ8_0, x.data(), 128, 1);
  EXPECT_THROW(dot_act(q8w, 0, short_row.row(0)), InputError);
}

namespace {

struct RandomWeights {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};
RandomWeights random_weights(DType t, int64_t rows, int64_t cols, uint64_t seed) {
  RandomWeights o;
  o.bytes.resize(size_t(rows * row_bytes(t, cols)));
  fill_synthetic(t, rows, cols, seed, {}, o.bytes.data());
  o.w = WeightMatrix{t, rows, cols, o.bytes.data()};
  return o;
}

std::vector<float> random_rows(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = nd(rng);
  return x;
}

}  // namespace

// dot_act is the exact product of the dequantized weight row and the dequantized activation
// (q * d) up to f32 rounding of the per-block scaling and the block sum: roundings of partial
// sums, each at most |partial| * 2^-24, all bounded by sum |w x|. Measured worst: 1.7e-8 of
// sum |w x| (Q8_0, 64 blocks); the bound 2e-7 is far below what one wrong element costs (~1/cols).
TEST(ActQuant, DotMatchesDoublePrecisionOverDequantizedOperands) {
  std::mt19937 rng(5);
  for (DType t : {DType::Q8_0, DType::Q2_K, DType::IQ2_XXS}) {
    const int64_t rows = 24, cols = 2048;
    const RandomWeights rw = random_weights(t, rows, cols, 17);
    const std::vector<float> x = random_rows(cols, rng);
    const ActQ8Rows xq = quantize_act_rows(act_block_for(t), x.data(), cols, 1);
    const ActQ8View v = xq.row(0);
    const int64_t per_scale = v.block == ActBlock::kQ8_0 ? kActQ8_0Block : kActQ8KBlock;
    std::vector<float> wr(static_cast<size_t>(cols));
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(rw.w, r, wr.data());
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = double(wr[size_t(c)]) * (double(v.q[c]) * double(v.d[c / per_scale]));
        ref += p, mag += std::fabs(p);
      }
      const float got = dot_act(rw.w, r, v);
      ASSERT_GT(mag, 0.0);
      worst = std::max(worst, std::fabs(double(got) - ref) / mag);
      ASSERT_NEAR(got, ref, 2e-7 * mag) << dtype_name(t) << " row " << r;
    }
    char worst_text[32];
    std::snprintf(worst_text, sizeof worst_text, "%.3g", worst);
    RecordProperty(std::string("worst_rel_") + std::string(dtype_name(t)), worst_text);
  }
}

// Every SIMD level's integer sums are exact, so dot_act gives the same bits on each; the row
// spans 3 chunks of the kernels' block batches (64) plus a remainder.
TEST(ActQuant, EverySimdLevelGivesTheSameBits) {
  std::mt19937 rng(13);
  const SimdLevel saved = simd_level();
  for (DType t : {DType::Q8_0, DType::Q2_K, DType::IQ2_XXS}) {
    const int64_t cols = t == DType::Q8_0 ? 32 * 200 : 256 * 200, rows = 6;
    const RandomWeights rw = random_weights(t, rows, cols, 29);
    std::vector<float> x = random_rows(cols, rng);
    x[7] = 1e4f;  // one outlier: the rest of its block quantizes near 0, its own value to -127
    const ActQ8Rows xq = quantize_act_rows(act_block_for(t), x.data(), cols, 1);
    for (int64_t r = 0; r < rows; ++r) {
      set_simd_level(SimdLevel::Scalar);
      const float want = dot_act(rw.w, r, xq.row(0));
      for (int lv = 1; lv <= int(simd_supported()); ++lv) {
        set_simd_level(SimdLevel(lv));
        const float got = dot_act(rw.w, r, xq.row(0));
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << dtype_name(t) << " " << simd_level_name(SimdLevel(lv)) << " row " << r;
      }
    }
  }
  set_simd_level(saved);
}

TEST(ActQuant, MatmulEqualsDotForEveryRowThreadedOrNot) {
  std::mt19937 rng(9);
  ThreadPool pool(3);
  for (DType t : {DType::Q8_0, DType::Q2_K, DType::IQ2_XXS}) {
    const int64_t rows = 37, cols = 512, n = 5;  // 37: the row split gets a remainder
    const RandomWeights rw = random_weights(t, rows, cols, 23);
    const std::vector<float> x = random_rows(n * cols, rng);
    std::vector<float> y(size_t(n * rows), -1.0f), yt(size_t(n * rows), -2.0f), y1(static_cast<size_t>(rows));
    matmul_act(rw.w, x.data(), n, y.data());
    matmul_act(rw.w, x.data(), n, yt.data(), &pool);
    matmul_act(rw.w, x.data() + 3 * cols, 1, y1.data(), &pool);  // one row alone: same numbers as in the batch
    const ActQ8Rows xq = quantize_act_rows(act_block_for(t), x.data(), cols, n);
    for (int64_t tk = 0; tk < n; ++tk)
      for (int64_t r = 0; r < rows; ++r) {
        const float want = dot_act(rw.w, r, xq.row(tk));
        const size_t at = size_t(tk * rows + r);
        ASSERT_EQ(std::memcmp(&y[at], &want, 4), 0) << dtype_name(t) << " token " << tk << " row " << r;
        ASSERT_EQ(std::memcmp(&yt[at], &want, 4), 0) << dtype_name(t) << " threaded, token " << tk << " row " << r;
        if (tk == 3) {
          ASSERT_EQ(std::memcmp(&y1[size_t(r)], &want, 4), 0) << dtype_name(t) << " row " << r;
        }
      }
  }
}

// quantize_act_q8_k_planes: the high plane is quantize_act_q8_k's bytes; the low plane holds the
// residual at d / 128 (|q_lo| <= 64), so d_hi q_hi + d_lo q_lo is within |d_hi| / 256 (+ f32
// rounding) of every x; an all-zero block is all zeros in both planes; a product through both
// planes (dot_act(hi) + dot_act(lo)) is >= 30x closer to the f32 product of the dequantized
// weights and x than the one plane (8 bits: ~|d| / 2 per value; 15 bits: ~|d| / 256), measured
// on Q2_K and IQ2_XXS rows of 2048.
TEST(ActQuant, TwoQ8KPlanesKeepFifteenBits) {
  std::mt19937 rng(23);
  const int64_t n = 2048;
  std::vector<float> x = random_rows(n, rng);
  for (int64_t i = 256; i < 512; ++i) x[size_t(i)] = 0.0f;  // block 1 all zeros
  x[700] = 1e4f, x[701] = -1e4f;                            // a block with a +-max tie
  const ActQ8Rows one = quantize_act_rows(ActBlock::kQ8_K, x.data(), n, 1), two = quantize_act_planes_rows(x.data(), n, 1);
  ASSERT_EQ(two.rows, 2);
  const ActQ8View a = one.row(0), hi = two.row(0), lo = two.row(1);
  EXPECT_EQ(std::memcmp(a.q, hi.q, size_t(n)), 0);
  EXPECT_EQ(std::memcmp(a.d, hi.d, sizeof(float) * size_t(n / 256)), 0);
  EXPECT_EQ(std::memcmp(a.bsums, hi.bsums, sizeof(int16_t) * size_t(n / 16)), 0);
  for (int64_t b = 0; b < n / 256; ++b) {
    EXPECT_EQ(lo.d[b], hi.d[b] / 128.0f);
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += lo.q[b * 256 + j * 16 + i];
      EXPECT_EQ(lo.bsums[b * 16 + j], sum);
    }
    for (int64_t i = b * 256; i < (b + 1) * 256; ++i) {
      ASSERT_LE(std::abs(int(lo.q[i])), 64) << i;
      const double back = double(hi.d[b]) * hi.q[i] + double(lo.d[b]) * lo.q[i];
      ASSERT_LE(std::fabs(back - double(x[size_t(i)])), std::fabs(double(hi.d[b])) / 256 * 1.01 + 1e-6 * std::fabs(x[size_t(i)]))
          << i;
      if (b == 1) {
        ASSERT_EQ(lo.q[i], 0);
      }
    }
  }
  EXPECT_EQ(lo.d[1], 0.0f);
  const std::vector<float> y = random_rows(n, rng);  // no zero block: the error ratio below
  const ActQ8Rows y1 = quantize_act_rows(ActBlock::kQ8_K, y.data(), n, 1), y2 = quantize_act_planes_rows(y.data(), n, 1);
  for (DType t : {DType::Q2_K, DType::IQ2_XXS}) {
    const RandomWeights rw = random_weights(t, 16, n, 31);
    std::vector<float> wr(static_cast<size_t>(n));
    double e1 = 0, e2 = 0;
    for (int64_t r = 0; r < 16; ++r) {
      dequantize_row(rw.w, r, wr.data());
      double ref = 0;
      for (int64_t c = 0; c < n; ++c) ref += double(wr[size_t(c)]) * double(y[size_t(c)]);
      e1 += std::fabs(double(dot_act(rw.w, r, y1.row(0))) - ref);
      e2 += std::fabs(double(dot_act(rw.w, r, y2.row(0))) + double(dot_act(rw.w, r, y2.row(1))) - ref);
    }
    EXPECT_LT(30 * e2, e1) << dtype_name(t) << ": one plane " << e1 / 16 << ", two planes " << e2 / 16 << " mean |err|";
    char text[64];
    std::snprintf(text, sizeof text, "%.3g / %.3g", e1 / 16, e2 / 16);
    RecordProperty(std::string("mean_err_one_two_planes_") + std::string(dtype_name(t)), text);
  }
  std::vector<int8_t> q(256);
  std::vector<float> d(1);
  std::vector<int16_t> bs(16);
  EXPECT_THROW(quantize_act_q8_k_planes(x.data(), 128, q.data(), d.data(), bs.data(), q.data(), d.data(), bs.data()),
               InputError);
}
