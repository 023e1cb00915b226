// DeepSeek V4 attention kernels (CPU: attention.cpp): rope on the head tails, the KV row
// into the sliding-window ring, and the sink softmax over window + compressed rows, split over
// chunks of 32 key rows (one block per head group and chunk, then a merge per head).
#include <algorithm>
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/quant_sim.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/deepseek_v4/cuda/attend_rows.cuh"
#include "models/deepseek_v4/cuda/kernels.h"
#include "models/deepseek_v4/cuda/rope_shared.cuh"

namespace ds4::deepseek_v4::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;
using detail::key_row;
using detail::to_row;
using detail::visible_rows;

// One block per head (and row: blockIdx.y): rmsnorm, rope tail, and for the KV row the
// storage round trip and the window ring. A thread's first kPrefetch values of x and of the
// weight are loaded together before any is used: the loop loaded one, used it and waited a
// memory latency for the next (4 + 4 in a row at head_dim 512), so the KV row's single block
// took ~11 us a layer in a decode step (session 29's per-kernel table). Same values, same
// operations in the same order (each thread's j ascending).
constexpr int kNormRopePrefetch = 4;

__global__ void norm_rope_kernel(float* x, NormRope r, const int32_t* __restrict__ pos, Rows rr, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float row[];  // {hd}
  const int64_t hd = r.head_dim, p = detail::row_position(pos, rr, blockIdx.y);
  float* xh = x + int64_t(blockIdx.y) * rr.stride + int64_t(blockIdx.x) * hd;
  r.ring = detail::shifted(r.ring, detail::row_shift(rr, blockIdx.y));  // a decode batch: the row's own ring
  float xv[kNormRopePrefetch], wv[kNormRopePrefetch];
#pragma unroll
  for (int u = 0; u < kNormRopePrefetch; ++u) {
    const int64_t j = threadIdx.x + int64_t(u) * blockDim.x;
    xv[u] = j < hd ? xh[j] : 0.f;
    wv[u] = j < hd && r.weight ? r.weight[j] : 1.f;
  }
  const int64_t rest = int64_t(kNormRopePrefetch) * blockDim.x;  // the values past the prefetched ones
  float ss = 0.f;
#pragma unroll
  for (int u = 0; u < kNormRopePrefetch; ++u) {
    const int64_t j = threadIdx.x + int64_t(u) * blockDim.x;
    if (j < hd) row[j] = xv[u], ss = fmaf(xv[u], xv[u], ss);
  }
  for (int64_t j = threadIdx.x + rest; j < hd; j += blockDim.x) {
    row[j] = xh[j];
    ss = fmaf(row[j], row[j], ss);
  }
  ss = block_reduce(ss, SumOp{}, 0.f);
  const float inv = rsqrtf(ss / float(hd) + r.eps);
#pragma unroll
  for (int u = 0; u < kNormRopePrefetch; ++u) {
    const int64_t j = threadIdx.x + int64_t(u) * blockDim.x;
    if (j < hd) row[j] = r.weight ? xv[u] * inv * wv[u] : xv[u] * inv;
  }
  for (int64_t j = threadIdx.x + rest; j < hd; j += blockDim.x) row[j] = r.weight ? row[j] * inv * r.weight[j] : row[j] * inv;
  __syncthreads();
  rope_shared(row, hd, r.rope_dim, r.inv_freq, p);
  const int64_t nope = hd - r.rope_dim;
  if (r.ring && r.fp8)  // one warp per block of 64
    for (int64_t b = threadIdx.x / 32; b < nope / 64; b += blockDim.x / 32)
      ds4::cuda::detail::roundtrip_block_warp(row + b * 64, 64, true);
  __syncthreads();
  for (int64_t j = threadIdx.x; j < hd; j += blockDim.x) xh[j] = row[j];
  if (r.ring)
    for (int64_t j = threadIdx.x; j < hd; j += blockDim.x) r.ring[(p % r.ring_rows) * hd + j] = row[j];
}

constexpr int kHeadGroup = 8;   // heads per block: each key row read serves them all
constexpr int kThreads = 256;
constexpr int kKeyRegs = 16;    // key values a lane holds at once: head_dim up to 512 in one go
constexpr int kRowsAtOnce = 2;  // key rows a warp loads together in the score pass
constexpr int kVBatch = 8;      // value rows (float4 each) a thread has in flight in the value pass
static_assert(kAttnChunk % 32 == 0, "the softmax holds a chunk's scores C / 32 per lane");
static_assert(kThreads / 32 >= kHeadGroup, "the softmax runs one warp per head");

