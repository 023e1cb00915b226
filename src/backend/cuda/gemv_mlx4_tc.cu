// gemv_mlx4_tc.h's kernel. A block owns 16 weight rows (one m16 tile); its kWarps warps split the
// rows' groups of 64 columns (warp w: groups w, w + kWarps, ...) and add their sums in warp order.
// Lane l = 4 g + t holds rows g and g + 8: per group, bytes 8t .. 8t + 7 of each row (16 weights,
// one 8-byte load) feed the A fragments of the group's four k16 MMAs. The fragment's k order is
// the load's, not the columns': MMA j's k = 2t, 2t + 1 take the nibble pair (q, q + 4) of word
// j / 2 with q = 2 (j % 2) (one shift, one LOP3 making two BF16 integers 128 + n, one HSUB2), and
// k = 2t + 8, 2t + 9 the pair q + 1; B follows the same order (pair_column). B's columns 0, 1, 2
// are the three BF16 parts of x (split_bf16x3: exact), the other five zero, so C's columns 0-2
// are sum(q x_i) per row, exactly multiplied, FP32 accumulated: lane t = 0 holds columns 0 and 1,
// t = 1 column 2. Each warp stages its groups' B fragments (the parts at their permuted slots) and
// sum(x) per group in shared memory once, after the PDL wait; the first kAhead groups' weights
// are loaded before it.
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/gemv_mlx4_tc.h"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

using gemv_detail::pdl_launch_dependents;
using gemv_detail::pdl_wait;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kRows = 16;         // one m16 tile of weight rows per block
constexpr int kGroup = 64;        // MLX group: four k16 steps
constexpr int kAheadRows = 4;     // groups x tiles a warp has in flight at once
constexpr int kParts = 3;         // x = x0 + x1 + x2, BF16 each
constexpr int kXWords = kParts * 32;  // a group's B registers: parts x 4 t x 8 (MMA j: 2j, 2j + 1)

struct TcArgs {
  const uint8_t* data;
  const uint8_t* scales;
  const uint8_t* biases;
  int64_t rows, row_bytes, groups;  // groups of 64 per row
  const int32_t* ids;
  size_t id_stride, id_scale_stride;
  int64_t x_stride, y_stride;
  int per_warp;  // groups per warp at most (the shared-memory slots of each warp)
};

// The column inside a group (0..63) of lane t's pair register q (0..7), half h (0 low, 1 high):
// the lane's 8 bytes are columns 16t .. 16t + 15, two 4-byte words of 8 nibbles (element k of a
// word at bits 4k, as MLX packs); pair q takes nibbles (q % 4) and (q % 4) + 4 of word q / 4.
__host__ __device__ constexpr int pair_column(int t, int q, int h) { return 16 * t + 8 * (q / 4) + (q % 4) + 4 * h; }

