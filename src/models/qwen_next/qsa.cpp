// QSA: gated GQA attention whose causal window is cut down per query by a block indexer
// (HF Qwen4ExpTextAttention + Qwen4ExpTextQSAIndexer; MTPLX QSACache). The indexer scores
// mean-pooled key blocks of `idx_ratio` tokens with relu(q . k) summed over its heads and
// keeps the top (budget / ratio) complete blocks plus the incomplete tail block.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/topk.h"
#include "core/thread_pool.h"
#include "models/qwen_next/layers.h"

namespace ds4::qwen_next {
namespace {

// Pool every block completed by the new rows: mean of raw keys -> k_layernorm -> rope at the
// block's first position. Cached: a block's pooled key never changes once complete.
void pool_new_blocks(const Ctx& x, const QsaWeights& w, LayerState& s, int64_t total) {
  const Config& c = x.c;
  const int64_t D = c.idx_dim, R = c.idx_ratio;
  for (int64_t b = s.idx_pooled.rows(); b < total / R; ++b) {
    std::vector<float> m(size_t(D), 0.0f);
    for (int64_t r = 0; r < R; ++r) {
      const float* raw = s.idx_raw.row(b * R + r);
      for (int64_t i = 0; i < D; ++i) m[size_t(i)] += raw[i];
    }
    for (auto& v : m) v /= float(R);
    cpu::rmsnorm_f32(m.data(), w.idx_k_norm.data(), 1.0f, D, c.rms_eps, m.data());
    cpu::rope_f32(m.data(), 1, D, c.rot_dim, b * R, x.inv_freq.data(), cpu::RopeStyle::kHalf);
    s.idx_pooled.append(m.data(), 1);
  }
}

// Selected key positions for a query at position p, ascending. q: {idx_heads, idx_dim}.
void select_keys(const Ctx& x, const LayerState& s, const float* q, int64_t p, std::vector<int32_t>& sel) {
  const Config& c = x.c;
  const int64_t D = c.idx_dim, R = c.idx_ratio, nb = (p + 1) / R, keep = c.idx_budget / R;
  sel.clear();
  if (nb <= keep) {  // every complete block is kept: plain causal attention
    for (int64_t j = 0; j <= p; ++j) sel.push_back(int32_t(j));
    return;
  }
  std::vector<float> score(static_cast<size_t>(nb));
  const float inv = 1.0f / std::sqrt(float(D));
  for (int64_t b = 0; b < nb; ++b) {
    const float* k = s.idx_pooled.row(b);
    float acc = 0;
    for (int64_t h = 0; h < c.idx_heads; ++h) {
      float dot = 0;
      for (int64_t i = 0; i < D; ++i) dot += q[h * D + i] * k[i];
      acc += std::max(dot, 0.0f);
    }
    score[size_t(b)] = acc * inv;
  }
  std::vector<int32_t> top;
  cpu::topk_f32(score.data(), nb, keep, top);
  std::sort(top.begin(), top.end());
  for (int32_t b : top)
    for (int64_t r = 0; r < R; ++r) sel.push_back(int32_t(b * R + r));
  for (int64_t j = nb * R; j <= p; ++j) sel.push_back(int32_t(j));
}

}  // namespace

void qsa_forward(const Ctx& x, const QsaWeights& w, LayerState& s, int64_t pos0, const float* in, int64_t n,
                 float* out) {
  const SeqRows one{&s, pos0, n, nullptr};
  qsa_forward_seqs(x, w, std::span<const SeqRows>(&one, 1), in, out);
}

void qsa_forward_seqs(const Ctx& x, const QsaWeights& w, std::span<const SeqRows> seqs, const float* in, float* out) {
  const Config& c = x.c;
  const int64_t H = c.heads, KV = c.kv_heads, hd = c.head_dim, D = c.idx_dim, IH = c.idx_heads;
  const int64_t n = total_rows(seqs);
  std::vector<float> qg(size_t(n * H * 2 * hd)), k(size_t(n * KV * hd)), v(size_t(n * KV * hd)),
      q(size_t(n * H * hd)), gate(size_t(n * H * hd)), iqk(size_t(n * (IH + 1) * D));
  matmul(w.q, in, n, qg.data(), x.pool);   // {n, heads, [query | gate] 2*hd}
  matmul(w.k, in, n, k.data(), x.pool);    // {n, kv_heads, hd}
  matmul(w.v, in, n, v.data(), x.pool);
  matmul(w.idx_qk, in, n, iqk.data(), x.pool);  // {n, [idx_heads queries | 1 key], idx_dim}
  // Row t of the pass: its sequence and position.
  std::vector<const SeqRows*> seq_of(static_cast<size_t>(n));
  std::vector<int64_t> pos_of(static_cast<size_t>(n));
  for (int64_t r = 0; const SeqRows& sq : seqs)
    for (int64_t t = 0; t < sq.n; ++t, ++r) seq_of[size_t(r)] = &sq, pos_of[size_t(r)] = sq.pos0 + t;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t p = pos_of[size_t(t)];
    for (int64_t h = 0; h < H; ++h) {
      const float* src = qg.data() + (t * H + h) * 2 * hd;
      float* qh = q.data() + (t * H + h) * hd;
      cpu::rmsnorm_f32(src, w.q_norm.data(), 1.0f, hd, c.rms_eps, qh);
      std::copy(src + hd, src + 2 * hd, gate.data() + (t * H + h) * hd);
    }
    cpu::rope_f32(q.data() + t * H * hd, H, hd, c.rot_dim, p, x.inv_freq.data(), cpu::RopeStyle::kHalf);
    float* kt = k.data() + t * KV * hd;
    for (int64_t h = 0; h < KV; ++h) cpu::rmsnorm_f32(kt + h * hd, w.k_norm.data(), 1.0f, hd, c.rms_eps, kt + h * hd);
    cpu::rope_f32(kt, KV, hd, c.rot_dim, p, x.inv_freq.data(), cpu::RopeStyle::kHalf);
    float* iq = iqk.data() + t * (IH + 1) * D;
    for (int64_t h = 0; h < IH; ++h) cpu::rmsnorm_f32(iq + h * D, w.idx_q_norm.data(), 1.0f, D, c.rms_eps, iq + h * D);
    cpu::rope_f32(iq, IH, D, c.rot_dim, p, x.inv_freq.data(), cpu::RopeStyle::kHalf);
    LayerState& s = *seq_of[size_t(t)]->s;
    s.idx_raw.append(iq + IH * D, 1);
  }
  std::vector<float> att(size_t(n * H * hd));
  for (int64_t r0 = 0; const SeqRows& sq : seqs) {  // caches, key selection and attention per sequence
    LayerState& s = *sq.s;
    const int64_t pos0 = sq.pos0, m = sq.n;
    s.k.append(k.data() + r0 * KV * hd, m);
    s.v.append(v.data() + r0 * KV * hd, m);
    pool_new_blocks(x, w, s, pos0 + m);
    // Per-query key selection, {m, budget + ratio - 1} at most (or the whole causal prefix).
    const int64_t total = pos0 + m;
    std::vector<std::vector<int32_t>> sel(static_cast<size_t>(m));
    parallel_for(x.pool, m, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        select_keys(x, s, iqk.data() + (r0 + t) * (IH + 1) * D, pos0 + t, sel[size_t(t)]);
    });
    int64_t stride = 0;
    for (auto& v2 : sel) stride = std::max(stride, int64_t(v2.size()));
    std::vector<int32_t> flat(size_t(m * stride), -1), count(static_cast<size_t>(m));
    for (int64_t t = 0; t < m; ++t) {
      std::copy(sel[size_t(t)].begin(), sel[size_t(t)].end(), flat.begin() + t * stride);
      count[size_t(t)] = int32_t(sel[size_t(t)].size());
    }
    cpu::AttentionArgs a;
    a.q = q.data() + r0 * H * hd; a.n_q = m; a.heads = H; a.head_dim = hd;
    a.k_pages = &s.k; a.v_pages = &s.v; a.n_kv = total; a.kv_heads = KV;
    a.q_pos0 = pos0; a.scale = 1.0f / std::sqrt(float(hd));
    a.sel = flat.data(); a.sel_count = count.data(); a.sel_stride = stride;
    a.out = att.data() + r0 * H * hd; a.pool = x.pool;
    cpu::attention_f32(a);
    r0 += m;
  }
  for (size_t i = 0; i < att.size(); ++i) att[i] *= cpu::sigmoid(gate[i]);  // output gate
  matmul(w.o, att.data(), n, out, x.pool);  // {n, d}
}

}  // namespace ds4::qwen_next
