// grouped_mma_bf16 (grouped_mma.h). Block = G entries (<= 16 x rows each) of ONE expert x 128
// weight rows, 8 warps of 16 weight rows; K in tiles of 128 columns (4 units of 32).
//
// Weights never pass through shared memory: each thread decodes its units (gemv_formats.cuh
// decode) straight into mma.sync m16n8k16 A fragments. The MMA's K order is free as long as
// x uses the same one, so the 16 K slots of k-step j (0..7) of a tile map to real columns
//   slots {2t, 2t+1, 2t+8, 2t+9} of quad lane t (= lane % 4) -> 32t + 4j + {0, 1, 2, 3}:
// lane (g = lane / 4, t) decodes exactly unit t of the tile for weight rows g and g + 8 (the
// A fragment's two rows) and uses all of it over the 8 k-steps; every weight is decoded once
// per block, by one thread, into registers. The B fragment of lane (g, t) at k-step j is then
// x[row g][32t + 4j .. + 3]: 8 contiguous bytes of the BF16 x tile in shared memory.
// x rows: FP32 from global to registers one tile ahead, to BF16 in a double-buffered shared
// tile (one barrier per tile), or (opt-in x ring) cp.async'd FP32 3-4 tiles ahead; weight units:
// global loads kAhead tiles ahead in registers, so 2-4 tiles of weights are in flight per thread.
// H200 (bench/results/mma-experts-h200-2026-12-04k): 1.2-1.6x the shared-tile wmma kernel at
// 512-1024-row chunks; a block's K tile takes ~2 us whatever the format (GB/s follows a row's
// bytes per tile: IQ2_XXS 456 GB/s, BF16 4100 at 512 rows), so x's one-tile distance is the
// suspect the ring tests (unmeasured).
// N = 8 per MMA: an entry's rows 8..15 are multiplied only when the entry has more than 8.
// Rows past an entry's count are zeros and never written back. Each output element is the same
// FP32 accumulation over the same K order whatever G, so G = 1 and G = 4 agree bit for bit.
//   G = 1: one block per entry (rows_per_expert <= 16: 512-row chunks of DeepSeek / GLM / Qwen).
//   G = 4: a run of up to 4 consecutive entries of one expert (moe_group gives an expert with
//     more than 16 rows of a chunk consecutive entries) shares each decoded fragment.
#include <cuda_bf16.h>

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/grouped_mma_entries.cuh"
#include "backend/cuda/grouped_mma_frag.cuh"
#include "backend/cuda/iq2xxs_grid.h"
#include "backend/cuda/smem_opt_in.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

using namespace gemv_detail;
using namespace grouped_mma_detail;

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kTileRows = 16 * kWarps;  // weight rows per block
constexpr int kTileK = 128;             // columns per K tile (4 units: one per quad lane)
constexpr int kG = kGroupedMmaMaxEntries;
// x tile in shared memory: BF16, column c of a row at c + 8 * (c / 32) (16 bytes of padding
// after each quad lane's 32 columns), row pitch 160: a quarter warp's 16-byte reads (2 rows x
// 4 lanes) then hit 32 distinct banks.
constexpr int kXPitch = kTileK + 8 * (kTileK / 32);
__device__ __forceinline__ int x_col(int c) { return c + 8 * (c >> 5); }
constexpr int kXPer = kN * kTileK / 2 / kThreads;  // float2 of x per entry and thread (4)
// The x ring (kRing, opt-in: grouped_mma_set_x_ring): x tiles FP32 in shared memory, cp.async'd
// kStages - 1 tiles ahead (no registers, no store pass), rounded to BF16 when the B fragments
// are read (the same operands as the BF16 tile: results equal bit for bit). Column c of a row at
// c + 4 * (c / 32), row pitch 144 floats: a quarter warp's 16-byte reads hit 32 distinct banks.
constexpr int kXPitchF = kTileK + 4 * (kTileK / 32);
__device__ __forceinline__ int xf_col(int c) { return c + 4 * (c >> 5); }
template <int G>
constexpr int kStages = G > 2 ? 3 : 4;
// Where a block's x tiles come from: FP32 rows through registers into the BF16 tile one tile
// ahead (the default), the FP32 ring above, or (grouped_mma_bf16_x16) rows the caller already
// rounded to BF16, cp.async'd kStages - 1 tiles ahead into a BF16 ring of the tile's layout:
// half the L2 -> SM bytes of FP32 x, no registers, no conversion per block (at 4 entries per
// block a K tile reads 32 KB of FP32 x beside ~5 KB of Q2_K weights). rows_to_bf16 rounds as
// pack_bf16 does, so all three give the same bits.
enum class XSrc { kF32Tile, kF32Ring, kBf16Ring };
template <int G, XSrc kX>
constexpr size_t ring_bytes() {
  if constexpr (kX == XSrc::kF32Ring) return size_t(kStages<G>) * G * kN * kXPitchF * sizeof(float);
  else if constexpr (kX == XSrc::kBf16Ring) return size_t(kStages<G>) * G * kN * kXPitch * sizeof(__nv_bfloat16);
  else return 0;
}

