#pragma once
// Manifold-constrained hyper-connections (mHC), f32: the residual stream is `hc` parallel
// streams; each block reads one collapsed input and writes back through learned mixes.
// Shared by DeepSeek V4 and GLM 5.x (HF DeepseekV4HyperConnection / Glm5NextTextHyperConnection):
//   flat = rmsnorm_unweighted(x {hc*dim}) ; m = fn · flat  {(2+hc)*hc}
//   pre  = sigmoid(m_pre * s0 + b_pre) + eps            {hc}
//   post = 2 * sigmoid(m_post * s1 + b_post)            {hc}
//   comb = sinkhorn(softmax_rows(m_comb * s2 + b_comb) + eps)   {hc, hc}
//   collapsed = sum_s pre[s] * x[s]                     {dim}
// and after the block: out[i] = post[i] * y + sum_j comb[j][i] * x[j].
#include <cstdint>

#include "core/weight.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::cpu {

struct HcWeights {
  WeightMatrix fn;              // {(2+hc)*hc, hc*dim}
  const float* base = nullptr;  // {(2+hc)*hc}
  const float* scale = nullptr; // {3}: pre, post, comb
  int64_t hc = 0;
  int64_t dim = 0;
  int sinkhorn_iters = 20;
  float eps = 1e-6f;            // hc_eps: added to pre/comb and to every Sinkhorn denominator
  float norm_eps = 1e-6f;       // eps of the unweighted RMSNorm over the flattened streams
};

// In place on a {hc, hc} matrix: column-normalize once, then (iters - 1) rounds of
// row- then column-normalization (HF order; denominators get + eps).
void hc_sinkhorn_f32(float* comb, int64_t hc, int iters, float eps);

// x {n, hc, dim} -> post {n, hc}, comb {n, hc, hc}, collapsed {n, dim}.
void hc_pre_f32(const HcWeights& w, const float* x, int64_t n, float* post, float* comb,
                float* collapsed, ThreadPool* pool = nullptr);

// out {n, hc, dim} = post[i] * y + sum_j comb[j][i] * x[j]; out must not alias x.
void hc_post_f32(const float* x, const float* y, const float* post, const float* comb, int64_t n,
                 int64_t hc, int64_t dim, float* out);

}  // namespace ds4::cpu
