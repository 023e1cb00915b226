// QSA attention decode kernels (CPU: qsa.cpp). The position comes from device memory so
// the whole step can be replayed from a CUDA graph; loops over keys and blocks are sized
// by it at run time. Over `Rows` (chunk.cu) row t = blockIdx.y runs at position pos[t]: one
// prep launch appends every row's K/V/raw indexer key, one pool launch pools the blocks they
// complete, then one select and one attend launch for all rows. Row t reads positions
// <= pos[t] and blocks < (pos[t]+1)/ratio only; a later row writes positions > pos[t] and
// completes blocks >= (pos[t]+1)/ratio, so no later row leaks into row t.
#include <cfloat>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/topk_select.h"
#include "core/error.h"
#include "models/qwen_next/cuda/kernels.h"
#include "models/qwen_next/cuda/qsa_internal.cuh"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;

// dst {n} = rope(rmsnorm(src) * w) at `pos` (NeoX halves over the first rot dims); one warp.
__device__ void norm_rope_warp(const float* src, const float* w, int64_t n, float eps, int64_t rot, int64_t pos,
                               const float* inv_freq, float* dst) {
  const int lane = threadIdx.x % 32;
  float ss = 0.f;
  for (int64_t i = lane; i < n; i += 32) ss += src[i] * src[i];
  ss = warp_reduce(ss, SumOp{});
  const float r = rsqrtf(ss / float(n) + eps);
  for (int64_t i = lane; i < n; i += 32) dst[i] = (src[i] * r) * w[i];
  __syncwarp();
  const int64_t half = rot / 2;
  for (int64_t i = lane; i < half; i += 32) {
    const float a = float(pos) * inv_freq[i];
    const float c = cosf(a), s = sinf(a);
    const float x0 = dst[i], x1 = dst[i + half];
    dst[i] = x0 * c - x1 * s;
    dst[i + half] = x1 * c + x0 * s;
  }
  __syncwarp();
}

// The indexer block that position `pos` completes (if any): mean of its raw keys ->
// k_layernorm -> rope at its first row. One warp; the raw keys must be visible to it.
__device__ void pool_block(const QsaCache& c, const QsaShape& sh, const float* idx_k_norm, int64_t pos) {
  const int64_t R = sh.idx_ratio, D = sh.idx_dim;
  const int lane = threadIdx.x % 32;
  if ((pos + 1) % R != 0) return;
  const int64_t b = pos / R;
  float* m = c.idx_pooled + b * D;
  for (int64_t i = lane; i < D; i += 32) {
    float s = 0.f;
    for (int64_t r = 0; r < R; ++r) s += c.idx_raw[(b * R + r) * D + i];
    m[i] = s / float(R);
  }
  __syncwarp();
  norm_rope_warp(m, idx_k_norm, D, sh.eps, sh.rot_dim, b * R, sh.inv_freq, m);
}

// pool: the decode step pools its own block here (one row: every raw key it needs is in
// memory or written by this warp); a chunk's rows pool in qsa_pool_kernel after all appends.
// Block (t, row) is one warp on vector t: the vectors' ~33 norm+rope
// chains run side by side instead of ~4 deep in one block's 8 warps (issue #23: 19.5 us a QSA
// layer); each vector's arithmetic is the warp function it always was, so the same bits.
__global__ void qsa_prep_kernel(const float* __restrict__ qg, const float* __restrict__ k, const float* __restrict__ v,
                                float* __restrict__ iqk, QsaNorms nw, QsaCache c, QsaShape sh,
                                const int32_t* __restrict__ pos_p, float* __restrict__ q, float* __restrict__ gate,
                                int64_t rs, bool pool, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t row = blockIdx.y;
  qg += row * rs, k += row * rs, v += row * rs, iqk += row * rs, q += row * rs, gate += row * rs;
  const int64_t pos = pos_p[row], hd = sh.head_dim, D = sh.idx_dim, KVD = sh.kv_heads * hd;
  const int lane = threadIdx.x % 32;
  const int64_t vecs = sh.heads + 2 * sh.kv_heads + sh.idx_heads + 1;
  {
    const int64_t t = blockIdx.x;  // one warp per block, one vector per warp
    if (t < sh.heads) {  // query head: [query | gate]
      const float* src = qg + t * 2 * hd;
      norm_rope_warp(src, nw.q, hd, sh.eps, sh.rot_dim, pos, sh.inv_freq, q + t * hd);
      for (int64_t i = lane; i < hd; i += 32) gate[t * hd + i] = src[hd + i];
    } else if (t < sh.heads + sh.kv_heads) {
      const int64_t h = t - sh.heads;
      norm_rope_warp(k + h * hd, nw.k, hd, sh.eps, sh.rot_dim, pos, sh.inv_freq, c.k + pos * KVD + h * hd);
    } else if (t < sh.heads + 2 * sh.kv_heads) {
      const int64_t h = t - sh.heads - sh.kv_heads;
      for (int64_t i = lane; i < hd; i += 32) c.v[pos * KVD + h * hd + i] = v[h * hd + i];
    } else if (t < vecs - 1) {
      float* p = iqk + (t - sh.heads - 2 * sh.kv_heads) * D;
      norm_rope_warp(p, nw.idx_q, D, sh.eps, sh.rot_dim, pos, sh.inv_freq, p);
    } else {
      for (int64_t i = lane; i < D; i += 32) c.idx_raw[pos * D + i] = iqk[sh.idx_heads * D + i];
      if (!pool || (pos + 1) % sh.idx_ratio != 0) return;
      __syncwarp();  // this row's raw key (written by this warp's lanes) is visible to all of it
      pool_block(c, sh, nw.idx_k, pos);
    }
  }
}

