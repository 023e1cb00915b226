#include "models/glm5/moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/swiglu_clamp.h"
#include "backend/cpu/topk.h"
#include "core/thread_pool.h"

namespace ds4::glm5 {

void mlp_forward(const MlpWeights& w, float limit, const float* x, int64_t n, float* out, ThreadPool* pool) {
  const int64_t inter = w.gate.rows;
  std::vector<float> g(size_t(n * inter)), u(size_t(n * inter));
  matmul(w.gate, x, n, g.data(), pool);
  matmul(w.up, x, n, u.data(), pool);
  cpu::swiglu_clamp_f32(g.data(), u.data(), n * inter, limit, g.data());
  matmul(w.down, g.data(), n, out, pool);
}

void route_token(const Config& c, const float* logits, const float* bias, int32_t* experts, float* weights) {
  const int64_t E = c.n_routed_experts, G = c.n_group, per = E / G, k = c.num_experts_per_tok;
  std::vector<float> score(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    score[size_t(e)] = cpu::sigmoid(logits[e]);
    choice[size_t(e)] = score[size_t(e)] + bias[e];  // the bias steers the choice, not the weight
  }
  if (G > 1) {
    // Group score = sum of its two best choices; keep the topk_group best groups.
    std::vector<float> gs(static_cast<size_t>(G));
    std::vector<int32_t> top;
    for (int64_t g = 0; g < G; ++g) {
      cpu::topk_f32(choice.data() + g * per, per, 2, top);
      gs[size_t(g)] = 0;
      for (int32_t i : top) gs[size_t(g)] += choice[size_t(g * per + i)];
    }
    cpu::topk_f32(gs.data(), G, c.topk_group, top);
    std::vector<bool> keep(size_t(G), false);
    for (int32_t g : top) keep[size_t(g)] = true;
    for (int64_t e = 0; e < E; ++e)
      if (!keep[size_t(e / per)]) choice[size_t(e)] = -INFINITY;
  }
  std::vector<int32_t> top;
  cpu::topk_f32(choice.data(), E, k, top);
  float sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    experts[i] = top[size_t(i)];
    weights[i] = score[size_t(top[size_t(i)])];
    sum += weights[i];
  }
  for (int64_t i = 0; i < k; ++i) {
    if (c.norm_topk_prob) weights[i] /= sum + 1e-20f;
    weights[i] *= c.routed_scaling_factor;
  }
}

void moe_forward(const MoeWeights& w, const Config& c, const float* x, int64_t n, float* out, ThreadPool* pool) {
  const int64_t H = c.hidden_size, E = c.n_routed_experts, k = c.num_experts_per_tok, I = c.moe_intermediate_size;
  std::vector<float> logits(size_t(n * E));
  matmul(w.router, x, n, logits.data(), pool);  // {n, experts}, f32 like HF's router
  std::vector<int32_t> ex(size_t(n * k));
  std::vector<float> wt(size_t(n * k));
  for (int64_t t = 0; t < n; ++t) route_token(c, logits.data() + t * E, w.bias.data(), &ex[size_t(t * k)], &wt[size_t(t * k)]);
  // Group the batch by expert so each expert's weights are read once per forward.
  std::vector<std::vector<std::pair<int32_t, float>>> rows(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < k; ++i) rows[size_t(ex[size_t(t * k + i)])].push_back({int32_t(t), wt[size_t(t * k + i)]});
  mlp_forward(w.shared, c.swiglu_limit, x, n, out, pool);
  std::vector<float> xin, gu, act, y;
  for (int64_t e = 0; e < E; ++e) {
    const auto& r = rows[size_t(e)];
    if (r.empty()) continue;
    const int64_t m = int64_t(r.size());
    xin.resize(size_t(m * H));
    for (int64_t i = 0; i < m; ++i) std::copy_n(x + r[size_t(i)].first * H, H, xin.data() + i * H);
    gu.resize(size_t(m * 2 * I));
    act.resize(size_t(m * I));
    y.resize(size_t(m * H));
    matmul(w.gate_up[size_t(e)], xin.data(), m, gu.data(), pool);  // {m, 2I}: gate | up
    for (int64_t i = 0; i < m; ++i)
      cpu::swiglu_clamp_f32(gu.data() + i * 2 * I, gu.data() + i * 2 * I + I, I, c.swiglu_limit, act.data() + i * I);
    matmul(w.down[size_t(e)], act.data(), m, y.data(), pool);
    for (int64_t i = 0; i < m; ++i) {
      float* o = out + r[size_t(i)].first * H;
      const float s = r[size_t(i)].second;
      for (int64_t d = 0; d < H; ++d) o[d] += s * y[size_t(i * H + d)];
    }
  }
}

}  // namespace ds4::glm5
