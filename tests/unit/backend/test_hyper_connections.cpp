// Hyper-connections against values printed by HF DeepseekV4HyperConnection (transformers
// 5.24, float32) for the same closed-form inputs (n_hc 4, hidden 8, 2 tokens).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/hyper_connections.h"
#include "core/error.h"

using namespace ds4::cpu;

namespace {
struct Case {
  std::vector<float> fn, base, x;
  float scale[3] = {0.7f, 0.9f, 1.3f};
  HcShape shape;
  Case() {
    shape.n_hc = 4;
    shape.hidden = 8;
    for (int i = 0; i < 24 * 32; ++i) fn.push_back(float(std::cos(i * 0.11) * 0.2));
    for (int i = 0; i < 24; ++i) base.push_back(float(0.1 * std::sin(i)));
    for (int i = 0; i < 2 * 32; ++i) x.push_back(float(std::sin(i * 0.37)));
  }
  HcWeights weights() const {
    HcWeights w;
    w.fn.type = ds4::DType::F32;
    w.fn.rows = 24;
    w.fn.cols = 32;
    w.fn.data = fn.data();
    w.base = base.data();
    w.scale = scale;
    return w;
  }
};
}  // namespace

TEST(HyperConnections, PreMatchesHf) {
  Case c;
  std::vector<float> col(2 * 8), post(2 * 4), comb(2 * 16);
  hc_pre_f32(c.weights(), c.shape, c.x.data(), 2, col.data(), post.data(), comb.data());
  const float want_post[4] = {0.7985669f, 1.1756320f, 0.7396101f, 1.2699485f};
  const float want_comb[16] = {0.1631048f, 0.3977408f, 0.2157892f, 0.2233641f, 0.3015950f, 0.1187749f,
                               0.4599408f, 0.1196883f, 0.3872173f, 0.1235107f, 0.2323273f, 0.2569437f,
                               0.1480819f, 0.3599725f, 0.0919417f, 0.4000029f};
  const float want_col[8] = {0.0454111f, 0.1204790f, 0.1792407f, 0.2137429f,
                             0.2193161f, 0.1952057f, 0.1446753f, 0.0745637f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(post[4 + i], want_post[i], 2e-6);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(comb[16 + i], want_comb[i], 2e-6);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(col[8 + i], want_col[i], 2e-6);
  // Sinkhorn result is doubly stochastic (to the eps floor).
  for (int r = 0; r < 4; ++r) {
    float rs = 0, cs = 0;
    for (int k = 0; k < 4; ++k) rs += comb[16 + r * 4 + k], cs += comb[16 + k * 4 + r];
    EXPECT_NEAR(rs, 1.0f, 1e-4);
    EXPECT_NEAR(cs, 1.0f, 1e-5);
  }
}

TEST(HyperConnections, PostMatchesHf) {
  Case c;
  std::vector<float> col(2 * 8), post(2 * 4), comb(2 * 16), out(2 * 32);
  hc_pre_f32(c.weights(), c.shape, c.x.data(), 2, col.data(), post.data(), comb.data());
  // Feed the collapsed input straight back as the "block output".
  hc_post_f32(c.shape, col.data(), c.x.data(), post.data(), comb.data(), 2, out.data());
  const float want[8] = {0.1347220f, 0.1684626f, 0.1794027f, 0.1660614f,
                         0.1302445f, 0.0767995f, 0.0129601f, -0.0526333f};
  for (int d = 0; d < 8; ++d) EXPECT_NEAR(out[32 + 2 * 8 + d], want[d], 3e-6);  // token 1, stream 2
}

TEST(HyperConnections, RejectsWrongFnShape) {
  Case c;
  HcWeights w = c.weights();
  w.fn.rows = 23;
  std::vector<float> col(16), post(8), comb(32);
  EXPECT_THROW(hc_pre_f32(w, c.shape, c.x.data(), 2, col.data(), post.data(), comb.data()), ds4::Error);
}
