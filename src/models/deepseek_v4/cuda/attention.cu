// DeepSeek V4 attention kernels (CPU: attention.cpp): rope on the head tails, the KV row
// into the sliding-window ring, and the sink softmax over window + compressed rows.
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/quant_sim.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/deepseek_v4/cuda/kernels.h"

namespace ds4::deepseek_v4::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;

// Rotates the tail pairs (2i, 2i+1) of one row in shared memory by angle p * inv_freq[i] (the
// f32 product, as on the CPU; cosf / sinf are full-range accurate). Every thread calls.
__device__ void rope_shared(float* row, int64_t hd, int64_t rot, const float* inv, int64_t p) {
  float* t = row + (hd - rot);
  for (int64_t i = threadIdx.x; i < rot / 2; i += blockDim.x) {
    const float a = float(p) * inv[i];
    const float c = cosf(a), s = sinf(a);
    const float x0 = t[2 * i], x1 = t[2 * i + 1];
    t[2 * i] = x0 * c - x1 * s;
    t[2 * i + 1] = x1 * c + x0 * s;
  }
  __syncthreads();
}

// One block per head: rmsnorm, rope tail, and for the KV row the storage round trip and the
// window ring.
__global__ void norm_rope_kernel(float* x, NormRope r, const int32_t* __restrict__ pos) {
  extern __shared__ float row[];  // {hd}
  const int64_t hd = r.head_dim, p = *pos;
  float* xh = x + int64_t(blockIdx.x) * hd;
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
    for (int64_t j = threadIdx.x; j < hd; j += blockDim.x) r.ring[(p % r.window) * hd + j] = row[j];
}

__device__ __forceinline__ const float* key_row(const AttendArgs& a, int64_t r, int64_t n_win, int64_t p) {
  if (r < n_win) return a.ring + ((p - n_win + 1 + r) % a.window) * a.hd;
  const int64_t k = r - n_win;
  return a.entries + (a.sel ? int64_t(a.sel[k]) : k) * a.hd;
}

// One block per head. Scores by warps (one row each), then the block's max / sum with the
// sink in the denominator, then each thread owns output features.
__global__ void attend_kernel(AttendArgs a, const int32_t* __restrict__ pos) {
  extern __shared__ float q[];  // {hd}
  const int64_t h = blockIdx.x, p = *pos, hd = a.hd;
  const int64_t n_win = p + 1 < a.window ? p + 1 : a.window;
  int64_t n_comp = 0;
  if (a.ratio > 0) n_comp = a.sel ? int64_t(*a.nsel) : (p + 1) / a.ratio;
  int64_t rows = n_win + n_comp;
  if (rows > a.max_rows) rows = a.max_rows;  // sized for max_ctx; never hit within it
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) q[i] = a.q[h * hd + i];
  __syncthreads();
  float* sc = a.scores + h * a.max_rows;
  const float scale = 1.0f / sqrtf(float(hd));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  for (int64_t r = warp; r < rows; r += nw) {
    const float* k = key_row(a, r, n_win, p);
    float d = 0.f;
    for (int64_t i = lane; i < hd; i += 32) d = fmaf(q[i], k[i], d);
    d = warp_reduce(d, SumOp{});
    if (lane == 0) sc[r] = d * scale;
  }
  __syncthreads();
  const float sink = a.sinks[h];
  float m = sink;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) m = fmaxf(m, sc[r]);
  m = block_reduce(m, MaxOp{}, -FLT_MAX);
  float sum = 0.f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) sum += (sc[r] = expf(sc[r] - m));
  sum = block_reduce(sum, SumOp{}, 0.f);  // its barriers also publish sc[]
  const float inv = 1.f / (sum + expf(sink - m));
  float* o = q;  // q is no longer read (the reductions' barriers passed): reuse it for the output
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    float acc = 0.f;
    for (int64_t r = 0; r < rows; ++r) acc = fmaf(sc[r], key_row(a, r, n_win, p)[i], acc);
    o[i] = acc * inv;
  }
  __syncthreads();
  rope_shared(o, hd, a.rope_dim, a.inv_freq, -p);  // K == V carried rope: rotate back
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) a.out[h * hd + i] = o[i];
}

}  // namespace

void norm_rope(float* x, const NormRope& r, const int32_t* pos, cudaStream_t s) {
  if (r.rope_dim < 0 || r.rope_dim % 2 || r.rope_dim > r.head_dim)
    throw InputError("deepseek_v4 cuda: rope_dim " + std::to_string(r.rope_dim) + " unsupported");
  NormRope k = r;
  const int64_t nope = r.head_dim - r.rope_dim;
  k.fp8 = r.fp8 && nope > 0 && nope % 64 == 0;  // ds4's shape condition (ds4_kv_storage)
  norm_rope_kernel<<<unsigned(r.heads), 128, size_t(r.head_dim) * 4, s>>>(x, k, pos);
  DS4_CUDA_CHECK_LAUNCH();
}

void attend(const AttendArgs& a, const int32_t* pos, cudaStream_t s) {
  attend_kernel<<<unsigned(a.heads), 256, size_t(a.hd) * 4, s>>>(a, pos);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::deepseek_v4::cuda
