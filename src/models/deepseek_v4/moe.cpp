// DeepSeek V4 MoE (HF DeepseekV4SparseMoeBlock; ds4.c layer_routed_moe_*, layer_shared_ffn_*):
// router scores = sqrt(softplus(logits)); the first layers pick experts by a fixed
// token -> experts table (hash routing), later layers by top-k of score + bias; the chosen
// scores, renormalized and scaled, weight the experts. Experts and the shared expert are
// SwiGLU with the gate clamped from above and up clamped to +-limit.
#include <algorithm>
#include <cmath>

#include "backend/cpu/activation.h"
#include "backend/cpu/swiglu_clamp.h"
#include "backend/cpu/topk.h"
#include "core/error.h"
#include "models/deepseek_v4/layers.h"

namespace ds4::deepseek_v4 {
namespace {

float score(ScoreFunc f, float logit) {
  switch (f) {
    case ScoreFunc::kSqrtSoftplus: return std::sqrt(cpu::softplus(logit));
    case ScoreFunc::kSigmoid: return cpu::sigmoid(logit);
    case ScoreFunc::kSoftmax: return logit;  // normalized over the row below
  }
  return logit;
}

// Y {n, hidden} = down(swiglu(gate X, up X)).
std::vector<float> swiglu_mlp(const Ctx& ctx, const WeightMatrix& g, const WeightMatrix& u, const WeightMatrix& d,
                              const float* x, int64_t n) {
  std::vector<float> gate = project(ctx, g, x, n, "expert gate");
  const std::vector<float> up = project(ctx, u, x, n, "expert up");
  // limit 0 = no clamp (configs without swiglu_limit)
  if (ctx.c.swiglu_limit > 0) cpu::swiglu_clamp_f32(gate.data(), up.data(), int64_t(gate.size()), ctx.c.swiglu_limit, gate.data());
  else cpu::swiglu_f32(gate.data(), up.data(), int64_t(gate.size()), gate.data());
  return project(ctx, d, gate.data(), n, "expert down");
}

// Per token: chosen experts {T, k} and their weights {T, k}.
void route(const Ctx& ctx, const LayerWeights& w, int64_t layer, const int32_t* tokens, const float* x, int64_t T,
           std::vector<int32_t>& idx, std::vector<float>& wt) {
  const Config& c = ctx.c;
  const int64_t E = c.experts, K = c.experts_used;
  std::vector<float> probs = project(ctx, w.router, x, T, "router");  // {T, E}
  idx.assign(size_t(T * K), 0);
  wt.assign(size_t(T * K), 0.0f);
  std::vector<int32_t> top;
  std::vector<float> biased(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    float* p = probs.data() + t * E;
    for (int64_t e = 0; e < E; ++e) p[e] = score(c.score, p[e]);
    if (c.score == ScoreFunc::kSoftmax) cpu::softmax_f32(p, E);
    int32_t* it = idx.data() + t * K;
    if (c.hash_moe[size_t(layer)]) {
      const int32_t tok = tokens[t];
      if (tok < 0 || tok >= c.vocab) throw InputError("token id " + std::to_string(tok) + " outside the vocabulary");
      std::copy_n(w.tid2eid.data() + int64_t(tok) * K, K, it);
    } else {
      for (int64_t e = 0; e < E; ++e) biased[size_t(e)] = p[e] + (w.router_bias.empty() ? 0.0f : w.router_bias[size_t(e)]);
      cpu::topk_f32(biased.data(), E, K, top);
      std::copy_n(top.data(), K, it);
    }
    float sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += (wt[size_t(t * K + k)] = p[it[k]]);
    const float norm = c.norm_topk ? sum + 1e-20f : 1.0f;  // HF: weights / (sum + 1e-20)
    for (int64_t k = 0; k < K; ++k) wt[size_t(t * K + k)] = wt[size_t(t * K + k)] / norm * float(c.routed_scale);
  }
}

}  // namespace

void moe_forward(const Ctx& ctx, const LayerWeights& w, int64_t layer, const int32_t* tokens, const float* x,
                 int64_t T, float* out) {
  const Config& c = ctx.c;
  const int64_t H = c.hidden, K = c.experts_used;
  std::vector<int32_t> idx;
  std::vector<float> wt;
  route(ctx, w, layer, tokens, x, T, idx, wt);
  std::fill(out, out + T * H, 0.0f);
  // Expert-major (HF order): gather each expert's tokens, run it batched, scatter-add.
  std::vector<float> xs;
  std::vector<int64_t> rows, slot;
  for (int64_t e = 0; e < c.experts; ++e) {
    rows.clear();
    slot.clear();
    for (int64_t i = 0; i < T * K; ++i)
      if (idx[size_t(i)] == e) rows.push_back(i / K), slot.push_back(i);
    if (rows.empty()) continue;
    xs.resize(rows.size() * size_t(H));
    for (size_t r = 0; r < rows.size(); ++r) std::copy_n(x + rows[r] * H, H, xs.data() + r * H);
    const std::vector<float> y = swiglu_mlp(ctx, w.exp_gate[size_t(e)], w.exp_up[size_t(e)], w.exp_down[size_t(e)],
                                            xs.data(), int64_t(rows.size()));
    for (size_t r = 0; r < rows.size(); ++r) {
      const float s = wt[size_t(slot[r])];
      for (int64_t d = 0; d < H; ++d) out[rows[r] * H + d] += y[r * H + size_t(d)] * s;
    }
  }
  const std::vector<float> sh = swiglu_mlp(ctx, w.sh_gate, w.sh_up, w.sh_down, x, T);
  for (int64_t i = 0; i < T * H; ++i) out[i] += sh[size_t(i)];
}

}  // namespace ds4::deepseek_v4
