// grouped_mma_bf16 (grouped_mma.h). Block = up to kEntriesPerBlock entries of ONE expert (the
// run of consecutive entries that moe_group gives an expert with more than 16 rows) x 128 weight
// rows, 8 warps. Per K tile of 128 columns: the block's 128 x 128 weights decoded unit by unit
// (gemv_formats.cuh decode) to BF16 in shared memory ONCE for all its entries, the entries' x
// rows (16 per entry) to BF16 beside them, then each warp multiplies its 16 weight rows with
// every entry's 16 x rows (wmma 16x16x16, FP32 accumulators, one per entry). Decoding, not the
// MMAs, bounds this kernel (a 512-row chunk decodes each used expert ~1-2 times per 16 rows), so
// sharing a decoded tile between the entries of one expert divides the decode work, and the
// next K tile's weight units are loaded into registers before this tile's MMAs (their latency
// hides behind the barrier and the MMAs instead of stalling the decode).
// Rows past an entry's count are zeros and never written back. Each output element is the same
// FP32 accumulation over the same K order whatever block computes it.
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
static_assert(kWarps * kG * 16 * 16 * sizeof(float) <= kTileRows * kLd * sizeof(__nv_bfloat16),
              "the output staging reuses the weight tile");
constexpr size_t kSmemBytes = size_t(kTileRows + kG * kN) * kLd * sizeof(__nv_bfloat16);

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