// One warp per row: the block row t completes, after every row's raw key is appended.
__global__ void qsa_pool_kernel(QsaCache c, QsaShape sh, const float* __restrict__ idx_k_norm,
                                const int32_t* __restrict__ pos_p, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  pool_block(c, sh, idx_k_norm, pos_p[blockIdx.x]);
}

// scores {nb}: relu(q_h . k_b) summed over indexer heads (the top budget/R of them are kept
// by ds4::cuda::topk_select_f32 in qsa_select: score desc, index asc, as cpu::topk_f32).
// Each dot is the serial fmaf chain over i it always was and the heads' relu terms are added in
// head order from 0.f, so the scores are the same bits as the one-thread-per-block kernel this
// replaces. That kernel cost ~47 us a QSA layer past the budget at any context (issue #23):
// each thread walked its own key row, ~128 dependent global loads. Here a CTA of
// kSelectThreads first stages the queries and up to kSelectBlocks pooled keys in shared memory
// (float4 loads, all in flight together), key rows padded to D + 1 floats so the column reads
// hit distinct banks; then thread (h, b) takes head h of block b (heads h, h + H', ...), and
// thread b adds its block's head terms in order. The grid is sized for max_ctx; CTAs past nb
// leave at once.
constexpr int kSelectThreads = 256, kSelectBlocks = 64;

// Blocks a CTA scores: as many as fit in 48 KB of shared memory after the queries, at most
// kSelectBlocks (0: the queries alone do not fit; qsa_select_scores throws).
int64_t qsa_select_per_cta(const QsaShape& sh) {
  const int64_t room = 48 * 1024 / int64_t(sizeof(float)) - sh.idx_heads * sh.idx_dim;
  const int64_t per_block = sh.idx_dim + 1 + sh.idx_heads;  // padded key row + head terms
  if (room < per_block) return 0;
  const int64_t n = room / per_block;
  return n < kSelectBlocks ? n : kSelectBlocks;
}

size_t qsa_select_smem(const QsaShape& sh, int64_t per_cta) {
  return size_t(sh.idx_heads * sh.idx_dim + per_cta * (sh.idx_dim + 1 + sh.idx_heads)) * sizeof(float);
}

