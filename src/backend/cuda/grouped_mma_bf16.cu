// grouped_mma_bf16 (grouped_mma.h). Block = G entries (<= 16 x rows each) of ONE expert x 128
// weight rows, 8 warps. Per K tile of 128 columns: the block's 128 x 128 weights decoded unit by
// unit (gemv_formats.cuh decode) to BF16 in shared memory once for its entries, the entries' x
// rows to BF16 beside them, then each warp multiplies its 16 weight rows with every entry's 16
// x rows (wmma 16x16x16, FP32 accumulators, one per entry). Rows past an entry's count are zeros
// and never written back. Each output element is the same FP32 accumulation over the same K
// order whatever G, so the two kernels below agree bit for bit.
//   G = 1: one block per entry (39 KB of shared memory, ~48 registers: 5 blocks per SM whose
//     loads and barriers overlap). H200 (bench/results/prefill-h200-2026-12-04g): the kernel is
//     latency bound, not decode bound: BF16 experts (no decode) run as fast as IQ2_XXS.
//   G = 4: a run of up to 4 consecutive entries of one expert (moe_group gives an expert with
//     more than 16 rows of a chunk consecutive entries) shares one decoded tile; the next K
//     tile's weight units load into registers before this tile's MMAs (2 blocks per SM: the
//     prefetch stands in for the occupancy). H200: 1.1-1.3x the G = 1 kernel's speed at
//     1024-row chunks, 1.5-1.7x at 2048 (74-77 TFLOP/s); at 512 rows (10-14 rows per expert)
//     G = 1 is 1.2-1.5x faster.
#include <cuda_bf16.h>
#include <mma.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/iq2xxs_grid.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

using namespace gemv_detail;
using namespace nvcuda;

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kTileRows = 16 * kWarps;    // weight rows per block
constexpr int kTileK = 128;               // columns per K step (4 units)
constexpr int kLd = kTileK + 8;           // BF16 row pitch in shared memory (16-byte multiple)
constexpr int kN = kGemvMaxRows;          // x rows per entry (16 = one wmma N)
constexpr int kG = kGroupedMmaMaxEntries;  // entries sharing one decoded tile
constexpr int kUnitsPerThread = kTileRows * (kTileK / kUnit) / kThreads;  // 2
static_assert(kUnitsPerThread * kThreads == kTileRows * (kTileK / kUnit));

__device__ const uint64_t d_grid[256] = {DS4_IQ2XXS_GRID_VALUES};

struct RowsArgs {
  int n;
  int64_t x_row, y_row;
  const int32_t *live, *counts, *x_idx, *y_idx;
};

// The units of this thread in a K tile: q = threadIdx.x + p * kThreads -> row q / 4, unit q % 4.
template <class F>
__device__ __forceinline__ void load_units(const Args& a, int64_t row0, int64_t k0,
                                           typename F::Raw (&raw)[kUnitsPerThread]) {
#pragma unroll
  for (int p = 0; p < kUnitsPerThread; ++p) {
    const int q = int(threadIdx.x) + p * kThreads;
    const int64_t row = min(row0 + q / (kTileK / kUnit), a.rows - 1), u = k0 / kUnit + q % (kTileK / kUnit);
    raw[p] = F::template load<FromGlobal>(a, a.data + row * a.row_stride, row, u);
  }
}

// Unit p of this thread decoded to BF16 into its row of the weight tile.
template <class F>
__device__ __forceinline__ void store_unit(const typename F::Raw& raw, int p, int64_t k0, const uint64_t* grid,
                                           __nv_bfloat16* ws) {
  const int q = int(threadIdx.x) + p * kThreads, r = q / (kTileK / kUnit), uu = q % (kTileK / kUnit);
  float w[kUnit];
  F::decode(raw, k0 / kUnit + uu, w, grid);
  uint4 v[4];
  uint32_t* pw = reinterpret_cast<uint32_t*>(v);
#pragma unroll
  for (int k = 0; k < kUnit / 2; ++k) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(w[2 * k], w[2 * k + 1]);
    pw[k] = *reinterpret_cast<const uint32_t*>(&h);
  }
  uint4* o = reinterpret_cast<uint4*>(ws + r * kLd + uu * kUnit);
