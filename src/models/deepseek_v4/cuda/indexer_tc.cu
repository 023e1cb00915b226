// The lightning indexer's scores over a tensor-core prefill chunk (issue #22). indexer_select's
// score kernel (compressor.cu) is a warp per entry and row with FP32 FMAs out of shared
// memory: at position 32K a 512-row chunk scores 512 x 8192 entries x 64 heads x 128 features
// per CSA layer, which took most of the chunk's "attend" time. Here the chunk's rows are one
// GEMM: M = (rows x heads) queries, N = the entries, K = d, on tensor cores (mma.sync m16n8k8),
// each operand split hi + lo into TF32 (3xTF32: hi*hi + hi*lo + lo*hi) so the products keep
// FP32-level precision; the scores choose entries by top-k, so TF32 alone (2^-11) would move
// selections. The mask is causal per row: row t sees the (*pos + t + 1) / ratio entries
// closed so far; a block computes up to what its last row sees and top-k reads each row's
// own count. Then relu, the head weights and the sum over heads, as index_score_kernel, in
// a different summation order (not bit for bit).
// Pre-split form (the default; DS4_INDEXER_TC_PRESPLIT=0 for the per-warp form). Per warp, each
// warp split every entry value of a tile into hi + lo itself (cvt, sub, cvt per value per warp: 8
// warps did the same 3 operations on each of the tile's 8192 values, ~2 ALU instructions per MMA),
// and the scores ran at ~18 % of the tensor pipe (test_deepseek_v4_cuda's info line, H100: 2.29 ms
// for 512 rows at 32K). There the block splits a landed tile once into {hi, lo} pairs in shared
// memory and the warps read a pair per value with one 8-byte load: the same tf32_split of the same
// values and the same MMAs in the same order, so the scores equal the per-warp form bit for bit.
// Session 30 (H100, bench/results/session30-2026-12-06 call 1): tc scores 2.311 -> 2.071 ms per
// 512-row call at 32K; 30-layer prefill in 2048-row chunks 8K / 32K 5803 / 5092 -> 5832 / 5175 tok/s.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "models/deepseek_v4/cuda/kernels.h"

