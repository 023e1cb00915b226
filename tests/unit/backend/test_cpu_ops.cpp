// CPU reference ops: each checked against a hand-computed value or an independent naive form.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/conv1d.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/topk.h"
#include "core/thread_pool.h"

using namespace ds4::cpu;

namespace {
std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
}  // namespace

TEST(CpuOps, RmsnormOnePlusWeight) {
  const float x[4] = {1, 2, 3, 4}, w[4] = {0, 1, -0.5f, 0.25f};
  float y[4];
  rmsnorm_f32(x, w, 1.0f, 4, 0.0f, y);
  const float r = 1.0f / std::sqrt(7.5f);  // mean of squares = 30 / 4
  EXPECT_NEAR(y[0], 1 * r * 1.0f, 1e-6);
  EXPECT_NEAR(y[1], 2 * r * 2.0f, 1e-6);
  EXPECT_NEAR(y[2], 3 * r * 0.5f, 1e-6);
  EXPECT_NEAR(y[3], 4 * r * 1.25f, 1e-6);
  float g[4];
  rmsnorm_grouped_f32(x, nullptr, 1.0f, 4, 2, 0.0f, g);  // groups {1,2}, {3,4}
  EXPECT_NEAR(g[0], 1 / std::sqrt(2.5f), 1e-6);
  EXPECT_NEAR(g[3], 4 / std::sqrt(12.5f), 1e-6);
  float l[2];
  const float v[2] = {3, 4};
  l2norm_f32(v, 2, 0.0f, l);
  EXPECT_NEAR(l[0], 0.6f, 1e-7);
  EXPECT_NEAR(l[1], 0.8f, 1e-7);
}

TEST(CpuOps, SoftmaxAndSwiglu) {
  float x[3] = {100, 100, 100.6931471806f};  // shift-invariant: large inputs do not overflow
  softmax_f32(x, 3);
  EXPECT_NEAR(x[0], 0.25f, 1e-5);
  EXPECT_NEAR(x[2], 0.5f, 1e-5);
  const float g[2] = {0, 2}, u[2] = {5, 3};
  float y[2];
  swiglu_f32(g, u, 2, y);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 3 * 2 / (1 + std::exp(-2.0f)), 1e-6);
  EXPECT_NEAR(softplus(0.0f), std::log(2.0f), 1e-7);
}

TEST(CpuOps, RopePartialHalfAndInterleaved) {
  // head_dim 6, rot_dim 4: pairs (0,2),(1,3) in kHalf, (0,1),(2,3) interleaved; 4,5 pass.
  auto inv = rope_inv_freq(4, 100.0);
  ASSERT_EQ(inv.size(), 2u);
  EXPECT_NEAR(inv[1], 0.1f, 1e-7);
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  rope_f32(x.data(), 1, 6, 4, 3, inv.data(), RopeStyle::kHalf);
  const float c0 = std::cos(3.0f), s0 = std::sin(3.0f), c1 = std::cos(0.3f), s1 = std::sin(0.3f);
  EXPECT_NEAR(x[0], 1 * c0 - 3 * s0, 1e-6);
  EXPECT_NEAR(x[2], 3 * c0 + 1 * s0, 1e-6);
  EXPECT_NEAR(x[1], 2 * c1 - 4 * s1, 1e-6);
  EXPECT_EQ(x[4], 5.0f);
  std::vector<float> y = {1, 2, 3, 4, 5, 6};
  rope_f32(y.data(), 1, 6, 4, 3, inv.data(), RopeStyle::kInterleaved);
  EXPECT_NEAR(y[0], 1 * c0 - 2 * s0, 1e-6);
  EXPECT_NEAR(y[3], 4 * c1 + 3 * s1, 1e-6);
}

TEST(CpuOps, AttentionGqaMatchesNaiveAndSelection) {
  const int64_t nq = 3, nkv = 5, H = 4, KV = 2, D = 8;
  auto q = randn(nq * H * D, 1), k = randn(nkv * KV * D, 2), v = randn(nkv * KV * D, 3);
  std::vector<float> out(nq * H * D);
  ds4::ThreadPool pool(2);
  AttentionArgs a;
  a.q = q.data(); a.n_q = nq; a.heads = H; a.head_dim = D;
  a.k = k.data(); a.v = v.data(); a.n_kv = nkv; a.kv_heads = KV;
  a.q_pos0 = 2; a.scale = 0.3f; a.out = out.data(); a.pool = &pool;
  attention_f32(a);
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / 2;
      std::vector<double> p;
      double m = -1e30, s = 0;
      for (int64_t j = 0; j <= 2 + i; ++j) {
        double d = 0;
        for (int64_t e = 0; e < D; ++e) d += q[(i * H + h) * D + e] * k[(j * KV + kh) * D + e];
        p.push_back(d * 0.3);
        m = std::max(m, p.back());
      }
      for (auto& x : p) s += (x = std::exp(x - m));
      for (int64_t e = 0; e < D; ++e) {
        double o = 0;
        for (size_t j = 0; j < p.size(); ++j) o += p[j] / s * v[(j * KV + kh) * D + e];
        EXPECT_NEAR(out[(i * H + h) * D + e], o, 1e-5);
      }
    }
  // Selecting exactly the single key 1 for every query returns that key's value row.
  std::vector<int32_t> sel = {1, 1, 1}, cnt = {1, 1, 1};
  a.sel = sel.data(); a.sel_count = cnt.data(); a.sel_stride = 1;
  attention_f32(a);
  for (int64_t e = 0; e < D; ++e) EXPECT_NEAR(out[(2 * H + 3) * D + e], v[(1 * KV + 1) * D + e], 1e-6);
}

TEST(CpuOps, Conv1dStreamingEqualsOneShot) {
  const int64_t n = 9, C = 3, K = 4;
  for (int64_t dil : {1, 3}) {
    auto x = randn(n * C, 4), w = randn(C * K, 5);
    const int64_t s = (K - 1) * dil;
    std::vector<float> st(s * C, 0.0f), y(n * C);
    conv1d_causal_f32({x.data(), n, C, w.data(), K, dil, st.data(), y.data()});
    // Naive: zero left padding.
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < C; ++c) {
        float r = 0;
        for (int64_t j = 0; j < K; ++j) {
          const int64_t src = t + j * dil - s;
          if (src >= 0) r += w[c * K + j] * x[src * C + c];
        }
        EXPECT_NEAR(y[t * C + c], r, 1e-5);
      }
    // Token by token (and in a 2+rest split) with the carried state gives the same.
    std::vector<float> st2(s * C, 0.0f), y2(n * C);
    for (int64_t t = 0; t < n; ++t)
      conv1d_causal_f32({x.data() + t * C, 1, C, w.data(), K, dil, st2.data(), y2.data() + t * C});
    for (int64_t i = 0; i < n * C; ++i) EXPECT_NEAR(y2[i], y[i], 1e-6);
    EXPECT_EQ(st2, st);
  }
}

TEST(CpuOps, TopkOrderAndTies) {
  const float x[6] = {1, 5, 3, 5, -1, 3};
  std::vector<int32_t> idx;
  topk_f32(x, 6, 4, idx);
  EXPECT_EQ(idx, (std::vector<int32_t>{1, 3, 2, 5}));
  topk_f32(x, 6, 10, idx);
  EXPECT_EQ(idx.size(), 6u);
}