__device__ const uint64_t d_grid[256] = {DS4_IQ2XXS_GRID_VALUES};

// Weight tiles in flight per thread: as many as ~24 bytes of registers per unit allow.
template <class F>
constexpr int kAhead = sizeof(typename F::Raw) <= 12 ? 4 : sizeof(typename F::Raw) <= 24 ? 3
                       : sizeof(typename F::Raw) <= 48 ? 2 : 1;

__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// This thread's two units of K tile kt: unit kt * 4 + t of weight rows r and r + 8 (clamped
// to the matrix: a partial last row tile reads the last row again and never writes it).
template <class F>
__device__ __forceinline__ void load_pair(const Args& a, int64_t r, int64_t kt, typename F::Raw (&raw)[2]) {
  const int64_t u = kt * (kTileK / kUnit) + int(threadIdx.x % 4);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = min(r + 8 * h, a.rows - 1);
    raw[h] = F::template load<FromGlobal>(a, a.data + row * a.row_stride, row, u);
  }
}

// Blocks per SM the registers are capped for: 1 at 4 entries (168 registers for Q2_K), 2 below;
// kOcc2 asks 2 at 4 entries too (<= 128 registers: the BF16 ring's 61 KB then fits twice). ncu of
// the BF16-x kernel at GLM's gate|up (session 27 call 1): 2 warps per scheduler, one instruction
// issued every 3.4 cycles, stalls mostly fixed-latency dependencies: latency-bound. With kOcc2
// (Q2_K spills ~90 bytes) GLM's experts took 374 -> 305 ms of a 2K prefill (call 2, H100).
template <int G, bool kOcc2>
constexpr int kMinBlocks = G > 2 && !kOcc2 ? 1 : 2;

