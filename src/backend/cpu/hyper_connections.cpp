#include "backend/cpu/hyper_connections.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/norm.h"
#include "core/error.h"

namespace ds4::cpu {

void hc_split_sinkhorn_f32(const float* mix, const float* scale, const float* base, const HcShape& s,
                           float* pre, float* post, float* comb) {
  const int64_t n = s.n_hc;
  const float eps = s.hc_eps;
  for (int64_t i = 0; i < n; ++i) {
    pre[i] = sigmoid(mix[i] * scale[0] + base[i]) + eps;
    post[i] = 2.0f * sigmoid(mix[n + i] * scale[1] + base[n + i]);
  }
  const float* cm = mix + 2 * n;
  const float* cb = base + 2 * n;
  for (int64_t r = 0; r < n; ++r) {  // softmax over each row's last axis, then + eps
    float* row = comb + r * n;
    float mx = -INFINITY;
    for (int64_t c = 0; c < n; ++c) {
      row[c] = cm[r * n + c] * scale[2] + cb[r * n + c];
      mx = std::max(mx, row[c]);
    }
    float sum = 0;
    for (int64_t c = 0; c < n; ++c) sum += (row[c] = std::exp(row[c] - mx));
    for (int64_t c = 0; c < n; ++c) row[c] = row[c] / sum + eps;
  }
  auto norm_cols = [&] {
    for (int64_t c = 0; c < n; ++c) {
      float sum = 0;
      for (int64_t r = 0; r < n; ++r) sum += comb[r * n + c];
      for (int64_t r = 0; r < n; ++r) comb[r * n + c] /= (sum + eps);
    }
  };
  auto norm_rows = [&] {
    for (int64_t r = 0; r < n; ++r) {
      float sum = 0;
      for (int64_t c = 0; c < n; ++c) sum += comb[r * n + c];
      for (int64_t c = 0; c < n; ++c) comb[r * n + c] /= (sum + eps);
    }
  };
  // The order matters for the exact values (the matrix is not symmetric): column pass
  // first, then (iters - 1) row+column passes (HF DeepseekV4HyperConnection.forward).
  norm_cols();
  for (int it = 1; it < s.sinkhorn_iters; ++it) {
    norm_rows();
    norm_cols();
  }
}

namespace {

// mix {tokens, (2+n)*n} = fn(unweighted_rmsnorm(x flattened)).
std::vector<float> hc_mix(const WeightMatrix& fn, const HcShape& s, const float* x, int64_t tokens,
                          ThreadPool* pool) {
  const int64_t flat = s.n_hc * s.hidden;
  if (fn.cols != flat) throw Error("hyper-connection fn has " + std::to_string(fn.cols) +
                                   " columns, expected n_hc * hidden = " + std::to_string(flat));
  std::vector<float> normed(size_t(tokens * flat));
  for (int64_t t = 0; t < tokens; ++t)
    rmsnorm_f32(x + t * flat, nullptr, 1.0f, flat, s.norm_eps, normed.data() + t * flat);
  std::vector<float> mix(size_t(tokens * fn.rows));
  matmul(fn, normed.data(), tokens, mix.data(), pool);
  return mix;
}

void weighted_streams(const float* x, const float* w, int64_t n_hc, int64_t hidden, float* out) {
  for (int64_t d = 0; d < hidden; ++d) out[d] = 0.0f;
  for (int64_t j = 0; j < n_hc; ++j)
    for (int64_t d = 0; d < hidden; ++d) out[d] += w[j] * x[j * hidden + d];
}

}  // namespace

void hc_pre_f32(const HcWeights& w, const HcShape& s, const float* x, int64_t tokens, float* collapsed,
                float* post, float* comb, ThreadPool* pool) {
  const int64_t n = s.n_hc, mix_dim = (2 + n) * n;
  if (w.fn.rows != mix_dim) throw Error("hyper-connection fn has " + std::to_string(w.fn.rows) +
                                        " rows, expected (2 + n_hc) * n_hc = " + std::to_string(mix_dim));
  const std::vector<float> mix = hc_mix(w.fn, s, x, tokens, pool);
  std::vector<float> pre(static_cast<size_t>(n));
  for (int64_t t = 0; t < tokens; ++t) {
    hc_split_sinkhorn_f32(mix.data() + t * mix_dim, w.scale, w.base, s, pre.data(), post + t * n,
                          comb + t * n * n);
    weighted_streams(x + t * n * s.hidden, pre.data(), n, s.hidden, collapsed + t * s.hidden);
  }
}

void hc_post_f32(const HcShape& s, const float* block_out, const float* residual, const float* post,
                 const float* comb, int64_t tokens, float* out) {
  const int64_t n = s.n_hc, h = s.hidden;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* b = block_out + t * h;
    const float* r = residual + t * n * h;
    const float* p = post + t * n;
    const float* c = comb + t * n * n;
    float* o = out + t * n * h;
    for (int64_t k = 0; k < n; ++k) {
      float* ok = o + k * h;
      for (int64_t d = 0; d < h; ++d) ok[d] = p[k] * b[d];
      for (int64_t j = 0; j < n; ++j) {
        const float cjk = c[j * n + k];
        const float* rj = r + j * h;
        for (int64_t d = 0; d < h; ++d) ok[d] += cjk * rj[d];
      }
    }
  }
}

void hc_head_f32(const HcWeights& w, const HcShape& s, const float* x, int64_t tokens, float* out,
                 ThreadPool* pool) {
  const int64_t n = s.n_hc;
  if (w.fn.rows != n) throw Error("hyper-connection head fn has " + std::to_string(w.fn.rows) +
                                  " rows, expected n_hc = " + std::to_string(n));
  const std::vector<float> mix = hc_mix(w.fn, s, x, tokens, pool);
  std::vector<float> pre(static_cast<size_t>(n));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < n; ++j) pre[size_t(j)] = sigmoid(mix[size_t(t * n + j)] * w.scale[0] + w.base[j]) + s.hc_eps;
    weighted_streams(x + t * n * s.hidden, pre.data(), n, s.hidden, out + t * s.hidden);
  }
}

}  // namespace ds4::cpu
