// Quant formats against vectors from gguf's NumPy (de)quantizers and the MLX affine formula
// (tools/quant/make_vectors.py), on every SIMD path this CPU has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/quant.h"
#include "core/synthetic_weights.h"
#include "core/thread_pool.h"
#include "core/weight.h"

using namespace ds4;

namespace {

template <typename T>
std::vector<T> load(const std::string& name) {
  std::ifstream in(std::string(DS4_TEST_DATA) + "/quant/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::vector<char> b((std::istreambuf_iterator<char>(in)), {});
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

std::vector<SimdLevel> levels() {
  std::vector<SimdLevel> l = {SimdLevel::Scalar};
  if (int(simd_supported()) >= 1) l.push_back(SimdLevel::Avx2);
  if (int(simd_supported()) >= 2) l.push_back(SimdLevel::Avx512);
  return l;
}

struct LevelGuard {
  SimdLevel saved = simd_level();
  ~LevelGuard() { set_simd_level(saved); }
};

// Every row decoded on every SIMD path equals the reference bit for bit.
void expect_decodes(const WeightMatrix& w, const std::vector<float>& want) {
  LevelGuard g;
  ASSERT_EQ(size_t(w.rows * w.cols), want.size());
  for (SimdLevel l : levels()) {
    set_simd_level(l);
    std::vector<float> row(size_t(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
      dequantize_row(w, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), want.data() + r * w.cols, row.size() * 4), 0)
          << dtype_name(w.type) << " row " << r << " on " << simd_level_name(l) << ": first value " << row[0]
          << " want " << want[size_t(r * w.cols)];
    }
  }
}

WeightMatrix ggml_matrix(DType t, const std::vector<uint8_t>& blocks, int64_t rows) {
  WeightMatrix w;
  w.type = t;
  w.rows = rows;
  w.cols = int64_t(blocks.size()) / block_geometry(t).bytes * block_geometry(t).elements / rows;
  w.data = blocks.data();
  return w;
}

}  // namespace

TEST(Quant, Q8_0MatchesGguf) {
  auto blocks = load<uint8_t>("q8_0.blocks");
  expect_decodes(ggml_matrix(DType::Q8_0, blocks, 4), load<float>("q8_0.f32"));
  auto x = load<float>("q8_0.in.f32");
  std::vector<uint8_t> mine(blocks.size());
  quantize_q8_0(x.data(), mine.data(), int64_t(x.size()));
  EXPECT_EQ(mine, blocks);
}

TEST(Quant, Q4_KMatchesGguf) {
  expect_decodes(ggml_matrix(DType::Q4_K, load<uint8_t>("q4_k.blocks"), 2), load<float>("q4_k.f32"));
}

TEST(Quant, Q2_KMatchesGguf) {
  expect_decodes(ggml_matrix(DType::Q2_K, load<uint8_t>("q2_k.blocks"), 4), load<float>("q2_k.f32"));
}

TEST(Quant, IQ2_XXSMatchesGguf) {
  expect_decodes(ggml_matrix(DType::IQ2_XXS, load<uint8_t>("iq2_xxs.blocks"), 8), load<float>("iq2_xxs.f32"));
}

TEST(Quant, MlxAffineMatchesFormula) {
  struct Case { int bits; int group; const char* st; };
  for (Case c : {Case{4, 32, "f16"}, Case{4, 64, "f16"}, Case{8, 32, "f16"}, Case{8, 64, "f16"}, Case{4, 64, "bf16"}}) {
    std::string name = "mlx_b" + std::to_string(c.bits) + "_g" + std::to_string(c.group) + "_" + c.st;
    SCOPED_TRACE(name);
    auto q = load<uint32_t>(name + ".q");
    auto s = load<uint16_t>(name + ".scales");
    auto b = load<uint16_t>(name + ".biases");
    auto x = load<float>(name + ".in.f32");
    WeightMatrix w;
    w.type = c.bits == 4 ? DType::MLX_Q4 : DType::MLX_Q8;
    w.rows = 3;
    w.cols = 128;
    w.data = q.data();
    w.scales = s.data();
    w.biases = b.data();
    w.scale_type = std::string(c.st) == "bf16" ? DType::BF16 : DType::F16;
    w.group_size = c.group;
    expect_decodes(w, load<float>(name + ".f32"));
    std::vector<uint32_t> mq(q.size());
    std::vector<uint16_t> ms(s.size()), mb(b.size());
    for (int r = 0; r < 3; ++r)
      quantize_mlx(x.data() + r * 128, 128, c.bits, c.group, w.scale_type, mq.data() + r * 128 * c.bits / 32,
                   ms.data() + r * 128 / c.group, mb.data() + r * 128 / c.group);
    EXPECT_EQ(mq, q);
    EXPECT_EQ(ms, s);
    EXPECT_EQ(mb, b);
  }
}

TEST(Quant, Q4_KQuantizerRoundTrip) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(2048);
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> q(size_t(row_bytes(DType::Q4_K, 2048)));
  quantize_q4_k(x.data(), q.data(), 2048);
  WeightMatrix w = ggml_matrix(DType::Q4_K, q, 1);
  std::vector<float> y(2048);
  dequantize_row(w, 0, y.data());
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) err += (x[i] - y[i]) * (x[i] - y[i]), ref += x[i] * x[i];
  // 4-bit with 6-bit sub-block scales: relative RMS error ~ 0.08 for Gaussian data.
  EXPECT_LT(std::sqrt(err / ref), 0.12);
  EXPECT_GT(std::sqrt(err / ref), 0.01);
}