template <class F, int G, XSrc kX, bool kOcc2 = false>
__global__ void __launch_bounds__(kThreads, kMinBlocks<G, kOcc2>)
    grouped_mma_kernel(Args a, RowsArgs ra, const float* __restrict__ x, float* __restrict__ y) {
  constexpr bool kRing = kX != XSrc::kF32Tile, kX16 = kX == XSrc::kBf16Ring;
  const __nv_bfloat16* x16 = reinterpret_cast<const __nv_bfloat16*>(x);  // kX16: BF16 rows, offsets in BF16
  constexpr int D = kAhead<F>;
  const int b = int(blockIdx.y);
  const int nt = block_entries<G>(a, ra, b);  // this block's entries (0: none)
  if (nt == 0) return;
  {
    const int64_t e = entry_weight(a, ra, b);
    a.data += e * a.id_stride;
    if (a.scales) a.scales = static_cast<const uint8_t*>(a.scales) + e * a.id_scale_stride;
    if (a.biases) a.biases = static_cast<const uint8_t*>(a.biases) + e * a.id_scale_stride;
  }
  __shared__ __align__(16) __nv_bfloat16 xs[2][kRing ? 8 : G * kN * kXPitch];
  extern __shared__ __align__(16) float ring[];  // kRing: {kStages, G * kN, kXPitchF} floats or {.., kXPitch} BF16
  __nv_bfloat16* ring16 = reinterpret_cast<__nv_bfloat16*>(ring);
  __shared__ int64_t xo[G * kN], yo[G * kN];
  __shared__ int nrows[G];
  __shared__ __align__(16) unsigned char tables[Frag<F>::kTableBytes];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int64_t row0 = int64_t(blockIdx.x) * kTileRows, r = row0 + 16 * warp + g;
  const int tiles = int(a.cols / kTileK);
  typename F::Raw raw[D][2];
#pragma unroll
  for (int s = 0; s < D; ++s)
    if (s < tiles) load_pair<F>(a, r, s, raw[s]);  // the first tiles' loads before the set-up below
  Frag<F>::init(tables, d_grid, int(threadIdx.x), kThreads);
  entry_rows<G>(a, ra, b, nt, xo, yo, nrows);
  __syncthreads();
  // x tile kt of every entry: pairs per thread, q -> entry row q / 64, columns 2 (q % 64).
  float2 xv[G][kXPer];
  auto load_x = [&](int64_t kt) {
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int p = 0; p < kXPer; ++p) {
        const int q = int(threadIdx.x) + p * kThreads, i = q / (kTileK / 2), c = 2 * (q % (kTileK / 2));
        const int64_t o = xo[j * kN + i];
        xv[j][p] = j < nt && o >= 0 ? *reinterpret_cast<const float2*>(x + o + kt * kTileK + c) : make_float2(0.f, 0.f);
      }
  };
  auto store_x = [&](int buf) {
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int p = 0; p < kXPer; ++p)
        if (j < nt) {
          const int q = int(threadIdx.x) + p * kThreads, i = q / (kTileK / 2), c = 2 * (q % (kTileK / 2));
          *reinterpret_cast<uint32_t*>(xs[buf] + (j * kN + i) * kXPitch + x_col(c)) = pack_bf16(xv[j][p].x, xv[j][p].y);
        }
  };
  // kRing: tile kt's x rows into stage `stage` (one commit group per tile, empty past the end),
  // E elements per copy: BF16 rows 8 (16 bytes), FP32 rows 2 (8 bytes)
  auto issue_x = [&](int kt, int stage) {
    auto rows = [&](auto* dst, const auto* src, auto e, int pitch, auto col) {
      constexpr int E = decltype(e)::value, kBytes = E * int(sizeof(*src));
#pragma unroll
      for (int p = 0; p < G * kN * (kTileK / E) / kThreads; ++p) {
        const int q = int(threadIdx.x) + p * kThreads, i = q / (kTileK / E), c = E * (q % (kTileK / E));
        const int64_t o = xo[i];
        const bool valid = i / kN < nt && o >= 0;
        cp_async<kBytes>(dst + (stage * G * kN + i) * pitch + col(c), valid ? src + o + int64_t(kt) * kTileK + c : src,
                         valid);
      }
    };
    if (kt < tiles) {
      if constexpr (kX16) rows(ring16, x16, std::integral_constant<int, 8>{}, kXPitch, [](int c) { return x_col(c); });
      else rows(ring, x, std::integral_constant<int, 2>{}, kXPitchF, [](int c) { return xf_col(c); });
    }
    cp_async_commit();
  };
  if constexpr (kRing) {
#pragma unroll
    for (int st = 0; st < kStages<G> - 1; ++st) issue_x(st, st);
  } else {
    load_x(0);
    store_x(0);
    if (tiles > 1) load_x(1);
    __syncthreads();
  }
  float acc[G][2][4];
