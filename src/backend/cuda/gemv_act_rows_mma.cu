// gemv_act_rows_q8_mma (gemv_act_rows_mma.h): Q8_0 weights times 2..16 quantized activation rows
// on int8 tensor cores, each row in gemv_act's f32 order (the header says which).
//
// Roles in the MMA (m16n8k32 s8, mma_sync.cuh): the activation rows are A (16 rows, zeros past
// n), 8 weight rows are B, one MMA per 32-value block gives the block's exact integer sums for all
// 16 x 8 pairs. Lane (g, t) holds the pairs (input g / g + 8, weight row 2t / 2t + 1) and feeds k
// slots 4t.. and 16 + 4t.. with values 8t .. 8t + 7 of the block, so it reads 8 consecutive bytes
// of weight row g and of its input rows (any k permutation is the same sum if A and B agree).
//
// Data flow: a thread block owns 8 kTiles weight rows and T / 32 slot groups (T: gemv_act's
// threads for the row) of kSplit warps each. A group's warps stage its slots' blocks (32
// consecutive blocks per step, kSteps steps) of every tile row into the group's shared memory with
// cp.async before the PDL wait -- all of them at once, 8.7-35 KB per group -- then each warp reads
// the activations of its slots (from L2, kAhead blocks ahead in registers) and for each slot in
// rev5 order runs its steps' MMAs and adds the terms. Shared memory above 48 KiB is opted into once per kernel (cudaFuncSetAttribute; legal
// during stream capture).
#include <algorithm>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_act_formats.cuh"
#include "backend/cuda/gemv_act_rows_mma.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "core/error.h"

