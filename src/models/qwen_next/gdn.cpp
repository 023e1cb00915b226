// Gated DeltaNet (HF Qwen3_5GatedDeltaNet as used by Qwen4ExpTextGatedDeltaNet; MTPLX
// GatedDeltaNet): causal depthwise conv + silu over [q | k | v], L2-normed q/k, per value
// head a decaying matrix state updated by the delta rule, gated RMSNorm, out_proj.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/conv1d.h"
#include "backend/cpu/norm.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "models/qwen_next/layers.h"

namespace ds4::qwen_next {
namespace {

// Recurrent gated delta rule for one value head over n steps, S {k_dim, v_dim}:
//   S = exp(g_t) S;  S += k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T q_t.
// Exactly the per-token recurrence; HF's chunked prefill form is an algebraic
// re-association of it (agreement ~1e-6, see tests/data/qwen_next/README.md).
void delta_rule_head(const Config& c, int64_t h, const float* qkv, int64_t n, const float* g,
                     const float* beta, float* S, float* o) {
  const int64_t kd = c.k_dim, vd = c.v_dim, C = c.conv_dim(), kh = h / (c.v_heads / c.k_heads);
  std::vector<float> mem(static_cast<size_t>(vd));
  for (int64_t t = 0; t < n; ++t) {
    const float* q = qkv + t * C + kh * kd;
    const float* k = qkv + t * C + c.key_dim() + kh * kd;
    const float* v = qkv + t * C + 2 * c.key_dim() + h * vd;
    const float decay = std::exp(g[t * c.v_heads + h]), b = beta[t * c.v_heads + h];
    for (int64_t i = 0; i < kd * vd; ++i) S[i] *= decay;
    std::fill(mem.begin(), mem.end(), 0.0f);
    for (int64_t i = 0; i < kd; ++i)
      for (int64_t j = 0; j < vd; ++j) mem[size_t(j)] += S[i * vd + j] * k[i];
    for (int64_t j = 0; j < vd; ++j) mem[size_t(j)] = (v[j] - mem[size_t(j)]) * b;  // delta
    for (int64_t i = 0; i < kd; ++i)
      for (int64_t j = 0; j < vd; ++j) S[i * vd + j] += k[i] * mem[size_t(j)];
    float* ot = o + t * c.value_dim() + h * vd;
    std::fill(ot, ot + vd, 0.0f);
    for (int64_t i = 0; i < kd; ++i)
      for (int64_t j = 0; j < vd; ++j) ot[j] += S[i * vd + j] * q[i];
  }
}

// Chunked form of the same rule (HF torch_chunk_gated_delta_rule, chunk 64), used for
// multi-token calls. Within a chunk of L tokens, with c_i = sum_{j<=i} g_j and
// A_ij = beta_i (k_i . k_j) e^{c_i - c_j} (j < i), the L sequential rank-1 updates
// collapse to two unit-lower-triangular solves (forward substitution):
//   U = (I + A)^-1 (beta v),  Wk = (I + A)^-1 (beta k e^{c})
//   v'_i = U_i - Wk_i^T S,   o_i = e^{c_i} q_i^T S + sum_{j<=i} (q_i . k_j) e^{c_i - c_j} v'_j
//   S <- e^{c_L} S + sum_j e^{c_L - c_j} k_j v'_j^T
// Same result as the recurrence up to rounding; the work is chunk-sized matrix products.
void delta_rule_chunked_head(const Config& c, int64_t h, const float* qkv, int64_t n, const float* g,
                             const float* beta, float* S, float* o) {
  constexpr int64_t kChunk = 64;
  const int64_t kd = c.k_dim, vd = c.v_dim, C = c.conv_dim(), kh = h / (c.v_heads / c.k_heads);
  std::vector<float> cum(kChunk), A(kChunk * kChunk), U(kChunk * vd), Wk(kChunk * kd), vn(kChunk * vd);
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t L = std::min(kChunk, n - c0);
    auto q = [&](int64_t i) { return qkv + (c0 + i) * C + kh * kd; };
    auto k = [&](int64_t i) { return qkv + (c0 + i) * C + c.key_dim() + kh * kd; };
    auto v = [&](int64_t i) { return qkv + (c0 + i) * C + 2 * c.key_dim() + h * vd; };
    auto bt = [&](int64_t i) { return beta[(c0 + i) * c.v_heads + h]; };
    float acc = 0;
    for (int64_t i = 0; i < L; ++i) cum[size_t(i)] = acc += g[(c0 + i) * c.v_heads + h];
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < i; ++j) {
        float d = 0;
        for (int64_t e = 0; e < kd; ++e) d += k(i)[e] * k(j)[e];
        A[size_t(i * kChunk + j)] = bt(i) * d * std::exp(cum[size_t(i)] - cum[size_t(j)]);
      }
    for (int64_t i = 0; i < L; ++i) {  // forward substitution for U and Wk together
      float* u = U.data() + i * vd;
      float* w = Wk.data() + i * kd;
      const float ec = std::exp(cum[size_t(i)]);
      for (int64_t e = 0; e < vd; ++e) u[e] = bt(i) * v(i)[e];
      for (int64_t e = 0; e < kd; ++e) w[e] = bt(i) * k(i)[e] * ec;
      for (int64_t j = 0; j < i; ++j) {
        const float a = A[size_t(i * kChunk + j)];
        for (int64_t e = 0; e < vd; ++e) u[e] -= a * U[size_t(j * vd + e)];
        for (int64_t e = 0; e < kd; ++e) w[e] -= a * Wk[size_t(j * kd + e)];
      }
    }
    for (int64_t i = 0; i < L; ++i) {  // v' = U - Wk S ; o = e^c q S + intra-chunk part
      float* vi = vn.data() + i * vd;
      float* oi = o + (c0 + i) * c.value_dim() + h * vd;
      std::copy_n(U.data() + i * vd, vd, vi);
      std::fill(oi, oi + vd, 0.0f);
      const float ec = std::exp(cum[size_t(i)]);
      for (int64_t e = 0; e < kd; ++e) {
        const float wk = Wk[size_t(i * kd + e)], qe = q(i)[e] * ec;
        const float* Se = S + e * vd;
        for (int64_t f = 0; f < vd; ++f) {
          vi[f] -= wk * Se[f];
          oi[f] += qe * Se[f];
        }
      }
      for (int64_t j = 0; j <= i; ++j) {
        float d = 0;
        for (int64_t e = 0; e < kd; ++e) d += q(i)[e] * k(j)[e];
        d *= std::exp(cum[size_t(i)] - cum[size_t(j)]);
        const float* vj = vn.data() + j * vd;
        for (int64_t f = 0; f < vd; ++f) oi[f] += d * vj[f];
      }
    }
    const float last = cum[size_t(L - 1)], el = std::exp(last);
    for (int64_t e = 0; e < kd * vd; ++e) S[e] *= el;
    for (int64_t j = 0; j < L; ++j) {
      const float dj = std::exp(last - cum[size_t(j)]);
      const float* vj = vn.data() + j * vd;
      for (int64_t e = 0; e < kd; ++e) {
        const float ke = k(j)[e] * dj;
        float* Se = S + e * vd;
        for (int64_t f = 0; f < vd; ++f) Se[f] += ke * vj[f];
      }
    }
  }
}

}  // namespace