__global__ void __launch_bounds__(kSelectThreads)
    qsa_select_kernel(const float* __restrict__ iqk, QsaCache c, QsaShape sh, const int32_t* __restrict__ pos_p,
                      float* __restrict__ scores, int64_t rs, int per_cta, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  // {H, D} queries, {per_cta, D + 1} keys, {H, per_cta} relu(dot) terms
  extern __shared__ float sel_smem[];
  const int64_t row = blockIdx.y;
  iqk += row * rs, scores += row * rs;
  const int64_t p = pos_p[row], R = sh.idx_ratio, nb = (p + 1) / R, keep_n = sh.idx_budget / R;
  if (nb <= keep_n) return;  // every complete block is kept: qsa_attend does not read `keep`
  const int64_t b0 = int64_t(blockIdx.x) * per_cta;
  if (b0 >= nb) return;
  const int D = int(sh.idx_dim), H = int(sh.idx_heads), D4 = D / 4;
  const int cnt = int(nb - b0 < per_cta ? nb - b0 : per_cta);
  float* qs = sel_smem;
  float* ks = qs + H * D;
  float* terms = ks + per_cta * (D + 1);
  const float4* q4 = reinterpret_cast<const float4*>(iqk);
  const float4* k4 = reinterpret_cast<const float4*>(c.idx_pooled + b0 * sh.idx_dim);
  for (int i = threadIdx.x; i < H * D4; i += kSelectThreads) {
    const float4 v = q4[i];
    qs[4 * i] = v.x, qs[4 * i + 1] = v.y, qs[4 * i + 2] = v.z, qs[4 * i + 3] = v.w;
  }
#pragma unroll 8
  for (int i = threadIdx.x; i < cnt * D4; i += kSelectThreads) {
    const float4 v = k4[i];
    float* dst = ks + (i / D4) * (D + 1) + (i % D4) * 4;
    dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
  }
  __syncthreads();
  const int b = threadIdx.x % per_cta, lanes_h = kSelectThreads / per_cta;
  if (b < cnt && int(threadIdx.x) < lanes_h * per_cta)
    for (int h = threadIdx.x / per_cta; h < H; h += lanes_h) {
      const float* kb = ks + b * (D + 1);
      const float* qh = qs + h * D;
      float dot = 0.f;
#pragma unroll 4
      for (int i = 0; i < D; ++i) dot += qh[i] * kb[i];
      terms[h * per_cta + b] = fmaxf(dot, 0.f);
    }
  __syncthreads();
  if (int(threadIdx.x) >= cnt) return;
  float acc = 0.f;
  for (int h = 0; h < H; ++h) acc += terms[h * per_cta + threadIdx.x];
  scores[b0 + threadIdx.x] = acc * rsqrtf(float(D));
}

// ---- Attention over the selected keys, split over key ranges (flash decoding) ----
// qsa_attend_split_kernel: block (g, s, row) takes the kHg query heads of group g (all on one
// KV head, so each key and value row is read once for them) over the s-th of kQsaSplits equal
// ranges of the row's visible keys in ascending position order; its 4 warps take every 4th key,
// kKeys keys at a time (their loads in flight together), with an online softmax per head.
// While every complete block is kept, the visible keys are positions 0..pos (as ever). Past the
// budget, each CTA first lists the kept indexer blocks (ascending) in shared memory from the
// `keep` flags, and the visible keys are those blocks' R keys each, then the open tail nb*R..pos:
// the splits divide the ~idx_budget selected keys instead of every position, so the cost
// follows the selection and not the context (at 32K the position ranges cost 5x 2K's: issue #23).
// A budget whose list does not fit (list_cap < keep_n) walks the positions, skipping unkept keys.
// The block's warps merge in shared memory and write {m, l, acc[hd]} per head;
// qsa_attend_merge_kernel rescales the splits to the global max, normalizes and gates.
// Lane l holds dims l, l + 32, ... (KD = ceil(hd / 32) of them).
constexpr int kAttnWarps = 4, kKeys = 4;