// Two BF16 integers n, m from the nibbles at bits s and s + 16 of w: (128 + n) - 128, exact.
__device__ __forceinline__ uint32_t nibble_pair(uint32_t w, int s) {
  uint32_t v = ((w >> s) & 0x000F000Fu) | 0x43004300u;
  __nv_bfloat162 b, k;
  *reinterpret_cast<uint32_t*>(&b) = v;
  *reinterpret_cast<uint32_t*>(&k) = 0x43004300u;
  b = __hsub2(b, k);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// x = p[0] + p[1] + p[2] exactly (each part rounds the rest to 8 mantissa bits; for |x| above
// ~2^-110 nothing is lost).
__device__ __forceinline__ void split_bf16x3(float x, __nv_bfloat16 (&p)[kParts]) {
  p[0] = __float2bfloat16_rn(x);
  const float r1 = x - __bfloat162float(p[0]);
  p[1] = __float2bfloat16_rn(r1);
  p[2] = __float2bfloat16_rn(r1 - __bfloat162float(p[1]));
}

template <bool kBf16>
__device__ __forceinline__ float scale_value(uint16_t h) {
  return kBf16 ? __uint_as_float(uint32_t(h) << 16) : __half2float(__ushort_as_half(h));
}

// One group's loads for a lane: its 8 bytes of rows g and g + 8 of each tile, their scales and biases.
template <int kTiles>
struct GroupLoad {
  uint2 a[kTiles], b[kTiles];
  uint16_t sa[kTiles], sb[kTiles], ba[kTiles], bb[kTiles];
};

extern __shared__ uint4 mlx4_tc_smem[];

// Splits of x staged in the warps' shared-memory slots. An item is one group (64 columns) of one
// x row: its parts at their B-fragment slots (96 words: part pi, lane t, pair register q, half h at
// 2 ((pi 4 + t) 8 + q) + h bf16s; lane l splits columns l and l + 32) and its sum(x) (every lane
// gets it, lane 0 stores it). Both kernels stage through stage_items, so their parts and sums are
// the same bits.
struct StageItem {
  const float* x;         // the group's 64 columns
  __nv_bfloat16* slots;   // its 96 slot words
  float* sum;             // where lane 0 puts sum(x)
};

// Up to kStageBatch items at a time: every lane's loads of all of them issued before the first
// split, their sums' butterflies interleaved. (One item after another, a warp with 16 groups waited
// 16 chains of a dependent load and five shuffles before its first MMA: by reasoning, not measured,
// what kept the tc kernel at 0.2-0.5x of gemv on 4096-column rows in session 31.) Per item the
// same expressions as the one-at-a-time staging it
// replaces: s = (0 + x[l]) + x[l + 32], then the xor butterfly 16 .. 1, so the same bits.
constexpr int kStageBatch = 8;
template <class Item>
__device__ __forceinline__ void stage_items(int count, int lane, Item&& item) {
  for (int k0 = 0; k0 < count; k0 += kStageBatch) {
    float v[kStageBatch][2];
#pragma unroll
    for (int u = 0; u < kStageBatch; ++u) {
      v[u][0] = v[u][1] = 0.f;
      if (k0 + u < count) {
        const float* xg = item(k0 + u).x;
        v[u][0] = xg[lane], v[u][1] = xg[lane + 32];  // PDL: input loads (plain, after the wait)
      }
    }
    float s[kStageBatch];
#pragma unroll
    for (int u = 0; u < kStageBatch; ++u) {
      s[u] = 0.f + v[u][0];
      s[u] += v[u][1];
      if (k0 + u >= count) continue;
      __nv_bfloat16* slots = item(k0 + u).slots;
#pragma unroll
      for (int hlf = 0; hlf < 2; ++hlf) {
        const int c = lane + 32 * hlf;  // column in the group
        __nv_bfloat16 part[kParts];
        split_bf16x3(v[u][hlf], part);
        const int ct = c / 16, cc = c % 16;  // lane t = ct, pair q, half h with pair_column(ct, q, h) = c
        const int q = (cc / 8) * 4 + cc % 4, h = (cc % 8) / 4;
#pragma unroll
        for (int pi = 0; pi < kParts; ++pi) slots[2 * ((pi * 4 + ct) * 8 + q) + h] = part[pi];
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int u = 0; u < kStageBatch; ++u) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
    if (lane == 0) {
#pragma unroll
      for (int u = 0; u < kStageBatch; ++u)
        if (k0 + u < count) *item(k0 + u).sum = s[u];
    }
  }
}

// One group's products for kTiles row tiles and np <= kP n8 tiles of B (x rows 2 p in columns
// 0-2, 2 p + 1 in columns 4-6): the four k16 MMAs of each (tile, B tile) from zero, then
// acc += scale * (c0 + c1) and bias * xs[p] (xs: the group's sum(x) of the lane's row on t = 0
// and t = 2, else 0). Lanes t = 0, 1 hold x row 2 p's columns (0, 1) and (2, 3), lanes t = 2, 3
// row 2 p + 1's (4, 5) and (6, 7): the same operations for a row in either slot, so a row's sums
// do not depend on the rows beside it (an MMA's output column depends only on its own B column).
template <bool kBf16, int kTiles, int kP>
__device__ __forceinline__ void group_products(const GroupLoad<kTiles>& l, const uint32_t (&bx)[kP][8],
                                               const float (&xs)[kP], int np, float (&acc_a)[kTiles][kP],
                                               float (&acc_b)[kTiles][kP]) {
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    uint32_t af[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t word_a = j < 2 ? l.a[i].x : l.a[i].y, word_b = j < 2 ? l.b[i].x : l.b[i].y;
      const int s0 = 4 * (2 * (j % 2));  // pair q = 2j: nibble (q % 4); pair 2j + 1: the next
      af[j][0] = nibble_pair(word_a, s0), af[j][1] = nibble_pair(word_b, s0);
      af[j][2] = nibble_pair(word_a, s0 + 4), af[j][3] = nibble_pair(word_b, s0 + 4);
    }
    const float sa = scale_value<kBf16>(l.sa[i]), sb = scale_value<kBf16>(l.sb[i]);
    const float ba = scale_value<kBf16>(l.ba[i]), bb = scale_value<kBf16>(l.bb[i]);
#pragma unroll
    for (int pp = 0; pp < kP; ++pp) {
      if (pp >= np) break;
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int j = 0; j < 4; ++j) mma::mma_bf16(c, af[j], bx[pp][2 * j], bx[pp][2 * j + 1]);
      acc_a[i][pp] = fmaf(sa, c[0] + c[1], acc_a[i][pp]);
      acc_b[i][pp] = fmaf(sb, c[2] + c[3], acc_b[i][pp]);
      acc_a[i][pp] = fmaf(ba, xs[pp], acc_a[i][pp]);
      acc_b[i][pp] = fmaf(bb, xs[pp], acc_b[i][pp]);
    }
  }
}

