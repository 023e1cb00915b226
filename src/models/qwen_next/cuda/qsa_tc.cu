// qsa_attend for a tensor-core prefill chunk (issue #22): the QSA layers' attention was 24 % of
// a 2K Qwen prefill on the group kernel (FP32 CUDA cores, one block per KV head and row, a warp
// reduction per key and head; bench/results/session23-2026-12-06 call 3). Here the products run
// on tensor cores (mma.sync m16n8k8, TF32 operands rounded to nearest, FP32 accumulate), flash
// style, in the split kernel's form: block (KV head, split, row) takes the row's query heads of
// that KV head (G <= 16: the M tile of 16, rows past G zero) over one range of the row's visible
// keys, in tiles of kKeys keys (cp.async into shared memory; K, then V into the same tile):
//   S = Q K^T (warp w: keys 8w .. 8w + 7 of the tile, all of hd), times 1 / sqrt(hd), keys past
//   the range masked; an online softmax per head in FP32 (running max m, exp-sum l);
//   O = O exp(m_old - m_new) + P V (warp w: the 8-column tiles w, w + 8, ... of hd).
// The visible keys and their order are the split kernel's (positions 0..pos while every complete
// block is kept; past the budget the kept blocks' keys ascending, then the open tail), so the
// partials {m, l, acc} go to the same slots and qsa_merge_splits finishes as for the decode step.
// Splits of at least kMinSplitKeys keys (fewer blocks, fewer partials to merge); unused splits
// write an empty partial (m = -inf). Only tensor-core chunks take it (qsa_attend's many_rows):
// decode steps and exact chunks keep their kernels bit for bit.
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "core/error.h"
#include "models/qwen_next/cuda/kernels.h"
#include "models/qwen_next/cuda/qsa_internal.cuh"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::mma::a_frag_tf32;
using ds4::cuda::mma::cp_async16;
using ds4::cuda::mma::cp_commit;
using ds4::cuda::mma::cp_wait;
using ds4::cuda::mma::flash_pv;
using ds4::cuda::mma::mma_tf32;
using ds4::cuda::mma::tf32;

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kKeys = 8 * kWarps;  // keys per tile: one 8-key n-tile of S per warp
constexpr int kMaxHd = 256;        // O: hd / 8 n-tiles over 8 warps, at most 4 each
constexpr int kNt = kMaxHd / 8 / kWarps;
constexpr int64_t kMinSplitKeys = 256;
constexpr int kPStride = kKeys + 4;  // P rows: A fragments (g, t) on distinct banks

// Row stride of Q and the key / value tile: hd + 4 puts the S phase's reads (rows g, column
// t) on distinct banks (the P V phase's value reads meet 2 rows per bank).
__host__ __device__ inline int64_t tile_ld(int64_t hd) { return hd + 4; }

size_t smem_bytes(const QsaShape& sh) {
  const int64_t ld = tile_ld(sh.head_dim), cap = sh.idx_budget / sh.idx_ratio;
  return size_t(16 * ld + int64_t(kKeys) * ld + 16 * kPStride + 3 * 16) * sizeof(float) + size_t(cap) * sizeof(int32_t);
}

// One m-tile's O fragments into the partials: rows g, g + 8 of the warp's n-tiles (warp, warp +
// kWarps, ... < nts), heads past G dropped; dst(h) is head h's partial row {m, l, hd values}.
// Both kernels store their tiles through it.
template <class Dst>
__device__ __forceinline__ void store_o_tile(const float (&o)[kNt][4], Dst dst, int G, int nts, int warp, int g,
                                             int t) {
  ds4::cuda::mma::for_each_acc(o, warp, kWarps, nts, g, t, [&](int h, int col, float v) {
    if (h < G) dst(h)[2 + col] = v;
  });
}

