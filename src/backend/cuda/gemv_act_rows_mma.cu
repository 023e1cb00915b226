// gemv_act_rows_q8_mma (gemv_act_rows_mma.h): Q8_0 weights times 2..16 quantized activation rows
// on int8 tensor cores, each row in gemv_act's f32 order (the header says which).
//
// Roles in the MMA (m16n8k32 s8, mma_sync.cuh): the activation rows are A (16 rows, zeros past
// n), 8 weight rows are B, one MMA per 32-value block gives the block's exact integer sums for all
// 16 x 8 pairs. Lane (g, t) holds the pairs (input g / g + 8, weight row 2t / 2t + 1) and feeds k
// slots 4t.. and 16 + 4t.. with values 8t .. 8t + 7 of the block, so it reads 8 consecutive bytes
// of weight row g and of its input rows (any k permutation is the same sum if A and B agree).
//
// Data flow: a thread block owns 8 kTiles weight rows and T / 32 warps (T: gemv_act's threads for
// the row). Warp w stages its slots' blocks (32 consecutive blocks per step, kSteps steps) of every
// tile row into its own shared memory with cp.async before the PDL wait -- the whole of its share
// at once: with one or two steps that is 8.7-35 KB per warp, enough bytes in flight per SM to
// stream the weight at near copy speed without a ring -- then reads the activations (from L2,
// kAhead blocks ahead in registers) and for each slot in rev5 order runs its steps' MMAs and adds
// the terms. Shared memory above 48 KiB is opted into once per kernel (cudaFuncSetAttribute; legal
// during stream capture).
#include <algorithm>
#include <mutex>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_act_rows_mma.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "core/error.h"