// The pair of a lane's accumulators summed (t = 0 + 1: x row 2 p; t = 2 + 3: row 2 p + 1).
__device__ __forceinline__ float pair_sum(float v) { return v + __shfl_xor_sync(0xffffffffu, v, 1); }

// The entry of a batch launch (blockIdx.y = b): expert ids[b] (or b) for the weights; returns b.
__device__ __forceinline__ int64_t enter_entry(TcArgs& a) {
  const int64_t b = blockIdx.y;
  const int64_t e = a.ids ? a.ids[b] : b;  // PDL: input load
  a.data += e * a.id_stride;
  a.scales += e * a.id_scale_stride;
  a.biases += e * a.id_scale_stride;
  return b;
}

// A lane's weight rows: rows g and g + 8 of each of the block's kTiles m16 tiles (clamped to the
// last row: their sums are computed and dropped), and one group's loads of them.
template <int kTiles>
struct TileRows {
  int64_t ra[kTiles], rb[kTiles];
  const uint8_t *wa[kTiles], *wb[kTiles];
  const unsigned short *sc, *bi;
  int64_t groups;
  __device__ __forceinline__ TileRows(const TcArgs& p, int64_t row0, int g, int t)
      : sc(reinterpret_cast<const unsigned short*>(p.scales)), bi(reinterpret_cast<const unsigned short*>(p.biases)),
        groups(p.groups) {
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
      ra[i] = min(row0 + kRows * i + g, p.rows - 1), rb[i] = min(row0 + kRows * i + g + 8, p.rows - 1);
      wa[i] = p.data + ra[i] * p.row_bytes + 8 * t, wb[i] = p.data + rb[i] * p.row_bytes + 8 * t;
    }
  }
  __device__ __forceinline__ void load(GroupLoad<kTiles>& l, int64_t grp) const {
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
      l.a[i] = __ldg(reinterpret_cast<const uint2*>(wa[i] + grp * (kGroup / 2)));
      l.b[i] = __ldg(reinterpret_cast<const uint2*>(wb[i] + grp * (kGroup / 2)));
      l.sa[i] = __ldg(sc + ra[i] * groups + grp), l.sb[i] = __ldg(sc + rb[i] * groups + grp);
      l.ba[i] = __ldg(bi + ra[i] * groups + grp), l.bb[i] = __ldg(bi + rb[i] * groups + grp);
    }
  }
  // This warp's groups i0 .. i0 + kAhead - 1 of its `mine` (warp, warp + kWarps, ...).
  template <int kAhead>
  __device__ __forceinline__ void load_round(GroupLoad<kTiles> (&l)[kAhead], int i0, int mine, int warp) const {
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (i0 + u >= mine) break;
      load(l[u], warp + int64_t(kWarps) * (i0 + u));
    }
  }
};

