#pragma once
// The tensor-core indexer of prefill chunks (models/deepseek_v4/cuda/indexer_tc.cu, 3xTF32
// scores as one masked GEMM over the chunk) against indexer_select (compressor.cu: FP32
// scores, a warp per entry and row) on the same rows, each row at its own position so each
// sees its own count of closed entries:
//   - the Flash's shape (64 heads x 128, ratio 4, top-512; rows in pairs per block, an odd
//     row count leaves the last block's second row unwritten), ds4's storage round trip of
//     the queries on, at ~2K entries (top-k picks 512 of ~2000) and at 32K (512 rows over
//     ~8200 entries: the prefill chunk the issue measured; also timed, printed only);
//   - 32 heads (4 rows per block) with the rows' counts crossing a 256-entry block boundary
//     (255..257 entries: the causal mask inside a block), checked against a double host
//     reference as well;
//   - a shape it does not take (4 heads x 16): it must run indexer_select, bit for bit;
//   - in every case it takes, the pre-split form (indexer_tc_set_presplit: each entry tile split
//     into TF32 hi + lo once per block) gives the per-warp form's scores and lists bit for bit.
// Bound per score (both kernels vs each other, and vs the host reference where computed):
// |diff| <= 2^-16 * sum_h |w_h| / sqrt(d nh) * ||q_h|| ||e|| + 1e-30: FP32 sums of 128 products
// (<= 128 * 2^-24 relative to sum |q_i e_i| <= ||q|| ||e||, Cauchy-Schwarz) and the 3xTF32
// products (<= 3 * 2^-22); a wrong entry, head, row or mask moves a score by its own size.
// Selections: equal lists wherever the row's k-th and (k+1)-th reference scores are further
// apart than twice the bound (else a tie within rounding may pick either; counted, printed).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/check.h"
#include "dsv4_attend_check.h"
#include "models/deepseek_v4/cuda/kernels.h"
#include "test_common.h"