namespace ds4::cuda {

namespace {

using gemv_detail::f16_bits;
using gemv_detail::pdl_launch_dependents;
using gemv_detail::pdl_wait;
using mma::lds_u16;
using mma::lds_u32;

constexpr int kSlotsMax = 128;                   // gemv_act.cu's kThreads: its threads are the f32 slots
constexpr int kSpan = 32;                        // blocks per warp and step: one per slot of the warp
constexpr int kBlockBytes = 34;                  // Q8_0: f16 scale, 32 int8
constexpr int kPitch = kSpan * kBlockBytes + 16;  // one staged row span: 16-byte aligned, rows on staggered banks
constexpr int kMaxSteps = 4;
constexpr int kAhead = 6;  // activation fragments in flight (registers)

struct Q8Args {
  const uint8_t* w;
  int64_t row_bytes, rows, nb;
  int slots;  // T
  const int8_t* xq;
  const float* xd;
  int64_t x_row;  // values
  float* y;
  int64_t y_row;
  int n;
};

// The slot of a warp's p-th partial sum: p's 5 bits reversed. Slots then complete in the order the
// xor tree pairs them (0 16, 8 24, then 0 16 | 8 24; 4 20, ...), so partial p is level 0 of a
// binary counter and each completed pair carries one level up: 5 levels of registers per pair
// instead of 32 slot sums.
__host__ __device__ constexpr int rev5(int p) {
  return ((p & 1) << 4) | ((p & 2) << 2) | (p & 4) | ((p & 8) >> 2) | ((p & 16) >> 4);
}

// One block's A fragment and scales for input rows g and g + 8 (zeros past n or past the row).
struct XFrag {
  uint32_t f[4];
  float d0, d1;
};

__device__ __forceinline__ void load_x(const Q8Args& a, int g, int t, int64_t j, XFrag& x) {
  uint2 lo = make_uint2(0, 0), hi = make_uint2(0, 0);
  float d0 = 0.f, d1 = 0.f;
  if (j < a.nb) {
    const int64_t per_row = a.x_row / 32;
    if (g < a.n) {
      lo = *reinterpret_cast<const uint2*>(a.xq + g * a.x_row + 32 * j + 8 * t);  // PDL: input load
      d0 = a.xd[g * per_row + j];                                                 // PDL: input load
    }
    if (g + 8 < a.n) {
      hi = *reinterpret_cast<const uint2*>(a.xq + (g + 8) * a.x_row + 32 * j + 8 * t);  // PDL: input load
      d1 = a.xd[(g + 8) * per_row + j];                                                 // PDL: input load
    }
  }
  x.f[0] = lo.x, x.f[1] = hi.x, x.f[2] = lo.y, x.f[3] = hi.y;
  x.d0 = d0, x.d1 = d1;
}

// 8 bytes at base + off (base 4-byte aligned, off even): after unrolling, off & 2 is a constant.
__device__ __forceinline__ uint2 lds_u64_at(const uint8_t* base, int off) {
  if ((off & 2) == 0) return make_uint2(lds_u32(base + off), lds_u32(base + off + 4));
  const uint32_t a = lds_u32(base + off - 2), b = lds_u32(base + off + 2), c = lds_u32(base + off + 6);
  return make_uint2(__byte_perm(a, b, 0x5432), __byte_perm(b, c, 0x5432));
}

// Blocks b0 .. b0 + 31 (fewer at the row's end) of the tile's rows into dst (row r at r * kPitch):
// kVec-byte pieces, consecutive lanes on consecutive pieces of a row; rows past the weight's end
// repeat its last row (their outputs are dropped). kVec 2: synchronous (rows not 4-byte aligned).
template <int kRows, int kVec>
__device__ __forceinline__ void stage_span(const Q8Args& a, uint8_t* dst, int64_t row0, int64_t b0, int lane) {
  const int64_t m = a.nb - b0 < kSpan ? a.nb - b0 : kSpan;
  const uint8_t* src = a.w + b0 * kBlockBytes;
  auto copy = [&](int pieces) {
    for (int i = lane; i < kRows * pieces; i += 32) {
      const int r = i / pieces, pc = i - r * pieces;
      const uint8_t* s = src + (row0 + r < a.rows ? row0 + r : a.rows - 1) * a.row_bytes + kVec * pc;
      uint8_t* d = dst + r * kPitch + kVec * pc;
      if constexpr (kVec == 16) mma::cp_async16(d, s, true);
      else if constexpr (kVec == 4) mma::cp_async_ca<4>(d, s);
      else *reinterpret_cast<uint16_t*>(d) = __ldg(reinterpret_cast<const uint16_t*>(s));
    }
  };
  if (m == kSpan) copy(kSpan * kBlockBytes / kVec);  // a constant divisor
  else copy(int(m) * kBlockBytes / kVec);           // the host checked: whole pieces
}

template <int kTiles, int kSteps, int kVec>
__global__ void __launch_bounds__(kSlotsMax) q8_rows_mma_kernel(Q8Args a) {
  constexpr int kRows = 8 * kTiles;
  constexpr int kItems = kSpan * kSteps;  // (slot, step) pairs of a warp, slot-major
  extern __shared__ __align__(16) uint8_t smem[];
  pdl_launch_dependents();
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int W = int(blockDim.x >> 5);
  const int64_t row0 = int64_t(blockIdx.x) * kRows;
  uint8_t* mine = smem + size_t(warp) * kSteps * kRows * kPitch;
  // The weights: not the previous kernel's output, so staged before the wait.
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    const int64_t b0 = int64_t(warp) * kSpan + int64_t(k) * a.slots;
    if (b0 < a.nb) stage_span<kRows, kVec>(a, mine + k * kRows * kPitch, row0, b0, lane);
  }
  mma::cp_commit();
  pdl_wait();
  auto block_of = [&](int p, int k) { return int64_t(warp) * kSpan + rev5(p) + int64_t(k) * a.slots; };
  XFrag ring[kAhead];
#pragma unroll
  for (int q = 0; q < kAhead && q < kItems; ++q) load_x(a, g, t, block_of(q / kSteps, q % kSteps), ring[q]);
  mma::cp_wait<0>();
  __syncwarp();
  const bool upper = a.n > 8;  // input rows g + 8 live
  float level[5][kTiles][4];   // the xor tree's pending pairs, level 0..4
  float total[kTiles][4];      // the warp's 32 slots, added as warp_sum adds them
#pragma unroll
  for (int p = 0; p < kSpan; ++p) {
    const int l = rev5(p);
    float s[kTiles][4];
#pragma unroll
    for (int T = 0; T < kTiles; ++T)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[T][i] = 0.f;
    // slot l's steps in turn: gemv_act's thread adds blocks l, l + T, ... from 0
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const int q = p * kSteps + k;
      const XFrag x = ring[q % kAhead];
      if (q + kAhead < kItems) load_x(a, g, t, block_of((q + kAhead) / kSteps, (q + kAhead) % kSteps), ring[q % kAhead]);
      if (block_of(p, k) >= a.nb) continue;  // uniform: the slot has no block at this step
      const uint8_t* span = mine + k * kRows * kPitch;
#pragma unroll
      for (int T = 0; T < kTiles; ++T) {
        const uint2 wq = lds_u64_at(span + (8 * T + g) * kPitch, l * kBlockBytes + 2 + 8 * t);
        int c[4] = {0, 0, 0, 0};
        mma::mma_s8_k32(c, x.f, wq.x, wq.y);
        const float dw0 = f16_bits(uint16_t(lds_u16(span + (8 * T + 2 * t) * kPitch + l * kBlockBytes)));
        const float dw1 = f16_bits(uint16_t(lds_u16(span + (8 * T + 2 * t + 1) * kPitch + l * kBlockBytes)));
        // gemv_act's ActQ8_0::term, (d_w * d_x) * isum, added to the slot's sum
        s[T][0] = __fadd_rn(s[T][0], __fmul_rn(__fmul_rn(dw0, x.d0), __int2float_rn(c[0])));
        s[T][1] = __fadd_rn(s[T][1], __fmul_rn(__fmul_rn(dw1, x.d0), __int2float_rn(c[1])));
        if (upper) {
          s[T][2] = __fadd_rn(s[T][2], __fmul_rn(__fmul_rn(dw0, x.d1), __int2float_rn(c[2])));
          s[T][3] = __fadd_rn(s[T][3], __fmul_rn(__fmul_rn(dw1, x.d1), __int2float_rn(c[3])));
        }
      }
    }
    // Slot l joins the tree: p's trailing one bits are the levels it completes.
#pragma unroll
    for (int T = 0; T < kTiles; ++T)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float c = s[T][i];
        int lv = 0;
#pragma unroll
        for (; lv < 5 && ((p >> lv) & 1); ++lv) c = __fadd_rn(level[lv][T][i], c);
        if (lv < 5) level[lv][T][i] = c;
        else total[T][i] = c;
      }
  }
  // The warps' sums from 0 in warp order (gemv_detail::finish_rows).
  float4* part = reinterpret_cast<float4*>(smem + size_t(W) * kSteps * kRows * kPitch);