template <int KD, int HG>
__global__ void __launch_bounds__(kAttnWarps * 32)
    qsa_attend_split_kernel(const float* __restrict__ q, QsaCache c, QsaShape sh, const int32_t* __restrict__ pos_p,
                            const uint8_t* __restrict__ keep, float* __restrict__ part, int64_t rs, int64_t list_cap,
                            bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ int32_t kept[];  // {list_cap}: the kept indexer blocks, ascending
  const int64_t row = blockIdx.z;
  q += row * rs, keep += row * rs * 4, part += row * rs;
  const int64_t p = pos_p[row], hd = sh.head_dim, R = sh.idx_ratio, nb = (p + 1) / R, keep_n = sh.idx_budget / R;
  const bool all = nb <= keep_n, listed = !all && keep_n <= list_cap;
  const int64_t h0 = int64_t(blockIdx.x) * HG, kvh = h0 / (sh.heads / sh.kv_heads), KVD = sh.kv_heads * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t kc = listed ? list_kept_blocks<kAttnWarps>(keep, nb, kept, list_cap) : 0;
  // n visible keys in position order; key i is at position at(i)
  const int64_t n = listed ? kc * R + (p + 1 - nb * R) : p + 1;
  auto at = [&](int64_t i) { return !listed ? i : i < kc * R ? int64_t(kept[i / R]) * R + i % R : nb * R + (i - kc * R); };
  const int64_t per = (n + kQsaSplits - 1) / kQsaSplits, j0 = int64_t(blockIdx.y) * per;
  const int64_t j1 = j0 + per < n ? j0 + per : n;
  const float scale = rsqrtf(float(hd));
  float qr[HG][KD], acc[HG][KD], m[HG], l[HG];
#pragma unroll
  for (int h = 0; h < HG; ++h) {
    m[h] = -INFINITY, l[h] = 0.f;
#pragma unroll
    for (int k = 0; k < KD; ++k) {
      const int64_t e = lane + 32 * k;
      qr[h][k] = e < hd ? q[(h0 + h) * hd + e] : 0.f;
      acc[h][k] = 0.f;
    }
  }
  auto visible = [&](int64_t j) { return j < j1 && (all || listed || j >= nb * R || keep[j / R]); };
  for (int64_t jb = j0 + warp * kKeys; jb < j1; jb += kAttnWarps * kKeys) {
    float kv[kKeys][KD], vv[kKeys][KD];
    bool vis[kKeys];
#pragma unroll
    for (int t = 0; t < kKeys; ++t) {
      vis[t] = visible(jb + t);
      const int64_t j = vis[t] ? at(jb + t) : 0;
      const float* kj = c.k + j * KVD + kvh * hd;
      const float* vj = c.v + j * KVD + kvh * hd;
#pragma unroll
      for (int k = 0; k < KD; ++k) {
        const int64_t e = lane + 32 * k;
        const bool ok = vis[t] && e < hd;
        kv[t][k] = ok ? __ldg(kj + e) : 0.f;
        vv[t][k] = ok ? __ldg(vj + e) : 0.f;
      }
    }
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      float sc[kKeys];
      float mx = m[h];
#pragma unroll
      for (int t = 0; t < kKeys; ++t) {
        float d = 0.f;
#pragma unroll
        for (int k = 0; k < KD; ++k) d = fmaf(qr[h][k], kv[t][k], d);
        d = warp_reduce(d, SumOp{});
        sc[t] = vis[t] ? d * scale : -INFINITY;
        mx = fmaxf(mx, sc[t]);
      }
      if (mx == -INFINITY) continue;  // nothing visible yet for this warp
      const float corr = expf(m[h] - mx);  // m = -inf: 0
      float pt[kKeys];
      float lsum = l[h] * corr;
#pragma unroll
      for (int t = 0; t < kKeys; ++t) lsum += (pt[t] = expf(sc[t] - mx));
      l[h] = lsum, m[h] = mx;
#pragma unroll
      for (int k = 0; k < KD; ++k) {
        float a = acc[h][k] * corr;
#pragma unroll
        for (int t = 0; t < kKeys; ++t) a = fmaf(pt[t], vv[t][k], a);
        acc[h][k] = a;
      }
    }
  }
  // merge the warps: {warps, HG, KD * 32 + 2}
  __shared__ float wm[kAttnWarps][HG][2];
  __shared__ float wacc[kAttnWarps][HG][KD * 32];
#pragma unroll
  for (int h = 0; h < HG; ++h) {
    if (lane == 0) wm[warp][h][0] = m[h], wm[warp][h][1] = l[h];
#pragma unroll
    for (int k = 0; k < KD; ++k) wacc[warp][h][lane + 32 * k] = acc[h][k];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < HG * KD * 32; i += blockDim.x) {
    const int h = i / (KD * 32), e = i % (KD * 32);
    float M = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w) M = fmaxf(M, wm[w][h][0]);
    float* out = part + ((int64_t(blockIdx.y) * sh.heads + h0 + h) * (hd + 2));
    if (M == -INFINITY) {  // no visible key in this split
      if (e == 0) out[0] = -INFINITY, out[1] = 0.f;
      continue;
    }
    float L = 0.f, A = 0.f;
    for (int w = 0; w < kAttnWarps; ++w) {
      const float f = expf(wm[w][h][0] - M);  // an empty warp: exp(-inf) = 0
      L = fmaf(wm[w][h][1], f, L);
      A = fmaf(wacc[w][h][e], f, A);
    }
    if (e < hd) out[2 + e] = A;
    if (e == 0) out[0] = M, out[1] = L;
  }
}