#pragma unroll
  for (int k = 0; k < 4; ++k) o[k] = v[k];
}

template <int G>
constexpr size_t smem_bytes() {
  return size_t(kTileRows + G * kN) * kLd * sizeof(__nv_bfloat16);
}

template <class F, int G>
__global__ void __launch_bounds__(kThreads, G > 1 ? 2 : 5)
    grouped_mma_kernel(Args a, RowsArgs ra, const float* __restrict__ x, float* __restrict__ y) {
  static_assert(kWarps * G * 16 * 16 * sizeof(float) <= kTileRows * kLd * sizeof(__nv_bfloat16),
                "the output staging reuses the weight tile");
  const int b = int(blockIdx.y);
  const int live = ra.live ? *ra.live : int(gridDim.y);
  if (b >= live) return;
  // This block's entries: b and the next ones of the same expert, up to G, when b starts such a
  // group inside its run of equal ids (else another block has b).
  int nt = 1;
  if (G > 1 && a.ids) {
    const int32_t e = a.ids[b];
    int s = b;
    while (s > 0 && a.ids[s - 1] == e) --s;
    if ((b - s) % G != 0) return;
    while (nt < G && b + nt < live && a.ids[b + nt] == e) ++nt;
  }
  {
    const int64_t e = a.ids ? a.ids[b] : b;
    a.data += e * a.id_stride;
    if (a.scales) a.scales = static_cast<const uint8_t*>(a.scales) + e * a.id_scale_stride;
    if (a.biases) a.biases = static_cast<const uint8_t*>(a.biases) + e * a.id_scale_stride;
  }
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* ws = reinterpret_cast<__nv_bfloat16*>(smem);  // weights; reused for the output
  __nv_bfloat16* xs = ws + kTileRows * kLd;                     // {G * kN, kLd} x rows
  __shared__ int64_t xo[G * kN], yo[G * kN];
  __shared__ int nrows[G];
  __shared__ uint64_t grid[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  const int64_t row0 = int64_t(blockIdx.x) * kTileRows;
  typename F::Raw raw[kUnitsPerThread];
  if constexpr (G > 1) load_units<F>(a, row0, 0, raw);  // first tile's loads before the set-up below
  if constexpr (std::is_same_v<F, IQ2_XXS>)
    for (int i = threadIdx.x; i < 256; i += kThreads) grid[i] = d_grid[i];
  if (threadIdx.x < G * kN) {
    const int j = threadIdx.x / kN, i = threadIdx.x % kN, bj = b + j;
    const int n = j < nt ? (ra.counts ? min(ra.counts[bj], kN) : ra.n) : 0;
    if (i == 0) nrows[j] = n;
    const int64_t k = int64_t(bj) * kGemvMaxRows + i;
    xo[threadIdx.x] = i < n ? bj * a.x_stride + (ra.x_idx ? ra.x_idx[k] : i) * ra.x_row : -1;
    yo[threadIdx.x] = i < n ? bj * a.y_stride + (ra.y_idx ? ra.y_idx[k] : i) * ra.y_row : -1;
  }
  __syncthreads();
  const int warp = threadIdx.x / 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[G];
#pragma unroll
  for (int j = 0; j < G; ++j) wmma::fill_fragment(acc[j], 0.f);
  constexpr int kXPer = kN * kTileK / 2 / kThreads;  // 4 float2 per entry and thread
  for (int64_t k0 = 0; k0 < a.cols; k0 += kTileK) {
    // x rows -> BF16 (rows past an entry's count are zeros), pairs per thread: q -> row q / 64,
    // columns 2 (q % 64). G > 1: the loads go out before the weight decode below.
    float2 xv[G][kXPer];
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int t = 0; t < kXPer; ++t) {
        const int q = int(threadIdx.x) + t * kThreads, i = q / (kTileK / 2), c = 2 * (q % (kTileK / 2));
        const int64_t o = xo[j * kN + i];
        xv[j][t] = j < nt && o >= 0 ? *reinterpret_cast<const float2*>(x + o + k0 + c) : make_float2(0.f, 0.f);
        if constexpr (G == 1)
          *reinterpret_cast<__nv_bfloat162*>(xs + i * kLd + c) = __floats2bfloat162_rn(xv[j][t].x, xv[j][t].y);
      }
    if constexpr (G == 1) {  // weights: this tile's units loaded, then decoded (occupancy hides the loads)
      load_units<F>(a, row0, k0, raw);
#pragma unroll
      for (int p = 0; p < kUnitsPerThread; ++p) store_unit<F>(raw[p], p, k0, grid, ws);
    } else {  // the prefetched units, then x, then the next tile's units in flight during the MMAs
#pragma unroll
      for (int p = 0; p < kUnitsPerThread; ++p) store_unit<F>(raw[p], p, k0, grid, ws);
#pragma unroll
      for (int j = 0; j < G; ++j)
#pragma unroll
        for (int t = 0; t < kXPer; ++t)
          if (j < nt) {
            const int q = int(threadIdx.x) + t * kThreads, i = q / (kTileK / 2), c = 2 * (q % (kTileK / 2));
            *reinterpret_cast<__nv_bfloat162*>(xs + (j * kN + i) * kLd + c) =
                __floats2bfloat162_rn(xv[j][t].x, xv[j][t].y);
          }
      if (k0 + kTileK < a.cols) load_units<F>(a, row0, k0 + kTileK, raw);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, ws + (16 * warp) * kLd + kk, kLd);
#pragma unroll
      for (int j = 0; j < G; ++j)
        if (j < nt) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
          wmma::load_matrix_sync(fb, xs + j * kN * kLd + kk, kLd);  // element (k, i) at xs[i * kLd + k]
          wmma::mma_sync(acc[j], fa, fb, acc[j]);
        }
    }
    __syncthreads();
  }
  // acc[j]: {16 weight rows, 16 x rows of entry j} of this warp -> shared (over the weight
  // tile, column-major: one x row's 16 weight rows contiguous), then out: lane = weight row,
  // so a half-warp writes 16 consecutive floats of one y row.
  float* out = reinterpret_cast<float*>(ws) + warp * G * 16 * 16;
