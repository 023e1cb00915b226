// grouped_mma_int8 (grouped_mma_int8.h). The block shape of grouped_mma_bf16: G entries (<= 16
// quantized x rows each) of ONE expert x 128 weight rows, 8 warps of 16 weight rows; K in tiles
// of 128 columns = 4 k-steps of mma.sync m16n8k32 (s8 x s8 -> s32).
//
// K order: a k-step is exactly 32 consecutive columns (one IQ2_XXS sub-block, one Q8_0 block,
// one Q2_K plane of a half super-block), because IQ2_XXS's per-32 scale (2s + 1, up to 31)
// does not fit an int8 weight: its k-step runs into zeroed accumulators and is scaled in int32
// before it joins the block sum. Q2_K's 4-bit scale folds into the weight (q * scale <= 45), so
// its k-steps accumulate in place. Quad lane t takes columns 8t .. 8t + 7 of a k-step for weight
// rows g and g + 8 (the A fragment: a0 / a1 = columns 8t .. + 3 of rows g / g + 8, a2 / a3 =
// 8t + 4 .. + 7), and the B fragment of x row g is its 8 bytes at the same columns (one 8-byte
// shared read): K slots 4t .. 4t + 3 <- columns 8t .., slots 16 + 4t .. <- 8t + 4 ...
// IQ2_XXS: lane t decodes grid entry t of the sub-block (8 weights: one byte permute per 4,
// gemv_act_formats.cuh's codes); Q2_K: quant bytes 32h + 8t .. + 7 serve all 4 planes of the
// half.
// f32 (ds4::dot_act's expressions, column order, __fmul_rn / __fadd_rn: no contraction):
//   Q8_0     acc += (d_w * d_x) * isum per 32-block
//   IQ2_XXS  acc += (d_w * d_x) * isum per 256-block, y = 0.125 * acc
//   Q2_K     acc += (d_x * d) * isum - (d_x * dmin) * summs per 256-block, summs = the mins
//            (high nibbles) dotted with the x row's bsums (dp2a, exact)
// x: int8 rows cp.async'd kStages - 1 tiles ahead into a shared ring with their scales (and Q2_K
// bsums); weight bytes in registers kAhead tiles ahead (per-lane loads of the bytes it decodes).
//
// Staged (Q2_K / IQ2_XXS; the default, grouped_mma_int8_set_staged(false) for the other): the per-lane weight
// loads above touch 8 rows' lines per warp instruction (~26 loads of 1-4 bytes per IQ2_XXS tile
// and thread: ~200 L1 wavefronts per warp and tile, ~2 us per tile at 16 warps per SM, the time
// the H200 showed for every format). Here a stage is one 256-column super-block: each block
// copies its 128 rows' super-blocks with coalesced 16-byte cp.async (the 16-byte window around
// each row's super-block, at any 2-byte offset) into a kSStages-deep shared ring together with
// the x rows, one barrier per stage; the lanes then read the same bytes from shared memory (rows
// at a pitch that puts a warp's 8 rows in different 4-bank bands: at most 2 rows per bank). Same
// bytes, same integer sums, same f32 expressions in the same order: the same bits as the
// unstaged kernel. Window arithmetic and staged reads: grouped_mma_int8_raw.cuh, checked on the
// host by test_grouped_mma_stage.
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/gemv_act_formats.cuh"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/grouped_mma_entries.cuh"
#include "backend/cuda/grouped_mma_int8.h"
#include "backend/cuda/grouped_mma_int8_raw.cuh"
#include "backend/cuda/iq2xxs_grid.h"
#include "backend/cuda/smem_opt_in.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

using gemv_act_detail::byte_perm;
using gemv_act_detail::iq2_grid_codes;
using gemv_act_detail::iq2_sign_codes;
using gemv_act_detail::kIq2Neg;
using gemv_act_detail::kIq2Pos;
using gemv_detail::Args;
using gemv_detail::f16_bits;
using gemv_detail::FromGlobal;
using gemv_detail::FromShared;
using namespace grouped_mma_detail;
using namespace grouped_mma_int8_detail;

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kTileRows = 16 * kWarps;
constexpr int kTileK = 128;  // columns per K tile: 4 k-steps of 32
constexpr int kG = kGroupedMmaMaxEntries;
constexpr int kStages = 3;
// x row pitch in shared memory: 160 bytes (40 words), so the 8-byte B reads of a half warp
// (rows g = 0..3 or 4..7, 4 quad lanes) hit 32 distinct banks.
constexpr int kXPitch = kTileK + 32;

__device__ const uint64_t d_grid8[256] = {DS4_IQ2XXS_GRID_VALUES};