// One block per (head, row): the splits rescaled to the global max, normalized, gated.
__global__ void qsa_attend_merge_kernel(const float* __restrict__ gate, QsaShape sh, const float* __restrict__ part,
                                        float* __restrict__ att, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t row = blockIdx.y, h = blockIdx.x, hd = sh.head_dim;
  gate += row * rs, part += row * rs, att += row * rs;
  float M = -INFINITY;
  for (int s = 0; s < kQsaSplits; ++s) M = fmaxf(M, part[(int64_t(s) * sh.heads + h) * (hd + 2)]);
  float L = 0.f;
  for (int s = 0; s < kQsaSplits; ++s) {
    const float* ps = part + (int64_t(s) * sh.heads + h) * (hd + 2);
    if (ps[0] != -INFINITY) L = fmaf(ps[1], expf(ps[0] - M), L);
  }
  const float inv = 1.f / L;  // the query's own key is always visible: L > 0
  for (int64_t e = threadIdx.x; e < hd; e += blockDim.x) {
    float o = 0.f;
    for (int s = 0; s < kQsaSplits; ++s) {
      const float* ps = part + (int64_t(s) * sh.heads + h) * (hd + 2);
      if (ps[0] != -INFINITY) o = fmaf(ps[2 + e], expf(ps[0] - M), o);
    }
    const float g = gate[h * hd + e];
    att[h * hd + e] = (o * inv) * (1.f / (1.f + expf(-g)));
  }
}

// One block per query head: scores over visible keys, softmax, weighted values, output gate.
// The path for head_dim > 256 (no model has one; the split kernel keeps hd / 32 per lane).
__global__ void qsa_attend_kernel(const float* __restrict__ q, const float* __restrict__ gate, QsaCache c, QsaShape sh,
                                  const int32_t* __restrict__ pos_p, const uint8_t* __restrict__ keep,
                                  float* __restrict__ scores, float* __restrict__ att, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float qs[];  // {hd}
  const int64_t row = blockIdx.y;
  q += row * rs, gate += row * rs, keep += row * rs * 4, scores += row * rs, att += row * rs;
  const int64_t p = pos_p[row], hd = sh.head_dim, h = blockIdx.x, R = sh.idx_ratio, nb = (p + 1) / R;
  const bool all = nb <= sh.idx_budget / R;
  const int64_t kvh = h / (sh.heads / sh.kv_heads), KVD = sh.kv_heads * hd;
  const float scale = rsqrtf(float(hd));
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) qs[i] = q[h * hd + i];
  __syncthreads();
  float* sc = scores + h * sh.max_ctx;
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j <= p; j += blockDim.x) {
    float s = -INFINITY;
    if (all || j >= nb * R || keep[j / R]) {
      const float* kj = c.k + j * KVD + kvh * hd;
      float d = 0.f;
      for (int64_t e = 0; e < hd; ++e) d += qs[e] * kj[e];
      s = d * scale;
      m = fmaxf(m, s);
    }
    sc[j] = s;
  }
  m = block_reduce(m, MaxOp{}, -FLT_MAX);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j <= p; j += blockDim.x) {
    const float e = expf(sc[j] - m);  // masked keys: exp(-inf) = 0
    sc[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, SumOp{}, 0.f);  // its barriers also publish sc[] to the block
  const float inv = 1.f / sum;
  // The weighted values over the kept blocks and the open tail only: a dropped key's weight is
  // exp(-inf) = 0 exactly, so skipping its term leaves every sum as it was (a long context
  // keeps idx_budget of its positions: the loop no longer grows with the position).
  const float* vh = c.v + kvh * hd;
  for (int64_t e = threadIdx.x; e < hd; e += blockDim.x) {
    float o = 0.f;
    for (int64_t b = 0; b < nb; ++b) {
      if (!all && !keep[b]) continue;
      for (int64_t j = b * R; j < (b + 1) * R; ++j) o += (sc[j] * inv) * vh[j * KVD + e];
    }
    for (int64_t j = nb * R; j <= p; ++j) o += (sc[j] * inv) * vh[j * KVD + e];
    const float g = gate[h * hd + e];
    att[h * hd + e] = o * (1.f / (1.f + expf(-g)));
  }
}