namespace ds4::deepseek_v4::cuda {
namespace {

using ds4::cuda::mma::cp_async16;
using ds4::cuda::mma::cp_commit;
using ds4::cuda::mma::cp_next_tile;
using ds4::cuda::mma::mma_tf32;
using ds4::cuda::mma::tf32_split;

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kM = 16 * kWarps;      // query rows of a block: (chunk rows x heads), a m16 tile per warp
constexpr int kD = 128;              // the feature count it takes (the Flash's index_head_dim)
constexpr int kLd = kD + 4;          // entry tile row stride: B fragments (g, t) on distinct banks
constexpr int kNe = 64;              // entries per tile: 8 n8 tiles per warp
constexpr int kTiles = 4;            // tiles per block: each warp loads its queries once for 256 entries
constexpr int kEntriesPerBlock = kNe * kTiles;

// The FP32 ring {2, kNe, kLd}, the warps' sums {kWarps, kNe}, and with kPresplit the split tile
// {kNe, kLd} of {hi, lo} pairs (8 bytes: a half warp's pairs (g = 0..3, t) on distinct banks).
template <bool kPresplit>
constexpr size_t shared_bytes() {
  return size_t(2 * kNe * kLd + kWarps * kNe) * 4 + (kPresplit ? size_t(kNe * kLd) * 8 : 0);
}

// Block (x, y): entries [x * 256, +256) for chunk rows [y * RB, +RB), RB = 128 / heads. Warp w
// holds the m16 tile of heads [16 w % heads, +16) of row y * RB + 16 w / heads: its queries' A
// fragments in registers (FP32, split per k step), the entry tiles in shared memory
// (cp.async, double-buffered). Each tile: the warp's 16 heads x 64 entries, then relu x weight
// summed over its heads (lanes with the same t), over the row's warps in shared memory.
template <int RB, bool kPresplit>
__global__ void __launch_bounds__(kThreads, 1) index_score_tc_kernel(IndexerArgs a, const int32_t* __restrict__ pos,
                                                                     int64_t rows, int64_t stride) {
  constexpr int NH = kM / RB, WPR = NH / 16;  // heads per row, warps per row
  extern __shared__ float4 sm4[];
  float* es = reinterpret_cast<float*>(sm4);  // {2, kNe, kLd}
  float* red = es + 2 * kNe * kLd;            // {kWarps, kNe}: each warp's per-entry sums
  uint2* split = reinterpret_cast<uint2*>(red + kWarps * kNe);  // kPresplit: {kNe, kLd} {hi, lo}
  const int64_t r0 = int64_t(blockIdx.y) * RB, p0 = *pos;
  const int64_t last = (r0 + RB < rows ? r0 + RB : rows) - 1;
  const int64_t n_max = (p0 + last + 1) / a.ratio, e0 = int64_t(blockIdx.x) * kEntriesPerBlock;
  if (e0 >= n_max) return;  // the grid is sized for max_ctx
  const int ne = int(n_max - e0 < kEntriesPerBlock ? n_max - e0 : kEntriesPerBlock), tiles = (ne + kNe - 1) / kNe;
  auto load = [&](int j) {
    float* dst = es + (j & 1) * kNe * kLd;
    for (int i = threadIdx.x; i < kNe * (kD / 4); i += kThreads) {
      const int r = i / (kD / 4), u = i % (kD / 4), k = j * kNe + r;
      const bool ok = k < ne;
      cp_async16(dst + r * kLd + 4 * u, ok ? a.entries + (e0 + k) * kD + 4 * u : a.entries, ok);
    }
    cp_commit();
  };
  load(0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int64_t row = r0 + warp / WPR;
  const int h0 = (warp % WPR) * 16;
  const int64_t src_row = row < rows ? row : r0;  // a row past the chunk computes, never writes
  float qa[kD / 8][4];
  {
    const float* q = a.q + src_row * stride + int64_t(h0) * kD;
#pragma unroll
    for (int ks = 0; ks < kD / 8; ++ks) {
      qa[ks][0] = q[g * kD + 8 * ks + t], qa[ks][1] = q[(g + 8) * kD + 8 * ks + t];
      qa[ks][2] = q[g * kD + 8 * ks + t + 4], qa[ks][3] = q[(g + 8) * kD + 8 * ks + t + 4];
    }
  }
  const float score_scale = 1.0f / sqrtf(float(kD)), head_scale = 1.0f / sqrtf(float(NH));
  const float* w = a.w + src_row * stride + h0;
  const float w0 = w[g] * head_scale, w1 = w[g + 8] * head_scale;
  for (int j = 0; j < tiles; ++j) {
    cp_next_tile(j, tiles, load);
    __syncthreads();
    const float* et = es + (j & 1) * kNe * kLd;
    if constexpr (kPresplit) {  // the tile's values split once, for all warps
      for (int i = threadIdx.x; i < kNe * kD; i += kThreads) {
        const int r = i / kD, c = i % kD;
        uint2 v;
        tf32_split(et[r * kLd + c], v.x, v.y);
        split[r * kLd + c] = v;
      }
      __syncthreads();
    }
    float acc[kNe / 8][4];
#pragma unroll
    for (int nt = 0; nt < kNe / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kD / 8; ++ks) {
      uint32_t ah[4], al[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) tf32_split(qa[ks][e], ah[e], al[e]);
      const float* eb = et + g * kLd + 8 * ks + t;
      const uint2* sb = split + g * kLd + 8 * ks + t;
#pragma unroll
      for (int nt = 0; nt < kNe / 8; ++nt) {
        uint32_t bh0, bl0, bh1, bl1;
        if constexpr (kPresplit) {
          const uint2 b0 = sb[nt * 8 * kLd], b1 = sb[nt * 8 * kLd + 4];
          bh0 = b0.x, bl0 = b0.y, bh1 = b1.x, bl1 = b1.y;
        } else {
          tf32_split(eb[nt * 8 * kLd], bh0, bl0);
          tf32_split(eb[nt * 8 * kLd + 4], bh1, bl1);
        }
        mma_tf32(acc[nt], al, bh0, bh1);  // the small terms first
        mma_tf32(acc[nt], ah, bl0, bl1);
        mma_tf32(acc[nt], ah, bh0, bh1);
      }
    }
    // relu(dot) * scale * weight, summed over the warp's 16 heads: g's 8 lanes, both halves
#pragma unroll
    for (int nt = 0; nt < kNe / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float v = fmaxf(acc[nt][c], 0.f) * score_scale * w0 + fmaxf(acc[nt][2 + c], 0.f) * score_scale * w1;
        v += __shfl_xor_sync(0xffffffffu, v, 4);
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        if (g == 0) red[warp * kNe + nt * 8 + 2 * t + c] = v;
      }
    __syncthreads();
    for (int i = threadIdx.x; i < RB * kNe; i += kThreads) {
      const int rr = i / kNe, k = i % kNe;
      const int64_t e = e0 + int64_t(j) * kNe + k;
      if (r0 + rr >= rows || j * kNe + k >= ne) continue;
      float s = 0.f;
#pragma unroll
      for (int wi = 0; wi < WPR; ++wi) s += red[(rr * WPR + wi) * kNe + k];
      a.scores[(r0 + rr) * stride + e] = s;
    }
    __syncthreads();  // the next iteration loads into this tile's buffer and rewrites red
  }
}

template <int RB, bool kPresplit>
void launch(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  constexpr size_t shm = shared_bytes<kPresplit>();
  ds4::cuda::opt_in_smem_once<index_score_tc_kernel<RB, kPresplit>>(shm);
  const dim3 grid(unsigned((a.max_entries + kEntriesPerBlock - 1) / kEntriesPerBlock),
                  unsigned((rows.count + RB - 1) / RB));
  index_score_tc_kernel<RB, kPresplit><<<grid, kThreads, shm, s>>>(a, pos, rows.count, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

template <int RB>
void launch(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  if (indexer_tc_presplit()) launch<RB, true>(a, pos, s, rows);
  else launch<RB, false>(a, pos, s, rows);
}

// DS4_INDEXER_TC_PRESPLIT (0 or 1; unset = 1) or indexer_tc_set_presplit.
std::atomic<int> g_presplit{-1};

}  // namespace

void indexer_tc_set_presplit(bool on) { g_presplit.store(on ? 1 : 0, std::memory_order_relaxed); }
bool indexer_tc_presplit() {
  return ds4::cuda::env_setting(g_presplit, "DS4_INDEXER_TC_PRESPLIT", {0, 1}, "0 or 1", 1) == 1;
}

bool indexer_tc_supported(const IndexerArgs& a) {
  const bool heads = a.nh == 16 || a.nh == 32 || a.nh == 64 || a.nh == 128;
  return heads && a.d == kD && a.max_entries > 0 && reinterpret_cast<uintptr_t>(a.entries) % 16 == 0;
}

void indexer_select_tc(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  if (!indexer_tc_supported(a)) return indexer_select(a, pos, s, rows);
  indexer_queries(a, pos, s, rows);
  switch (a.nh) {
    case 16: launch<8>(a, pos, s, rows); break;
    case 32: launch<4>(a, pos, s, rows); break;
    case 64: launch<2>(a, pos, s, rows); break;
    default: launch<1>(a, pos, s, rows); break;
  }
  indexer_topk(a, pos, s, rows);
}

}  // namespace ds4::deepseek_v4::cuda