template <class F>
__global__ void __launch_bounds__(kThreads, 2) grouped_mma_kernel(Args a, RowsArgs ra, int max_entries,
                                                              const float* __restrict__ x, float* __restrict__ y) {
  const int b = int(blockIdx.y);
  const int live = ra.live ? *ra.live : int(gridDim.y);
  if (b >= live) return;
  // This block's entries: b and the next ones of the same expert, up to max_entries, when b
  // starts such a group inside its run of equal ids (else another block has b).
  int nt = 1;
  if (a.ids && max_entries > 1) {
    const int32_t e = a.ids[b];
    int s = b;
    while (s > 0 && a.ids[s - 1] == e) --s;
    if ((b - s) % max_entries != 0) return;
    while (nt < max_entries && b + nt < live && a.ids[b + nt] == e) ++nt;
  }
  {
    const int64_t e = a.ids ? a.ids[b] : b;
    a.data += e * a.id_stride;
    if (a.scales) a.scales = static_cast<const uint8_t*>(a.scales) + e * a.id_scale_stride;
    if (a.biases) a.biases = static_cast<const uint8_t*>(a.biases) + e * a.id_scale_stride;
  }
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* ws = reinterpret_cast<__nv_bfloat16*>(smem);  // weights; reused for the output
  __nv_bfloat16* xs = ws + kTileRows * kLd;                     // {kG * kN, kLd} x rows
  __shared__ int64_t xo[kG * kN], yo[kG * kN];
  __shared__ int nrows[kG];
  __shared__ uint64_t grid[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  const int64_t row0 = int64_t(blockIdx.x) * kTileRows;
  typename F::Raw raw[kUnitsPerThread];
  load_units<F>(a, row0, 0, raw);  // first tile's loads before the set-up below
  if constexpr (std::is_same_v<F, IQ2_XXS>)
    for (int i = threadIdx.x; i < 256; i += kThreads) grid[i] = d_grid[i];
  if (threadIdx.x < kG * kN) {
    const int j = threadIdx.x / kN, i = threadIdx.x % kN, bj = b + j;
    const int n = j < nt ? (ra.counts ? min(ra.counts[bj], kN) : ra.n) : 0;
    if (i == 0) nrows[j] = n;
    const int64_t k = int64_t(bj) * kGemvMaxRows + i;
    xo[threadIdx.x] = i < n ? bj * a.x_stride + (ra.x_idx ? ra.x_idx[k] : i) * ra.x_row : -1;
    yo[threadIdx.x] = i < n ? bj * a.y_stride + (ra.y_idx ? ra.y_idx[k] : i) * ra.y_row : -1;
  }
  __syncthreads();
  const int warp = threadIdx.x / 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kG];
#pragma unroll
  for (int j = 0; j < kG; ++j) wmma::fill_fragment(acc[j], 0.f);
  for (int64_t k0 = 0; k0 < a.cols; k0 += kTileK) {
    // x rows -> BF16 (rows past an entry's count are zeros): per entry kN x kTileK values, pairs
    // per thread; the loads go out before the weight decode below.
    constexpr int kXPer = kN * kTileK / 2 / kThreads;  // 4 float2 per entry and thread
    float2 xv[kG][kXPer];
#pragma unroll
    for (int j = 0; j < kG; ++j)
#pragma unroll
      for (int t = 0; t < kXPer; ++t) {
        const int q = int(threadIdx.x) + t * kThreads, i = q / (kTileK / 2), c = 2 * (q % (kTileK / 2));
        const int64_t o = xo[j * kN + i];
        xv[j][t] = j < nt && o >= 0 ? *reinterpret_cast<const float2*>(x + o + k0 + c) : make_float2(0.f, 0.f);
      }
    // weights: the prefetched units -> BF16 rows of the tile
#pragma unroll
    for (int p = 0; p < kUnitsPerThread; ++p) {
      const int q = int(threadIdx.x) + p * kThreads, r = q / (kTileK / kUnit), uu = q % (kTileK / kUnit);
      float w[kUnit];
      F::decode(raw[p], k0 / kUnit + uu, w, grid);
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
#pragma unroll
    for (int j = 0; j < kG; ++j)
#pragma unroll
      for (int t = 0; t < kXPer; ++t)
        if (j < nt) {
          const int q = int(threadIdx.x) + t * kThreads, i = q / (kTileK / 2), c = 2 * (q % (kTileK / 2));
          *reinterpret_cast<__nv_bfloat162*>(xs + (j * kN + i) * kLd + c) = __floats2bfloat162_rn(xv[j][t].x, xv[j][t].y);
        }
    // the next tile's weight units in flight during this tile's MMAs
    if (k0 + kTileK < a.cols) load_units<F>(a, row0, k0 + kTileK, raw);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, ws + (16 * warp) * kLd + kk, kLd);
#pragma unroll
      for (int j = 0; j < kG; ++j)
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
  float* out = reinterpret_cast<float*>(ws) + warp * kG * 16 * 16;
#pragma unroll
  for (int j = 0; j < kG; ++j)
    if (j < nt) wmma::store_matrix_sync(out + j * 256, acc[j], 16, wmma::mem_col_major);
  __syncwarp();
  for (int q = threadIdx.x % 32; q < nt * 256; q += 32) {
    const int j = q / 256, i = (q % 256) / 16, r = q % 16;  // entry j, its x row i, weight row r
    const int64_t row = row0 + 16 * warp + r;
    if (i < nrows[j] && row < a.rows) y[yo[j * kN + i] + row] = out[q];
  }
}

// Entries per block: kG unless DS4_GROUPED_MMA_ENTRIES (read on first use) or
// grouped_mma_set_entries_per_block says otherwise (1 = one block per entry, the bench's baseline).
std::atomic<int> g_entries{0};
int entries_per_block() {
  int v = g_entries.load(std::memory_order_relaxed);
  if (v == 0) {
    v = kG;
    if (const char* e = std::getenv("DS4_GROUPED_MMA_ENTRIES")) {
      const int n = std::atoi(e);
      if (n < 1 || n > kG)
        throw InputError("DS4_GROUPED_MMA_ENTRIES=" + std::string(e) + ": expected 1.." + std::to_string(kG));
      v = n;
    }
    g_entries.store(v, std::memory_order_relaxed);
  }
  return v;
}

template <class F>
void launch(const Args& a, const RowsArgs& ra, const float* x, float* y, unsigned batch, cudaStream_t s) {
  // over the 48 KiB default (per device: set at every launch, a host-side attribute write)
  DS4_CUDA_CHECK(cudaFuncSetAttribute(grouped_mma_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(kSmemBytes)));
  const dim3 blocks(unsigned((a.rows + kTileRows - 1) / kTileRows), batch);
  grouped_mma_kernel<F><<<blocks, kThreads, kSmemBytes, s>>>(a, ra, entries_per_block(), x, y);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace

void grouped_mma_set_entries_per_block(int n) {
  if (n < 1 || n > kG) throw InputError("grouped_mma_set_entries_per_block: " + std::to_string(n) + " (1.." + std::to_string(kG) + ")");
  g_entries.store(n, std::memory_order_relaxed);
}
int grouped_mma_entries_per_block() { return entries_per_block(); }

bool grouped_mma_supports(const WeightMatrix& w) {
  if (!gemv_supports(w.type) || w.cols % kTileK != 0 || w.rows < 1) return false;
  if (w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8)
    return w.scales && w.biases && w.group_size >= 32 && (w.group_size & (w.group_size - 1)) == 0 &&
           w.cols % w.group_size == 0 && (w.scale_type == DType::F16 || w.scale_type == DType::BF16);
  return true;
}

void grouped_mma_bf16(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t s) {
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
    case DType::F32: return launch<F32>(a, ra, x, y, batch, s);
    case DType::BF16: return launch<Half16<true>>(a, ra, x, y, batch, s);
    case DType::F16: return launch<Half16<false>>(a, ra, x, y, batch, s);
    case DType::Q8_0: return launch<Q8_0>(a, ra, x, y, batch, s);
    case DType::Q4_K: return launch<Q4_K>(a, ra, x, y, batch, s);
    case DType::Q2_K: return launch<Q2_K>(a, ra, x, y, batch, s);
    case DType::IQ2_XXS: return launch<IQ2_XXS>(a, ra, x, y, batch, s);
    case DType::MLX_Q4:
      return bf16s ? launch<MlxAffine<4, true>>(a, ra, x, y, batch, s) : launch<MlxAffine<4, false>>(a, ra, x, y, batch, s);
    case DType::MLX_Q8:
      return bf16s ? launch<MlxAffine<8, true>>(a, ra, x, y, batch, s) : launch<MlxAffine<8, false>>(a, ra, x, y, batch, s);
    default: break;
  }
}

}  // namespace ds4::cuda