namespace ds4::cuda {

namespace {

using gemv_detail::f16_bits;
using gemv_detail::pdl_launch_dependents;
using gemv_detail::pdl_wait;

constexpr int kSlotsMax = gemv_act_detail::kActThreads;  // gemv_act's threads: its f32 slots
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

// Shared-memory word loads by 32-bit shared address (the item offsets are constants after
// unrolling, so they fold into the instruction).
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint32_t lds16(uint32_t addr) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
  return v;
}

// Blocks b0 .. b0 + 31 (fewer at the row's end) of the tile's rows into dst (row r at r * kPitch):
// kVec-byte pieces, consecutive lanes (lane: 0 .. 32 kSplit - 1, the group's threads) on
// consecutive pieces of a row; rows past the weight's end
// repeat its last row (their outputs are dropped). kVec 2: synchronous 2-byte copies (rows not
// 16-byte aligned).
template <int kRows, int kVec, int kSplit>
__device__ __forceinline__ void stage_span(const Q8Args& a, uint8_t* dst, int64_t row0, int64_t b0, int lane) {
  const int64_t m = a.nb - b0 < kSpan ? a.nb - b0 : kSpan;
  const uint8_t* src = a.w + b0 * kBlockBytes;
  auto copy = [&](int pieces) {
    for (int i = lane; i < kRows * pieces; i += 32 * kSplit) {
      const int r = i / pieces, pc = i - r * pieces;
      const uint8_t* s = src + (row0 + r < a.rows ? row0 + r : a.rows - 1) * a.row_bytes + kVec * pc;
      uint8_t* d = dst + r * kPitch + kVec * pc;
      if constexpr (kVec == 16) mma::cp_async16(d, s, true);
      else *reinterpret_cast<uint16_t*>(d) = __ldg(reinterpret_cast<const uint16_t*>(s));
    }
  };
  if (m == kSpan) copy(kSpan * kBlockBytes / kVec);  // a constant divisor
  else copy(int(m) * kBlockBytes / kVec);           // the host checked: whole pieces
}

// kSplit warps share a slot group: warp sub takes the slots of leaves sub * 32 / kSplit .. of the
// tree (rev5 order), i.e. a whole subtree, so the group's sum is the kSplit subtree sums added as
// the tree's top levels add them. More, shorter chains per block: each warp's slots run one after
// another (the terms of a slot are a sequential sum), so a warp's time is its slots' latency.
// Every address is formed once per thread; an item (slot, step) is then constant offsets, its
// loads, one MMA per tile and the f32 terms, without branches: a slot with no block at a step
// (the row's end) adds 0.f in its place, which leaves its sum unchanged (a sum that starts at +0
// and only adds is never -0, and s + 0 == s for every other s).
// kUpper: input rows 8..15 live (n > 8); without them the pairs of rows g + 8 are neither
// formed nor added (the kernel is bound by its instruction issue: session 19, NOTES.md).
template <int kTiles, int kSteps, int kVec, int kSplit, bool kUpper>
// (No minimum blocks per SM: bounds of 2 / 3 / 3 for 4 / 2 / 1 warps per group -- one wave on
// 4096x4096 -- left 2 tiles x 4 warps at 64 registers with a spill and made it slower, 1024x4096
// n = 16 8.9 us against 6.1, and gained nothing elsewhere: H100, session 19 call 7.)
__global__ void __launch_bounds__(kSlotsMax * kSplit) q8_rows_mma_kernel(Q8Args a) {
  constexpr int kRows = 8 * kTiles;
  constexpr int kLeaves = kSpan / kSplit;                           // slots per warp
  constexpr int kLevels = kLeaves == 32 ? 5 : kLeaves == 16 ? 4 : 3;  // its subtree's height
  constexpr int kItems = kLeaves * kSteps;                          // (slot, step) pairs of a warp, slot-major
  constexpr int kRing = kAhead < kItems ? kAhead : kItems;
  constexpr int kPairs = kUpper ? 4 : 2;  // C values of live input rows per lane and tile
  static_assert(kSplit == 1 || kSplit == 2 || kSplit == 4, "1, 2 or 4 warps per slot group");
  extern __shared__ __align__(16) uint8_t smem[];
  pdl_launch_dependents();
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int group = warp / kSplit, sub = warp % kSplit;
  const int W = int(blockDim.x >> 5) / kSplit;  // slot groups: gemv_act's warps
  const int64_t row0 = int64_t(blockIdx.x) * kRows;
  uint8_t* mine = smem + size_t(group) * kSteps * kRows * kPitch;
  // The weights: not the previous kernel's output, so staged before the wait; the group's warps
  // share the copies (then a block barrier).
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    const int64_t b0 = int64_t(group) * kSpan + int64_t(k) * a.slots;
    if (b0 < a.nb) stage_span<kRows, kVec, kSplit>(a, mine + k * kRows * kPitch, row0, b0, sub * 32 + lane);
  }
  mma::cp_commit();
  pdl_wait();
  // Leaf pl of this warp is slot rev5(pl) | low; its block at step k is j0 + rev5(pl) + k T.
  const int low = rev5(sub * kLeaves);
  const int64_t j0 = int64_t(group) * kSpan + low;
  int64_t left[kSteps];  // blocks of the row from the warp's leaf-0 block at each step
#pragma unroll
  for (int k = 0; k < kSteps; ++k) left[k] = a.nb - j0 - int64_t(k) * a.slots;
  // Input rows g and g + 8 at block j0, value 8t (never read past n: the loads are predicated).
  const int64_t per_row = a.x_row / 32;
  const bool has_lo = g < a.n, has_hi = g + 8 < a.n;
  const int8_t* xlo = a.xq + int64_t(g) * a.x_row + 32 * j0 + 8 * t;
  const int8_t* xhi = xlo + 8 * a.x_row;
  const float* dlo = a.xd + int64_t(g) * per_row + j0;
  const float* dhi = dlo + 8 * per_row;
  auto load = [&](int q, XFrag& x) {
    const int pl = q / kSteps, k = q % kSteps;
    const int64_t off = rev5(pl) + int64_t(k) * a.slots;  // blocks from j0
    const bool live = rev5(pl) < left[k];
    uint2 lo = make_uint2(0, 0), hi = make_uint2(0, 0);
    float d0 = 0.f, d1 = 0.f;
    if (live && has_lo) {
      lo = *reinterpret_cast<const uint2*>(xlo + 32 * off);  // PDL: input load
      d0 = dlo[off];                                         // PDL: input load
    }
    if (live && has_hi) {
      hi = *reinterpret_cast<const uint2*>(xhi + 32 * off);  // PDL: input load
      d1 = dhi[off];                                         // PDL: input load
    }
    x.f[0] = lo.x, x.f[1] = hi.x, x.f[2] = lo.y, x.f[3] = hi.y;
    x.d0 = d0, x.d1 = d1;
  };
  XFrag ring[kRing];
#pragma unroll
  for (int q = 0; q < kRing; ++q) load(q, ring[q]);
  // Shared addresses. The quant bytes of tile row 8T + g at leaf 0: base_q (2-byte aligned: a word
  // load pair from wa, bytes picked by sel); an item adds the constant 34 rev5(pl) + step and tile
  // offsets, all multiples of 4 but 34 rev5(pl) for odd rev5(pl), which adds 2: the other pair.
  const uint32_t s_mine = uint32_t(__cvta_generic_to_shared(mine)) + uint32_t(low * kBlockBytes);
  const uint32_t base_q = s_mine + uint32_t(g * kPitch + 2 + 8 * t);
  const uint32_t mis = base_q & 2u;
  const uint32_t wa_even = base_q & ~3u, wa_odd = wa_even + (mis ? 4u : 0u);
  const uint32_t sel_even = mis ? 0x5432u : 0x3210u, sel_odd = mis ? 0x3210u : 0x5432u;
  const uint32_t base_d = s_mine + uint32_t(2 * t * kPitch);  // scale of tile row 8T + 2t (+ kPitch: 2t + 1)
  mma::cp_wait<0>();
  if constexpr (kSplit == 1) __syncwarp();
  else __syncthreads();
  float level[kLevels][kTiles][4];  // the subtree's pending pairs
  float total[kTiles][4] = {};      // the warp's slots, added as warp_sum adds them (rows g + 8: 0 without kUpper)
#pragma unroll
  for (int pl = 0; pl < kLeaves; ++pl) {
    const int r = rev5(pl);
    float s[kTiles][4];
#pragma unroll
    for (int T = 0; T < kTiles; ++T)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[T][i] = 0.f;
    // slot l's steps in turn: gemv_act's thread adds blocks l, l + T, ... from 0
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const int q = pl * kSteps + k;
      const XFrag x = ring[q % kRing];
      if (q + kRing < kItems) load(q + kRing, ring[q % kRing]);
      const bool live = r < left[k];
#pragma unroll
      for (int T = 0; T < kTiles; ++T) {
        const uint32_t c_q = uint32_t((k * kRows + 8 * T) * kPitch + (r * kBlockBytes & ~3));
        const uint32_t wa = ((r * kBlockBytes) & 2 ? wa_odd : wa_even) + c_q;
        const uint32_t sel = (r * kBlockBytes) & 2 ? sel_odd : sel_even;
        const uint32_t w0 = lds32(wa), w1 = lds32(wa + 4), w2 = lds32(wa + 8);
        int c[4] = {0, 0, 0, 0};
        mma::mma_s8_k32(c, x.f, __byte_perm(w0, w1, sel), __byte_perm(w1, w2, sel));
        const uint32_t c_d = uint32_t((k * kRows + 8 * T) * kPitch + r * kBlockBytes);
        const float dw0 = f16_bits(uint16_t(lds16(base_d + c_d)));
        const float dw1 = f16_bits(uint16_t(lds16(base_d + c_d + kPitch)));
        // gemv_act's block term, added to the slot's sum
        const float dw[2] = {dw0, dw1}, dx[2] = {x.d0, x.d1};
#pragma unroll
        for (int i = 0; i < kPairs; ++i) {
          const float term = gemv_act_detail::ActQ8_0::block_term(dw[i & 1], dx[i >> 1], c[i]);
          s[T][i] = __fadd_rn(s[T][i], live ? term : 0.f);
        }
      }
    }
    // Slot l joins the tree: pl's trailing one bits are the levels it completes.
#pragma unroll
    for (int T = 0; T < kTiles; ++T)
#pragma unroll
      for (int i = 0; i < kPairs; ++i) {
        float c = s[T][i];
        int lv = 0;
#pragma unroll
        for (; lv < kLevels && ((pl >> lv) & 1); ++lv) c = __fadd_rn(level[lv][T][i], c);
        if (lv < kLevels) level[lv][T][i] = c;
        else total[T][i] = c;
      }
  }
  // The subtrees of a group added as the xor tree's top levels add them, then the groups from 0
  // in order (gemv_detail::finish_rows).
  float4* part = reinterpret_cast<float4*>(smem + size_t(W) * kSteps * kRows * kPitch);