// Lane-strided partial dot products of R key rows (k[r]; null: past the chunk, left 0) with
// the block's hg queries q {hg, hd} in shared memory: d[r][h] over features lane, lane + 32,
// ... (the caller reduces over the warp). A lane's hd / 32 key values of all R rows are loaded
// before the products (issue #23: loading one value and using it waited a memory latency per
// value); each sum runs in feature order, so R changes no result.
template <int R>
__device__ __forceinline__ void key_dots(const float* (&k)[R], const float* q, int64_t hd, int hg, int lane,
                                         float (&d)[R][kHeadGroup]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h) d[r][h] = 0.f;
  if (hd <= 32 * kKeyRegs) {
    float kv[R][kKeyRegs];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < kKeyRegs; ++j) kv[r][j] = k[r] && lane + 32 * j < hd ? __ldg(k[r] + lane + 32 * j) : 0.f;
#pragma unroll
    for (int j = 0; j < kKeyRegs; ++j) {
      const int64_t i = lane + 32 * j;
      if (i >= hd) break;
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h)
        if (h < hg) {
          const float qv = q[h * hd + i];
#pragma unroll
          for (int r = 0; r < R; ++r) d[r][h] = fmaf(qv, kv[r][j], d[r][h]);
        }
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (!k[r]) continue;
    for (int64_t i = lane; i < hd; i += 32) {
      const float v = k[r][i];
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h)
        if (h < hg) d[r][h] = fmaf(q[h * hd + i], v, d[r][h]);
    }
  }
}

// The value pass of one thread: float4 column u of the rows g, g + groups, ... < nr, weighted
// by each head's probabilities p {hg, C}, kVBatch rows' loads in flight.
template <int C>
__device__ __forceinline__ void value_rows(const float* const* rp, const float* p, int nr, int g, int groups,
                                           int64_t u, int hg, float4 (&acc)[kHeadGroup]) {
#pragma unroll
  for (int h = 0; h < kHeadGroup; ++h) acc[h] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int r0 = g; r0 < nr; r0 += kVBatch * groups) {
    float4 v[kVBatch];
#pragma unroll
    for (int j = 0; j < kVBatch; ++j) {
      const int r = r0 + j * groups;
      v[j] = r < nr ? __ldg(reinterpret_cast<const float4*>(rp[r]) + u) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int j = 0; j < kVBatch; ++j) {
      const int r = r0 + j * groups;
      if (r >= nr) break;
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h)
        if (h < hg) {
          const float w = p[h * C + r];
          acc[h].x = fmaf(w, v[j].x, acc[h].x), acc[h].y = fmaf(w, v[j].y, acc[h].y);
          acc[h].z = fmaf(w, v[j].z, acc[h].z), acc[h].w = fmaf(w, v[j].w, acc[h].w);
        }
    }
  }
}

__device__ __forceinline__ void add4(float4& a, float4 b) { a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w; }