__device__ __forceinline__ int groups_of_warp(int64_t groups, int warp) {
  return groups > warp ? int((groups - warp + kWarps - 1) / kWarps) : 0;
}

// kTiles m16 tiles of rows per block (16 kTiles rows): each group's B fragments serve them all.
template <bool kBf16, int kTiles>
__global__ void __launch_bounds__(kThreads) gemv_mlx4_tc_kernel(TcArgs a, const float* x, float* y) {
  constexpr int kAhead = kAheadRows / kTiles;  // groups in flight: the same bytes for any kTiles
  pdl_launch_dependents();
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  const bool waited = a.ids != nullptr;  // the pdl_sass_check predicate
  if (waited) pdl_wait();  // the expert ids come from the kernel before (a router)
  {
    const int64_t b = enter_entry(a);
    x += b * a.x_stride;
    y += b * a.y_stride;
  }
  const int64_t row0 = int64_t(blockIdx.x) * kRows * kTiles;
  const TileRows<kTiles> tr(a, row0, g, t);
  const int mine = groups_of_warp(a.groups, warp);
  GroupLoad<kTiles> cur[kAhead];
  tr.load_round(cur, 0, mine, warp);  // weights only (immutable): before the wait
  if (!waited) pdl_wait();

  // This warp's groups of x: the parts at their B slots, and sum(x) (plain loads after the wait).
  uint32_t* xb = reinterpret_cast<uint32_t*>(mlx4_tc_smem) + int64_t(warp) * a.per_warp * kXWords;
  float* xsum = reinterpret_cast<float*>(reinterpret_cast<uint32_t*>(mlx4_tc_smem) + int64_t(kWarps) * a.per_warp * kXWords) +
                warp * a.per_warp;
  stage_items(mine, lane, [&](int i) {
    return StageItem{x + (warp + int64_t(kWarps) * i) * kGroup, reinterpret_cast<__nv_bfloat16*>(xb + i * kXWords),
                     xsum + i};
  });
  __syncwarp();

  float acc_a[kTiles][1], acc_b[kTiles][1];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) acc_a[i][0] = 0.f, acc_b[i][0] = 0.f;
  for (int i0 = 0; i0 < mine; i0 += kAhead) {
    GroupLoad<kTiles> nxt[kAhead];
    if (i0 + kAhead < mine) tr.load_round(nxt, i0 + kAhead, mine, warp);
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (i0 + u >= mine) break;
      uint32_t bx[1][8] = {{0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u}};  // B column g: part g (g < 3), else 0
      if (g < kParts) {
        const uint4* src = reinterpret_cast<const uint4*>(xb + (i0 + u) * kXWords + (g * 4 + t) * 8);
        const uint4 lo = src[0], hi = src[1];
        bx[0][0] = lo.x, bx[0][1] = lo.y, bx[0][2] = lo.z, bx[0][3] = lo.w;
        bx[0][4] = hi.x, bx[0][5] = hi.y, bx[0][6] = hi.z, bx[0][7] = hi.w;
      }
      const float xs[1] = {t == 0 ? xsum[i0 + u] : 0.f};  // the bias term once, on t = 0
      group_products<kBf16, kTiles, 1>(cur[u], bx, xs, 1, acc_a, acc_b);
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) cur[u] = nxt[u];
  }
  __shared__ float red[kWarps][kRows * kTiles];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    const float va = pair_sum(acc_a[i][0]), vb = pair_sum(acc_b[i][0]);  // (t = 2, 3 hold zero columns)
    if (t == 0) red[warp][kRows * i + g] = va, red[warp][kRows * i + g + 8] = vb;
  }
  __syncthreads();
  if (threadIdx.x < kRows * kTiles && row0 + threadIdx.x < a.rows) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w][threadIdx.x];
    y[row0 + threadIdx.x] = s;
  }
}