#pragma unroll
  for (int j = 0; j < G; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[j][h][k] = 0.f;
  for (int kt0 = 0; kt0 < tiles; kt0 += D) {
#pragma unroll
    for (int s = 0; s < D; ++s) {
      const int kt = kt0 + s;
      if (kt < tiles) {  // block-uniform
      const int stage = kt % kStages<G>;
      if constexpr (kRing) {  // tile kt's x landed (this thread's copies; the barrier: everyone's), and
        cp_async_wait<kStages<G> - 2>();  // the stage read in tile kt - 1 is free for tile kt + kStages - 1
        __syncthreads();
        issue_x(kt + kStages<G> - 1, (kt + kStages<G> - 1) % kStages<G>);
      }
      // A fragments: pk[h][2j] = columns 4j, 4j+1 and pk[h][2j+1] = 4j+2, 4j+3 of this lane's unit, row g + 8h
      uint32_t pk[2][16];
#pragma unroll
      for (int h = 0; h < 2; ++h) Frag<F>::decode(raw[s][h], kt * (kTileK / kUnit) + t, pk[h], tables);
      if (kt + D < tiles) load_pair<F>(a, r, kt + D, raw[s]);
      const __nv_bfloat16* xt = (kX16 ? ring16 + stage * G * kN * kXPitch : xs[kt & 1]) + g * kXPitch + x_col(32 * t);
      const float* xf = ring + (stage * G * kN + g) * kXPitchF + xf_col(32 * t);
#pragma unroll
      for (int j2 = 0; j2 < 4; ++j2) {  // k-steps 2 j2 and 2 j2 + 1: one 16-byte read of x per N tile
#pragma unroll
        for (int j = 0; j < G; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            if (j < nt && (h == 0 || nrows[j] > 8)) {
              uint4 bv;
              if constexpr (kRing && !kX16) {
                const float* f = xf + (j * kN + 8 * h) * kXPitchF + 8 * j2;
                const float4 f0 = *reinterpret_cast<const float4*>(f), f1 = *reinterpret_cast<const float4*>(f + 4);
                bv = make_uint4(pack_bf16(f0.x, f0.y), pack_bf16(f0.z, f0.w), pack_bf16(f1.x, f1.y), pack_bf16(f1.z, f1.w));
              } else {
                bv = *reinterpret_cast<const uint4*>(xt + (j * kN + 8 * h) * kXPitch + 8 * j2);
              }
              const uint32_t a0[4] = {pk[0][4 * j2], pk[1][4 * j2], pk[0][4 * j2 + 1], pk[1][4 * j2 + 1]};
              const uint32_t a1[4] = {pk[0][4 * j2 + 2], pk[1][4 * j2 + 2], pk[0][4 * j2 + 3], pk[1][4 * j2 + 3]};
              mma_16816(acc[j][h], a0, bv.x, bv.y);
              mma_16816(acc[j][h], a1, bv.z, bv.w);
            }
      }
      if constexpr (!kRing) {
        if (kt + 1 < tiles) store_x((kt + 1) & 1);
        if (kt + 2 < tiles) load_x(kt + 2);
        __syncthreads();
      }
      }
    }
  }
  store_rows<G>(acc, y, r, a.rows, t, nt, yo, nrows);
}

// Entries per block: 0 = by the chunk (rows_per_expert), else forced (1, 2 or kG):
// DS4_GROUPED_MMA_ENTRIES or grouped_mma_set_entries_per_block.
std::atomic<int> g_entries{-1};
int forced_entries() {
  return env_setting(g_entries, "DS4_GROUPED_MMA_ENTRIES", {0, 1, 2, kG}, "0 (by the chunk), 1, 2 or 4");
}

// The x ring (kRing): DS4_GROUPED_MMA_XRING (0 or 1) or grouped_mma_set_x_ring.
std::atomic<int> g_ring{-1};
bool x_ring() { return env_setting(g_ring, "DS4_GROUPED_MMA_XRING", {0, 1}, "0 or 1") == 1; }

// Two blocks per SM at 4 entries for the BF16-x kernel (kOcc2): DS4_GROUPED_MMA_OCC (1 or 2; unset = 2)
// or grouped_mma_set_occupancy; the same bits either way (only the register allocation differs).
std::atomic<int> g_occ{-1};
int occupancy() { return env_setting(g_occ, "DS4_GROUPED_MMA_OCC", {1, 2}, "1 or 2", 2); }

template <class F, int G, XSrc kX, bool kOcc2 = false>
void launch_x(const Args& a, const RowsArgs& ra, const float* x, float* y, unsigned batch, cudaStream_t s) {
  const dim3 blocks(unsigned((a.rows + kTileRows - 1) / kTileRows), batch);
  constexpr size_t bytes = ring_bytes<G, kX>();
  if constexpr (bytes > 48 * 1024) opt_in_smem_once<grouped_mma_kernel<F, G, kX, kOcc2>>(bytes);
  grouped_mma_kernel<F, G, kX, kOcc2><<<blocks, kThreads, bytes, s>>>(a, ra, x, y);
  DS4_CUDA_CHECK_LAUNCH();
}

template <class F, int G>
void launch_g(const Args& a, const RowsArgs& ra, const float* x, bool x16, float* y, unsigned batch, cudaStream_t s) {
  if (x16) {
    if constexpr (G == kG) {
      if (occupancy() == 2) return launch_x<F, G, XSrc::kBf16Ring, true>(a, ra, x, y, batch, s);
    }
    launch_x<F, G, XSrc::kBf16Ring>(a, ra, x, y, batch, s);
  } else if (x_ring()) {
    launch_x<F, G, XSrc::kF32Ring>(a, ra, x, y, batch, s);
  } else {
    launch_x<F, G, XSrc::kF32Tile>(a, ra, x, y, batch, s);
  }
}

template <class F>
void launch(const Args& a, const RowsArgs& ra, const float* x, bool x16, float* y, unsigned batch,
            int64_t rows_per_expert, cudaStream_t s) {
  const int g = entries_for(forced_entries(), rows_per_expert, kG);
  if (g == kG) launch_g<F, kG>(a, ra, x, x16, y, batch, s);
  else if (g == 2) launch_g<F, 2>(a, ra, x, x16, y, batch, s);
  else launch_g<F, 1>(a, ra, x, x16, y, batch, s);
}

}  // namespace