// One M row's online-softmax step over a tile of kKeys = 64 scores (pr; -inf where masked) by one
// warp (lanes: keys lane and lane + 32): the row's new running max and exp-sum in m_s / l_s, the
// rescale of its O in corr_s, and its weights (TF32-rounded) over the scores. A row with no visible
// key yet (every score so far -inf: a tile of masked keys before any visible one, or a row past the
// chunk) gets weights 0 and leaves O unchanged; rows past G score 0, not -inf.
__device__ __forceinline__ void softmax_tile_row(float* pr, int r, float* m_s, float* l_s, float* corr_s, int lane) {
  static_assert(kKeys == 64, "two scores per lane");
  const float v0 = pr[lane], v1 = pr[lane + 32];
  float mx = fmaxf(v0, v1);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const float m_old = m_s[r], m_new = fmaxf(m_old, mx);
  const bool none = m_new == -INFINITY;
  const float p0 = none ? 0.f : expf(v0 - m_new), p1 = none ? 0.f : expf(v1 - m_new);
  float sum = p0 + p1;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  pr[lane] = __uint_as_float(tf32(p0)), pr[lane + 32] = __uint_as_float(tf32(p1));
  __syncwarp();
  if (lane == 0) {
    const float corr = none ? 1.f : expf(m_old - m_new);  // m_old = -inf: 0
    corr_s[r] = corr;
    l_s[r] = l_s[r] * corr + sum;
    m_s[r] = m_new;
  }
}

// The multi-row form (qsa_attend_tc_rows_kernel below): kRowGroup consecutive rows of a chunk per
// block where every row of the group is within the index budget.
constexpr int kRowGroup = 4;

// Whether rows [g0, g0 + kRowGroup) (those < rows) all see every key 0..p (every block kept).
__device__ __forceinline__ bool group_dense(const int32_t* __restrict__ pos_p, int64_t g0, int64_t rows, int64_t ratio,
                                            int64_t keep_n) {
  int64_t pmax = -1;
  for (int64_t r = g0; r < g0 + kRowGroup && r < rows; ++r) pmax = pos_p[r] > pmax ? pos_p[r] : pmax;
  return (pmax + 1) / ratio <= keep_n;
}

