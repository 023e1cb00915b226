#include "models/glm5/indexer.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/topk.h"
#include "core/dtype.h"
#include "core/weight.h"
#include "core/thread_pool.h"

namespace ds4::glm5 {
namespace {

// nn.LayerNorm (biased variance), in place on one row.
void layernorm(float* x, int64_t n, const float* w, const float* b, float eps) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= double(n);
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const float r = float(1.0 / std::sqrt(var / double(n) + double(eps)));
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] - float(mean)) * r * w[i] + b[i];
}

// Pool keys for every pool completed by the rows just appended: per channel, a softmax over
// the pool's positions of (gate + ape[position in pool]) weights the indexer keys.
void finish_pools(const IndexerWeights& w, int64_t kp, int64_t dim, MlaState& st) {
  const int64_t rows = st.idx_keys.rows();
  const int64_t done = st.pool_keys.rows(), complete = rows / kp;
  std::vector<float> logit(static_cast<size_t>(kp)), pooled(static_cast<size_t>(dim));
  for (int64_t p = done; p < complete; ++p) {
    for (int64_t d = 0; d < dim; ++d) {
      float m = -INFINITY;
      for (int64_t j = 0; j < kp; ++j) {
        logit[size_t(j)] = st.idx_gates.row(p * kp + j)[d] + w.ape[size_t(j * dim + d)];
        m = std::max(m, logit[size_t(j)]);
      }
      float sum = 0, acc = 0;
      for (int64_t j = 0; j < kp; ++j) {
        const float e = std::exp(logit[size_t(j)] - m);
        sum += e;
        acc += e * st.idx_keys.row(p * kp + j)[d];
      }
      pooled[size_t(d)] = acc / sum;
    }
    st.pool_keys.append(pooled.data(), 1);
  }
}

}  // namespace

void indexer_select(const IndexerWeights& w, const Config& c, const float* x, const float* q_resid, int64_t n,
                    int64_t pos0, MlaState& st, Selection& sel, ThreadPool* pool) {
  const IndexerSeq one{&st, &sel, pos0, n};
  indexer_select_seqs(w, c, x, q_resid, std::span<const IndexerSeq>(&one, 1), pool);
}

void indexer_select_seqs(const IndexerWeights& w, const Config& c, const float* x, const float* q_resid,
                         std::span<const IndexerSeq> seqs, ThreadPool* pool) {
  const int64_t dim = c.index_head_dim, heads = c.index_n_heads, kp = c.index_kpool, budget = c.kpool_budget();
  int64_t n = 0;
  for (const IndexerSeq& s : seqs) n += s.n;
  std::vector<float> k(size_t(n * dim)), gate(size_t(n * dim)), q(size_t(n * heads * dim)), wt(size_t(n * heads));
  matmul(w.wk, x, n, k.data(), pool);  // {n, dim}
  for (int64_t t = 0; t < n; ++t) layernorm(k.data() + t * dim, dim, w.k_norm_w.data(), w.k_norm_b.data(), 1e-6f);
  matmul(w.compress_gate, x, n, gate.data(), pool);  // {n, dim}
  // Row r of the pass: its sequence and its row within it.
  std::vector<const IndexerSeq*> seq_of;
  std::vector<int64_t> row_in;
  for (int64_t r0 = 0; const IndexerSeq& s : seqs) {
    MlaState& st = *s.st;
    st.idx_keys.append(k.data() + r0 * dim, s.n);
    st.idx_gates.append(gate.data() + r0 * dim, s.n);
    finish_pools(w, kp, dim, st);
    s.sel->width = c.index_topk + kp - 1;
    s.sel->idx.assign(size_t(s.n * s.sel->width), -1);
    s.sel->count.assign(size_t(s.n), 0);
    for (int64_t t = 0; t < s.n; ++t) seq_of.push_back(&s), row_in.push_back(t);
    r0 += s.n;
  }
  matmul(w.wq_b, q_resid, n, q.data(), pool);       // {n, heads, dim}
  matmul(w.weights_proj, x, n, wt.data(), pool);    // {n, heads}
  const float head_scale = 1.0f / std::sqrt(float(heads)), softmax_scale = 1.0f / std::sqrt(float(dim));

  parallel_for(pool, n, [&](int64_t b, int64_t e) {
    std::vector<float> score, dots, run_dots;
    std::vector<int32_t> top;
    for (int64_t r = b; r < e; ++r) {
      const MlaState& st = *seq_of[size_t(r)]->st;
      Selection& sel = *seq_of[size_t(r)]->sel;
      const int64_t t = row_in[size_t(r)];
      const int64_t pos = seq_of[size_t(r)]->pos0 + t, visible = pos + 1, complete = visible / kp;
      int32_t* out = sel.idx.data() + t * sel.width;
      int32_t cnt = 0;
      if (complete <= budget) {
        // Dense: every complete pool fits the budget, and the tail adds the rest.
        for (int64_t j = 0; j <= pos; ++j) out[cnt++] = int32_t(j);
      } else {
        // dots {heads, pools} = q {heads, dim} . pool_keys {pools, dim}^T through the weight
        // kernels (inline: this already runs inside a parallel_for).
        // One product per block of pool keys (paged); each dot is the same whichever block
        // holds its key, so this equals one product over all keys.
        dots.resize(size_t(heads * complete));
        st.pool_keys.for_each_run(0, complete, [&](int64_t first, int64_t count, const float* rows) {
          WeightMatrix keys;
          keys.type = DType::F32;
          keys.rows = count;
          keys.cols = dim;
          keys.data = rows;
          run_dots.resize(size_t(heads * count));
          matmul(keys, q.data() + r * heads * dim, heads, run_dots.data(), nullptr);
          for (int64_t h = 0; h < heads; ++h)
            std::copy_n(run_dots.begin() + h * count, count, dots.begin() + h * complete + first);
        });
        score.assign(size_t(complete), 0.0f);
        for (int64_t h = 0; h < heads; ++h) {
          const float wh = wt[size_t(r * heads + h)] * head_scale;
          const float* dh = dots.data() + h * complete;
          for (int64_t p = 0; p < complete; ++p) score[size_t(p)] += wh * std::max(dh[p] * softmax_scale, 0.0f);
        }
        cpu::topk_f32(score.data(), complete, budget, top);
        std::sort(top.begin(), top.end());
        for (int32_t p : top)
          for (int64_t j = 0; j < kp; ++j) out[cnt++] = int32_t(p * kp + j);
        for (int64_t j = complete * kp; j <= pos; ++j) out[cnt++] = int32_t(j);  // incomplete tail
      }
      sel.count[size_t(t)] = cnt;
    }
  });
}

}  // namespace ds4::glm5
