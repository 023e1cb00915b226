// Sparse MoE (HF Qwen3NextSparseMoeBlock): softmax router over all experts, top-k,
// renormalized weights, SwiGLU experts with a packed [gate | up] projection, plus a
// shared expert scaled by sigmoid(shared_expert_gate(x)).
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/topk.h"
#include "models/qwen_next/layers.h"

namespace ds4::qwen_next {

void moe_forward(const Ctx& x, const MoeWeights& w, const float* in, int64_t n, float* out) {
  const Config& c = x.c;
  const int64_t d = c.hidden, I = c.moe_inter, S = c.shared_inter;
  std::vector<float> probs(size_t(n * c.experts));
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
  // Routed experts, token by token (decode and verify have few rows; prefill could group
  // rows per expert, which changes nothing numerically per row).
  std::vector<int32_t> top;
  std::vector<float> gu(size_t(2 * I)), act(static_cast<size_t>(I)), y(static_cast<size_t>(d));
  for (int64_t t = 0; t < n; ++t) {
    float* p = probs.data() + t * c.experts;
    cpu::softmax_f32(p, c.experts);
    cpu::topk_f32(p, c.experts, c.top_k, top);
    double sum = 0;
    for (int32_t e : top) sum += p[e];
    for (int32_t e : top) {
      const float wt = c.norm_topk ? float(p[e] / sum) : p[e];
      matvec(w.gate_up[size_t(e)], in + t * d, gu.data(), x.pool);
      cpu::swiglu_f32(gu.data(), gu.data() + I, I, act.data());
      matvec(w.down[size_t(e)], act.data(), y.data(), x.pool);
      for (int64_t i = 0; i < d; ++i) out[t * d + i] += wt * y[size_t(i)];
    }
  }
}

}  // namespace ds4::qwen_next