// skip_dense: the rows form runs too; rows of its dense groups are its (this kernel leaves them).
__global__ void __launch_bounds__(kThreads) qsa_attend_tc_kernel(const float* __restrict__ q, QsaCache c, QsaShape sh,
                                                                 const int32_t* __restrict__ pos_p,
                                                                 const uint8_t* __restrict__ keep, float* __restrict__ part,
                                                                 int64_t rs, bool skip_dense) {
  extern __shared__ __align__(16) float smem[];
  const int64_t hd = sh.head_dim, ld = tile_ld(hd), G = sh.heads / sh.kv_heads, KVD = sh.kv_heads * hd;
  float* Qs = smem;                          // {16, ld}: the heads' queries (TF32-rounded), rows >= G zero
  float* T = Qs + 16 * ld;                   // {kKeys, ld}: the key tile, then the value tile
  float* P = T + int64_t(kKeys) * ld;        // {16, kPStride}: scores, then the weights (TF32-rounded)
  float* m_s = P + 16 * kPStride;            // {16} running max per head
  float* l_s = m_s + 16;                     // {16} running exp-sum
  float* corr_s = l_s + 16;                  // {16} this tile's rescale of O
  int32_t* kept = reinterpret_cast<int32_t*>(corr_s + 16);  // {idx_budget / ratio}
  const int64_t row = blockIdx.z, kvh = blockIdx.x, split = blockIdx.y, h0 = kvh * G;
  if (skip_dense && group_dense(pos_p, row / kRowGroup * kRowGroup, gridDim.z, sh.idx_ratio, sh.idx_budget / sh.idx_ratio))
    return;  // (block-uniform)
  q += row * rs, keep += row * rs * 4, part += row * rs;
  const int64_t p = pos_p[row], R = sh.idx_ratio, nb = (p + 1) / R, keep_n = sh.idx_budget / R;
  const bool listed = nb > keep_n;  // past the budget: the kept blocks' keys, then the tail
  const int64_t kc = listed ? list_kept_blocks<kWarps>(keep, nb, kept, keep_n) : 0;
  const int64_t n = listed ? kc * R + (p + 1 - nb * R) : p + 1;  // visible keys, in position order
  auto at = [&](int64_t i) { return !listed ? i : i < kc * R ? int64_t(kept[i / R]) * R + i % R : nb * R + (i - kc * R); };
  int64_t per = (n + kQsaSplits - 1) / kQsaSplits;
  if (per < kMinSplitKeys) per = kMinSplitKeys;
  const int64_t j0 = split * per, j1 = j0 + per < n ? j0 + per : n;
  auto out = [&](int64_t h) { return part + (split * sh.heads + h0 + h) * (hd + 2); };
  if (j0 >= n) {  // an unused split: an empty partial (block-uniform)
    if (threadIdx.x < G) out(threadIdx.x)[0] = -INFINITY, out(threadIdx.x)[1] = 0.f;
    return;
  }
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const float scale = rsqrtf(float(hd));
  for (int64_t i = threadIdx.x; i < 16 * hd; i += kThreads) {
    const int64_t h = i / hd, e = i % hd;
    Qs[h * ld + e] = h < G ? __uint_as_float(tf32(q[(h0 + h) * hd + e])) : 0.f;
  }
  if (threadIdx.x < 16) m_s[threadIdx.x] = -INFINITY, l_s[threadIdx.x] = 0.f;
  // tile jb's key (kv = 0) or value (1) rows into T; rows past the range zero
  const int64_t chunks = hd / 4;
  auto load = [&](int64_t jb, int kv) {
    const float* base = (kv ? c.v : c.k) + kvh * hd;
    for (int64_t i = threadIdx.x; i < int64_t(kKeys) * chunks; i += kThreads) {
      const int64_t r = i / chunks, e = 4 * (i % chunks), j = jb + r;
      const bool ok = j < j1;
      cp_async16(T + r * ld + e, ok ? base + at(j) * KVD + e : base, ok);
    }
    cp_commit();
  };
  float o[kNt][4];
#pragma unroll
  for (int i = 0; i < kNt; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  const int nts = int(hd / 8);  // O's n-tiles; warp w takes w, w + kWarps, ...
  load(j0, 0);
  for (int64_t jb = j0; jb < j1; jb += kKeys) {
    cp_wait<0>();
    __syncthreads();  // the key tile (and, at the first tile, Q and m / l) in place
    {                 // S: warp w's 16 x 8 tile, keys jb + 8w ..
      float sc[4] = {0.f, 0.f, 0.f, 0.f};
      const float* kr = T + int64_t(8 * warp + g) * ld;
      for (int64_t k0 = 0; k0 < hd; k0 += 8) {
        uint32_t a[4];
        a_frag_tf32(Qs, ld, k0, g, t, a);
        mma_tf32(sc, a, tf32(kr[k0 + t]), tf32(kr[k0 + t + 4]));
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = g + (i < 2 ? 0 : 8), col = 8 * warp + 2 * t + (i & 1);
        P[r * kPStride + col] = jb + col < j1 ? sc[i] * scale : -INFINITY;
      }
    }
    __syncthreads();  // S in P; every warp is done with the key tile
    load(jb, 1);      // the value tile, while the softmax runs
    // the online softmax: warp w takes heads 2w, 2w + 1 (lanes: keys lane and lane + 32)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) softmax_tile_row(P + (2 * warp + hh) * kPStride, 2 * warp + hh, m_s, l_s, corr_s, lane);
    cp_wait<0>();
    __syncthreads();  // the value tile, the weights and corr in place
    flash_pv<kNt, kWarps, kKeys>(o, P, kPStride, T, ld, corr_s, warp, nts, g, t);  // O = O corr + P V
    __syncthreads();  // every warp is done with the value tile and P
    if (jb + kKeys < j1) load(jb + kKeys, 0);
  }
  store_o_tile(o, out, G, nts, warp, g, t);  // the partials
  if (threadIdx.x < G) out(threadIdx.x)[0] = m_s[threadIdx.x], out(threadIdx.x)[1] = l_s[threadIdx.x];
}

// The multi-row form (DS4_QSA_TC_ROWS=1; written in session 29, off by default: see tc_rows_on). Within the
// index budget every row of a chunk sees keys 0..p in position order, so kRowGroup consecutive rows
// share their keys: block (KV head, split, group of 4 rows) takes M = 4 rows x 16 heads (four m16
// tiles) against each key / value tile, where the single-row kernel's blocks each reread the tile
// from L2 for one row (1.97 ms per launch, 11 % of a 1024-row Qwen chunk at 2K, session 28's
// survey). The splits cut the group's longest key range; row r masks keys past its own p_r, and a
// row without keys in a split writes an empty partial, so qsa_merge_splits finishes each row as
// before (the same keys, another partition: within rounding of the single-row kernel). Groups with
// a row past the budget are left to the single-row kernel (skip_dense).
constexpr int kRowsM = 16 * kRowGroup;  // the block's M rows: row i / 16 of the group, head i % 16

size_t rows_smem_bytes(const QsaShape& sh) {
  const int64_t ld = tile_ld(sh.head_dim);
  return size_t(kRowsM * ld + int64_t(kKeys) * ld + kRowsM * kPStride + 3 * kRowsM) * sizeof(float);
}

__global__ void __launch_bounds__(kThreads, 1) qsa_attend_tc_rows_kernel(const float* __restrict__ q, QsaCache c, QsaShape sh,
                                                                         const int32_t* __restrict__ pos_p,
                                                                         float* __restrict__ part, int64_t rs, int64_t rows) {
  extern __shared__ __align__(16) float smem[];
  const int64_t hd = sh.head_dim, ld = tile_ld(hd), G = sh.heads / sh.kv_heads, KVD = sh.kv_heads * hd;
  float* Qs = smem;                          // {64, ld}: the rows' heads' queries (TF32), rows >= G or past the chunk zero
  float* T = Qs + kRowsM * ld;               // {kKeys, ld}: the key tile, then the value tile
  float* P = T + int64_t(kKeys) * ld;        // {64, kPStride}: scores, then the weights (TF32-rounded)
  float* m_s = P + kRowsM * kPStride;        // {64} running max
  float* l_s = m_s + kRowsM;                 // {64} running exp-sum
  float* corr_s = l_s + kRowsM;              // {64} this tile's rescale of O
  const int64_t g0 = int64_t(blockIdx.z) * kRowGroup, kvh = blockIdx.x, split = blockIdx.y, h0 = kvh * G;
  if (!group_dense(pos_p, g0, rows, sh.idx_ratio, sh.idx_budget / sh.idx_ratio)) return;  // the single-row kernel's
  const int nr = int(rows - g0 < kRowGroup ? rows - g0 : kRowGroup);
  int64_t nvis[kRowGroup], n = 0;  // each row's visible keys (0 past the chunk), the group's most
#pragma unroll
  for (int r = 0; r < kRowGroup; ++r) {
    nvis[r] = r < nr ? int64_t(pos_p[g0 + r]) + 1 : 0;
    n = nvis[r] > n ? nvis[r] : n;
  }
  int64_t per = (n + kQsaSplits - 1) / kQsaSplits;
  if (per < kMinSplitKeys) per = kMinSplitKeys;
  const int64_t j0 = split * per, j1 = j0 + per < n ? j0 + per : n;
  auto out = [&](int r, int64_t h) { return part + (g0 + r) * rs + (split * sh.heads + h0 + h) * (hd + 2); };
  if (threadIdx.x < kRowGroup * G) {  // a row with no key in [j0, j1): an empty partial
    const int r = int(threadIdx.x / G), h = int(threadIdx.x % G);
    if (r < nr && j0 >= nvis[r]) out(r, h)[0] = -INFINITY, out(r, h)[1] = 0.f;
  }
  if (j0 >= n) return;  // (block-uniform)
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const float scale = rsqrtf(float(hd));
  for (int64_t i = threadIdx.x; i < kRowsM * hd; i += kThreads) {
    const int64_t m = i / hd, e = i % hd, r = m / 16, h = m % 16;
    Qs[m * ld + e] = h < G && r < nr ? __uint_as_float(tf32(q[(g0 + r) * rs + (h0 + h) * hd + e])) : 0.f;
  }
  if (threadIdx.x < kRowsM) m_s[threadIdx.x] = -INFINITY, l_s[threadIdx.x] = 0.f;
  const int64_t chunks = hd / 4;
  auto load = [&](int64_t jb, int kv) {  // tile jb's key (kv = 0) or value (1) rows (positions jb..) into T
    const float* base = (kv ? c.v : c.k) + kvh * hd;
    for (int64_t i = threadIdx.x; i < int64_t(kKeys) * chunks; i += kThreads) {
      const int64_t r = i / chunks, e = 4 * (i % chunks), j = jb + r;
      const bool ok = j < j1;
      cp_async16(T + r * ld + e, ok ? base + j * KVD + e : base, ok);
    }
    cp_commit();
  };
  float o[kRowGroup][kNt][4];
#pragma unroll
  for (int mt = 0; mt < kRowGroup; ++mt)
#pragma unroll
    for (int i = 0; i < kNt; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
  const int nts = int(hd / 8);  // O's n-tiles; warp w takes w, w + kWarps, ...
  load(j0, 0);
  for (int64_t jb = j0; jb < j1; jb += kKeys) {
    cp_wait<0>();
    __syncthreads();  // the key tile (and, at the first tile, Q and m / l) in place
    {                 // S: warp w's keys jb + 8w .. + 7 for all four m-tiles (one B fragment, four A)
      float sc[kRowGroup][4] = {};
      const float* kr = T + int64_t(8 * warp + g) * ld;
      for (int64_t k0 = 0; k0 < hd; k0 += 8) {
        const uint32_t b0 = tf32(kr[k0 + t]), b1 = tf32(kr[k0 + t + 4]);
#pragma unroll
        for (int mt = 0; mt < kRowGroup; ++mt) {
          uint32_t a[4];
          a_frag_tf32(Qs + int64_t(mt) * 16 * ld, ld, k0, g, t, a);
          mma_tf32(sc[mt], a, b0, b1);
        }
      }
#pragma unroll
      for (int mt = 0; mt < kRowGroup; ++mt) {
        const int64_t lim = nvis[mt] < j1 ? nvis[mt] : j1;  // row mt's keys end at its own position
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = g + (i < 2 ? 0 : 8), col = 8 * warp + 2 * t + (i & 1);
          P[(mt * 16 + r) * kPStride + col] = jb + col < lim ? sc[mt][i] * scale : -INFINITY;
        }
      }
    }
    __syncthreads();  // S in P; every warp is done with the key tile
    load(jb, 1);      // the value tile, while the softmax runs
    // the online softmax: warp w takes M rows 8w .. 8w + 7 (lanes: keys lane and lane + 32)
#pragma unroll
    for (int hh = 0; hh < kRowsM / kWarps; ++hh) {
      const int r = (kRowsM / kWarps) * warp + hh;
      softmax_tile_row(P + r * kPStride, r, m_s, l_s, corr_s, lane);
    }
    cp_wait<0>();
    __syncthreads();  // the value tile, the weights and corr in place
    // O = O corr + P V: warp w's n-tiles w, w + kWarps, ..., one V fragment for all four m-tiles
#pragma unroll
    for (int i = 0; i < kNt; ++i) {
      const int nt = warp + kWarps * i;
      if (nt >= nts) break;
#pragma unroll
      for (int mt = 0; mt < kRowGroup; ++mt) {
        const float c0 = corr_s[mt * 16 + g], c1 = corr_s[mt * 16 + g + 8];
        o[mt][i][0] *= c0, o[mt][i][1] *= c0, o[mt][i][2] *= c1, o[mt][i][3] *= c1;
      }
#pragma unroll
      for (int k0 = 0; k0 < kKeys; k0 += 8) {
        const uint32_t b0 = tf32(T[int64_t(k0 + t) * ld + 8 * nt + g]), b1 = tf32(T[int64_t(k0 + t + 4) * ld + 8 * nt + g]);
#pragma unroll
        for (int mt = 0; mt < kRowGroup; ++mt) {
          uint32_t a[4];
          a_frag_tf32(P + mt * 16 * kPStride, kPStride, k0, g, t, a);
          mma_tf32(o[mt][i], a, b0, b1);
        }
      }
    }
    __syncthreads();  // every warp is done with the value tile and P
    if (jb + kKeys < j1) load(jb + kKeys, 0);
  }
  // the partials of the rows with keys in this split: rows g, g + 8 of each m-tile's n-tiles
#pragma unroll
  for (int mt = 0; mt < kRowGroup; ++mt) {
    if (mt >= nr || j0 >= nvis[mt]) continue;
    store_o_tile(o[mt], [&](int64_t h) { return out(mt, h); }, G, nts, warp, g, t);
  }
  if (threadIdx.x < kRowGroup * G) {
    const int r = int(threadIdx.x / G), h = int(threadIdx.x % G);
    if (r < nr && j0 < nvis[r]) out(r, h)[0] = m_s[r * 16 + h], out(r, h)[1] = l_s[r * 16 + h];
  }
}

// DS4_QSA_TC_ROWS (0 or 1; unset = 0: session 30's A/B on the H100 gave Qwen prefill 2K 4613 -> 4696
// tok/s, 8K 4089 -> 4079, in 1024-row chunks; not a clear win) or qsa_attend_set_tc_rows.
std::atomic<int> g_tc_rows{-1};
bool tc_rows_on() { return ds4::cuda::env_setting(g_tc_rows, "DS4_QSA_TC_ROWS", {0, 1}, "0 or 1", 0) == 1; }

// DS4_QSA_TC (0 or 1; unset = 1) or qsa_attend_set_tc: whether tensor-core chunks take this kernel.
std::atomic<int> g_tc{-1};

}  // namespace

