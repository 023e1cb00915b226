#include "models/glm5/kda.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/conv1d.h"
#include "backend/cpu/norm.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace ds4::glm5 {
namespace {

struct Dims {
  int64_t H, hd, nh, qkv;
};

// Forget gate g {n, qkv} in log space (<= 0): the decay applied to the state per key channel.
void forget_gate(const KdaWeights& w, const Config& c, const Dims& d, const float* x, int64_t n, float* g,
                 ThreadPool* pool) {
  std::vector<float> fa(size_t(n * d.hd));
  matmul(w.f_a, x, n, fa.data(), pool);  // {n, head_dim}
  matmul(w.f_b, fa.data(), n, g, pool);  // {n, qkv}
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < d.nh; ++h) {
      const float rate = std::exp(w.a_log[size_t(h)]);
      for (int64_t e = 0; e < d.hd; ++e) {
        const int64_t i = h * d.hd + e;
        const float v = g[t * d.qkv + i] + w.dt_bias[size_t(i)];
        // Safe gate: a sigmoid bounded below by linear_lower_bound keeps exp(g) away from 0.
        g[t * d.qkv + i] = c.has_lower_bound ? c.linear_lower_bound * cpu::sigmoid(rate * v)
                                             : -rate * cpu::softplus(v);
      }
    }
}

// One head's operands over n tokens: q/k/v/g rows of `row` floats, beta with stride bstride.
struct HeadRun {
  const float *q, *k, *v, *g, *beta;
  int64_t n, row, bstride, hd;
  float* S;                 // {dk, dv}: the head's state, advanced in place
  float* o;                 // {n, row}
  float* rec = nullptr;     // captured window: S after token t at rec + t * rec_stride
  int64_t rec_stride = 0;
};

// One head over n tokens, token by token (the recurrent form; HF's chunked form is the same
// recurrence reassociated).
void delta_rule_head(const HeadRun& a) {
  const float *q = a.q, *k = a.k, *v = a.v, *g = a.g, *beta = a.beta;
  const int64_t n = a.n, row = a.row, bstride = a.bstride, hd = a.hd;
  float *S = a.S, *o = a.o;
  std::vector<float> qn(static_cast<size_t>(hd)), kn(qn), mem(qn);
  const float scale = 1.0f / std::sqrt(float(hd));
  for (int64_t t = 0; t < n; ++t) {
    // FLA computes the l2norm in f32 with eps on the sum of squares.
    cpu::l2norm_f32(q + t * row, hd, 1e-6f, qn.data());
    cpu::l2norm_f32(k + t * row, hd, 1e-6f, kn.data());
    const float* vt = v + t * row;
    const float* gt = g + t * row;
    const float b = beta[t * bstride];
    std::fill(mem.begin(), mem.end(), 0.0f);
    for (int64_t i = 0; i < hd; ++i) {
      const float decay = std::exp(gt[i]);
      float* Si = S + i * hd;
      for (int64_t j = 0; j < hd; ++j) {
        Si[j] *= decay;
        mem[size_t(j)] += Si[j] * kn[size_t(i)];
      }
    }
    for (int64_t j = 0; j < hd; ++j) mem[size_t(j)] = (vt[j] - mem[size_t(j)]) * b;  // delta
    float* ot = o + t * row;
    std::fill(ot, ot + hd, 0.0f);
    for (int64_t i = 0; i < hd; ++i) {
      float* Si = S + i * hd;
      const float ki = kn[size_t(i)], qi = qn[size_t(i)] * scale;
      for (int64_t j = 0; j < hd; ++j) {
        Si[j] += ki * mem[size_t(j)];
        ot[j] += Si[j] * qi;
      }
    }
    if (a.rec && t + 1 < n) std::copy_n(S, hd * hd, a.rec + t * a.rec_stride);
  }
}

}  // namespace

void kda_init_state(const Config& c, KdaState& st) {
  const int64_t qkv = c.linear_num_heads * c.linear_head_dim;
  st.conv.assign(size_t((c.linear_conv_kernel_dim - 1) * 3 * qkv), 0.0f);
  st.recurrent.assign(size_t(c.linear_num_heads * c.linear_head_dim * c.linear_head_dim), 0.0f);
}

void kda_forward(const KdaWeights& w, const Config& c, const float* x, int64_t n, KdaState& st, float* out,
                 ThreadPool* pool) {
  const KdaSeq one{&st, n};
  kda_forward_seqs(w, c, x, std::span<const KdaSeq>(&one, 1), out, pool);
}

