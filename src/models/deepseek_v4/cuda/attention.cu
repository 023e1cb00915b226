// DeepSeek V4 attention kernels (CPU: attention.cpp): rope on the head tails, the KV row
// into the sliding-window ring, and the sink softmax over window + compressed rows, split over
// chunks of key rows (one block per head group and chunk, then a merge per head).
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/quant_sim.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/deepseek_v4/cuda/kernels.h"
#include "models/deepseek_v4/cuda/rope_shared.cuh"

namespace ds4::deepseek_v4::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;

// One block per head (and row: blockIdx.y): rmsnorm, rope tail, and for the KV row the
// storage round trip and the window ring.
__global__ void norm_rope_kernel(float* x, NormRope r, const int32_t* __restrict__ pos, int64_t stride) {
  extern __shared__ float row[];  // {hd}
  const int64_t hd = r.head_dim, p = *pos + int64_t(blockIdx.y);
  float* xh = x + int64_t(blockIdx.y) * stride + int64_t(blockIdx.x) * hd;
  float ss = 0.f;
  for (int64_t j = threadIdx.x; j < hd; j += blockDim.x) {
    row[j] = xh[j];
    ss = fmaf(row[j], row[j], ss);
  }
  ss = block_reduce(ss, SumOp{}, 0.f);
  const float inv = rsqrtf(ss / float(hd) + r.eps);
  for (int64_t j = threadIdx.x; j < hd; j += blockDim.x) row[j] = r.weight ? row[j] * inv * r.weight[j] : row[j] * inv;
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

__device__ __forceinline__ const float* key_row(const AttendArgs& a, int64_t r, int64_t n_win, int64_t p) {
  if (r < n_win) return a.ring + ((p - n_win + 1 + r) % a.ring_rows) * a.hd;
  const int64_t k = r - n_win;
  return a.entries + (a.sel ? int64_t(a.sel[k]) : k) * a.hd;
}

constexpr int kHeadGroup = 8;   // heads per block: each key row read serves them all
constexpr int kThreads = 256;
constexpr int kKeyRegs = 16;    // key values a lane holds at once: head_dim up to 512 in one go

__device__ __forceinline__ int64_t visible_rows(const AttendArgs& a, int64_t p, int64_t& n_win) {
  n_win = p + 1 < a.window ? p + 1 : a.window;
  int64_t n_comp = 0;
  if (a.ratio > 0) n_comp = a.sel ? int64_t(*a.nsel) : (p + 1) / a.ratio;
  const int64_t rows = n_win + n_comp;
  return rows < a.max_rows ? rows : a.max_rows;  // sized for max_ctx; never clipped within it
}

// Row t of a chunk: its own query, selection, partials and output (Rows::stride floats apart).
__device__ __forceinline__ void to_row(AttendArgs& a, int64_t t, int64_t stride) {
  const int64_t o = t * stride;
  a.q += o, a.part += o, a.part_ml += o, a.out += o;
  if (a.sel) a.sel += o, a.nsel += o;
}

// Split-K attention (flash decoding). Block (g, c): heads [g * HG, (g+1) * HG) over key rows
// [c * kAttnChunk, ...): scores (a warp per row, the row read once for all HG heads), the
// chunk's max and exp-sum per head, and the unnormalized partial output {HG, hd}.
__global__ void __launch_bounds__(kThreads) attend_chunk_kernel(AttendArgs a, int hg, const int32_t* __restrict__ pos,
                                                                int64_t stride) {
  extern __shared__ float sm[];  // q {hg, hd}, then p {hg, kAttnChunk}
  to_row(a, blockIdx.z, stride);
  const int64_t p = *pos + int64_t(blockIdx.z), hd = a.hd, c = blockIdx.y, h0 = int64_t(blockIdx.x) * hg;
  int64_t n_win;
  const int64_t rows = visible_rows(a, p, n_win), r0 = c * kAttnChunk;
  if (r0 >= rows) return;  // the grid is sized for max_ctx
  const int64_t nr = rows - r0 < kAttnChunk ? rows - r0 : kAttnChunk;
  float* q = sm;
  float* pr = sm + hg * hd;
  // The chunk's row addresses once (ring slot / selected entry: an int64 modulo and a gather),
  // so the loops below are plain independent loads the compiler can keep in flight.
  __shared__ const float* rp[kAttnChunk];
  for (int64_t r = threadIdx.x; r < nr; r += blockDim.x) rp[r] = key_row(a, r0 + r, n_win, p);
  for (int64_t i = threadIdx.x; i < hg * hd; i += blockDim.x) q[i] = a.q[h0 * hd + i];
  __syncthreads();
  const float scale = 1.0f / sqrtf(float(hd));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  // A lane's hd / 32 key values are loaded together before the dot products (issue #23: the
  // loop that loaded one and used it waited a memory latency per value, 16 of them a row at
  // hd 512); the sums run in the same order as that loop's, so the scores are unchanged.
  for (int64_t r = warp; r < nr; r += nw) {
    const float* k = rp[r];
    float d[kHeadGroup];
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h) d[h] = 0.f;
    if (hd <= 32 * kKeyRegs) {
      float kv[kKeyRegs];
#pragma unroll
      for (int j = 0; j < kKeyRegs; ++j) kv[j] = lane + 32 * j < hd ? k[lane + 32 * j] : 0.f;
#pragma unroll
      for (int j = 0; j < kKeyRegs; ++j) {
        const int64_t i = lane + 32 * j;
        if (i >= hd) break;
#pragma unroll
        for (int h = 0; h < kHeadGroup; ++h)
          if (h < hg) d[h] = fmaf(q[h * hd + i], kv[j], d[h]);
      }
    } else {
      for (int64_t i = lane; i < hd; i += 32) {
        const float v = k[i];
#pragma unroll
        for (int h = 0; h < kHeadGroup; ++h)
          if (h < hg) d[h] = fmaf(q[h * hd + i], v, d[h]);
      }
    }
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h)
      if (h < hg) {
        const float t = warp_reduce(d[h], SumOp{});
        if (lane == 0) pr[h * kAttnChunk + r] = t * scale;
      }
  }
  __syncthreads();
  if (threadIdx.x < hg) {  // per head: the chunk's max, exp, sum (serial: at most kAttnChunk rows)
    float* ph = pr + threadIdx.x * kAttnChunk;
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
        if (h < hg) acc[h] = fmaf(pr[h * kAttnChunk + r], v, acc[h]);
    }
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h)
      if (h < hg) a.part[(c * a.heads + h0 + h) * hd + i] = acc[h];
  }
}