struct XArgs {
  const int8_t* q;
  const float* d;
  const int16_t* bs;
};

// Weight tiles in flight per thread (registers: 24, 10, 18 words per tile). (Twice as many at one
// block per SM was slower on the H200: mmq-experts-h200-2026-12-04, "int8 deep".)
template <Fmt F>
constexpr int kAhead = F == Fmt::kQ2_K ? 4 : 2;
// Activation values per scale.
template <Fmt F>
constexpr int kBlock = F == Fmt::kQ8_0 ? 32 : 256;
// x scales per row and tile in the ring.
template <Fmt F>
constexpr int kDPerTile = F == Fmt::kQ8_0 ? 4 : 1;

struct Iq2Tables {
  uint32_t codes[256];
  uint32_t sign_codes[128];
};

__device__ __forceinline__ void mma_s8(int32_t (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <Fmt F, int G>
struct Ring {
  int8_t q[kStages][G * kN][kXPitch];
  float d[kStages][G * kN][kDPerTile<F>];
  int16_t bs[kStages][F == Fmt::kQ2_K ? G * kN : 1][8];  // Q2_K: the half's 8 bsums
};

// The A fragment of k-step s for this lane's rows g (h2 = 0) and g + 8 (h2 = 1): lo = columns
// 8t .. 8t + 3, hi = 8t + 4 .. 8t + 7 of the k-step; mul = IQ2_XXS's 2 * scale + 1.
template <Fmt F>
__device__ __forceinline__ void frag(const Raw<F>& r, int s, int t, const Iq2Tables& tb, uint32_t& lo, uint32_t& hi,
                                     int32_t& mul) {
  if constexpr (F == Fmt::kQ8_0) {
    lo = r.lo[s], hi = r.hi[s], mul = 1;
  } else if constexpr (F == Fmt::kQ2_K) {
    // group 8h + 2s + (t >= 2): byte 2s + (t >> 1) of the half's 8 scale bytes, low nibble
    const int bi = 2 * s + (t >> 1);
    const uint32_t sc = ((bi < 4 ? r.sc0 : r.sc1) >> (8 * (bi & 3))) & 0xfu;
    lo = ((r.q0 >> (2 * s)) & 0x03030303u) * sc;  // bytes <= 3 * 15: no carry between them
    hi = ((r.q1 >> (2 * s)) & 0x03030303u) * sc;
    mul = 1;
  } else {
    const uint32_t c = tb.codes[r.g[s]] | tb.sign_codes[(r.a1[s] >> (7 * t)) & 127u];
    lo = byte_perm(kIq2Pos, kIq2Neg, c);
    hi = byte_perm(kIq2Pos, kIq2Neg, c >> 16);
    mul = int32_t(2 * (r.a1[s] >> 28) + 1);
  }
}

// One K tile (4 k-steps of 32 columns) of this lane's weight rows (cur[0]: row g, cur[1]: row
// g + 8) times the block's entries' x rows, accumulated. x through shared memory: xq = the
// tile's first int8 column of entry row 0 (row i at xq + i * qp), xd = the scales (row i at
// xd + i * dp; Q8_0: one per k-step, the K-quants: the super-block's at [0]), xbs = Q2_K's 8
// bsums of this half (row i at xbs + i * bp, 16-byte aligned). `last`: the tile ends a 256-column
// super-block, whose term (K-quants) then joins acc.
template <Fmt F, int G>
__device__ __forceinline__ void tile_products(const Raw<F> (&cur)[2], int g, int t, int nt, const int* nrows,
                                              const int8_t* xq, int qp, const float* xd, int dp, const int16_t* xbs,
                                              int bp, bool last, const Iq2Tables& tables, float (&acc)[G][2][4],
                                              int32_t (&isum)[G][2][4], int32_t (&summs)[G][2][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    uint32_t lo[2], hi[2];
    int32_t mul[2];
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) frag<F>(cur[h2], s, t, tables, lo[h2], hi[h2], mul[h2]);
    const uint32_t af[4] = {lo[0], lo[1], hi[0], hi[1]};
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (j < nt && (h == 0 || nrows[j] > 8)) {
          const uint2 bv = *reinterpret_cast<const uint2*>(xq + (j * kN + 8 * h + g) * qp + 32 * s + 8 * t);
          if constexpr (F == Fmt::kQ2_K) {
            mma_s8(isum[j][h], af, bv.x, bv.y);
          } else {
            int32_t c[4] = {0, 0, 0, 0};
            mma_s8(c, af, bv.x, bv.y);
            if constexpr (F == Fmt::kIQ2_XXS) {
#pragma unroll
              for (int k = 0; k < 4; ++k) isum[j][h][k] += c[k] * mul[k >> 1];
            } else {  // Q8_0: the 32-block's term
#pragma unroll
              for (int k = 0; k < 4; ++k) {
                const float dx = xd[(j * kN + 8 * h + 2 * t + (k & 1)) * dp + s];
                const float dw = f16_bits(uint16_t(cur[k >> 1].d[s]));
                acc[j][h][k] = __fadd_rn(acc[j][h][k], __fmul_rn(__fmul_rn(dw, dx), __int2float_rn(c[k])));
              }
            }
          }
        }
  }
  if constexpr (F == Fmt::kQ2_K) {  // the half's mins: summs += sum_i min_i * bsum_i (8 groups)
    uint32_t mn[2][2];
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) mn[h2][0] = (cur[h2].sc0 >> 4) & 0x0f0f0f0fu, mn[h2][1] = (cur[h2].sc1 >> 4) & 0x0f0f0f0fu;
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (j < nt && (h == 0 || nrows[j] > 8)) {
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const uint4 bs = *reinterpret_cast<const uint4*>(xbs + (j * kN + 8 * h + 2 * t + (k & 1)) * bp);
            int32_t v = summs[j][h][k];
            v = __dp2a_lo(int(bs.x), int(mn[k >> 1][0]), v);
            v = __dp2a_hi(int(bs.y), int(mn[k >> 1][0]), v);
            v = __dp2a_lo(int(bs.z), int(mn[k >> 1][1]), v);
            v = __dp2a_hi(int(bs.w), int(mn[k >> 1][1]), v);
            summs[j][h][k] = v;
          }
        }
  }
  if constexpr (F != Fmt::kQ8_0) {
    if (last) {  // the super-block's term
#pragma unroll
      for (int j = 0; j < G; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const float dx = xd[(j * kN + 8 * h + 2 * t + (k & 1)) * dp];
            if constexpr (F == Fmt::kIQ2_XXS) {
              const float dw = f16_bits(uint16_t(cur[k >> 1].d));
              acc[j][h][k] = __fadd_rn(acc[j][h][k], __fmul_rn(__fmul_rn(dw, dx), __int2float_rn(isum[j][h][k])));
            } else {
              const uint32_t dm = cur[k >> 1].dm;
              const float dall = __fmul_rn(dx, f16_bits(uint16_t(dm & 0xffffu)));
              const float dmin = __fmul_rn(dx, f16_bits(uint16_t(dm >> 16)));
              const float term = __fsub_rn(__fmul_rn(dall, __int2float_rn(isum[j][h][k])),
                                           __fmul_rn(dmin, __int2float_rn(summs[j][h][k])));
              acc[j][h][k] = __fadd_rn(acc[j][h][k], term);
              summs[j][h][k] = 0;
            }
            isum[j][h][k] = 0;
          }
    }
  }
}