void kda_forward_seqs(const KdaWeights& w, const Config& c, const float* x, std::span<const KdaSeq> seqs, float* out,
                      ThreadPool* pool) {
  const Dims d{c.hidden_size, c.linear_head_dim, c.linear_num_heads, c.linear_num_heads * c.linear_head_dim};
  const int64_t C = 3 * d.qkv;
  int64_t n = 0;
  for (const KdaSeq& q : seqs) n += q.n;
  std::vector<int64_t> row0;  // first row of each sequence
  for (int64_t r = 0; const KdaSeq& q : seqs) row0.push_back(r), r += q.n;
  std::vector<float> proj(size_t(n * d.qkv)), mixed(size_t(n * C)), conv(size_t(n * C));
  // {n, 3*qkv} = [q | k | v] per token, the channel order of HF's conv1d.
  const WeightMatrix* mats[3] = {&w.q, &w.k, &w.v};
  for (int part = 0; part < 3; ++part) {
    matmul(*mats[part], x, n, proj.data(), pool);
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(proj.data() + t * d.qkv, d.qkv, mixed.data() + t * C + part * d.qkv);
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    KdaState& st = *seqs[i].st;
    if (st.cap.on) {  // a captured verify window: keep what commit_prefix needs per row
      // Per sequence (a batched verify captures several windows): this sequence's rows only.
      st.cap.conv0 = st.conv;
      st.cap.conv_in.assign(mixed.begin() + row0[i] * C, mixed.begin() + (row0[i] + seqs[i].n) * C);
      // The state after the last row is the layer's own: rows 0..n-2 only. For GLM's 2-row
      // verify (integrated MTP, one draft) this is the one backup a rejection restores.
      st.cap.rec.assign(size_t(seqs[i].n - 1) * st.recurrent.size(), 0.0f);
    }
    cpu::Conv1dArgs ca;  // the conv window is per sequence
    ca.x = mixed.data() + row0[i] * C;
    ca.n = seqs[i].n;
    ca.channels = C;
    ca.w = w.conv.data();
    ca.kernel = c.linear_conv_kernel_dim;
    ca.state = st.conv.data();
    ca.y = conv.data() + row0[i] * C;
    cpu::conv1d_causal_f32(ca);
  }
  cpu::silu_f32(conv.data(), n * C, conv.data());

  std::vector<float> g(size_t(n * d.qkv)), beta(size_t(n * d.nh)), core(size_t(n * d.qkv));
  forget_gate(w, c, d, x, n, g.data(), pool);
  matmul(w.b, x, n, beta.data(), pool);  // {n, heads}
  cpu::sigmoid_f32(beta.data(), n * d.nh, beta.data());
  // (sequence, head) pairs are independent: one task each. Views into conv {n, 3*qkv} with
  // row stride C; a sequence's rows start at row0.
  parallel_for(pool, int64_t(seqs.size()) * d.nh, [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const int64_t h = task % d.nh;
      const size_t si = size_t(task / d.nh);
      KdaState& st = *seqs[si].st;
      const int64_t n = seqs[si].n, r0 = row0[si];
      std::vector<float> o(size_t(n * d.hd));
      // Strided views: q/k/v of head h live at column offsets {0, qkv, 2qkv} + h*hd of row t.
      std::vector<float> q(size_t(n * d.hd)), k(size_t(n * d.hd)), v(size_t(n * d.hd)), gg(size_t(n * d.hd));
      for (int64_t t = 0; t < n; ++t) {
        const float* r = conv.data() + (r0 + t) * C + h * d.hd;
        std::copy_n(r, d.hd, q.data() + t * d.hd);
        std::copy_n(r + d.qkv, d.hd, k.data() + t * d.hd);
        std::copy_n(r + 2 * d.qkv, d.hd, v.data() + t * d.hd);
        std::copy_n(g.data() + (r0 + t) * d.qkv + h * d.hd, d.hd, gg.data() + t * d.hd);
      }
      HeadRun run{q.data(), k.data(), v.data(), gg.data(), beta.data() + r0 * d.nh + h, n, d.hd, d.nh, d.hd,
                  st.recurrent.data() + h * d.hd * d.hd, o.data()};
      if (st.cap.on) run.rec = st.cap.rec.data() + h * d.hd * d.hd, run.rec_stride = int64_t(st.recurrent.size());
      delta_rule_head(run);
      for (int64_t t = 0; t < n; ++t)
        std::copy_n(o.data() + t * d.hd, d.hd, core.data() + (r0 + t) * d.qkv + h * d.hd);
    }
  });
  // Output gate (LoRA) and gated RMSNorm per head: rmsnorm(o) * w * sigmoid(gate).
  std::vector<float> ga(size_t(n * d.hd)), gate(size_t(n * d.qkv));
  matmul(w.g_a, x, n, ga.data(), pool);
  matmul(w.g_b, ga.data(), n, gate.data(), pool);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < d.nh; ++h) {
      float* o = core.data() + t * d.qkv + h * d.hd;
      cpu::rmsnorm_f32(o, w.o_norm.data(), 0.0f, d.hd, c.rms_norm_eps, o);
      const float* gt = gate.data() + t * d.qkv + h * d.hd;
      for (int64_t e = 0; e < d.hd; ++e) o[e] *= cpu::sigmoid(gt[e]);
    }
  matmul(w.o, core.data(), n, out, pool);
}

}  // namespace ds4::glm5