#pragma unroll
  for (int T = 0; T < kTiles; ++T)
    part[(warp * kTiles + T) * 32 + lane] = make_float4(total[T][0], total[T][1], total[T][2], total[T][3]);
  __syncthreads();
  for (int T = warp; T < kTiles; T += W) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int w = 0; w < W; ++w) {
      const float4 v = part[(w * kTiles + T) * 32 + lane];
      acc.x = __fadd_rn(acc.x, v.x), acc.y = __fadd_rn(acc.y, v.y), acc.z = __fadd_rn(acc.z, v.z),
      acc.w = __fadd_rn(acc.w, v.w);
    }
    const float out[4] = {acc.x, acc.y, acc.z, acc.w};
    const int64_t m = row0 + 8 * T + 2 * t;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int xr = g + (i < 2 ? 0 : 8);
      const int64_t wr = m + (i & 1);
      if (xr < a.n && wr < a.rows) a.y[xr * a.y_row + wr] = out[i];
    }
  }
}

int g_tiles = 0;  // gemv_act_rows_q8_mma_set_tiles

// gemv_act.cu threads_for on a Q8_0 row (one unit per block).
int slots_for(int64_t nb) { return int(std::min<int64_t>(kSlotsMax, (nb + 31) / 32 * 32)); }

size_t smem_bytes(int warps, int steps, int tiles) {
  return size_t(warps) * steps * 8 * tiles * kPitch + size_t(warps) * tiles * 32 * sizeof(float4);
}