// One block per head: merges the chunks (rescaled to the global max, the sink joining the
// denominator), then rotates the output's rope tail back (K == V carried rope).
__global__ void attend_merge_kernel(AttendArgs a, const int32_t* __restrict__ pos, int64_t stride) {
  extern __shared__ float o[];  // {hd}
  to_row(a, blockIdx.y, stride);
  const int64_t p = *pos + int64_t(blockIdx.y), hd = a.hd, h = blockIdx.x;
  int64_t n_win;
  const int64_t chunks = (visible_rows(a, p, n_win) + kAttnChunk - 1) / kAttnChunk;
  const float sink = a.sinks[h];
  float m = sink;
  for (int64_t c = 0; c < chunks; ++c) m = fmaxf(m, a.part_ml[(c * a.heads + h) * 2]);
  float den = expf(sink - m);
  for (int64_t c = 0; c < chunks; ++c) {
    const float* ml = a.part_ml + (c * a.heads + h) * 2;
    den += expf(ml[0] - m) * ml[1];
  }
  const float inv = 1.f / den;
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    float acc = 0.f;
    for (int64_t c = 0; c < chunks; ++c)
      acc = fmaf(expf(a.part_ml[(c * a.heads + h) * 2] - m), a.part[(c * a.heads + h) * hd + i], acc);
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
  norm_rope_kernel<<<dim3(unsigned(r.heads), unsigned(rows.count)), 128, size_t(r.head_dim) * 4, s>>>(x, k, pos,
                                                                                                   rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void attend(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  int hg = kHeadGroup;
  while (a.heads % hg) hg /= 2;
  const size_t shm = size_t(hg) * size_t(a.hd + kAttnChunk) * 4;
  if (shm > 48 * 1024) throw InputError("deepseek_v4 cuda: head_dim " + std::to_string(a.hd) + " too large for attend");
  const dim3 grid(unsigned(a.heads / hg), unsigned(attend_chunks(a.max_rows)), unsigned(rows.count));
  attend_chunk_kernel<<<grid, kThreads, shm, s>>>(a, hg, pos, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
  attend_merge_kernel<<<dim3(unsigned(a.heads), unsigned(rows.count)), 128, size_t(a.hd) * 4, s>>>(a, pos, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::deepseek_v4::cuda