#pragma unroll
  for (int T = 0; T < kTiles; ++T)
    part[(warp * kTiles + T) * 32 + lane] = make_float4(total[T][0], total[T][1], total[T][2], total[T][3]);
  __syncthreads();
  auto add4 = [](float4 u, float4 v) {
    return make_float4(__fadd_rn(u.x, v.x), __fadd_rn(u.y, v.y), __fadd_rn(u.z, v.z), __fadd_rn(u.w, v.w));
  };
  for (int T = warp; T < kTiles; T += W * kSplit) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int w = 0; w < W; ++w) {
      auto sub_sum = [&](int i) { return part[((w * kSplit + i) * kTiles + T) * 32 + lane]; };
      float4 e = sub_sum(0);
      if constexpr (kSplit == 2) e = add4(e, sub_sum(1));
      if constexpr (kSplit == 4) e = add4(add4(e, sub_sum(1)), add4(sub_sum(2), sub_sum(3)));
      acc = add4(acc, e);
    }
    const float out[4] = {acc.x, acc.y, acc.z, acc.w};
    mma::store_c_rows(out, g, t, row0 + 8 * T, a.n, a.rows, a.y, a.y_row);
  }
}

int g_tiles = 0;  // gemv_act_rows_q8_mma_set_tiles
int g_split = 0;  // gemv_act_rows_q8_mma_set_split

