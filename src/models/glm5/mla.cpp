#include "models/glm5/mla.h"

#include <cmath>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/norm.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace ds4::glm5 {

void mla_forward(const MlaWeights& w, const Config& c, const float* x, int64_t n, int64_t pos0, MlaState& st,
                 Selection& sel, float* out, ThreadPool* pool) {
  const MlaSeq one{&st, &sel, pos0, n};
  mla_forward_seqs(w, c, x, std::span<const MlaSeq>(&one, 1), out, pool);
}

void mla_forward_seqs(const MlaWeights& w, const Config& c, const float* x, std::span<const MlaSeq> seqs, float* out,
                      ThreadPool* pool) {
  const int64_t nh = c.num_attention_heads, nope = c.qk_nope_head_dim, vd = c.v_head_dim;
  const int64_t kvr = c.kv_lora_rank, qr = c.q_lora_rank;
  int64_t n = 0;
  for (const MlaSeq& s : seqs) n += s.n;
  std::vector<float> q_resid(size_t(n * qr)), q(size_t(n * nh * nope)), kv(size_t(n * kvr));
  matmul(w.q_a, x, n, q_resid.data(), pool);
  for (int64_t t = 0; t < n; ++t)
    cpu::rmsnorm_f32(q_resid.data() + t * qr, w.q_a_norm.data(), 0.0f, qr, c.rms_norm_eps, q_resid.data() + t * qr);
  matmul(w.q_b, q_resid.data(), n, q.data(), pool);  // {n, heads, nope}
  matmul(w.kv_a, x, n, kv.data(), pool);              // {n, kv_lora}
  for (int64_t t = 0; t < n; ++t)
    cpu::rmsnorm_f32(kv.data() + t * kvr, w.kv_a_norm.data(), 0.0f, kvr, c.rms_norm_eps, kv.data() + t * kvr);
  std::vector<IndexerSeq> idx;
  for (int64_t r0 = 0; const MlaSeq& s : seqs) {
    MlaState& st = *s.st;
    DS4_CHECK(st.latent.rows() == s.pos0, "glm5 mla: latent cache out of step with the position");
    st.latent.append(kv.data() + r0 * kvr, s.n);
    idx.push_back({s.st, s.sel, s.pos0, s.n});
    r0 += s.n;
  }
  if (w.has_indexer) indexer_select_seqs(w.indexer, c, x, q_resid.data(), idx, pool);
  for (const MlaSeq& s : seqs)
    DS4_CHECK(int64_t(s.sel->count.size()) == s.n, "glm5 mla: shared DSA layer without a selection of this batch");

  // Absorb W_uk into the query: q_lat[t][h] = W_uk[h]^T q[t][h]  {n, heads, kv_lora}.
  std::vector<float> q_lat(size_t(n * nh * kvr), 0.0f), o_lat(size_t(n * nh * kvr));
  parallel_for(pool, n * nh, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t h = r % nh;
      const float* qh = q.data() + r * nope;
      float* dst = q_lat.data() + r * kvr;
      for (int64_t d = 0; d < nope; ++d) {
        const float* uk = w.w_uk.data() + (h * nope + d) * kvr;
        for (int64_t i = 0; i < kvr; ++i) dst[i] += qh[d] * uk[i];
      }
    }
  });
  // One latent "KV head" shared by all heads: keys and values are both the latent rows.
  // Per sequence: its own cache and selection.
  for (int64_t r0 = 0; const MlaSeq& s : seqs) {
    cpu::AttentionArgs a;
    a.q = q_lat.data() + r0 * nh * kvr;
    a.n_q = s.n;
    a.heads = nh;
    a.head_dim = kvr;
    a.k_pages = &s.st->latent;
    a.v_pages = &s.st->latent;
    a.n_kv = s.pos0 + s.n;
    a.kv_heads = 1;
    a.v_dim = kvr;
    a.q_pos0 = s.pos0;
    a.scale = 1.0f / std::sqrt(float(nope));  // HF: qk_head_dim^-0.5 with qk_head_dim = nope (no RoPE)
    a.sel = s.sel->idx.data();
    a.sel_count = s.sel->count.data();
    a.sel_stride = s.sel->width;
    a.out = o_lat.data() + r0 * nh * kvr;
    a.pool = pool;
    cpu::attention_f32(a);
    r0 += s.n;
  }
  // Un-absorb W_uv: o[t][h] = W_uv[h] o_lat[t][h]  {n, heads, v}.
  std::vector<float> o(size_t(n * nh * vd));
  parallel_for(pool, n * nh, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t h = r % nh;
      const float* ol = o_lat.data() + r * kvr;
      for (int64_t v = 0; v < vd; ++v) {
        const float* uv = w.w_uv.data() + (h * vd + v) * kvr;
        float acc = 0;
        for (int64_t i = 0; i < kvr; ++i) acc += uv[i] * ol[i];
        o[size_t(r * vd + v)] = acc;
      }
    }
  });
  matmul(w.o, o.data(), n, out, pool);
}

}  // namespace ds4::glm5
