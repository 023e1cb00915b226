// Sparse MoE (HF Qwen3NextSparseMoeBlock): softmax router over all experts, top-k,
// renormalized weights, SwiGLU experts with a packed [gate | up] projection, plus a
// shared expert scaled by sigmoid(shared_expert_gate(x)).
#include <algorithm>
#include <utility>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/topk.h"
#include "models/qwen_next/layers.h"

namespace ds4::qwen_next {

void moe_forward(const Ctx& x, const MoeWeights& w, const float* in, int64_t n, float* out) {
  const Config& c = x.c;
  const int64_t d = c.hidden, I = c.moe_inter, S = c.shared_inter;
  std::vector<float> probs(size_t(n * c.experts)), routed(size_t(n * d), 0.0f);
  matmul(w.router, in, n, probs.data(), x.pool);  // {n, E}
  // Shared expert over all rows at once.
  std::vector<float> g(size_t(n * S)), u(size_t(n * S)), sg(static_cast<size_t>(n));
  matmul(w.sh_gate, in, n, g.data(), x.pool);
  matmul(w.sh_up, in, n, u.data(), x.pool);
  cpu::swiglu_f32(g.data(), u.data(), n * S, g.data());
  matmul(w.sh_down, g.data(), n, out, x.pool);  // {n, d}
  matmul(w.sh_gate_scalar, in, n, sg.data(), x.pool);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) out[t * d + i] *= cpu::sigmoid(sg[size_t(t)]);
  // Routing per token, then each hit expert runs once over all of its rows (a matmul in
  // prefill, a matvec in decode). Outputs are added in ascending expert order for every
  // row, as HF's expert loop does, so a row's result does not depend on the batch.
  std::vector<std::vector<std::pair<int64_t, float>>> rows(size_t(c.experts));  // expert -> (row, weight)
  std::vector<int32_t> top;
  for (int64_t t = 0; t < n; ++t) {
    float* p = probs.data() + t * c.experts;
    cpu::softmax_f32(p, c.experts);
    cpu::topk_f32(p, c.experts, c.top_k, top);
    double sum = 0;
    for (int32_t e : top) sum += p[e];
    for (int32_t e : top) rows[size_t(e)].push_back({t, c.norm_topk ? float(p[e] / sum) : p[e]});
  }
  std::vector<float> xin, gu, act, y;
  for (int64_t e = 0; e < c.experts; ++e) {
    const auto& r = rows[size_t(e)];
    const int64_t m = int64_t(r.size());
    if (m == 0) continue;
    xin.resize(size_t(m * d));
    gu.resize(size_t(m * 2 * I));
    act.resize(size_t(m * I));
    y.resize(size_t(m * d));
    for (int64_t i = 0; i < m; ++i) std::copy_n(in + r[size_t(i)].first * d, d, xin.data() + i * d);
    matmul(w.gate_up[size_t(e)], xin.data(), m, gu.data(), x.pool);  // {m, [gate | up] 2I}
    for (int64_t i = 0; i < m; ++i) cpu::swiglu_f32(gu.data() + i * 2 * I, gu.data() + i * 2 * I + I, I, act.data() + i * I);
    matmul(w.down[size_t(e)], act.data(), m, y.data(), x.pool);  // {m, d}
    for (int64_t i = 0; i < m; ++i) {
      float* o = routed.data() + r[size_t(i)].first * d;
      const float wt = r[size_t(i)].second;
      for (int64_t k = 0; k < d; ++k) o[k] += wt * y[size_t(i * d + k)];
    }
  }
  for (int64_t i = 0; i < n * d; ++i) out[i] = routed[size_t(i)] + out[i];  // experts + gated shared
}

}  // namespace ds4::qwen_next
