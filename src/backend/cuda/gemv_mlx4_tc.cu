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

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
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

// kTiles m16 tiles of rows per block (16 kTiles rows): each group's B fragments serve them all.
template <bool kBf16, int kTiles>
__global__ void __launch_bounds__(kThreads) gemv_mlx4_tc_kernel(TcArgs p, const float* x, float* y) {
  constexpr int kAhead = kAheadRows / kTiles;  // groups in flight: the same bytes for any kTiles
  pdl_launch_dependents();
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  if (p.ids) pdl_wait();  // the expert ids come from the kernel before (a router)
  {
    const int64_t b = blockIdx.y;
    const int64_t e = p.ids ? p.ids[b] : b;
    p.data += e * p.id_stride;
    p.scales += e * p.id_scale_stride;
    p.biases += e * p.id_scale_stride;
    x += b * p.x_stride;
    y += b * p.y_stride;
  }
  const int64_t row0 = int64_t(blockIdx.x) * kRows * kTiles;
  int64_t ra[kTiles], rb[kTiles];
  const uint8_t *wa[kTiles], *wb[kTiles];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    ra[i] = min(row0 + kRows * i + g, p.rows - 1), rb[i] = min(row0 + kRows * i + g + 8, p.rows - 1);
    wa[i] = p.data + ra[i] * p.row_bytes + 8 * t, wb[i] = p.data + rb[i] * p.row_bytes + 8 * t;
  }
  const unsigned short* sc = reinterpret_cast<const unsigned short*>(p.scales);
  const unsigned short* bi = reinterpret_cast<const unsigned short*>(p.biases);
  const int mine = p.groups > warp ? int((p.groups - warp + kWarps - 1) / kWarps) : 0;
  auto load = [&](GroupLoad<kTiles> (&l)[kAhead], int i0) {
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (i0 + u >= mine) break;
      const int64_t grp = warp + int64_t(kWarps) * (i0 + u);
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
        l[u].a[i] = __ldg(reinterpret_cast<const uint2*>(wa[i] + grp * (kGroup / 2)));
        l[u].b[i] = __ldg(reinterpret_cast<const uint2*>(wb[i] + grp * (kGroup / 2)));
        l[u].sa[i] = __ldg(sc + ra[i] * p.groups + grp), l[u].sb[i] = __ldg(sc + rb[i] * p.groups + grp);
        l[u].ba[i] = __ldg(bi + ra[i] * p.groups + grp), l[u].bb[i] = __ldg(bi + rb[i] * p.groups + grp);
      }
    }
  };
  GroupLoad<kTiles> cur[kAhead];
  load(cur, 0);  // weights only (immutable): before the wait
  if (!p.ids) pdl_wait();

  // This warp's groups of x: the parts at their B slots, and sum(x) (plain loads after the wait).
  uint32_t* xb = reinterpret_cast<uint32_t*>(mlx4_tc_smem) + int64_t(warp) * p.per_warp * kXWords;
  float* xsum = reinterpret_cast<float*>(reinterpret_cast<uint32_t*>(mlx4_tc_smem) + int64_t(kWarps) * p.per_warp * kXWords) +
                warp * p.per_warp;
  for (int i = 0; i < mine; ++i) {
    const int64_t c0 = (warp + int64_t(kWarps) * i) * kGroup;
    __nv_bfloat16* slots = reinterpret_cast<__nv_bfloat16*>(xb + i * kXWords);
    float s = 0.f;
#pragma unroll
    for (int hlf = 0; hlf < 2; ++hlf) {
      const int c = lane + 32 * hlf;  // column in the group
      const float v = x[c0 + c];
      s += v;
      __nv_bfloat16 part[kParts];
      split_bf16x3(v, part);
      const int ct = c / 16, cc = c % 16;  // lane t = ct, pair q, half h with pair_column(ct, q, h) = c
      const int q = (cc / 8) * 4 + cc % 4, h = (cc % 8) / 4;
#pragma unroll
      for (int pi = 0; pi < kParts; ++pi) slots[2 * ((pi * 4 + ct) * 8 + q) + h] = part[pi];
    }
    s = warp_sum(s);
    if (lane == 0) xsum[i] = s;
  }
  __syncwarp();

  float acc_a[kTiles], acc_b[kTiles];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) acc_a[i] = 0.f, acc_b[i] = 0.f;
  for (int i0 = 0; i0 < mine; i0 += kAhead) {
    GroupLoad<kTiles> nxt[kAhead];
    if (i0 + kAhead < mine) load(nxt, i0 + kAhead);
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (i0 + u >= mine) break;
      const GroupLoad<kTiles>& l = cur[u];
      uint32_t bx[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};  // B column g: part g (g < 3), else 0
      if (g < kParts) {
        const uint4* src = reinterpret_cast<const uint4*>(xb + (i0 + u) * kXWords + (g * 4 + t) * 8);
        const uint4 lo = src[0], hi = src[1];
        bx[0] = lo.x, bx[1] = lo.y, bx[2] = lo.z, bx[3] = lo.w, bx[4] = hi.x, bx[5] = hi.y, bx[6] = hi.z, bx[7] = hi.w;
      }
      const float xs = t == 0 ? xsum[i0 + u] : 0.f;
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
        float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t word_a = j < 2 ? l.a[i].x : l.a[i].y, word_b = j < 2 ? l.b[i].x : l.b[i].y;
          const int s0 = 4 * (2 * (j % 2));  // pair q = 2j: nibble (q % 4); pair 2j + 1: the next
          const uint32_t af[4] = {nibble_pair(word_a, s0), nibble_pair(word_b, s0), nibble_pair(word_a, s0 + 4),
                                  nibble_pair(word_b, s0 + 4)};
          mma::mma_bf16(c, af, bx[2 * j], bx[2 * j + 1]);
        }
        // lane t = 0: columns 0, 1 (x0, x1 parts) of rows g, g + 8; t = 1: column 2 (x2) and the
        // zero column 3; t = 2, 3: zero columns. The bias term once, on t = 0 (xs = 0 elsewhere).
        acc_a[i] = fmaf(scale_value<kBf16>(l.sa[i]), c[0] + c[1], acc_a[i]);
        acc_b[i] = fmaf(scale_value<kBf16>(l.sb[i]), c[2] + c[3], acc_b[i]);
        acc_a[i] = fmaf(scale_value<kBf16>(l.ba[i]), xs, acc_a[i]);
        acc_b[i] = fmaf(scale_value<kBf16>(l.bb[i]), xs, acc_b[i]);
      }
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) cur[u] = nxt[u];
  }
  __shared__ float red[kWarps][kRows * kTiles];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    float va = acc_a[i], vb = acc_b[i];
    va += __shfl_xor_sync(0xffffffffu, va, 1);
    vb += __shfl_xor_sync(0xffffffffu, vb, 1);
    va += __shfl_xor_sync(0xffffffffu, va, 2);
    vb += __shfl_xor_sync(0xffffffffu, vb, 2);
    if (t == 0) red[warp][kRows * i + g] = va, red[warp][kRows * i + g + 8] = vb;
  }
  __syncthreads();
  if (threadIdx.x < kRows * kTiles && row0 + threadIdx.x < p.rows) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w][threadIdx.x];
    y[row0 + threadIdx.x] = s;
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
int gemv_mlx4_tc_tiles() { return env_setting(g_tiles, "DS4_MLX4_TC_TILES", {1, 2, 4}, "1, 2 or 4", 1); }
void gemv_mlx4_tc_set_tiles(int tiles) {
  if (tiles != 1 && tiles != 2 && tiles != 4)
    throw InputError("cuda gemv_mlx4_tc: tiles " + std::to_string(tiles) + " is not 1, 2 or 4");
  g_tiles.store(tiles, std::memory_order_relaxed);
}