// Split-K attention (flash decoding), issue #23: block (g, c) takes heads [g * hg, (g+1) * hg)
// over key rows [c * C, ...) (C = kAttnChunk: one token and exact chunks; wide prefill chunks
// run attend_wide_kernel, attend() says why). Scores: a warp per row (kRowsAtOnce rows' loads
// together), the row read once for all hg heads. Softmax: a warp per head, C / 32 scores per lane
// (max and exp-sum as warp reductions). Values: the block's threads split into `groups` row
// groups x hd / 4 float4 columns, each group's partial sums added in group order through
// shared memory (the query's space, free after the scores). Writes the chunk's max and
// exp-sum per head and the unnormalized partial output {hg, hd}.
template <int C>
__global__ void __launch_bounds__(kThreads)
    attend_chunk_kernel(AttendArgs a, int hg, int groups, const int32_t* __restrict__ pos, Rows rr, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float4 sm4[];  // q {hg, hd} | value partials {groups - 1, hg, hd}, then p {hg, C}
  float* sm = reinterpret_cast<float*>(sm4);
  const int64_t p = to_row(a, blockIdx.z, rr, pos), hd = a.hd, c = blockIdx.y, h0 = int64_t(blockIdx.x) * hg;
  int64_t n_win;
  const int64_t rows = visible_rows(a, p, n_win), r0 = c * C;
  if (r0 >= rows) return;  // the grid is sized for max_ctx
  const int nr = int(rows - r0 < C ? rows - r0 : C);
  const int64_t units = hd / 4;
  float* q = sm;
  float* pr = sm + int64_t(groups > 1 ? groups - 1 : 1) * hg * hd;  // as attend() sizes it
  // The chunk's row addresses once (ring slot / selected entry: an int64 modulo and a gather),
  // so the loops below are plain independent loads the compiler can keep in flight.
  __shared__ const float* rp[C];
  for (int r = threadIdx.x; r < nr; r += blockDim.x) rp[r] = key_row(a, r0 + r, n_win, p);
  {
    const float4* q4 = reinterpret_cast<const float4*>(a.q + h0 * hd);
    for (int64_t i = threadIdx.x; i < hg * units; i += blockDim.x) sm4[i] = q4[i];
  }
  __syncthreads();
  const float scale = 1.0f / sqrtf(float(hd));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  for (int rb = warp * kRowsAtOnce; rb < nr; rb += nw * kRowsAtOnce) {
    const float* kr[kRowsAtOnce];
#pragma unroll
    for (int k = 0; k < kRowsAtOnce; ++k) kr[k] = rb + k < nr ? rp[rb + k] : nullptr;
    float d[kRowsAtOnce][kHeadGroup];
    key_dots<kRowsAtOnce>(kr, q, hd, hg, lane, d);
#pragma unroll
    for (int k = 0; k < kRowsAtOnce; ++k)
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h)
        if (h < hg) {
          const float t = warp_reduce(d[k][h], SumOp{});
          if (lane == 0 && rb + k < nr) pr[h * C + rb + k] = t * scale;
        }
  }
  __syncthreads();
  if (warp < hg) {  // per head: the chunk's max, exp and exp-sum; rows past nr hold 0
    float* ph = pr + warp * C;
    float sc[C / 32];
    float m = -FLT_MAX;
#pragma unroll
    for (int j = 0; j < C / 32; ++j) {
      sc[j] = lane + 32 * j < nr ? ph[lane + 32 * j] : -FLT_MAX;
      m = fmaxf(m, sc[j]);
    }
    m = warp_reduce(m, MaxOp{});
    float l = 0.f;
#pragma unroll
    for (int j = 0; j < C / 32; ++j) {
      const float e = lane + 32 * j < nr ? expf(sc[j] - m) : 0.f;
      ph[lane + 32 * j] = e;
      l += e;
    }
    l = warp_reduce(l, SumOp{});
    if (lane == 0) {
      float* ml = a.part_ml + (c * a.heads + h0 + warp) * 2;
      ml[0] = m, ml[1] = l;
    }
  }
  __syncthreads();
  float4* part4 = reinterpret_cast<float4*>(a.part + (c * a.heads + h0) * hd);
  float4 acc[kHeadGroup];
  if (groups == 1) {  // hd / 4 >= kThreads / 2: every thread its columns over all rows
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      value_rows<C>(rp, pr, nr, 0, 1, u, hg, acc);
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h)
        if (h < hg) part4[h * units + u] = acc[h];
    }
    return;
  }
  const int g = int(threadIdx.x / units);
  const int64_t u = threadIdx.x % units;
  float4* red = sm4;  // {groups - 1, hg, units}: q is no longer read
  if (g < groups) {
    value_rows<C>(rp, pr, nr, g, groups, u, hg, acc);
    if (g > 0)
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h)
        if (h < hg) red[(int64_t(g - 1) * hg + h) * units + u] = acc[h];
  }
  __syncthreads();
  if (g == 0) {
    for (int k = 1; k < groups; ++k)
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h)
        if (h < hg) add4(acc[h], red[(int64_t(k - 1) * hg + h) * units + u]);
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h)
      if (h < hg) part4[h * units + u] = acc[h];
  }
}

