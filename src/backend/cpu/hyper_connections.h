#pragma once
// Manifold-constrained hyper-connections (mHC): the residual is `n_hc` parallel streams
// {tokens, n_hc, hidden}. Before a block the streams are collapsed with `pre` weights;
// after it the block output is expanded with `post` and the old streams are mixed through
// `comb`, a doubly-stochastic {n_hc, n_hc} matrix (Sinkhorn-Knopp projection).
// Used by DeepSeek V4 (HF DeepseekV4HyperConnection, ds4.c hc_split_sinkhorn_one) and
// GLM 5.x (HF Glm5NextTextHyperConnection): the same math, shapes from config.
#include <cstdint>

#include "core/weight.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::cpu {

struct HcWeights {
  WeightMatrix fn;             // {(2 + n_hc) * n_hc, n_hc * hidden}: mix projection
  const float* base = nullptr;   // {(2 + n_hc) * n_hc}: pre | post | comb (row-major n_hc x n_hc)
  const float* scale = nullptr;  // {3}: pre, post, comb scales
};

struct HcShape {
  int64_t n_hc = 4;
  int64_t hidden = 0;
  int sinkhorn_iters = 20;
  float hc_eps = 1e-6f;    // Sinkhorn floor and pre offset
  float norm_eps = 1e-6f;  // unweighted RMSNorm over the flattened streams
};

// mix {(2+n)*n} -> pre {n} = sigmoid(mix*s0 + b) + eps, post {n} = 2 sigmoid(mix*s1 + b),
// comb {n, n} = Sinkhorn(softmax_rows(mix*s2 + b) + eps): first a column normalization,
// then (iters - 1) x (rows, columns), each dividing by (sum + eps), exactly as HF and ds4.
// comb[j * n + k] weighs input stream j into output stream k.
void hc_split_sinkhorn_f32(const float* mix, const float* scale, const float* base, const HcShape& s,
                           float* pre, float* post, float* comb);

// Per token: collapsed {hidden} = sum_j pre[j] x[j], from the streams x {n_hc, hidden}.
// Also returns post {n_hc} and comb {n_hc, n_hc} for hc_post_f32.
// x {tokens, n_hc, hidden}; collapsed {tokens, hidden}; post {tokens, n_hc};
// comb {tokens, n_hc, n_hc}.
void hc_pre_f32(const HcWeights& w, const HcShape& s, const float* x, int64_t tokens, float* collapsed,
                float* post, float* comb, ThreadPool* pool = nullptr);

// out[k] = post[k] * block_out + sum_j comb[j, k] * residual[j]   (per token)
// block_out {tokens, hidden}; residual/out {tokens, n_hc, hidden}; out must not alias residual.
void hc_post_f32(const HcShape& s, const float* block_out, const float* residual, const float* post,
                 const float* comb, int64_t tokens, float* out);

// DeepSeek V4 final collapse (HF DeepseekV4HyperHead, ds4 output_hc_head_one):
// w = sigmoid(fn(rmsnorm(flat x)) * scale[0] + base) + eps; out = sum_j w[j] x[j].
// fn {n_hc, n_hc * hidden}, base {n_hc}, scale {1}. x {tokens, n_hc, hidden}, out {tokens, hidden}.
void hc_head_f32(const HcWeights& w, const HcShape& s, const float* x, int64_t tokens, float* out,
                 ThreadPool* pool = nullptr);

}  // namespace ds4::cpu