void gdn_forward(const Ctx& x, const GdnWeights& w, LayerState& s, const float* in, int64_t n, float* out) {
  const SeqRows one{&s, 0, n, nullptr};
  gdn_forward_seqs(x, w, std::span<const SeqRows>(&one, 1), in, out);
}

void gdn_forward_seqs(const Ctx& x, const GdnWeights& w, std::span<const SeqRows> seqs, const float* in, float* out) {
  const Config& c = x.c;
  const int64_t n = total_rows(seqs);
  const int64_t C = c.conv_dim(), VH = c.v_heads, V = c.value_dim();
  std::vector<float> raw(size_t(n * C)), qkv(size_t(n * C)), z(size_t(n * V)), a(size_t(n * VH)),
      b(size_t(n * VH)), o(size_t(n * V));
  matmul(w.qkv, in, n, raw.data(), x.pool);  // {n, conv_dim}
  matmul(w.z, in, n, z.data(), x.pool);      // {n, v_heads * v_dim}
  matmul(w.b, in, n, b.data(), x.pool);      // {n, v_heads}
  matmul(w.a, in, n, a.data(), x.pool);
  for (int64_t r0 = 0; const SeqRows& q : seqs) {
    LayerState& s = *q.s;
    if (s.cap.on) {  // conv history before the window + its input rows (commit rebuilds any prefix)
      s.cap.conv0 = s.conv;  // this sequence's rows only (a batched verify captures several)
      s.cap.conv_in.assign(raw.begin() + r0 * C, raw.begin() + (r0 + q.n) * C);
    }
    cpu::conv1d_causal_f32({raw.data() + r0 * C, q.n, C, w.conv.data(), c.conv_k, 1, s.conv.data(), qkv.data() + r0 * C});
    r0 += q.n;
  }
  cpu::silu_f32(qkv.data(), n * C, qkv.data());
  // q, k: L2 norm per key head (eps 1e-6 on the sum, FLA convention), q scaled by k_dim^-1/2.
  const float qscale = 1.0f / std::sqrt(float(c.k_dim));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < 2 * c.k_heads; ++h) {
      float* p = qkv.data() + t * C + h * c.k_dim;
      cpu::l2norm_f32(p, c.k_dim, 1e-6f, p);
      if (h < c.k_heads)
        for (int64_t i = 0; i < c.k_dim; ++i) p[i] *= qscale;
    }
  // beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias)  (log-space decay, <= 0)
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < VH; ++h) {
      b[size_t(t * VH + h)] = cpu::sigmoid(b[size_t(t * VH + h)]);
      a[size_t(t * VH + h)] = -std::exp(w.a_log[size_t(h)]) * cpu::softplus(a[size_t(t * VH + h)] + w.dt_bias[size_t(h)]);
    }
  const int64_t sz = c.k_dim * c.v_dim;
  std::vector<int64_t> row0;
  for (int64_t r = 0; const SeqRows& q : seqs) row0.push_back(r), r += q.n;
  for (const SeqRows& q : seqs)
    if (q.s->cap.on) q.s->cap.ssm.resize(size_t(q.n * VH * sz));
  // (sequence, value head) pairs are independent: one task each.
  parallel_for(x.pool, int64_t(seqs.size()) * VH, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t h = task % VH;
      const size_t si = size_t(task / VH);
      LayerState& s = *seqs[si].s;
      const int64_t n = seqs[si].n, r0 = row0[si];
      const float *qr = qkv.data() + r0 * C, *ar = a.data() + r0 * VH, *br = b.data() + r0 * VH;
      float* orow = o.data() + r0 * V;
      float* S = s.ssm.data() + h * sz;
      if (s.cap.on) {  // captured verify: the recurrence row by row, keeping S after each row
        for (int64_t t = 0; t < n; ++t) {
          delta_rule_head(c, h, qr + t * C, 1, ar + t * VH, br + t * VH, S, orow + t * V);
          std::copy_n(S, sz, s.cap.ssm.data() + (t * VH + h) * sz);
        }
        continue;
      }
      // One token: the recurrence (decode). Several: the chunked form (prefill, verify).
      if (n == 1) delta_rule_head(c, h, qr, n, ar, br, S, orow);
      else delta_rule_chunked_head(c, h, qr, n, ar, br, S, orow);
    }
  });
  // Gated RMSNorm per value head: norm(o) * w * act(z), act = sigmoid (Flash-Next) or silu.
  for (int64_t r = 0; r < n * VH; ++r) {
    float* oh = o.data() + r * c.v_dim;
    const float* zh = z.data() + r * c.v_dim;
    cpu::rmsnorm_f32(oh, w.norm.data(), 0.0f, c.v_dim, c.rms_eps, oh);
    for (int64_t i = 0; i < c.v_dim; ++i) oh[i] *= c.gate_sigmoid ? cpu::sigmoid(zh[i]) : cpu::silu(zh[i]);
  }
  matmul(w.out, o.data(), n, out, x.pool);  // {n, d}
}

}  // namespace ds4::qwen_next