template <int kTiles, int kSteps, int kVec>
void launch(const Q8Args& a, cudaStream_t stream) {
  auto* kernel = q8_rows_mma_kernel<kTiles, kSteps, kVec>;
  static std::once_flag opted_in;  // per instantiation: the most any launch of it needs
  std::call_once(opted_in, [&] {
    DS4_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(smem_bytes(kSlotsMax / 32, kSteps, kTiles))));
  });
  const unsigned blocks = unsigned((a.rows + 8 * kTiles - 1) / (8 * kTiles));
  gemv_detail::launch_maybe_pdl_smem(gemv_pdl(), kernel, dim3(blocks), a.slots, smem_bytes(a.slots / 32, kSteps, kTiles),
                                     stream, a);
}

template <int kTiles, int kVec>
void launch_steps(const Q8Args& a, int steps, cudaStream_t stream) {
  if (steps == 1) return launch<kTiles, 1, kVec>(a, stream);
  if (steps == 2) return launch<kTiles, 2, kVec>(a, stream);
  if constexpr (kTiles == 1) return launch<1, 4, kVec>(a, stream);  // 3 or 4 (the host checked)
}

int steps_of(int64_t nb) {
  const int slots = slots_for(nb);
  return int((nb + slots - 1) / slots);
}

}  // namespace

bool gemv_act_rows_q8_mma_fits(const WeightMatrix& w) {
  return w.type == DType::Q8_0 && w.rows > 0 && w.cols > 0 && w.cols % 32 == 0 && steps_of(w.cols / 32) <= kMaxSteps;
}

void gemv_act_rows_q8_mma_set_tiles(int tiles) {
  if (tiles < 0 || tiles > 2) throw InputError("cuda gemv_act_rows_q8_mma: tiles " + std::to_string(tiles) + " is not 0, 1 or 2");
  g_tiles = tiles;
}

void gemv_act_rows_q8_mma(const WeightMatrix& w, const ActQ8View& x, float* y, int n, int64_t x_row, int64_t y_row,
                          cudaStream_t stream) {
  if (!gemv_act_rows_q8_mma_fits(w))
    throw InputError("cuda gemv_act_rows_q8_mma: a " + std::string(dtype_name(w.type)) + " weight of " +
                     std::to_string(w.rows) + "x" + std::to_string(w.cols) + " (Q8_0 rows of at most 16384 values)");
  if (n < 1 || n > 16) throw InputError("cuda gemv_act_rows_q8_mma: n " + std::to_string(n) + " is not in 1..16");
  Q8Args a{};
  a.w = static_cast<const uint8_t*>(w.data);
  a.row_bytes = w.row_stride_bytes();
  a.rows = w.rows;
  a.nb = w.cols / 32;
  a.slots = slots_for(a.nb);
  a.xq = x.q, a.xd = x.d, a.x_row = x_row;
  a.y = y, a.y_row = y_row, a.n = n;
  const int steps = steps_of(a.nb);
  // Pieces of 16 bytes when every row and span start is 16-byte aligned (blocks a multiple of 8:
  // a span's 34 m bytes are then whole pieces too), 4 for an even block count, else 2.
  const uintptr_t base = reinterpret_cast<uintptr_t>(a.w);
  const int vec = base % 16 == 0 && a.row_bytes % 16 == 0 && a.nb % 8 == 0 ? 16
                  : base % 4 == 0 && a.row_bytes % 4 == 0 && a.nb % 2 == 0  ? 4
                                                                             : 2;
  // Two 8-row tiles share each activation fragment: for more than 8 inputs, one step, tall weights.
  const int tiles = g_tiles ? g_tiles : (n > 8 && steps == 1 && a.rows >= 4096 ? 2 : 1);
  if (vec == 16 && tiles == 2 && steps <= 2) return launch_steps<2, 16>(a, steps, stream);
  if (vec == 16) return launch_steps<1, 16>(a, steps, stream);
  if (vec == 4) return launch_steps<1, 4>(a, steps, stream);
  launch_steps<1, 2>(a, steps, stream);
}

}  // namespace ds4::cuda