#pragma unroll
  for (int j = 0; j < G; ++j)
    if (j < nt) wmma::store_matrix_sync(out + j * 256, acc[j], 16, wmma::mem_col_major);
  __syncwarp();
  for (int q = threadIdx.x % 32; q < nt * 256; q += 32) {
    const int j = q / 256, i = (q % 256) / 16, r = q % 16;  // entry j, its x row i, weight row r
    const int64_t row = row0 + 16 * warp + r;
    if (i < nrows[j] && row < a.rows) y[yo[j * kN + i] + row] = out[q];
  }
}

// Entries per block: 0 = by the chunk (rows_per_expert), else forced (1 or kG): the environment
// variable DS4_GROUPED_MMA_ENTRIES (read on first use) or grouped_mma_set_entries_per_block.
std::atomic<int> g_entries{-1};
int forced_entries() {
  int v = g_entries.load(std::memory_order_relaxed);
  if (v < 0) {
    v = 0;
    if (const char* e = std::getenv("DS4_GROUPED_MMA_ENTRIES")) {
      const std::string t = e;
      if (t != "0" && t != "1" && t != std::to_string(kG))
        throw InputError("DS4_GROUPED_MMA_ENTRIES=" + t + ": expected 0 (by the chunk), 1 or " + std::to_string(kG));
      v = std::stoi(t);
    }
    g_entries.store(v, std::memory_order_relaxed);
  }
  return v;
}