// The rows form (gemv_rows' contract): up to 2 kP input rows against kTiles m16 tiles of weight
// rows per block; x row 2 p in B tile p's columns 0-2, row 2 p + 1 in its columns 4-6, each
// group's A fragments decoded once for all of them and each B fragment loaded once for all the
// tiles (kTiles > 1: fewer blocks stage the same x, for many rows). x is staged per round of
// kRowsAhead groups (all of a warp's groups for 16 rows would not fit shared memory) through
// stage_items, and every row's arithmetic is the one-row kernel's (group_products, pair_sum, the
// warps in order; a row's sums do not depend on the tiles beside it), so a row equals
// gemv_mlx4_tc_kernel's result for it bit for bit at any row count, slot or tile count. Plain
// launches (the wait is a no-op then; kept unconditional for a PDL launch).
template <int kTiles>  // groups x tiles of weight loads in flight, as the one-row kernel's kAheadRows
constexpr int kRowsAheadOf = kTiles >= 4 ? 1 : 2;
template <int kP>  // kTiles x kP <= 16: the accumulators and B fragments stay in registers
constexpr int kRowsMaxTiles = kP >= 8 ? 2 : 4;
template <bool kBf16, int kP, int kTiles>
__global__ void __launch_bounds__(kThreads) gemv_mlx4_tc_rows_kernel(TcArgs p, gemv_detail::RowsArgs ra, const float* x,
                                                                     float* y) {
  static_assert(kTiles <= kRowsMaxTiles<kP>, "rows tiles past the register budget");
  constexpr int kN = 2 * kP, kRowWords = kXWords + 4;  // a staged row of a group: 96 slot words, its sum, 16-byte steps
  constexpr int kRowsAhead = kRowsAheadOf<kTiles>;
  pdl_wait();
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  int n = 0;
  int64_t xo[kN], yo[kN];
  if (!gemv_detail::rows_entry<kN>(p, ra, n, xo, yo, [](TcArgs& e) { return enter_entry(e); })) return;
  const int np = (n + 1) / 2;
  const int64_t row0 = int64_t(blockIdx.x) * kRows * kTiles;
  const TileRows<kTiles> tr(p, row0, g, t);
  const int mine = groups_of_warp(p.groups, warp);
  uint32_t* xb = reinterpret_cast<uint32_t*>(mlx4_tc_smem) + int64_t(warp) * kRowsAhead * kN * kRowWords;
  GroupLoad<kTiles> cur[kRowsAhead];
  tr.load_round(cur, 0, mine, warp);
  float acc_a[kTiles][kP], acc_b[kTiles][kP];
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int pp = 0; pp < kP; ++pp) acc_a[i][pp] = 0.f, acc_b[i][pp] = 0.f;
  // lane (g, t) reads x row 2 pp + (g >= 4), part g % 4 (none for g % 4 == 3)
  const int half = g / 4, part = g % 4;
  for (int i0 = 0; i0 < mine; i0 += kRowsAhead) {
    GroupLoad<kTiles> nxt[kRowsAhead];
    if (i0 + kRowsAhead < mine) tr.load_round(nxt, i0 + kRowsAhead, mine, warp);
    const int groups_now = min(kRowsAhead, mine - i0);
    stage_items(groups_now * n, lane, [&](int k) {
      const int u = k / n, r = k % n;
      uint32_t* ru = xb + (u * kN + r) * kRowWords;
      return StageItem{x + xo[r] + (warp + int64_t(kWarps) * (i0 + u)) * kGroup, reinterpret_cast<__nv_bfloat16*>(ru),
                       reinterpret_cast<float*>(ru + kXWords)};
    });
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kRowsAhead; ++u) {
      if (i0 + u >= mine) break;
      const uint32_t* ru = xb + u * kN * kRowWords;
      uint32_t bx[kP][8];
      float xs[kP];
#pragma unroll
      for (int pp = 0; pp < kP; ++pp) {
        const int r = 2 * pp + half;
#pragma unroll
        for (int k = 0; k < 8; ++k) bx[pp][k] = 0u;
        if (part < kParts && r < n) {
          const uint4* src = reinterpret_cast<const uint4*>(ru + r * kRowWords + (part * 4 + t) * 8);
          const uint4 lo = src[0], hi = src[1];
          bx[pp][0] = lo.x, bx[pp][1] = lo.y, bx[pp][2] = lo.z, bx[pp][3] = lo.w;
          bx[pp][4] = hi.x, bx[pp][5] = hi.y, bx[pp][6] = hi.z, bx[pp][7] = hi.w;
        }
        const int rs = 2 * pp + t / 2;  // t = 0: row 2 pp's bias term, t = 2: row 2 pp + 1's
        xs[pp] = (t % 2 == 0 && rs < n) ? reinterpret_cast<const float*>(ru + rs * kRowWords)[kXWords] : 0.f;
      }
      group_products<kBf16, kTiles, kP>(cur[u], bx, xs, np, acc_a, acc_b);
    }
    __syncwarp();  // the next round stages over this one's slots