// gemv_act's threads on a Q8_0 row (one unit per block).
int slots_for(int64_t nb) { return gemv_act_detail::act_threads_for(nb); }

size_t smem_bytes(int groups, int steps, int tiles, int split) {
  return size_t(groups) * steps * 8 * tiles * kPitch + size_t(groups) * split * tiles * 32 * sizeof(float4);
}

template <int kTiles, int kSteps, int kVec, int kSplit, bool kUpper>
void launch_upper(const Q8Args& a, cudaStream_t stream) {
  auto* kernel = q8_rows_mma_kernel<kTiles, kSteps, kVec, kSplit, kUpper>;
  opt_in_smem_once<q8_rows_mma_kernel<kTiles, kSteps, kVec, kSplit, kUpper>>(
      smem_bytes(kSlotsMax / 32, kSteps, kTiles, kSplit));  // the most any launch of it needs
  const unsigned blocks = unsigned((a.rows + 8 * kTiles - 1) / (8 * kTiles));
  const int groups = a.slots / 32;
  gemv_detail::launch_maybe_pdl_smem(gemv_pdl(), kernel, dim3(blocks), a.slots * kSplit,
                                     smem_bytes(groups, kSteps, kTiles, kSplit), stream, a);
}

template <int kTiles, int kSteps, int kVec, int kSplit>
void launch(const Q8Args& a, cudaStream_t stream) {
  if (a.n > 8) return launch_upper<kTiles, kSteps, kVec, kSplit, true>(a, stream);
  launch_upper<kTiles, kSteps, kVec, kSplit, false>(a, stream);
}

template <int kTiles, int kVec, int kSplit>
void launch_steps(const Q8Args& a, int steps, cudaStream_t stream) {
  if (steps == 1) return launch<kTiles, 1, kVec, kSplit>(a, stream);
  if (steps == 2) return launch<kTiles, 2, kVec, kSplit>(a, stream);
  if constexpr (kTiles == 1) return launch<1, 4, kVec, kSplit>(a, stream);  // 3 or 4 (the host checked)
}

template <int kTiles>
void launch_split(const Q8Args& a, int steps, int split, cudaStream_t stream) {
  if (split == 2) return launch_steps<kTiles, 16, 2>(a, steps, stream);
  launch_steps<kTiles, 16, 4>(a, steps, stream);
}

int steps_of(int64_t nb) {
  const int slots = slots_for(nb);
  return int((nb + slots - 1) / slots);
}

}  // namespace

bool gemv_act_rows_q8_mma_fits(const WeightMatrix& w) {
  return w.type == DType::Q8_0 && w.rows > 0 && w.cols > 0 && w.cols % 32 == 0 && steps_of(w.cols / 32) <= kMaxSteps;
}

void gemv_act_rows_q8_mma_set_split(int split) {
  if (split != 0 && split != 2 && split != 4)
    throw InputError("cuda gemv_act_rows_q8_mma: split " + std::to_string(split) + " is not 0, 2 or 4");
  g_split = split;
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
  // a span's 34 m bytes are then whole pieces too), else 2 (synchronous: odd shapes only).
  const uintptr_t base = reinterpret_cast<uintptr_t>(a.w);
  const int vec = base % 16 == 0 && a.row_bytes % 16 == 0 && a.nb % 8 == 0 ? 16 : 2;
  // Two 8-row tiles share each activation fragment: for more than 8 inputs, one step, tall weights.
  // Two 8-row tiles share each activation fragment; 4 warps share a slot group, 2 on one-step rows
  // of at least 4096 values and weights of at least 4096 rows (16-byte staging only; the odd shapes
  // take 1 tile, 1 warp per slot group). H100, bench_cuda_gemv --rows-mma, session 19 call 5, n = 16:
  // 2 tiles x 4 warps the fastest on 1024x4096 (6.0 us; 1 tile x 2 warps 10.0), 32768x1024 (21.8),
  // 4096x8192 (26.2), 2048x4096 (8.0); 2 x 2 on 4096x4096 (13.0 vs 15.1) and 8192x4096 (25.8 vs
  // 26.9). The kernel waits on its activation loads: 2 tiles halve them, more warps shorten the chains.
  const int tiles = g_tiles ? g_tiles : (steps <= 2 ? 2 : 1);
  const int split = g_split ? g_split : steps == 1 && a.rows >= 4096 && w.cols >= 4096 ? 2 : 4;
  if (vec == 16 && tiles == 2 && steps <= 2) return launch_split<2>(a, steps, split, stream);
  if (vec == 16) return launch_split<1>(a, steps, split, stream);
  launch_steps<1, 2, 1>(a, steps, stream);
}

}  // namespace ds4::cuda