// qsa_attend_kernel for all G = heads / kv_heads query heads of one KV head at once (GQA):
// block (kv head, row). Every visible key and value row is read once for the G heads instead
// of once per head, and a key's G dot products are one warp's coalesced read of it (lane
// partials, then a butterfly sum: a different summation order than qsa_attend_kernel's, so the
// two differ in the last bits; the decode step and a chunk both take this kernel whenever it
// applies, so a chunk still equals its decode steps bit for bit). MG: G rounded up (registers).
template <int MG>
__global__ void qsa_attend_group_kernel(const float* __restrict__ q, const float* __restrict__ gate, QsaCache c,
                                        QsaShape sh, const int32_t* __restrict__ pos_p,
                                        const uint8_t* __restrict__ keep, float* __restrict__ scores,
                                        float* __restrict__ att, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float qs[];  // {G, hd} queries, then {warps, MG} maxima and {warps, MG} sums
  const int64_t row = blockIdx.y, kvh = blockIdx.x;
  q += row * rs, gate += row * rs, keep += row * rs * 4, scores += row * rs, att += row * rs;
  const int64_t p = pos_p[row], hd = sh.head_dim, R = sh.idx_ratio, nb = (p + 1) / R, mc = sh.max_ctx;
  const int64_t G = sh.heads / sh.kv_heads, KVD = sh.kv_heads * hd, h0 = kvh * G;
  const bool all = nb <= sh.idx_budget / R;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  float* red_max = qs + G * hd;
  float* red_sum = red_max + warps * MG;
  const float scale = rsqrtf(float(hd));
  for (int64_t i = threadIdx.x; i < G * hd; i += blockDim.x) qs[i] = q[h0 * hd + i];
  __syncthreads();
  const float* kh = c.k + kvh * hd;
  const float* vh = c.v + kvh * hd;
  float* sc = scores + h0 * mc;  // head h0 + g's scores at sc + g * mc
  auto visible = [&](int64_t j) { return all || j >= nb * R || keep[j / R]; };
  float m[MG];
#pragma unroll
  for (int g = 0; g < MG; ++g) m[g] = -FLT_MAX;
  for (int64_t j = warp; j <= p; j += warps) {  // one warp per key
    if (!visible(j)) continue;  // its weight is never read
    const float* kj = kh + j * KVD;
    float d[MG];
#pragma unroll
    for (int g = 0; g < MG; ++g) d[g] = 0.f;
    for (int64_t e = lane; e < hd; e += 32) {
      const float kv = kj[e];
#pragma unroll
      for (int g = 0; g < MG; ++g)
        if (g < G) d[g] += qs[g * hd + e] * kv;
    }
#pragma unroll
    for (int g = 0; g < MG; ++g) {
      if (g >= G) break;
      d[g] = warp_reduce(d[g], SumOp{}) * scale;
      m[g] = fmaxf(m[g], d[g]);
      if (lane == 0) sc[g * mc + j] = d[g];
    }
  }
  if (lane == 0)
#pragma unroll
    for (int g = 0; g < MG; ++g) red_max[warp * MG + g] = m[g];
  __syncthreads();  // also publishes every warp's scores to the block
#pragma unroll
  for (int g = 0; g < MG; ++g) {
    m[g] = -FLT_MAX;
    for (int w = 0; w < warps; ++w) m[g] = fmaxf(m[g], red_max[w * MG + g]);
  }
  float sum[MG];
#pragma unroll
  for (int g = 0; g < MG; ++g) sum[g] = 0.f;
  for (int64_t j = threadIdx.x; j <= p; j += blockDim.x) {
    if (!visible(j)) continue;
#pragma unroll
    for (int g = 0; g < MG; ++g) {
      if (g >= G) break;
      const float e = expf(sc[g * mc + j] - m[g]);
      sc[g * mc + j] = e;
      sum[g] += e;
    }
  }
#pragma unroll
  for (int g = 0; g < MG; ++g) {
    sum[g] = warp_reduce(sum[g], SumOp{});
    if (lane == 0) red_sum[warp * MG + g] = sum[g];
  }
  __syncthreads();  // also publishes the weights sc[] to the block
  float inv[MG];
#pragma unroll
  for (int g = 0; g < MG; ++g) {
    float t = 0.f;
    for (int w = 0; w < warps; ++w) t += red_sum[w * MG + g];
    inv[g] = 1.f / t;
  }
  for (int64_t e = threadIdx.x; e < hd; e += blockDim.x) {
    float o[MG];
#pragma unroll
    for (int g = 0; g < MG; ++g) o[g] = 0.f;
    auto add = [&](int64_t j) {
      const float v = vh[j * KVD + e];
#pragma unroll
      for (int g = 0; g < MG; ++g)
        if (g < G) o[g] += (sc[g * mc + j] * inv[g]) * v;
    };
    for (int64_t b = 0; b < nb; ++b) {
      if (!all && !keep[b]) continue;
      for (int64_t j = b * R; j < (b + 1) * R; ++j) add(j);
    }
    for (int64_t j = nb * R; j <= p; ++j) add(j);
#pragma unroll
    for (int g = 0; g < MG; ++g) {
      if (g >= G) break;
      const float gt = gate[(h0 + g) * hd + e];
      att[(h0 + g) * hd + e] = o[g] * (1.f / (1.f + expf(-gt)));
    }
  }
}