namespace ds4::cuda_test {

struct IndexerTcCase {
  const char* name;
  int64_t nh, d, rope_dim, ratio, topk, pos0, rows, max_entries;
  bool sim, host_reference, timed;
};

inline void indexer_tc_case(const IndexerTcCase& k) {
  namespace dk = ds4::deepseek_v4::cuda;
  std::mt19937 rng(uint32_t(k.nh * 7919 + k.pos0));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t NH = k.nh, D = k.d, R = k.rows;
  const int64_t n_last = (k.pos0 + R) / k.ratio;  // the last row's closed entries
  // Row t: q {NH, D} | w {NH} | scores {max_entries} | sel {topk} | nsel
  const int64_t o_w = NH * D, o_sc = o_w + NH, o_sel = o_sc + k.max_entries, o_nsel = o_sel + k.topk;
  const int64_t stride = (o_nsel + 1 + 3) / 4 * 4;
  std::vector<float> rowbuf(size_t(R * stride), 0.f);
  for (int64_t t = 0; t < R; ++t) {
    float* r = rowbuf.data() + t * stride;
    for (int64_t i = 0; i < NH * D; ++i) r[i] = u(rng);
    for (int64_t h = 0; h < NH; ++h) r[o_w + h] = u(rng);
  }
  std::vector<float> entries(size_t(k.max_entries * D));
  for (float& x : entries) x = u(rng);
  std::vector<float> inv(size_t(k.rope_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(10000.f, -2.f * float(i) / float(k.rope_dim));
  const int32_t pos = int32_t(k.pos0);

  DeviceUploads up;
  float* exact_rb = static_cast<float*>(up(rowbuf.data(), rowbuf.size() * 4));
  float* tc_rb = static_cast<float*>(up(rowbuf.data(), rowbuf.size() * 4));
  float* split_rb = static_cast<float*>(up(rowbuf.data(), rowbuf.size() * 4));  // (the queries are roped in place)
  const float* dent = static_cast<const float*>(up(entries.data(), entries.size() * 4));
  const float* dinv = static_cast<const float*>(up(inv.data(), inv.size() * 4));
  const int32_t* dpos = static_cast<const int32_t*>(up(&pos, 4));
  auto args = [&](float* rb) {
    return dk::IndexerArgs{rb, rb + o_w, dent, NH, D, k.rope_dim, k.ratio, k.topk, k.max_entries, k.sim, dinv,
                           rb + o_sc, reinterpret_cast<int32_t*>(rb + o_sel), reinterpret_cast<int32_t*>(rb + o_nsel)};
  };
  const dk::Rows rows{R, stride};
  const bool takes = dk::indexer_tc_supported(args(tc_rb));
  const bool keep_split = dk::indexer_tc_presplit();
  dk::indexer_select(args(exact_rb), dpos, nullptr, rows);
  dk::indexer_tc_set_presplit(false);
  dk::indexer_select_tc(args(tc_rb), dpos, nullptr, rows);
  dk::indexer_tc_set_presplit(true);
  dk::indexer_select_tc(args(split_rb), dpos, nullptr, rows);
  dk::indexer_tc_set_presplit(keep_split);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ex(rowbuf.size()), tc(rowbuf.size()), sp(rowbuf.size());
  DS4_CUDA_CHECK(cudaMemcpy(ex.data(), exact_rb, ex.size() * 4, cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(tc.data(), tc_rb, tc.size() * 4, cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(sp.data(), split_rb, sp.size() * 4, cudaMemcpyDeviceToHost));
  char buf[400];
  if (takes) {
    std::snprintf(buf, sizeof buf, "indexer_tc %s: the pre-split form = the per-warp form bit for bit (scores, lists)", k.name);
    check(std::memcmp(tc.data(), sp.data(), tc.size() * 4) == 0, buf);
  }
  if (!takes) {  // must have run indexer_select itself
    const bool same = std::memcmp(ex.data(), tc.data(), ex.size() * 4) == 0;
    std::snprintf(buf, sizeof buf, "indexer_tc %s: not taken, runs indexer_select bit for bit: %s", k.name,
                  same ? "yes" : "NO");
    check(same, buf);
    return;
  }
  const double scale = 1.0 / std::sqrt(double(D)), head_scale = 1.0 / std::sqrt(double(NH));
  std::vector<double> enorm(static_cast<size_t>(n_last));
  for (int64_t e = 0; e < n_last; ++e) {
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += double(entries[size_t(e * D + i)]) * entries[size_t(e * D + i)];
    enorm[size_t(e)] = std::sqrt(s);
  }
  double worst_ratio = 0, worst_ref = 0;
  int64_t list_diff = 0, ambiguous = 0, checked = 0;
  bool finite = true, counts_ok = true;
  for (int64_t t = 0; t < R; ++t) {
    const float* qr = ex.data() + t * stride;  // the queries after index_q (roped in place)
    const int64_t n = (k.pos0 + t + 1) / k.ratio;
    std::vector<double> qn(static_cast<size_t>(NH));
    for (int64_t h = 0; h < NH; ++h) {
      double s = 0;
      for (int64_t i = 0; i < D; ++i) s += double(qr[h * D + i]) * qr[h * D + i];
      qn[size_t(h)] = std::sqrt(s) * std::abs(double(qr[o_w + h])) * head_scale * scale;
    }
    const double qsum = std::accumulate(qn.begin(), qn.end(), 0.0);
    std::vector<double> ref;
    if (k.host_reference) ref.resize(size_t(n));
    double row_bound = 0;
    for (int64_t e = 0; e < n; ++e) {
      const double b = std::ldexp(qsum * enorm[size_t(e)], -16) + 1e-30;
      row_bound = std::max(row_bound, b);
      const float a = ex[size_t(t * stride + o_sc + e)], c = tc[size_t(t * stride + o_sc + e)];
      finite = finite && std::isfinite(c);
      worst_ratio = std::max(worst_ratio, std::abs(double(a) - c) / b);
      if (k.host_reference) {
        double s = 0;
        for (int64_t h = 0; h < NH; ++h) {
          double dot = 0;
          for (int64_t i = 0; i < D; ++i) dot += double(qr[h * D + i]) * entries[size_t(e * D + i)];
          s += std::max(dot, 0.0) * scale * (double(qr[o_w + h]) * head_scale);
        }
        ref[size_t(e)] = s;
        worst_ref = std::max(worst_ref, std::max(std::abs(s - c), std::abs(s - a)) / b);
      }
    }
    const int32_t ne = *reinterpret_cast<const int32_t*>(ex.data() + t * stride + o_nsel);
    const int32_t nt = *reinterpret_cast<const int32_t*>(tc.data() + t * stride + o_nsel);
    counts_ok = counts_ok && ne == nt && ne == int32_t(std::min(n, k.topk));
    const int32_t* le = reinterpret_cast<const int32_t*>(ex.data() + t * stride + o_sel);
    const int32_t* lt = reinterpret_cast<const int32_t*>(tc.data() + t * stride + o_sel);
    if (std::equal(le, le + ne, lt)) {
      ++checked;
      continue;
    }
    if (n <= k.topk) {  // every entry kept: the lists cannot differ
      ++list_diff;
      continue;
    }
    // differing lists: allowed only for a tie within rounding at the k-th score
    std::vector<float> s(ex.begin() + t * stride + o_sc, ex.begin() + t * stride + o_sc + n);
    std::nth_element(s.begin(), s.begin() + (k.topk - 1), s.end(), std::greater<float>());
    const float kth = s[size_t(k.topk - 1)];
    std::nth_element(s.begin() + k.topk, s.begin() + k.topk, s.end(), std::greater<float>());
    const float next = s[size_t(k.topk)];
    if (double(kth) - next <= 2 * row_bound)
      ++ambiguous;
    else
      ++list_diff;
  }
  std::snprintf(buf, sizeof buf,
                "indexer_tc %s: %lld rows at %lld.. (%lld entries), %lld heads x %lld: max |tc - exact| / bound %.3g "
                "(<= 1)%s%.3g; same top-%lld list in %lld rows, %lld ties within rounding, %lld other differences (must be 0)",
                k.name, (long long)R, (long long)k.pos0, (long long)n_last, (long long)NH, (long long)D, worst_ratio,
                k.host_reference ? ", vs double reference " : "", k.host_reference ? worst_ref : 0.0,
                (long long)k.topk, (long long)checked, (long long)ambiguous, (long long)list_diff);
  check(finite && counts_ok && worst_ratio <= 1 && worst_ref <= 1 && list_diff == 0, buf);
  if (!k.timed) return;
  // The queries are roped in place on every call: timing only (the values were checked above).
  const float ms_ex = gpu_ms_per_call([&] { dk::indexer_select(args(exact_rb), dpos, nullptr, rows); });
  const float ms_tc = gpu_ms_per_call([&] { dk::indexer_select_tc(args(tc_rb), dpos, nullptr, rows); });
  // its steps alone: the queries (in place) and the top-k; the tc scores are the rest
  const float ms_q = gpu_ms_per_call([&] { dk::indexer_queries(args(tc_rb), dpos, nullptr, rows); });
  const float ms_k = gpu_ms_per_call([&] { dk::indexer_topk(args(tc_rb), dpos, nullptr, rows); });
  dk::indexer_tc_set_presplit(!keep_split);
  const float ms_other = gpu_ms_per_call([&] { dk::indexer_select_tc(args(tc_rb), dpos, nullptr, rows); });
  dk::indexer_tc_set_presplit(keep_split);
  const float ms_split = keep_split ? ms_tc : ms_other, ms_warp = keep_split ? ms_other : ms_tc;
  std::printf("info indexer %s: indexer_select %.3f ms, indexer_select_tc %.3f ms per call (queries %.3f + tc scores "
              "%.3f + top-k %.3f); tc scores per-warp split %.3f ms, pre-split %.3f ms\n",
              k.name, ms_ex, ms_tc, ms_q, ms_tc - ms_q - ms_k, ms_k, ms_warp - ms_q - ms_k, ms_split - ms_q - ms_k);
}

inline void indexer_tc_shapes() {
  indexer_tc_case({"Flash (64 x 128, top-512, ds4 storage, odd rows)", 64, 128, 64, 4, 512, 8000, 67, 2100, true, false, false});
  indexer_tc_case({"32 heads, counts crossing a 256-entry block", 32, 128, 64, 4, 16, 1020, 10, 300, false, true, false});
  indexer_tc_case({"tiny 4 x 16 (not taken)", 4, 16, 8, 4, 4, 40, 9, 64, false, false, false});
  indexer_tc_case({"Flash 512-row chunk at 32768", 64, 128, 64, 4, 512, 32768, 512, 8448, true, false, true});
}

}  // namespace ds4::cuda_test