// The wide-chunk form (prefill chunks of >= kAttnWideRows rows: throughput, not latency; the
// kernel of 2026-12-04, kept as it was). Block (g, c): heads [g * HG, (g+1) * HG) over key
// rows [c * kAttnChunkWide, ...): scores (a warp per row, the row read once for all HG heads),
// the chunk's max and exp-sum per head (one thread per head), and the unnormalized partial
// output {HG, hd} (each thread its columns over all the chunk's rows).
__global__ void __launch_bounds__(kThreads)
    attend_wide_kernel(AttendArgs a, int hg, const int32_t* __restrict__ pos, Rows rr, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float sm[];  // q {hg, hd}, then p {hg, kAttnChunkWide}
  const int64_t p = to_row(a, blockIdx.z, rr, pos), hd = a.hd, c = blockIdx.y, h0 = int64_t(blockIdx.x) * hg;
  int64_t n_win;
  const int64_t rows = visible_rows(a, p, n_win), r0 = c * kAttnChunkWide;
  if (r0 >= rows) return;  // the grid is sized for max_ctx
  const int64_t nr = rows - r0 < kAttnChunkWide ? rows - r0 : kAttnChunkWide;
  float* q = sm;
  float* pr = sm + hg * hd;
  // The chunk's row addresses once (ring slot / selected entry: an int64 modulo and a gather),
  // so the loops below are plain independent loads the compiler can keep in flight.
  __shared__ const float* rp[kAttnChunkWide];
  for (int64_t r = threadIdx.x; r < nr; r += blockDim.x) rp[r] = key_row(a, r0 + r, n_win, p);
  for (int64_t i = threadIdx.x; i < hg * hd; i += blockDim.x) q[i] = a.q[h0 * hd + i];
  __syncthreads();
  const float scale = 1.0f / sqrtf(float(hd));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  for (int64_t r = warp; r < nr; r += nw) {
    const float* kr[1] = {rp[r]};
    float d[1][kHeadGroup];
    key_dots<1>(kr, q, hd, hg, lane, d);
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h)
      if (h < hg) {
        const float t = warp_reduce(d[0][h], SumOp{});
        if (lane == 0) pr[h * kAttnChunkWide + r] = t * scale;
      }
  }
  __syncthreads();
  if (threadIdx.x < hg) {  // per head: the chunk's max, exp, sum (serial: at most kAttnChunkWide rows)
    float* ph = pr + threadIdx.x * kAttnChunkWide;
    float m = -FLT_MAX;
    for (int64_t r = 0; r < nr; ++r) m = fmaxf(m, ph[r]);
    float l = 0.f;
    for (int64_t r = 0; r < nr; ++r) l += (ph[r] = expf(ph[r] - m));
    float* ml = a.part_ml + (c * a.heads + h0 + threadIdx.x) * 2;
    ml[0] = m, ml[1] = l;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    float acc[kHeadGroup];
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h) acc[h] = 0.f;
#pragma unroll 8
    for (int64_t r = 0; r < nr; ++r) {
      const float v = rp[r][i];
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h)
        if (h < hg) acc[h] = fmaf(pr[h * kAttnChunkWide + r], v, acc[h]);
    }
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h)
      if (h < hg) a.part[(c * a.heads + h0 + h) * hd + i] = acc[h];
  }
}

// One block per head: merges the chunks (rescaled to the global max, the sink joining the
// denominator), then rotates the output's rope tail back (K == V carried rope). Each chunk's
// weight exp(m_c - m) is computed once into shared memory.
__global__ void attend_merge_kernel(AttendArgs a, int64_t chunk, const int32_t* __restrict__ pos, Rows rr,
                                    bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float o[];  // {hd}, then the chunk weights {chunks}
  const int64_t p = to_row(a, blockIdx.y, rr, pos), hd = a.hd, h = blockIdx.x;
  int64_t n_win;
  const int64_t chunks = (visible_rows(a, p, n_win) + chunk - 1) / chunk;
  float* wc = o + hd;
  const float sink = a.sinks[h];
  float m = sink;
  for (int64_t c = 0; c < chunks; ++c) m = fmaxf(m, a.part_ml[(c * a.heads + h) * 2]);
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) wc[c] = expf(a.part_ml[(c * a.heads + h) * 2] - m);
  __syncthreads();
  float den = expf(sink - m);
  for (int64_t c = 0; c < chunks; ++c) den += wc[c] * a.part_ml[(c * a.heads + h) * 2 + 1];
  const float inv = 1.f / den;
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    float acc = 0.f;
    for (int64_t c = 0; c < chunks; ++c) acc = fmaf(wc[c], a.part[(c * a.heads + h) * hd + i], acc);
    o[i] = acc * inv;
  }
  __syncthreads();
  rope_shared(o, hd, a.rope_dim, a.inv_freq, -p);
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) a.out[h * hd + i] = o[i];
}

}  // namespace