constexpr int kAttendThreads = 256;

size_t group_smem(const QsaShape& sh, int mg) {
  return size_t((sh.heads / sh.kv_heads) * sh.head_dim + 2 * (kAttendThreads / 32) * mg) * sizeof(float);
}

}  // namespace

void qsa_prep(const float* qg, const float* k, const float* v, float* iqk, const QsaNorms& n, const QsaCache& c,
              const QsaShape& sh, const int32_t* pos, float* q, float* gate, cudaStream_t s, const Rows& rows) {
  const bool one = rows.count == 1;
  const int64_t vecs = sh.heads + 2 * sh.kv_heads + sh.idx_heads + 1;  // qsa_prep_kernel: a warp each
  ds4::cuda::gemv_detail::launch_small(qsa_prep_kernel, dim3(unsigned(vecs), unsigned(rows.count)), 32, 0, s, qg, k, v,
                                       iqk, n, c, sh, pos, q, gate, rows.stride, one);
  if (one) return;
  ds4::cuda::gemv_detail::launch_small(qsa_pool_kernel, dim3(unsigned(rows.count)), 32, 0, s, c, sh, n.idx_k, pos);
}

void qsa_select(const float* iqk, const QsaCache& c, const QsaShape& sh, const int32_t* pos, float* scores,
                uint8_t* keep, cudaStream_t s, const Rows& rows) {
  qsa_select_scores(iqk, c, sh, pos, scores, s, rows);
  qsa_select_keep(sh, pos, scores, keep, s, rows);
}

void qsa_select_scores(const float* iqk, const QsaCache& c, const QsaShape& sh, const int32_t* pos, float* scores,
                       cudaStream_t s, const Rows& rows) {
  const int64_t max_blocks = sh.max_ctx / sh.idx_ratio + 1, per = qsa_select_per_cta(sh);
  if (per < 1 || sh.idx_dim % 4 != 0)
    throw InputError("qwen_next cuda: the indexer's " + std::to_string(sh.idx_heads) + " x " +
                     std::to_string(sh.idx_dim) + " queries do not fit in 48 KB of shared memory (or idx_dim % 4 != 0)");
  const dim3 grid(unsigned((max_blocks + per - 1) / per), unsigned(rows.count));
  ds4::cuda::gemv_detail::launch_small(qsa_select_kernel, dim3(grid), kSelectThreads, qsa_select_smem(sh, per), s, iqk,
                                       c, sh, pos, scores, rows.stride, int(per));
}

void qsa_select_keep(const QsaShape& sh, const int32_t* pos, const float* scores, uint8_t* keep, cudaStream_t s,
                     const Rows& rows) {
  // The same set as the rank loop it replaced (float compare); NaN aside (topk_select.h).
  ds4::cuda::TopkSelectArgs ta;
  ta.scores = scores, ta.score_stride = rows.stride, ta.k = sh.idx_budget / sh.idx_ratio, ta.rows = rows.count;
  ta.n = ds4::cuda::TopkCount{pos, 1, 0, sh.idx_ratio};  // nb = (pos[t] + 1) / ratio
  ta.keep = keep, ta.keep_stride = rows.stride * 4;       // bytes in the float row scratch
  ds4::cuda::topk_select_f32(ta, s);
}