#pragma unroll
    for (int u = 0; u < kRowsAhead; ++u) cur[u] = nxt[u];
  }
  __shared__ float red[kWarps][kRows * kTiles][kN];
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int pp = 0; pp < kP; ++pp) {
      if (pp >= np) break;
      const float va = pair_sum(acc_a[i][pp]), vb = pair_sum(acc_b[i][pp]);
      const int r = 2 * pp + t / 2;
      if (t % 2 == 0 && r < n) red[warp][kRows * i + g][r] = va, red[warp][kRows * i + g + 8][r] = vb;
    }
  __syncthreads();
  for (int k = int(threadIdx.x); k < kRows * kTiles * n; k += kThreads) {
    const int wr = k / n, r = k % n;
    if (row0 + wr >= p.rows) continue;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w][wr][r];
    y[yo[r] + row0 + wr] = s;
  }
}

// Compile-time checks of the permutation: the 32 (q, h) slots of a lane cover its 16 columns
// twice (rows g and g + 8 use the same slots) -> every column of 16t .. 16t + 15 exactly once.
constexpr bool lane_columns_ok() {
  for (int t = 0; t < 4; ++t) {
    int seen[kGroup] = {};
    for (int q = 0; q < 8; ++q)
      for (int h = 0; h < 2; ++h) ++seen[pair_column(t, q, h)];
    for (int c = 0; c < kGroup; ++c)
      if (seen[c] != (c / 16 == t ? 1 : 0)) return false;
  }
  return true;
}
static_assert(lane_columns_ok(), "pair_column must map each lane's slots onto its 16 columns");

std::atomic<int> g_on{-1}, g_tiles{-1};

}  // namespace

bool gemv_mlx4_tc_on() { return env_setting(g_on, "DS4_MLX4_TC", {0, 1}, "0 or 1", 0) == 1; }
void gemv_mlx4_tc_set(bool on) { g_on.store(on ? 1 : 0, std::memory_order_relaxed); }
int gemv_mlx4_tc_tiles() { return env_setting(g_tiles, "DS4_MLX4_TC_TILES", {0, 1, 2, 4}, "0, 1, 2 or 4", 0); }
void gemv_mlx4_tc_set_tiles(int tiles) {
  if (tiles != 0 && tiles != 1 && tiles != 2 && tiles != 4)
    throw InputError("cuda gemv_mlx4_tc: tiles " + std::to_string(tiles) + " is not 0 (by shape), 1, 2 or 4");
  g_tiles.store(tiles, std::memory_order_relaxed);
}