void grouped_mma_set_entries_per_block(int n) {
  if (n != 0 && n != 1 && n != 2 && n != kG)
    throw InputError("grouped_mma_set_entries_per_block: " + std::to_string(n) + " (0, 1, 2 or " + std::to_string(kG) + ")");
  g_entries.store(n, std::memory_order_relaxed);
}
int grouped_mma_entries_per_block() { return forced_entries(); }
void grouped_mma_set_x_ring(bool on) { g_ring.store(on ? 1 : 0, std::memory_order_relaxed); }
bool grouped_mma_x_ring() { return x_ring(); }

namespace {
std::atomic<int> g_x16{-1};
}
bool grouped_mma_x16() { return env_setting(g_x16, "DS4_GROUPED_MMA_X16", {0, 1}, "0 or 1", 1) == 1; }
void grouped_mma_set_x16(bool on) { g_x16.store(on ? 1 : 0, std::memory_order_relaxed); }
void grouped_mma_set_occupancy(int blocks_per_sm) {
  if (blocks_per_sm != 1 && blocks_per_sm != 2)
    throw InputError("grouped_mma_set_occupancy: " + std::to_string(blocks_per_sm) + " (1 or 2)");
  g_occ.store(blocks_per_sm, std::memory_order_relaxed);
}
int grouped_mma_occupancy() { return occupancy(); }

bool grouped_mma_supports(const WeightMatrix& w) {
  if (!gemv_supports(w.type) || w.cols % kTileK != 0 || w.rows < 1) return false;
  if (w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8)
    return w.scales && w.biases && w.group_size >= 32 && (w.group_size & (w.group_size - 1)) == 0 &&
           w.cols % w.group_size == 0 && (w.scale_type == DType::F16 || w.scale_type == DType::BF16);
  return true;
}