namespace {

template <int KD, int HG>
void launch_split(const float* q, const float* gate, const QsaCache& c, const QsaShape& sh, const int32_t* pos,
                  const uint8_t* keep, float* part, float* att, cudaStream_t s, const Rows& rows) {
  const dim3 grid(unsigned(sh.heads / HG), unsigned(kQsaSplits), unsigned(rows.count));
  // The kept-block list in shared memory, up to 4 K blocks (16 KB beside the merge's 16 KB; the
  // full-size model keeps 512).
  const int64_t keep_n = sh.idx_budget / sh.idx_ratio, cap = keep_n <= 4096 ? keep_n : 0;
  ds4::cuda::gemv_detail::launch_small(qsa_attend_split_kernel<KD, HG>, dim3(grid), kAttnWarps * 32,
                                       size_t(cap) * sizeof(int32_t), s, q, c, sh, pos, keep, part, rows.stride, cap);
  qsa_merge_splits(gate, sh, part, att, s, rows);
}

template <int KD>
void launch_split_kd(const float* q, const float* gate, const QsaCache& c, const QsaShape& sh, const int32_t* pos,
                     const uint8_t* keep, float* part, float* att, cudaStream_t s, const Rows& rows) {
  const int64_t group = sh.heads / sh.kv_heads;  // query heads per KV head
  if (group % 4 == 0) return launch_split<KD, 4>(q, gate, c, sh, pos, keep, part, att, s, rows);
  if (group % 2 == 0) return launch_split<KD, 2>(q, gate, c, sh, pos, keep, part, att, s, rows);
  launch_split<KD, 1>(q, gate, c, sh, pos, keep, part, att, s, rows);
}

}  // namespace

void qsa_merge_splits(const float* gate, const QsaShape& sh, const float* part, float* att, cudaStream_t s,
                      const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(qsa_attend_merge_kernel, dim3(unsigned(sh.heads), unsigned(rows.count)), 128, 0,
                                       s, gate, sh, part, att, rows.stride);
}

void qsa_attend(const float* q, const float* gate, const QsaCache& c, const QsaShape& sh, const int32_t* pos,
                const uint8_t* keep, float* scores, float* att, cudaStream_t s, const Rows& rows, bool many_rows) {
  // A tensor-core prefill chunk (hundreds of rows; not bit-identical to decode steps anyway):
  // the group kernel, one block per (KV head, row) reading each key and value once for its
  // query group (up to 16 query heads per KV head, queries in 48 KB of shared memory).
  const int64_t G = sh.heads / sh.kv_heads;
  if (many_rows && qsa_tc()) {  // the products on tensor cores (qsa_tc.cu), where the shape fits
    if (qsa_attend_tc_supports(sh)) return qsa_attend_tc(q, gate, c, sh, pos, keep, scores, att, s, rows);
  }
  if (many_rows) {
    const dim3 grid(unsigned(sh.kv_heads), unsigned(rows.count));
    if (G <= 4 && group_smem(sh, 4) <= 48 * 1024) {
      ds4::cuda::gemv_detail::launch_small(qsa_attend_group_kernel<4>, dim3(grid), kAttendThreads, group_smem(sh, 4), s,
                                           q, gate, c, sh, pos, keep, scores, att, rows.stride);
      return;
    }
    if (G <= 16 && group_smem(sh, 16) <= 48 * 1024) {
      ds4::cuda::gemv_detail::launch_small(qsa_attend_group_kernel<16>, dim3(grid), kAttendThreads, group_smem(sh, 16),
                                           s, q, gate, c, sh, pos, keep, scores, att, rows.stride);
      return;
    }
  }
  // Decode steps and exact chunks: the split path for every head_dim up to 256 (parallel over
  // the context, so a single row fills the GPU; the choice depends on the shape only, so an
  // exact chunk's rows and the decode step take the same one and stay equal bit for bit).
  const int64_t kd = (sh.head_dim + 31) / 32;
  if (kd <= 1) return launch_split_kd<1>(q, gate, c, sh, pos, keep, scores, att, s, rows);
  if (kd <= 2) return launch_split_kd<2>(q, gate, c, sh, pos, keep, scores, att, s, rows);
  if (kd <= 4) return launch_split_kd<4>(q, gate, c, sh, pos, keep, scores, att, s, rows);
  if (kd <= 8) return launch_split_kd<8>(q, gate, c, sh, pos, keep, scores, att, s, rows);
  ds4::cuda::gemv_detail::launch_small(qsa_attend_kernel, dim3(unsigned(sh.heads), unsigned(rows.count)), 256,
                                       size_t(sh.head_dim) * sizeof(float), s, q, gate, c, sh, pos, keep, scores, att,
                                       rows.stride);
}

}  // namespace ds4::qwen_next::cuda