TEST(Quant, F8E4M3Decode) {
  std::vector<uint8_t> v = {0x00, 0x38, 0xb8, 0x7e, 0x01, 0x08, 0x40, 0x7f};
  WeightMatrix w;
  w.type = DType::F8_E4M3;
  w.rows = 1;
  w.cols = 8;
  w.data = v.data();
  float out[8];
  dequantize_row(w, 0, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], -1.0f);
  EXPECT_EQ(out[3], 448.0f);
  EXPECT_EQ(out[4], std::ldexp(1.0f, -9));
  EXPECT_EQ(out[5], std::ldexp(1.0f, -6));
  EXPECT_EQ(out[6], 2.0f);
  EXPECT_TRUE(std::isnan(out[7]));
}

// Synthetic weights (issue #10's full-size speed models) decode to finite values of the
// intended magnitude in every format, and the same seed gives the same bytes.
TEST(SyntheticWeights, EveryFormatDecodesFiniteAndSmall) {
  for (ds4::DType t : {ds4::DType::F32, ds4::DType::F16, ds4::DType::BF16, ds4::DType::Q8_0, ds4::DType::Q4_K,
                       ds4::DType::Q2_K, ds4::DType::IQ2_XXS}) {
    const int64_t rows = 3, cols = 512;
    std::vector<uint8_t> a(size_t(rows * ds4::row_bytes(t, cols))), b(a.size());
    ds4::fill_synthetic(t, rows, cols, 7, {}, a.data());
    ds4::fill_synthetic(t, rows, cols, 7, {}, b.data());
    EXPECT_EQ(a, b) << ds4::dtype_name(t);
    ds4::WeightMatrix w{t, rows, cols, a.data()};
    std::vector<float> row(static_cast<size_t>(cols));
    float max_abs = 0;
    for (int64_t r = 0; r < rows; ++r) {
      ds4::dequantize_row(w, r, row.data());
      for (float v : row) {
        ASSERT_TRUE(std::isfinite(v)) << ds4::dtype_name(t);
        max_abs = std::max(max_abs, std::fabs(v));
      }
    }
    // Floats: |w| <= 0.05; blocks: scale <= 0.003 times the largest code (Q8_0 127,
    // Q4_K 15 x 63, Q2_K 3 x 15, IQ2_XXS grid 43 x 2 x 15) stays well under 5.
    EXPECT_GT(max_abs, 0.0f) << ds4::dtype_name(t);
    EXPECT_LT(max_abs, 5.0f) << ds4::dtype_name(t);
  }
}
