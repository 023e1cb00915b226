// The synthetic full-size GLM 5.x Flash (models/glm5/synthetic_full.h) checked on the CPU with
// the generator the GPU fill runs (backend/cuda/synthetic_fill_blocks.h): every block format
// decodes (core's row decoders) to finite values within [-amp, amp] that use the range, and
// the real-width model with fewer layers, experts and vocabulary, materialized on the host,
// binds through the CPU model and gives finite, non-degenerate logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/synthetic_fill_blocks.h"
#include "core/dtype.h"
#include "core/weight.h"
#include "models/glm5/config.h"
#include "models/glm5/model.h"
#include "models/glm5/synthetic_full.h"

namespace ds4::glm5 {
namespace {

namespace sy = ds4::synth;

TEST(Glm5SyntheticFull, BlocksDecodeFiniteWithinAmp) {
  const int64_t rows = 8, cols = 4096;
  const float amp = 1.0f / std::sqrt(float(cols));
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::Q2_K}) {
    std::vector<uint8_t> buf(size_t(rows * row_bytes(t, cols)));
    const int64_t per_row = t == DType::Q8_0 ? cols / 32 : cols / 256;
    const int bytes = t == DType::Q8_0 ? sy::kQ8Bytes : t == DType::Q4_K ? sy::kQ4KBytes : sy::kQ2KBytes;
    for (int64_t u = 0; u < rows * per_row; ++u) {
      uint8_t* p = buf.data() + u * bytes;
      if (t == DType::Q8_0) sy::q8_0_block(p, 42, uint64_t(u), amp);
      else if (t == DType::Q4_K) sy::q4_k_block(p, 42, uint64_t(u), amp);
      else sy::q2_k_block(p, 42, uint64_t(u), amp);
    }
    WeightMatrix w;
    w.type = t, w.rows = rows, w.cols = cols, w.data = buf.data();
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(w, r, row.data());
      double sum = 0;
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < cols; ++i) {
        ASSERT_TRUE(std::isfinite(row[size_t(i)])) << dtype_name(t) << " row " << r << " col " << i;
        ASSERT_LE(std::fabs(row[size_t(i)]), amp * 1.01f) << dtype_name(t) << " row " << r << " col " << i;
        sum += row[size_t(i)], lo = std::min(lo, row[size_t(i)]), hi = std::max(hi, row[size_t(i)]);
      }
      EXPECT_LT(std::fabs(sum / double(cols)), 0.1 * amp) << dtype_name(t) << " row " << r << ": mean not near 0";
      EXPECT_GT(hi - lo, 0.8f * amp) << dtype_name(t) << " row " << r << ": values do not use the range";
    }
  }
}

TEST(Glm5SyntheticFull, HalfConversionMatchesCore) {
  for (float f : {1.0f, 0.5f, 3.3e-5f, 6.1e-5f, 1e-7f, 0.0123f, -0.77f, 1000.0f}) {
    const uint16_t h = sy::to_f16(f);
    const float back = [&] {  // core's decoder through a 1-element F16 row
      WeightMatrix w;
      w.type = DType::F16, w.rows = 1, w.cols = 1, w.data = &h;
      float x;
      dequantize_row(w, 0, &x);
      return x;
    }();
    EXPECT_NEAR(back, f, std::fabs(f) * 1e-3 + 6e-8) << f;
  }
}

TEST(Glm5SyntheticFull, ConfigIsTheFlashOne) {
  SyntheticFullOptions o;
  ASSERT_TRUE(parse_synthetic_full("synthetic-full", o));
  const Config c = parse_config(synthetic_full_config(o), "t");
  EXPECT_EQ(c.num_hidden_layers, 45);
  EXPECT_EQ(c.n_routed_experts, 288);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.vocab_size, 154880);
  EXPECT_EQ(o.experts, DType::Q2_K);
  ASSERT_TRUE(parse_synthetic_full("synthetic-full:q4_k:192:4", o));
  EXPECT_EQ(o.experts, DType::Q4_K);
  EXPECT_EQ(o.n_experts, 192);
  EXPECT_EQ(o.layers, 4);
  EXPECT_FALSE(parse_synthetic_full("synthetic:4:16", o));
  EXPECT_THROW(parse_synthetic_full("synthetic-full:q3", o), std::exception);
}

TEST(Glm5SyntheticFull, RealWidthsRunFiniteOnTheCpu) {
  SyntheticFullOptions o;
  o.layers = 4, o.n_experts = 8, o.vocab = 2048, o.materialize = true;  // layer 3: DSA + MoE
  auto m = load_source(synthetic_full_source(o), LoadOptions{2});
  std::vector<int32_t> prompt = {1, 5, 9, 200, 7};
  auto st = m->new_state();
  auto l = m->prefill(*st, prompt);
  ASSERT_EQ(l.size(), 2048u);
  for (size_t i = 0; i < l.size(); ++i) ASSERT_TRUE(std::isfinite(l[i])) << "logit " << i << " = " << l[i];
  EXPECT_GT(*std::max_element(l.begin(), l.end()) - *std::min_element(l.begin(), l.end()), 1e-4f);
  l = m->decode(*st, 3);
  for (size_t i = 0; i < l.size(); ++i) ASSERT_TRUE(std::isfinite(l[i])) << "decode logit " << i << " = " << l[i];
}

}  // namespace
}  // namespace ds4::glm5