template <int G>
__device__ __forceinline__ void zero_sums(float (&acc)[G][2][4], int32_t (&isum)[G][2][4], int32_t (&summs)[G][2][4]) {
#pragma unroll
  for (int j = 0; j < G; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[j][h][k] = 0.f, isum[j][h][k] = 0, summs[j][h][k] = 0;
}

// IQ2_XXS's decode tables in shared memory (the caller syncs).
template <Fmt F>
__device__ __forceinline__ void init_tables(Iq2Tables& tables) {
  if constexpr (F == Fmt::kIQ2_XXS) {
    for (int i = int(threadIdx.x); i < 256; i += kThreads) tables.codes[i] = iq2_grid_codes(d_grid8[i]);
    for (int i = int(threadIdx.x); i < 128; i += kThreads) tables.sign_codes[i] = iq2_sign_codes(uint32_t(i));
  }
}

// ds4's IQ2_XXS row value is 0.125 * its sum; then the accumulators to y.
template <Fmt F, int G>
__device__ __forceinline__ void finish_rows(float (&acc)[G][2][4], float* y, int64_t r, int64_t rows, int t, int nt,
                                            const int64_t* yo, const int* nrows, bool planes) {
  if constexpr (F == Fmt::kIQ2_XXS) {
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[j][h][k] = __fmul_rn(0.125f, acc[j][h][k]);
  }
  if (planes) store_rows_planes<G>(acc, y, r, rows, t, nt, yo, nrows);
  else store_rows<G>(acc, y, r, rows, t, nt, yo, nrows);
}

template <Fmt F, int G>
__global__ void __launch_bounds__(kThreads, G > 2 ? 1 : 2)
    grouped_mma_int8_kernel(Args a, RowsArgs ra, XArgs x, float* __restrict__ y) {
  constexpr int D = kAhead<F>, BV = kBlock<F>;
  const int b = int(blockIdx.y);
  const int nt = block_entries<G>(a, ra, b);  // this block's entries (0: none)
  if (nt == 0) return;
  a.data += entry_weight(a, ra, b) * a.id_stride;
  __shared__ __align__(16) Ring<F, G> ring;
  __shared__ int64_t xo[G * kN], yo[G * kN];
  __shared__ int nrows[G];
  __shared__ Iq2Tables tables;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int64_t r = int64_t(blockIdx.x) * kTileRows + 16 * warp + g;
  const uint8_t* wrow[2];
#pragma unroll
  for (int h2 = 0; h2 < 2; ++h2)  // a partial last row tile reads the last row again and never writes it
    wrow[h2] = a.data + min(r + 8 * h2, a.rows - 1) * a.row_stride;
  const int tiles = int(a.cols / kTileK);
  Raw<F> raw[D][2];
#pragma unroll
  for (int s = 0; s < D; ++s)
    if (s < tiles) raw[s][0].load(wrow[0], s, t), raw[s][1].load(wrow[1], s, t);
  init_tables<F>(tables);
  entry_rows<G>(a, ra, b, nt, xo, yo, nrows);
  __syncthreads();
  // tile kt's x rows (int8), their scales and (Q2_K) the half's bsums into stage st; one commit
  // group per tile, empty past the end
  auto issue_x = [&](int kt, int st) {
    if (kt < tiles) {
      constexpr int kQ = G * kN * (kTileK / 16), kD = G * kN * kDPerTile<F>, kS = F == Fmt::kQ2_K ? G * kN * 4 : 0;
      for (int q = int(threadIdx.x); q < kQ + kD + kS; q += kThreads) {
        if (q < kQ) {
          const int i = q / (kTileK / 16), c = 16 * (q % (kTileK / 16));
          const int64_t o = xo[i];
          cp_async<16>(&ring.q[st][i][c], o >= 0 ? x.q + o + int64_t(kt) * kTileK + c : x.q, o >= 0);
        } else if (q < kQ + kD) {
          const int i = (q - kQ) / kDPerTile<F>, c = (q - kQ) % kDPerTile<F>;
          const int64_t o = xo[i];
          const int64_t blk = (int64_t(kt) * kTileK) / BV + c;
          cp_async<4>(&ring.d[st][i][c], o >= 0 ? x.d + o / BV + blk : x.d, o >= 0);
        } else {
          const int i = (q - kQ - kD) / 4, c = 2 * ((q - kQ - kD) % 4);
          const int64_t o = xo[i];
          cp_async<4>(&ring.bs[st][i][c], o >= 0 ? x.bs + o / 16 + int64_t(kt) * 8 + c : x.bs, o >= 0);
        }
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) issue_x(st, st);
  float acc[G][2][4];
  int32_t isum[G][2][4], summs[G][2][4];
  zero_sums<G>(acc, isum, summs);
  for (int kt0 = 0; kt0 < tiles; kt0 += D) {
#pragma unroll
    for (int sd = 0; sd < D; ++sd) {
      const int kt = kt0 + sd;
      if (kt < tiles) {  // block-uniform
        const int st = kt % kStages;
        cp_async_wait<kStages - 2>();  // tile kt's x landed (this thread's copies; the barrier: everyone's),
        __syncthreads();               // and the stage read in tile kt - 1 is free for tile kt + kStages - 1
        issue_x(kt + kStages - 1, (kt + kStages - 1) % kStages);
        const Raw<F> cur[2] = {raw[sd][0], raw[sd][1]};
        if (kt + D < tiles) raw[sd][0].load(wrow[0], kt + D, t), raw[sd][1].load(wrow[1], kt + D, t);
        tile_products<F, G>(cur, g, t, nt, nrows, &ring.q[st][0][0], kXPitch, &ring.d[st][0][0], kDPerTile<F>,
                            &ring.bs[st][0][0], 8, (kt & 1) != 0, tables, acc, isum, summs);
      }
    }
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the block exits
  finish_rows<F, G>(acc, y, r, a.rows, t, nt, yo, nrows, ra.plane_off > 0);
}

// The staged kernel's shared ring (dynamic shared memory), one 256-column super-block per stage:
// the block's 128 weight rows (each row's super-block inside the 16-byte window around it, at the
// row's offset mod 16), the entries' int8 x rows, their scales and (Q2_K) their 16 bsums.
// Q8_0's 272-byte rows take 3 stages (4 would be ~221 KiB at G = 4: over what fits beside the rest).
// kOcc2 (two blocks per SM at 4 entries, IQ2_XXS / Q2_K only): 3 stages, so two rings fit an SM
// (IQ2_XXS 2 x 87 KB, Q2_K 2 x 105 KB; 4 stages would be 2 x 116 / 2 x 140 KB).
template <Fmt F, bool kOcc2 = false>
constexpr int kSStages = F == Fmt::kQ8_0 || kOcc2 ? 3 : 4;
constexpr int kXPitchS = 256 + 32;  // 72 words: a half warp's 8-byte B reads hit 32 banks
// x scales per row and stage: Q8_0's 8 blocks, the K-quants' one super-block.
template <Fmt F>
constexpr int kDPerStage = F == Fmt::kQ8_0 ? 8 : 1;
template <Fmt F, int G, bool kOcc2 = false>
struct StagedRing {
  static constexpr int S = kSStages<F, kOcc2>;
  uint8_t w[S][kTileRows][kWPitch<F>];
  int8_t q[S][G * kN][kXPitchS];
  float d[S][G * kN][kDPerStage<F>];
  int16_t bs[S][F == Fmt::kQ2_K ? G * kN : 1][16];
};

// Blocks per SM the compiler must allow (registers): 2 up to 2 entries; at 4 entries 1, or 2
// with kOcc2 (<= 128 registers: spills where the 4-entry sums need more).
template <int G, bool kOcc2>
constexpr int kStagedMinBlocks = G > 2 && !kOcc2 ? 1 : 2;

template <Fmt F, int G, bool kOcc2 = false>
__global__ void __launch_bounds__(kThreads, kStagedMinBlocks<G, kOcc2>)
    grouped_mma_int8_staged_kernel(Args a, RowsArgs ra, XArgs x, float* __restrict__ y) {
  constexpr int SB = kSuperBytes<F>, NC = kWChunks<F>, S = kSStages<F, kOcc2>, DS = kDPerStage<F>;
  const int b = int(blockIdx.y);
  const int nt = block_entries<G>(a, ra, b);  // this block's entries (0: none)
  if (nt == 0) return;
  a.data += entry_weight(a, ra, b) * a.id_stride;
  extern __shared__ __align__(16) unsigned char smem[];
  StagedRing<F, G, kOcc2>& ring = *reinterpret_cast<StagedRing<F, G, kOcc2>*>(smem);
  __shared__ int64_t xo[G * kN], yo[G * kN];
  __shared__ int nrows[G];
  __shared__ Iq2Tables tables;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int64_t row0 = int64_t(blockIdx.x) * kTileRows, r = row0 + 16 * warp + g;
  const int stages = int(a.cols / 256);
  init_tables<F>(tables);
  entry_rows<G>(a, ra, b, nt, xo, yo, nrows);
  __syncthreads();
  // Super-block ks of the block's rows (rows past the matrix: its last row again, never written)
  // and of the entries' x rows into stage st; one commit group per stage, empty past the end.
  auto issue = [&](int ks, int st) {
    if (ks < stages) {
      for (int q = int(threadIdx.x); q < kTileRows * NC; q += kThreads) {
        const int i = q / NC, c = q % NC;
        const uint8_t* p = a.data + min(row0 + i, a.rows - 1) * a.row_stride + int64_t(ks) * SB;
        const int off = window_offset(p);
        cp_async<16>(&ring.w[st][i][16 * c], p - off + 16 * c, window_chunk_live<F>(c, off));
      }
      constexpr int kQ = G * kN * 16, kD = G * kN * DS, kS = F == Fmt::kQ2_K ? G * kN * 8 : 0;
      for (int q = int(threadIdx.x); q < kQ + kD + kS; q += kThreads) {
        if (q < kQ) {
          const int i = q / 16, c = 16 * (q % 16);
          const int64_t o = xo[i];
          cp_async<16>(&ring.q[st][i][c], o >= 0 ? x.q + o + int64_t(ks) * 256 + c : x.q, o >= 0);
        } else if (q < kQ + kD) {  // (Q8_0: the stage's 8 block scales of row i)
          const int i = (q - kQ) / DS, c = (q - kQ) % DS;
          const int64_t o = xo[i];
          cp_async<4>(&ring.d[st][i][c], o >= 0 ? x.d + o / (256 / DS) + int64_t(ks) * DS + c : x.d, o >= 0);
        } else {
          const int i = (q - kQ - kD) / 8, c = 2 * ((q - kQ - kD) % 8);
          const int64_t o = xo[i];
          cp_async<4>(&ring.bs[st][i][c], o >= 0 ? x.bs + o / 16 + int64_t(ks) * 16 + c : x.bs, o >= 0);
        }
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int st = 0; st < S - 1; ++st) issue(st, st);
  // this lane's rows' offsets mod 16 (their super-block ks sits at (off + ks SB) mod 16 in its window)
  int off[2];
#pragma unroll
  for (int h2 = 0; h2 < 2; ++h2)
    off[h2] = window_offset(a.data + min(r + 8 * h2, a.rows - 1) * a.row_stride);
  float acc[G][2][4];
  int32_t isum[G][2][4], summs[G][2][4];
  zero_sums<G>(acc, isum, summs);
  for (int ks = 0; ks < stages; ++ks) {
    const int st = ks % S;
    cp_async_wait<S - 2>();  // stage ks landed (this thread's copies; the barrier: everyone's),
    __syncthreads();         // and the stage read in ks - 1 is free for ks + S - 1
    issue(ks + S - 1, (ks + S - 1) % S);
    const uint8_t* sb[2];
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) sb[h2] = &ring.w[st][16 * warp + g + 8 * h2][window_shift<F>(off[h2], ks)];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      Raw<F> cur[2];
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2) cur[h2].template load_half<FromShared>(sb[h2], h, t);
      tile_products<F, G>(cur, g, t, nt, nrows, &ring.q[st][0][128 * h], kXPitchS, &ring.d[st][0][DS == 8 ? 4 * h : 0],
                          DS, &ring.bs[st][0][8 * h], 16, h == 1, tables, acc, isum, summs);
    }
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the block exits
  finish_rows<F, G>(acc, y, r, a.rows, t, nt, yo, nrows, ra.plane_off > 0);
}

// The staged kernel: DS4_GROUPED_MMA_INT8_STAGED (0 or 1; unset = 1) or grouped_mma_int8_set_staged.
std::atomic<int> g_staged{-1};
bool staged() { return env_setting(g_staged, "DS4_GROUPED_MMA_INT8_STAGED", {0, 1}, "0 or 1", 1) == 1; }

// Two blocks per SM for the staged kernel at 4 entries (IQ2_XXS / Q2_K): DS4_GROUPED_MMA_INT8_OCC
// (1 or 2; unset = 2) or grouped_mma_int8_set_occupancy; the same bits either way. H100, 30-layer
// synthetic Flash in 2048-row chunks (4 entries per block), same binaries: 2K / 8K prefill 4782.2 /
// 4616.0 tok/s with one block per SM, 5502.3 / 5282.3 with two (bench/results/session28-2026-12-06 call 2).
std::atomic<int> g_occ{-1};
int occupancy() { return env_setting(g_occ, "DS4_GROUPED_MMA_INT8_OCC", {1, 2}, "1 or 2", 2); }

// The staged ring is over the 48 KiB default: opt in (once per kernel and device).
template <Fmt F, int G, bool kOcc2>
size_t staged_smem() {
  constexpr size_t n = sizeof(StagedRing<F, G, kOcc2>);
  opt_in_smem_once<grouped_mma_int8_staged_kernel<F, G, kOcc2>>(n);
  return n;
}

// Whether a launch on this weight takes the staged kernel: Q2_K / IQ2_XXS from a 16-byte aligned
// start (the windows never begin before it; Q2_K's 84-byte super-blocks then keep its rows 4-byte
// aligned for its 4-byte loads); Q8_0 with cols a multiple of 256 (rows of 272-byte multiples:
// every row and stage stays 16-byte aligned, no window shift).
bool stages(const WeightMatrix& w) {
  if (!staged() || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return false;
  if (w.type == DType::Q8_0) return w.cols % 256 == 0;  // (272-byte multiples per row)
  return w.type == DType::IQ2_XXS || w.type == DType::Q2_K;
}

template <Fmt F, int G>
void launch_g(const Args& a, const RowsArgs& ra, const XArgs& x, float* y, unsigned batch, bool staged_launch,
              cudaStream_t s) {
  const dim3 blocks(unsigned((a.rows + kTileRows - 1) / kTileRows), batch);
  // Staging copies the 16-byte windows around the rows' super-blocks (grouped_mma_int8_raw.cuh):
  // from a 16-byte aligned matrix start they never begin before it, and end at most 14 bytes past
  // it (kDeviceReadSlack). The caller decided (stages()).
  if (staged_launch) {
    if constexpr (G > 2 && F != Fmt::kQ8_0) {  // (Q8_0's 272-byte rows: two 3-stage rings do not fit)
      if (occupancy() == 2) {
        grouped_mma_int8_staged_kernel<F, G, true><<<blocks, kThreads, staged_smem<F, G, true>(), s>>>(a, ra, x, y);
        DS4_CUDA_CHECK_LAUNCH();
        return;
      }
    }
    grouped_mma_int8_staged_kernel<F, G, false><<<blocks, kThreads, staged_smem<F, G, false>(), s>>>(a, ra, x, y);
    DS4_CUDA_CHECK_LAUNCH();
    return;
  }
  grouped_mma_int8_kernel<F, G><<<blocks, kThreads, 0, s>>>(a, ra, x, y);
  DS4_CUDA_CHECK_LAUNCH();
}

template <Fmt F>
void launch(const Args& a, const RowsArgs& ra, const XArgs& x, float* y, unsigned batch, int64_t rows_per_expert,
            bool staged_launch, cudaStream_t s) {
  const int g = entries_for(grouped_mma_entries_per_block(), rows_per_expert, kG);
  if (g == kG) launch_g<F, kG>(a, ra, x, y, batch, staged_launch, s);
  else if (g == 2) launch_g<F, 2>(a, ra, x, y, batch, staged_launch, s);
  else launch_g<F, 1>(a, ra, x, y, batch, staged_launch, s);
}

}  // namespace

void grouped_mma_int8_set_staged(bool on) { g_staged.store(on ? 1 : 0, std::memory_order_relaxed); }
void grouped_mma_int8_set_occupancy(int blocks_per_sm) {
  if (blocks_per_sm != 1 && blocks_per_sm != 2)
    throw InputError("grouped_mma_int8_set_occupancy: " + std::to_string(blocks_per_sm) + " (1 or 2)");
  g_occ.store(blocks_per_sm, std::memory_order_relaxed);
}
int grouped_mma_int8_occupancy() { return occupancy(); }
bool grouped_mma_int8_staged() { return staged(); }
bool grouped_mma_int8_stages(const WeightMatrix& w) { return stages(w); }

bool grouped_mma_int8_supports(const WeightMatrix& w) {
  if (w.rows < 1 || !w.data) return false;
  if (w.type == DType::Q8_0) return w.cols % kTileK == 0;
  return (w.type == DType::Q2_K || w.type == DType::IQ2_XXS) && w.cols % 256 == 0;
}

namespace {

// The weight and activation checks both entry points make.
void check_operands(const WeightMatrix& w, const ActQ8View& x, const std::string& what) {
  if (!grouped_mma_int8_supports(w))
    throw InputError(what + std::string(dtype_name(w.type)) + " " + std::to_string(w.rows) + "x" +
                     std::to_string(w.cols) + " (Q8_0 with cols a multiple of 128, Q2_K / IQ2_XXS of 256)");
  if (x.block != act_block_for(w.type) || x.n != w.cols)
    throw InputError(what + "activation blocks or length (" + std::to_string(x.n) + ") do not match the " +
                     std::string(dtype_name(w.type)) + " weight");
  if (!x.q || !x.d || (x.block == ActBlock::kQ8_K && !x.bsums) || reinterpret_cast<uintptr_t>(x.q) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(x.d) % 4 != 0 || reinterpret_cast<uintptr_t>(x.bsums) % 4 != 0)
    throw InputError(what + "activation pointers missing or misaligned (q 16 bytes, d and bsums 4)");
}

// A row or group step of x in values: a multiple of the activation block and of 16 (the int8 rows'
// 16-byte copies), not negative.
bool x_step_ok(int64_t v, int64_t bv) { return v >= 0 && v % bv == 0 && v % 16 == 0; }

void launch_format(const WeightMatrix& w, const Args& a, const RowsArgs& ra, const XArgs& xa, float* y, unsigned batch,
                   int64_t rows_per_expert, cudaStream_t s) {
  // Every entry's matrix must keep stages()'s alignment too: Q8_0's unshifted windows need 16-byte
  // starts, Q2_K's 4-byte loads 4 (the experts' and groups' strides are whole aligned matrices today).
  const int64_t need = w.type == DType::Q8_0 ? 16 : w.type == DType::Q2_K ? 4 : 2;
  const bool st = stages(w) && a.id_stride % need == 0;
  switch (w.type) {
    case DType::Q8_0: return launch<Fmt::kQ8_0>(a, ra, xa, y, batch, rows_per_expert, st, s);
    case DType::Q2_K: return launch<Fmt::kQ2_K>(a, ra, xa, y, batch, rows_per_expert, st, s);
    default: return launch<Fmt::kIQ2_XXS>(a, ra, xa, y, batch, rows_per_expert, st, s);
  }
}

// grouped_mma_int8 (planes = 1) and grouped_mma_int8_planes (2: at most kN / 2 input rows per entry).
void routed(const WeightMatrix& w, const ActQ8View& x, float* y, const GemvRows& r, cudaStream_t s,
            int64_t rows_per_expert, int planes, const std::string& what) {
  check_operands(w, x, what);
  const int64_t bv = act_values_per_scale(x.block);
  // planes: entries of at most 8 rows, so a stride of 8 (counts past 8 would be dropped silently)
  const bool stride_ok = r.idx_stride == kGemvMaxRows / planes;
  if (r.n < 1 || r.n > kGemvMaxRows / planes || !stride_ok || r.batch.count < 1 ||
      r.batch.count > 65535 || !x_step_ok(r.x_row, bv) || !x_step_ok(r.batch.x_stride, bv) || r.x_row < planes * x.n)
    throw InputError(what + "n " + std::to_string(r.n) + " (at most " + std::to_string(kGemvMaxRows / planes) +
                     "), count " + std::to_string(r.batch.count) + ", idx_stride " + std::to_string(r.idx_stride) +
                     (planes == 2 ? " (takes 8)" : " (takes 16)") + ", x_row " + std::to_string(r.x_row) + " or x stride " +
                     std::to_string(r.batch.x_stride) + " (x_row and x stride: multiples of the activation block " +
                     "and of 16; x_row >= " + std::to_string(planes) + " rows of the weight's width)");
  Args a{static_cast<const uint8_t*>(w.data), w.row_stride_bytes(), nullptr, nullptr, 0, 0, w.rows, w.cols,
         r.batch.ids, int64_t(r.batch.id_stride), 0, r.batch.x_stride, r.batch.y_stride};
  RowsArgs ra{r.n, r.x_row, r.y_row, r.live, r.counts, r.x_idx, r.y_idx};
  if (planes == 2) ra.plane_off = x.n;
  ra.idx_stride = int(r.idx_stride);
  launch_format(w, a, ra, XArgs{x.q, x.d, x.bsums}, y, unsigned(r.batch.count), planes * rows_per_expert, s);
}

}  // namespace

void grouped_mma_int8(const WeightMatrix& w, const ActQ8View& x, float* y, const GemvRows& r, cudaStream_t s,
                      int64_t rows_per_expert) {
  routed(w, x, y, r, s, rows_per_expert, 1, "cuda grouped_mma_int8: ");
}

void grouped_mma_int8_planes(const WeightMatrix& w, const ActQ8View& x, float* y, const GemvRows& r, cudaStream_t s,
                             int64_t rows_per_expert) {
  const std::string what = "cuda grouped_mma_int8_planes: ";
  if (w.type != DType::Q2_K && w.type != DType::IQ2_XXS)
    throw InputError(what + std::string(dtype_name(w.type)) + " weights (the planes are Q8_K: Q2_K / IQ2_XXS)");
  routed(w, x, y, r, s, rows_per_expert, 2, what);
}

void grouped_mma_int8_dense(const WeightMatrix& w, const ActQ8View& x, int64_t x_row, float* y, int64_t y_row, int64_t n,
                            const DenseGroups& groups, cudaStream_t s) {
  const std::string what = "cuda grouped_mma_int8_dense: ";
  check_operands(w, x, what);
  const int64_t bv = act_values_per_scale(x.block), slices = (n + kN - 1) / kN;
  if (n < 1 || groups.count < 1 || slices * groups.count > 65535 || !x_step_ok(x_row, bv) ||
      !x_step_ok(groups.x_stride, bv) || y_row < 0 || groups.y_stride < 0 || !y)
    throw InputError(what + std::to_string(n) + " rows x " + std::to_string(groups.count) +
                     " groups (at most 65535 slices of 16 rows), x_row " + std::to_string(x_row) + " or x stride " +
                     std::to_string(groups.x_stride) + " (multiples of the activation block and of 16), y_row " +
                     std::to_string(y_row) + " or y stride " + std::to_string(groups.y_stride));
  Args a{static_cast<const uint8_t*>(w.data), w.row_stride_bytes(), nullptr, nullptr, 0, 0, w.rows, w.cols,
         nullptr, int64_t(groups.w_stride), 0, groups.x_stride, groups.y_stride};
  RowsArgs ra{kN, x_row, y_row, nullptr, nullptr, nullptr, nullptr};
  ra.dense_rows = n;
  ra.dense_entries = int(slices);
  launch_format(w, a, ra, XArgs{x.q, x.d, x.bsums}, y, unsigned(slices * groups.count), n, s);
}

}  // namespace ds4::cuda