namespace {

// grouped_mma_bf16 / _x16: x is FP32 rows, or (x16) BF16 rows whose offsets count BF16 elements.
void run(const WeightMatrix& w, const float* x, bool x16, float* y, const GemvRows& r, cudaStream_t s,
         int64_t rows_per_expert) {
  const char* name = x16 ? "cuda grouped_mma_bf16_x16" : "cuda grouped_mma_bf16";
  if (!grouped_mma_supports(w))
    throw InputError(std::string(name) + ": " + std::string(dtype_name(w.type)) + " " + std::to_string(w.rows) + "x" +
                     std::to_string(w.cols) + " (cols must be a multiple of " + std::to_string(kTileK) + ")");
  if (r.n < 1 || r.n > kGemvMaxRows || r.idx_stride != kGemvMaxRows || r.batch.count < 1 || r.batch.count > 65535 || r.x_row % 2 != 0 ||
      r.batch.x_stride % 2 != 0)
    throw InputError(std::string(name) + ": n " + std::to_string(r.n) + ", count " + std::to_string(r.batch.count) +
                     ", idx_stride " + std::to_string(r.idx_stride) + " (takes 16) or an odd x stride");
  if (x16 && (r.x_row % 8 != 0 || r.batch.x_stride % 8 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0))
    throw InputError(std::string(name) + ": BF16 x rows must start 16-byte aligned (x_row " + std::to_string(r.x_row) +
                     ", x_stride " + std::to_string(r.batch.x_stride) + " BF16 elements: multiples of 8)");
  Args a{static_cast<const uint8_t*>(w.data), w.row_stride_bytes(), w.scales, w.biases, 0, 0, w.rows, w.cols,
         r.batch.ids, int64_t(r.batch.id_stride), int64_t(r.batch.id_scale_stride), r.batch.x_stride,
         r.batch.y_stride};
  if (w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8) {
    while ((int64_t(1) << a.group_shift) < w.group_size) ++a.group_shift;
    a.groups_per_row = w.cols / w.group_size;
  }
  const RowsArgs ra{r.n, r.x_row, r.y_row, r.live, r.counts, r.x_idx, r.y_idx};
  const unsigned batch = unsigned(r.batch.count);
  const bool bf16s = w.scale_type == DType::BF16;
  const int64_t rpe = rows_per_expert;
  switch (w.type) {
    case DType::F32: return launch<F32>(a, ra, x, x16, y, batch, rpe, s);
    case DType::BF16: return launch<Half16<true>>(a, ra, x, x16, y, batch, rpe, s);
    case DType::F16: return launch<Half16<false>>(a, ra, x, x16, y, batch, rpe, s);
    case DType::Q8_0: return launch<Q8_0>(a, ra, x, x16, y, batch, rpe, s);
    case DType::Q4_K: return launch<Q4_K>(a, ra, x, x16, y, batch, rpe, s);
    case DType::Q2_K: return launch<Q2_K>(a, ra, x, x16, y, batch, rpe, s);
    case DType::IQ2_XXS: return launch<IQ2_XXS>(a, ra, x, x16, y, batch, rpe, s);
    case DType::MLX_Q4:
      return bf16s ? launch<MlxAffine<4, true>>(a, ra, x, x16, y, batch, rpe, s)
                   : launch<MlxAffine<4, false>>(a, ra, x, x16, y, batch, rpe, s);
    case DType::MLX_Q8:
      return bf16s ? launch<MlxAffine<8, true>>(a, ra, x, x16, y, batch, rpe, s)
                   : launch<MlxAffine<8, false>>(a, ra, x, x16, y, batch, rpe, s);
    default: break;
  }
}

}  // namespace

void grouped_mma_bf16(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t s,
                      int64_t rows_per_expert) {
  run(w, x, false, y, r, s, rows_per_expert);
}

void grouped_mma_bf16_x16(const WeightMatrix& w, const void* x_bf16, float* y, const GemvRows& r, cudaStream_t s,
                          int64_t rows_per_expert) {
  run(w, static_cast<const float*>(x_bf16), true, y, r, s, rows_per_expert);
}

}  // namespace ds4::cuda