namespace {

// The row tiles per block of a launch: the set value (capped at max_tiles), else the most tiles up
// to auto_max whose grid still has min_blocks_per_sm blocks an SM (a row's bits do not depend on it).
int tiles_for(int64_t rows, int count, int max_tiles, int auto_max, double min_blocks_per_sm) {
  const int set = gemv_mlx4_tc_tiles();
  if (set != 0) return std::min(set, max_tiles);
  const double want = min_blocks_per_sm * gemv_detail::sm_count();
  for (int t = std::min(auto_max, max_tiles); t > 1; t /= 2)
    if (double((rows + kRows * t - 1) / (kRows * t)) * count >= want) return t;
  return 1;
}

}  // namespace

bool gemv_mlx4_tc_supports(const WeightMatrix& w) {
  return w.type == DType::MLX_Q4 && w.group_size == kGroup &&
         (w.scale_type == DType::BF16 || w.scale_type == DType::F16) && w.rows > 0 && w.cols > 0 &&
         w.cols % kGroup == 0 && w.cols <= kMlx4TcMaxCols && w.row_stride_bytes() == w.cols / 2 && w.data &&
         w.scales && w.biases && reinterpret_cast<uintptr_t>(w.data) % 8 == 0 &&
         reinterpret_cast<uintptr_t>(w.scales) % 2 == 0 && reinterpret_cast<uintptr_t>(w.biases) % 2 == 0;
}

namespace {

void check_supported(const char* who, const WeightMatrix& w, const GemvBatch& b) {
  const int count = b.count;
  if (!gemv_mlx4_tc_supports(w))
    throw InputError(std::string(who) + ": takes MLX q4 with group 64, F16 / BF16 scales, cols a multiple of 64 up to " +
                     std::to_string(kMlx4TcMaxCols) + " and an 8-byte aligned weight (got " +
                     std::string(dtype_name(w.type)) + " " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                     ", group " + std::to_string(w.group_size) + ")");
  if (count < 1 || count > 65535) throw InputError(std::string(who) + ": batch count " + std::to_string(count));
  if (b.id_stride % 8 != 0 || b.id_scale_stride % 2 != 0)  // the weights' 8-byte and the scales' 2-byte loads
    throw InputError(std::string(who) + ": expert strides " + std::to_string(b.id_stride) + " / " +
                     std::to_string(b.id_scale_stride) + " bytes break the 8 / 2-byte alignment of the loads");
}

TcArgs tc_args(const WeightMatrix& w, const GemvBatch& batch) {
  TcArgs a;
  a.data = static_cast<const uint8_t*>(w.data);
  a.scales = static_cast<const uint8_t*>(w.scales);
  a.biases = static_cast<const uint8_t*>(w.biases);
  a.rows = w.rows, a.row_bytes = w.cols / 2, a.groups = w.cols / kGroup;
  a.ids = batch.ids;
  a.id_stride = batch.id_stride, a.id_scale_stride = batch.id_scale_stride;
  a.x_stride = batch.x_stride, a.y_stride = batch.y_stride;
  a.per_warp = int((a.groups + kWarps - 1) / kWarps);
  return a;
}

template <auto kKernel, class... Args>
void launch_tc(bool pdl, dim3 grid, size_t smem, cudaStream_t stream, Args... args) {
  opt_in_smem_max_once<kKernel>();
  gemv_detail::launch_maybe_pdl_smem(pdl, kKernel, grid, kThreads, smem, stream, args...);
}

}  // namespace

