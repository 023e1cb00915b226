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

// One block per head, one thread per rotated pair (2i, 2i+1) of the tail. The angle is the
// f32 product pos * inv_freq as on the CPU; cosf/sinf are full-range accurate.
__global__ void rope_tail_kernel(float* x, int64_t hd, int64_t rot, const float* __restrict__ inv,
                                 const int32_t* __restrict__ pos, int sign) {
  const int64_t i = threadIdx.x;
  if (i >= rot / 2) return;
  const float a = float(int64_t(sign) * int64_t(*pos)) * inv[i];
  const float c = cosf(a), s = sinf(a);
  float* xh = x + int64_t(blockIdx.x) * hd + (hd - rot);
  const float x0 = xh[2 * i], x1 = xh[2 * i + 1];
  xh[2 * i] = x0 * c - x1 * s;
  xh[2 * i + 1] = x1 * c + x0 * s;
}

__global__ void kv_store_kernel(const float* __restrict__ kv, int64_t hd, int64_t nope, bool fp8,
                                float* __restrict__ ring, int64_t window, const int32_t* __restrict__ pos) {
  extern __shared__ float row[];  // {hd}
  for (int64_t j = threadIdx.x; j < hd; j += blockDim.x) row[j] = kv[j];
  __syncthreads();
  if (fp8 && int64_t(threadIdx.x) < nope / 64) ds4::cuda::detail::roundtrip_block(row + threadIdx.x * 64, 64, true);
  __syncthreads();
  float* dst = ring + (int64_t(*pos) % window) * hd;
  for (int64_t j = threadIdx.x; j < hd; j += blockDim.x) dst[j] = row[j];
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
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    float acc = 0.f;
    for (int64_t r = 0; r < rows; ++r) acc = fmaf(sc[r], key_row(a, r, n_win, p)[i], acc);
    a.out[h * hd + i] = acc * inv;
  }
}

}  // namespace

void rope_tail(float* x, const RopeTail& r, const int32_t* pos, int sign, cudaStream_t s) {
  if (r.rope_dim <= 0) return;
  if (r.rope_dim % 2 || r.rope_dim > r.head_dim || r.rope_dim / 2 > 1024)
    throw InputError("deepseek_v4 cuda: rope_dim " + std::to_string(r.rope_dim) + " unsupported");
  const unsigned threads = unsigned((r.rope_dim / 2 + 31) / 32 * 32);
  rope_tail_kernel<<<unsigned(r.heads), threads, 0, s>>>(x, r.head_dim, r.rope_dim, r.inv_freq, pos, sign);
  DS4_CUDA_CHECK_LAUNCH();
}

void kv_store(const float* kv, int64_t head_dim, int64_t rope_dim, bool fp8, float* ring, int64_t window,
              const int32_t* pos, cudaStream_t s) {
  const int64_t nope = head_dim - rope_dim;
  fp8 = fp8 && nope > 0 && nope % 64 == 0;  // ds4's shape condition (ds4_kv_storage)
  kv_store_kernel<<<1, 256, size_t(head_dim) * 4, s>>>(kv, head_dim, nope, fp8, ring, window, pos);
  DS4_CUDA_CHECK_LAUNCH();
}

void attend(const AttendArgs& a, const int32_t* pos, cudaStream_t s) {
  attend_kernel<<<unsigned(a.heads), 256, size_t(a.hd) * 4, s>>>(a, pos);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::deepseek_v4::cuda
