#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace ds4::cpu {
namespace {

// One (query, head): scores over the visible keys, softmax, weighted sum of values.
void attend_one(const AttentionArgs& a, int64_t i, int64_t h, std::vector<float>& sc,
                std::vector<int32_t>& idx) {
  const int64_t v_dim = a.v_dim ? a.v_dim : a.head_dim;
  const int64_t k_row = a.k_row ? a.k_row : a.kv_heads * a.head_dim;
  const int64_t v_row = a.v_row ? a.v_row : a.kv_heads * v_dim;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const float* q = a.q + (i * a.heads + h) * a.head_dim;
  const int64_t last = std::min(a.q_pos0 + i, a.n_kv - 1);
  idx.clear();
  if (a.sel) {
    const int32_t* s = a.sel + i * a.sel_stride;
    for (int32_t t = 0; t < a.sel_count[i]; ++t)
      if (s[t] >= 0 && s[t] <= last) idx.push_back(s[t]);
  } else {
    for (int64_t j = 0; j <= last; ++j) idx.push_back(int32_t(j));
  }
  float* o = a.out + (i * a.heads + h) * v_dim;
  std::fill(o, o + v_dim, 0.0f);
  if (idx.empty()) return;  // a fully masked row: zeros (never happens with a causal tail)
  sc.resize(idx.size());
  float m = -INFINITY;
  for (size_t t = 0; t < idx.size(); ++t) {
    const float* k = (a.k_pages ? a.k_pages->row(idx[t]) : a.k + idx[t] * k_row) + kvh * a.head_dim;
    float d = 0;
    for (int64_t e = 0; e < a.head_dim; ++e) d += q[e] * k[e];
    sc[t] = d * a.scale;
    m = std::max(m, sc[t]);
  }
  double sum = 0;
  for (float& s : sc) {
    s = std::exp(s - m);
    sum += s;
  }
  const float inv = float(1.0 / sum);
  for (size_t t = 0; t < idx.size(); ++t) {
    const float* v = (a.v_pages ? a.v_pages->row(idx[t]) : a.v + idx[t] * v_row) + kvh * v_dim;
    const float p = sc[t] * inv;
    for (int64_t e = 0; e < v_dim; ++e) o[e] += p * v[e];
  }
}

}  // namespace

void attention_f32(const AttentionArgs& a) {
  DS4_CHECK(a.kv_heads > 0 && a.heads % a.kv_heads == 0, "attention: heads must be a multiple of kv_heads");
  DS4_CHECK(!a.sel || a.sel_count, "attention: selection needs sel_count");
  DS4_CHECK((!a.k_pages || a.k_pages->rows() >= a.n_kv) && (!a.v_pages || a.v_pages->rows() >= a.n_kv),
            "attention: paged cache shorter than n_kv");
  parallel_for(a.pool, a.n_q * a.heads, [&](int64_t b, int64_t e) {
    std::vector<float> sc;
    std::vector<int32_t> idx;
    for (int64_t r = b; r < e; ++r) attend_one(a, r / a.heads, r % a.heads, sc, idx);
  }, 4);
}

}  // namespace ds4::cpu