void gemv_mlx4_tc(const WeightMatrix& w, const float* x, float* y, const GemvBatch& batch, cudaStream_t stream) {
  check_supported("cuda gemv_mlx4_tc", w, batch);
  if (!x || !y) throw InputError("cuda gemv_mlx4_tc: null x or y");
  const TcArgs a = tc_args(w, batch);
  const size_t smem = size_t(kWarps) * size_t(a.per_warp) * (kXWords * 4 + 4);
  // By shape: 2 tiles only where that still gives 2.5 blocks an SM (session 31, H100: 2 tiles won on
  // Qwen's three big shapes, 1 on 2560 and 4096 rows; 4 tiles never).
  const int tiles = tiles_for(w.rows, batch.count, 4, 2, 2.5);
  const dim3 grid(unsigned((w.rows + kRows * tiles - 1) / (kRows * tiles)), unsigned(batch.count));
  const bool pdl = gemv_pdl(), bf16 = w.scale_type == DType::BF16;
  if (tiles == 4) {
    if (bf16) launch_tc<gemv_mlx4_tc_kernel<true, 4>>(pdl, grid, smem, stream, a, x, y);
    else launch_tc<gemv_mlx4_tc_kernel<false, 4>>(pdl, grid, smem, stream, a, x, y);
  } else if (tiles == 2) {
    if (bf16) launch_tc<gemv_mlx4_tc_kernel<true, 2>>(pdl, grid, smem, stream, a, x, y);
    else launch_tc<gemv_mlx4_tc_kernel<false, 2>>(pdl, grid, smem, stream, a, x, y);
  } else {
    if (bf16) launch_tc<gemv_mlx4_tc_kernel<true, 1>>(pdl, grid, smem, stream, a, x, y);
    else launch_tc<gemv_mlx4_tc_kernel<false, 1>>(pdl, grid, smem, stream, a, x, y);
  }
}

void gemv_mlx4_tc_rows(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t stream) {
  check_supported("cuda gemv_mlx4_tc_rows", w, r.batch);
  check_gemv_rows("cuda gemv_mlx4_tc_rows", r);
  if (!x || !y) throw InputError("cuda gemv_mlx4_tc_rows: null x or y");
  const TcArgs a = tc_args(w, r.batch);
  const gemv_detail::RowsArgs ra = gemv_detail::rows_args(r);
  const int kp = r.n <= 2 ? 1 : r.n <= 4 ? 2 : r.n <= 8 ? 4 : 8;
  const bool bf16 = w.scale_type == DType::BF16;
  auto with_tiles = [&](auto kp_tag, auto tiles_tag) {
    constexpr int kP = decltype(kp_tag)::value, kT = decltype(tiles_tag)::value;
    const size_t smem = size_t(kWarps) * kRowsAheadOf<kT> * size_t(2 * kP) * (kXWords + 4) * 4;
    const dim3 grid(unsigned((w.rows + kRows * kT - 1) / (kRows * kT)), unsigned(r.batch.count));
    if (bf16) launch_tc<gemv_mlx4_tc_rows_kernel<true, kP, kT>>(false, grid, smem, stream, a, ra, x, y);
    else launch_tc<gemv_mlx4_tc_rows_kernel<false, kP, kT>>(false, grid, smem, stream, a, ra, x, y);
  };
  auto go = [&](auto kp_tag) {
    constexpr int kP = decltype(kp_tag)::value;
    // Each block stages all of its rows' x: more weight rows per block (up to the register budget)
    // while the grid keeps 1.5 blocks an SM.
    const int tiles = tiles_for(w.rows, r.batch.count, kRowsMaxTiles<kP>, 4, 1.5);
    if constexpr (kRowsMaxTiles<kP> >= 4) {
      if (tiles == 4) return with_tiles(kp_tag, std::integral_constant<int, 4>{});
    }
    if (tiles == 2) return with_tiles(kp_tag, std::integral_constant<int, 2>{});
    with_tiles(kp_tag, std::integral_constant<int, 1>{});
  };
  if (kp == 1) go(std::integral_constant<int, 1>{});
  else if (kp == 2) go(std::integral_constant<int, 2>{});
  else if (kp == 4) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 8>{});
}

}  // namespace ds4::cuda