void norm_rope(float* x, const NormRope& r, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  if (r.rope_dim < 0 || r.rope_dim % 2 || r.rope_dim > r.head_dim)
    throw InputError("deepseek_v4 cuda: rope_dim " + std::to_string(r.rope_dim) + " unsupported");
  NormRope k = r;
  const int64_t nope = r.head_dim - r.rope_dim;
  k.fp8 = r.fp8 && nope > 0 && nope % 64 == 0;  // ds4's shape condition (ds4_kv_storage)
  if (r.ring && r.ring_rows < 1) throw InputError("deepseek_v4 cuda: norm_rope ring without rows");
  ds4::cuda::gemv_detail::launch_small(norm_rope_kernel, dim3(unsigned(r.heads), unsigned(rows.count)), 128,
                                       size_t(r.head_dim) * 4, s, x, k, pos, rows);
}

void attend(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  // One token and exact chunks (at most kMaxChunkRows + 1 rows) run the latency kernel on the
  // same 32-row chunks, so they stay bit-identical; a wide prefill chunk is throughput-bound:
  // there the latency kernel cost ~1.7x the wide one per 512-row chunk (32-row chunks; 1.25x
  // with 128-row ones; H200, bench/results/ds-decode-h200-2026-12-04g), so those keep it.
  attend_chunked(a, pos, s, rows, rows.count >= kAttnWideRows ? kAttnChunkWide : kAttnChunk);
}

void attend_chunked(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows, int64_t chunk) {
  if (a.hd < 4 || a.hd % 4)
    throw InputError("deepseek_v4 cuda: attend needs head_dim % 4 == 0 (float4 rows), got " + std::to_string(a.hd));
  if (chunk != kAttnChunk && chunk != kAttnChunkWide)
    throw InputError("deepseek_v4 cuda: attend chunk " + std::to_string(chunk) + " unsupported");
  int hg = kHeadGroup;
  while (a.heads % hg) hg /= 2;
  const dim3 grid(unsigned(a.heads / hg), unsigned((a.max_rows + chunk - 1) / chunk), unsigned(rows.count));
  if (chunk == kAttnChunk) {
    // Row groups of the value pass: as many as the block has threads for hd / 4 columns
    // each, at most one per row of the chunk.
    const int64_t units = a.hd / 4;
    const int groups = units > kThreads / 2 ? 1 : int(std::min<int64_t>(kThreads / units, chunk));
    const int64_t qr = std::max<int64_t>(1, groups - 1) * hg * a.hd;  // q, then the value partials
    const size_t shm = size_t(qr + int64_t(hg) * chunk) * 4;
    if (shm > 48 * 1024) throw InputError("deepseek_v4 cuda: head_dim " + std::to_string(a.hd) + " too large for attend");
    ds4::cuda::gemv_detail::launch_small(attend_chunk_kernel<kAttnChunk>, dim3(grid), kThreads, shm, s, a, hg, groups,
                                         pos, rows);
  } else {
    const size_t shm = size_t(hg) * size_t(a.hd + chunk) * 4;
    if (shm > 48 * 1024) throw InputError("deepseek_v4 cuda: head_dim " + std::to_string(a.hd) + " too large for attend");
    ds4::cuda::gemv_detail::launch_small(attend_wide_kernel, dim3(grid), kThreads, shm, s, a, hg, pos, rows);
  }
  DS4_CUDA_CHECK_LAUNCH();
  attend_merge(a, chunk, pos, s, rows);
}

void attend_merge(const AttendArgs& a, int64_t chunk, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  const size_t mshm = size_t(a.hd + attend_chunks(a.max_rows)) * 4;
  if (mshm > 48 * 1024) throw InputError("deepseek_v4 cuda: too many attend chunks for max_rows " + std::to_string(a.max_rows));
  ds4::cuda::gemv_detail::launch_small(attend_merge_kernel, dim3(unsigned(a.heads), unsigned(rows.count)), 128, mshm, s,
                                       a, chunk, pos, rows);
}

}  // namespace ds4::deepseek_v4::cuda