bool gemv_mlx4_tc_supports(const WeightMatrix& w) {
  return w.type == DType::MLX_Q4 && w.group_size == kGroup &&
         (w.scale_type == DType::BF16 || w.scale_type == DType::F16) && w.rows > 0 && w.cols > 0 &&
         w.cols % kGroup == 0 && w.cols <= kMlx4TcMaxCols && w.row_stride_bytes() == w.cols / 2 && w.data &&
         w.scales && w.biases && reinterpret_cast<uintptr_t>(w.data) % 8 == 0 &&
         reinterpret_cast<uintptr_t>(w.scales) % 2 == 0 && reinterpret_cast<uintptr_t>(w.biases) % 2 == 0;
}

void gemv_mlx4_tc(const WeightMatrix& w, const float* x, float* y, const GemvBatch& batch, cudaStream_t stream) {
  if (!gemv_mlx4_tc_supports(w))
    throw InputError("cuda gemv_mlx4_tc: takes MLX q4 with group 64, F16 / BF16 scales, cols a multiple of 64 up to " +
                     std::to_string(kMlx4TcMaxCols) + " and an 8-byte aligned weight (got " +
                     std::string(dtype_name(w.type)) + " " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                     ", group " + std::to_string(w.group_size) + ")");
  if (batch.count < 1 || batch.count > 65535)
    throw InputError("cuda gemv_mlx4_tc: batch count " + std::to_string(batch.count));
  if (!x || !y) throw InputError("cuda gemv_mlx4_tc: null x or y");
  TcArgs a;
  a.data = static_cast<const uint8_t*>(w.data);
  a.scales = static_cast<const uint8_t*>(w.scales);
  a.biases = static_cast<const uint8_t*>(w.biases);
  a.rows = w.rows, a.row_bytes = w.cols / 2, a.groups = w.cols / kGroup;
  a.ids = batch.ids;
  a.id_stride = batch.id_stride, a.id_scale_stride = batch.id_scale_stride;
  a.x_stride = batch.x_stride, a.y_stride = batch.y_stride;
  a.per_warp = int((a.groups + kWarps - 1) / kWarps);
  const size_t smem = size_t(kWarps) * size_t(a.per_warp) * (kXWords * 4 + 4);
  const int tiles = gemv_mlx4_tc_tiles();
  const dim3 grid(unsigned((w.rows + kRows * tiles - 1) / (kRows * tiles)), unsigned(batch.count));
  auto go = [&](auto kernel) {
    opt_in_smem_max_once<decltype(kernel)::value>();
    gemv_detail::launch_maybe_pdl_smem(gemv_pdl(), decltype(kernel)::value, grid, kThreads, smem, stream, a, x, y);
  };
  const bool bf16 = w.scale_type == DType::BF16;
  if (tiles == 4) {
    if (bf16) go(std::integral_constant<decltype(&gemv_mlx4_tc_kernel<true, 4>), &gemv_mlx4_tc_kernel<true, 4>>{});
    else go(std::integral_constant<decltype(&gemv_mlx4_tc_kernel<false, 4>), &gemv_mlx4_tc_kernel<false, 4>>{});
  } else if (tiles == 2) {
    if (bf16) go(std::integral_constant<decltype(&gemv_mlx4_tc_kernel<true, 2>), &gemv_mlx4_tc_kernel<true, 2>>{});
    else go(std::integral_constant<decltype(&gemv_mlx4_tc_kernel<false, 2>), &gemv_mlx4_tc_kernel<false, 2>>{});
  } else {
    if (bf16) go(std::integral_constant<decltype(&gemv_mlx4_tc_kernel<true, 1>), &gemv_mlx4_tc_kernel<true, 1>>{});
    else go(std::integral_constant<decltype(&gemv_mlx4_tc_kernel<false, 1>), &gemv_mlx4_tc_kernel<false, 1>>{});
  }
}

}  // namespace ds4::cuda
