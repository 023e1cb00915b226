#pragma once
// Internal: the per-entry arithmetic of a compressor lane (CPU compressor_push), shared by the
// row-by-row walk (compressor.cu: decode steps) and the chunk form (lane_chunk.cu: every
// window a chunk closes at once). One definition, so both compile the same expressions (the
// same order of summation, the same FMA contractions) and emit bit-identical entries; only
// where the window's rows are read from differs (the lane's pending slots or the chunk's rows).
#include <cfloat>

#include "backend/cuda/quant_sim.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/deepseek_v4/cuda/kernels.h"

namespace ds4::deepseek_v4::cuda::lane_detail {

// ds4 storage numerics of one emitted entry (CPU ds4_kv_storage / ds4_indexer_storage),
// `row` in shared memory; every thread of the block calls.
// One warp per block of values; blockDim.x >= 64 (the Hadamard's 64 pairs).
__device__ inline void entry_storage(float* row, int64_t dim, int64_t rope_dim, bool fp8, bool indexer_sim) {
  const int64_t nope = dim - rope_dim, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (fp8 && nope > 0 && nope % 64 == 0)
    for (int64_t b = warp; b < nope / 64; b += warps) ds4::cuda::detail::roundtrip_block_warp(row + b * 64, 64, true);
  if (indexer_sim && dim == 128) {
    ds4::cuda::detail::hadamard_block(row, dim);
    for (int64_t b = warp; b < dim / 32; b += warps) ds4::cuda::detail::roundtrip_block_warp(row + b * 32, 32, false);
  }
  __syncthreads();
}

__device__ inline void rope_row(float* row, int64_t dim, int64_t rot, const float* inv, int64_t p) {
  for (int64_t i = threadIdx.x; i < rot / 2; i += blockDim.x) {
    const float a = float(p) * inv[i];
    const float c = cosf(a), s = sinf(a);
    float* t = row + (dim - rot);
    const float x0 = t[2 * i], x1 = t[2 * i + 1];
    t[2 * i] = x0 * c - x1 * s;
    t[2 * i + 1] = x1 * c + x0 * s;
  }
  __syncthreads();
}

// One feature of a closing window: the softmax over the gates of the window's R rows (after
// the previous window's R Ca rows when has_prev) weighting their values. pg / pv: the
// previous window's gate / value of row r; cg / cv: this window's. The loops are unrolled so
// that kPoolUnroll rows' loads are in flight at once (an HCA window's 128 rows otherwise wait
// one memory latency each); the sums still run in row order.
inline constexpr int kPoolUnroll = 16;
template <class PG, class PV, class CG, class CV>
__device__ __forceinline__ float pool_feature(int64_t R, bool has_prev, PG pg, PV pv, CG cg, CV cv) {
  float m = -FLT_MAX;
  if (has_prev)
#pragma unroll kPoolUnroll
    for (int64_t r = 0; r < R; ++r) m = fmaxf(m, pg(r));
#pragma unroll kPoolUnroll
  for (int64_t r = 0; r < R; ++r) m = fmaxf(m, cg(r));
  float sum = 0.f;
  if (has_prev)
#pragma unroll kPoolUnroll
    for (int64_t r = 0; r < R; ++r) sum += expf(pg(r) - m);
#pragma unroll kPoolUnroll
  for (int64_t r = 0; r < R; ++r) sum += expf(cg(r) - m);
  float acc = 0.f;
  if (has_prev)
#pragma unroll kPoolUnroll
    for (int64_t r = 0; r < R; ++r) acc += pv(r) * (expf(pg(r) - m) / sum);
#pragma unroll kPoolUnroll
  for (int64_t r = 0; r < R; ++r) acc += cv(r) * (expf(cg(r) - m) / sum);
  return acc;
}

// The pooled row {dim} in shared memory -> entry e of the lane: rmsnorm, rope at the window's
// first position p_first, storage round trip. blockDim.x must be the same in every caller
// (kLaneThreads: the rmsnorm's block reduction sums in an order set by the block size).
inline constexpr int kLaneThreads = 512;
__device__ inline void finish_entry(const LaneArgs& a, float* row, int64_t p_first, int64_t e) {
  const int64_t D = a.dim;
  float ss = 0.f;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) ss += row[j] * row[j];
  ss = ds4::cuda::detail::block_reduce(ss, ds4::cuda::detail::SumOp{}, 0.f);
  const float inv = rsqrtf(ss / float(D) + a.eps);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) row[j] = row[j] * inv * a.norm[j];
  __syncthreads();
  rope_row(row, D, a.rope_dim, a.inv_freq, p_first);
  entry_storage(row, D, a.rope_dim, a.fp8, a.indexer_sim);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) a.entries[e * D + j] = row[j];
  __syncthreads();  // row[] is reused by the caller
}

}  // namespace ds4::deepseek_v4::cuda::lane_detail