void qsa_attend_set_tc(bool on) { g_tc.store(on ? 1 : 0, std::memory_order_relaxed); }
void qsa_attend_set_tc_rows(bool on) { g_tc_rows.store(on ? 1 : 0, std::memory_order_relaxed); }

bool qsa_tc() { return ds4::cuda::env_setting(g_tc, "DS4_QSA_TC", {0, 1}, "0 or 1", 1) == 1; }

bool qsa_attend_tc_supports(const QsaShape& sh) {
  if (sh.kv_heads < 1 || sh.heads % sh.kv_heads != 0 || sh.heads / sh.kv_heads > 16) return false;
  if (sh.head_dim < 8 || sh.head_dim % 8 != 0 || sh.head_dim > kMaxHd || sh.idx_ratio < 1) return false;
  return smem_bytes(sh) + 64 <= size_t(227) * 1024;  // (+ list_kept_blocks' static warp sums)
}

void qsa_attend_tc(const float* q, const float* gate, const QsaCache& c, const QsaShape& sh, const int32_t* pos,
                   const uint8_t* keep, float* part, float* att, cudaStream_t s, const Rows& rows) {
  if (!qsa_attend_tc_supports(sh))
    throw InputError("qwen_next cuda: qsa_attend_tc takes up to 16 query heads per KV head and head_dim a multiple of "
                     "8 up to " + std::to_string(kMaxHd));
  if (rows.count < 1 || rows.count > 65535) throw InputError("qwen_next cuda: qsa_attend_tc rows " + std::to_string(rows.count));
  const size_t smem = smem_bytes(sh), rows_smem = rows_smem_bytes(sh);
  // the multi-row form where asked for and its shared memory fits (rows of groups past the budget
  // stay with the single-row kernel, which leaves the dense groups' rows to it)
  const bool by_rows = tc_rows_on() && rows.count > 1 && rows_smem <= size_t(227) * 1024;
  if (by_rows) {
    ds4::cuda::opt_in_smem_max_once<qsa_attend_tc_rows_kernel>();
    const dim3 rgrid(unsigned(sh.kv_heads), unsigned(kQsaSplits), unsigned((rows.count + kRowGroup - 1) / kRowGroup));
    qsa_attend_tc_rows_kernel<<<rgrid, kThreads, rows_smem, s>>>(q, c, sh, pos, part, rows.stride, rows.count);
    DS4_CUDA_CHECK_LAUNCH();
  }
  ds4::cuda::opt_in_smem_max_once<qsa_attend_tc_kernel>();
  const dim3 grid(unsigned(sh.kv_heads), unsigned(kQsaSplits), unsigned(rows.count));
  qsa_attend_tc_kernel<<<grid, kThreads, smem, s>>>(q, c, sh, pos, keep, part, rows.stride, by_rows);
  DS4_CUDA_CHECK_LAUNCH();
  qsa_merge_splits(gate, sh, part, att, s, rows);
}

}  // namespace ds4::qwen_next::cuda