template <class F, int G>
void launch_g(const Args& a, const RowsArgs& ra, const float* x, float* y, unsigned batch, cudaStream_t s) {
  constexpr size_t bytes = smem_bytes<G>();
  if constexpr (bytes > 48 * 1024)  // over the default: opt in (per device, so at every launch: a host-side write)
    DS4_CUDA_CHECK(cudaFuncSetAttribute(grouped_mma_kernel<F, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  const dim3 blocks(unsigned((a.rows + kTileRows - 1) / kTileRows), batch);
  grouped_mma_kernel<F, G><<<blocks, kThreads, bytes, s>>>(a, ra, x, y);
  DS4_CUDA_CHECK_LAUNCH();
}

template <class F>
void launch(const Args& a, const RowsArgs& ra, const float* x, float* y, unsigned batch, int64_t rows_per_expert,
            cudaStream_t s) {
  const int forced = forced_entries();
  const bool shared = forced ? forced > 1 : rows_per_expert > kN;
  if (shared) launch_g<F, kG>(a, ra, x, y, batch, s);
  else launch_g<F, 1>(a, ra, x, y, batch, s);
}

}  // namespace

void grouped_mma_set_entries_per_block(int n) {
  if (n != 0 && n != 1 && n != kG)
    throw InputError("grouped_mma_set_entries_per_block: " + std::to_string(n) + " (0, 1 or " + std::to_string(kG) + ")");
  g_entries.store(n, std::memory_order_relaxed);
}
int grouped_mma_entries_per_block() { return forced_entries(); }

bool grouped_mma_supports(const WeightMatrix& w) {
  if (!gemv_supports(w.type) || w.cols % kTileK != 0 || w.rows < 1) return false;
  if (w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8)
    return w.scales && w.biases && w.group_size >= 32 && (w.group_size & (w.group_size - 1)) == 0 &&
           w.cols % w.group_size == 0 && (w.scale_type == DType::F16 || w.scale_type == DType::BF16);
  return true;
}

void grouped_mma_bf16(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t s,
                      int64_t rows_per_expert) {
  if (!grouped_mma_supports(w))
    throw InputError("cuda grouped_mma_bf16: " + std::string(dtype_name(w.type)) + " " + std::to_string(w.rows) + "x" +
                     std::to_string(w.cols) + " (cols must be a multiple of " + std::to_string(kTileK) + ")");
  if (r.n < 1 || r.n > kGemvMaxRows || r.batch.count < 1 || r.batch.count > 65535 || r.x_row % 2 != 0 ||
      r.batch.x_stride % 2 != 0)
    throw InputError("cuda grouped_mma_bf16: n " + std::to_string(r.n) + ", count " + std::to_string(r.batch.count) +
                     " or an odd x stride");
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
  switch (w.type) {
    case DType::F32: return launch<F32>(a, ra, x, y, batch, rows_per_expert, s);
    case DType::BF16: return launch<Half16<true>>(a, ra, x, y, batch, rows_per_expert, s);
    case DType::F16: return launch<Half16<false>>(a, ra, x, y, batch, rows_per_expert, s);
    case DType::Q8_0: return launch<Q8_0>(a, ra, x, y, batch, rows_per_expert, s);
    case DType::Q4_K: return launch<Q4_K>(a, ra, x, y, batch, rows_per_expert, s);
    case DType::Q2_K: return launch<Q2_K>(a, ra, x, y, batch, rows_per_expert, s);
    case DType::IQ2_XXS: return launch<IQ2_XXS>(a, ra, x, y, batch, rows_per_expert, s);
    case DType::MLX_Q4:
        return bf16s ? launch<MlxAffine<4, true>>(a, ra, x, y, batch, rows_per_expert, s)
                   : launch<MlxAffine<4, false>>(a, ra, x, y, batch, rows_per_expert, s);
    case DType::MLX_Q8:
      return bf16s ? launch<MlxAffine<8, true>>(a, ra, x, y, batch, rows_per_expert, s)
                   : launch<MlxAffine<8, false>>(a, ra, x, y, batch, rows_per_expert, s);
    default: break;
  }
}

}  // namespace ds4::cuda
