#pragma once
// Internal to the grouped expert MMAs (grouped_mma_bf16.cu, grouped_mma_int8.cu): the entries a
// block takes, their rows' x / y offsets, the store of the accumulators and the cp.async
// helpers. Both kernels: a block = G entries (<= kN rows each) of one expert x 16 * warps weight
// rows; accumulators acc[j][h][k] of mma.sync m16n8 tiles (weight rows r, r + 8; entry j's rows
// 8h + 2t, 8h + 2t + 1).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/env_setting.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_formats.cuh"

namespace ds4::cuda::grouped_mma_detail {

using gemv_detail::Args;
using ds4::cuda::env_setting;

inline constexpr int kN = kGemvMaxRows;  // x rows per entry (two MMA N tiles of 8)

struct RowsArgs {
  int n;
  int64_t x_row, y_row;  // x_row in x's elements (floats, or int8 values)
  const int32_t *live, *counts, *x_idx, *y_idx;
  // Dense launches (grouped_mma_int8_dense): dense_rows > 0 rows of x per weight group, cut into
  // dense_entries = ceil(dense_rows / kN) consecutive entries; entry b is slice b % dense_entries
  // of group b / dense_entries (weight data + group * id_stride, x + group * x_stride + slice rows,
  // y likewise). ids / live / counts / x_idx / y_idx are unused then.
  int64_t dense_rows = 0;
  int dense_entries = 0;
  // Two activation planes (grouped_mma_int8_planes, the int8 kernel only): plane_off > 0 values
  // from a token's high-plane row to its low-plane row; an entry's token i (<= kN / 2 of them)
  // takes MMA rows 2 i (high) and 2 i + 1 (low), which one thread holds side by side, and its
  // output is their sum (store_rows_planes).
  int64_t plane_off = 0;
  int idx_stride = kGemvMaxRows;  // x_idx / y_idx entries per entry (moe_group's group_stride)
};

// Entries per block: `forced` (1, 2 or g_max) or by the chunk's rows per expert (1 up to kN, 2
// up to 2 kN, else g_max).
inline int entries_for(int forced, int64_t rows_per_expert, int g_max) {
  return forced ? forced : rows_per_expert <= kN ? 1 : rows_per_expert <= 2 * kN ? 2 : g_max;
}

// Entry b's block takes b and the next entries of the same expert, up to G, when b starts such
// a group inside its run of equal ids (moe_group gives an expert's entries consecutively): their
// count, or 0 when b is past *live or another block has b (the whole block then returns).
template <int G>
__device__ __forceinline__ int block_entries(const Args& a, const RowsArgs& ra, int b) {
  if (ra.dense_rows > 0) {  // a block starts at every G-th slice of its group
    const int slice = b % ra.dense_entries;
    return slice % G != 0 ? 0 : min(G, ra.dense_entries - slice);
  }
  const int live = ra.live ? *ra.live : int(gridDim.y);
  if (b >= live) return 0;
  int nt = 1;
  if (G > 1 && a.ids) {
    const int32_t e = a.ids[b];
    int s = b;
    while (s > 0 && a.ids[s - 1] == e) --s;
    if ((b - s) % G != 0) return 0;
    while (nt < G && b + nt < live && a.ids[b + nt] == e) ++nt;
  }
  return nt;
}

// The weight entry b reads: its expert (ids[b], b when ids is null), or a dense launch's group.
__device__ __forceinline__ int64_t entry_weight(const Args& a, const RowsArgs& ra, int b) {
  if (ra.dense_rows > 0) return b / ra.dense_entries;
  return a.ids ? int64_t(a.ids[b]) : int64_t(b);
}

// Threads < G * kN: row i of entry j (thread j * kN + i) -> its x and y offsets (-1 past the
// entry's count) and, for i = 0, the entry's rows (0 for j >= nt). The caller syncs.
template <int G>
__device__ __forceinline__ void entry_rows(const Args& a, const RowsArgs& ra, int b, int nt, int64_t* xo, int64_t* yo,
                                           int* nrows) {
  if (threadIdx.x >= G * kN) return;
  const int j = threadIdx.x / kN, i = threadIdx.x % kN, bj = b + j;
  if (ra.dense_rows > 0) {  // slice bj % E of group bj / E: rows kN * slice + i
    const int64_t group = bj / ra.dense_entries, r0 = int64_t(bj % ra.dense_entries) * kN;
    const int n = j < nt ? int(min(int64_t(kN), ra.dense_rows - r0)) : 0;
    if (i == 0) nrows[j] = n;
    xo[threadIdx.x] = i < n ? group * a.x_stride + (r0 + i) * ra.x_row : -1;
    yo[threadIdx.x] = i < n ? group * a.y_stride + (r0 + i) * ra.y_row : -1;
    return;
  }
  if (ra.plane_off > 0) {  // token i / 2, plane i % 2
    const int tokens = j < nt ? min(ra.counts ? ra.counts[bj] : ra.n, kN / 2) : 0, n = 2 * tokens, tok = i >> 1;
    if (i == 0) nrows[j] = n;
    const int64_t k = int64_t(bj) * ra.idx_stride + tok;
    xo[threadIdx.x] = i < n ? bj * a.x_stride + (ra.x_idx ? ra.x_idx[k] : tok) * ra.x_row + (i & 1) * ra.plane_off : -1;
    yo[threadIdx.x] = i < n && (i & 1) == 0 ? bj * a.y_stride + (ra.y_idx ? ra.y_idx[k] : tok) * ra.y_row : -1;
    return;
  }
  const int n = j < nt ? (ra.counts ? min(ra.counts[bj], kN) : ra.n) : 0;
  if (i == 0) nrows[j] = n;
  const int64_t k = int64_t(bj) * ra.idx_stride + i;
  xo[threadIdx.x] = i < n ? bj * a.x_stride + (ra.x_idx ? ra.x_idx[k] : i) * ra.x_row : -1;
  yo[threadIdx.x] = i < n ? bj * a.y_stride + (ra.y_idx ? ra.y_idx[k] : i) * ra.y_row : -1;
}

// acc[j][h][k] -> y: weight row r + 8 (k / 2) of entry j's row 8h + 2t + (k & 1), where both exist.
template <int G, class T>
__device__ __forceinline__ void store_rows(const T (&acc)[G][2][4], float* y, int64_t r, int64_t rows, int t, int nt,
                                           const int64_t* yo, const int* nrows) {
#pragma unroll
  for (int j = 0; j < G; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int i = 8 * h + 2 * t + (k & 1);
        const int64_t row = r + 8 * (k >> 1);
        if (j < nt && i < nrows[j] && row < rows) y[yo[j * kN + i] + row] = acc[j][h][k];
      }
}

// Two planes (RowsArgs::plane_off): MMA rows 8h + 2t (high) and 8h + 2t + 1 (low) of entry j
// are acc[j][h][0] / [1] (weight row r) and [2] / [3] (row r + 8): token 4h + t's output is
// their sum, high + low.
template <int G>
__device__ __forceinline__ void store_rows_planes(const float (&acc)[G][2][4], float* y, int64_t r, int64_t rows, int t,
                                                  int nt, const int64_t* yo, const int* nrows) {
#pragma unroll
  for (int j = 0; j < G; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int k = 0; k < 4; k += 2) {
        const int i = 8 * h + 2 * t;
        const int64_t row = r + 8 * (k >> 1);
        if (j < nt && i < nrows[j] && row < rows) y[yo[j * kN + i] + row] = __fadd_rn(acc[j][h][k], acc[j][h][k + 1]);
      }
}

// cp.async of `bytes` (4, 8 or 16) from global to shared; zeros when !valid (src then unread).
template <int kBytes>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(kBytes),
                 "r"(valid ? kBytes : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace ds4::cuda::grouped_mma_detail
