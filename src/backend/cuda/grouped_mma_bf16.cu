// grouped_mma_bf16 (grouped_mma.h). Block = one entry x 128 weight rows, 8 warps; per K tile of
// 128 columns: the entry's (up to 16) x rows to BF16 in shared memory, the block's 128 x 128
// weights decoded unit by unit (gemv_formats.cuh decode) to BF16 in shared memory, then each
// warp multiplies its 16 weight rows with the 16 x rows (wmma 16x16x16, FP32 accumulators).
// Rows past the entry's count are zeros and never written back.
#include <cuda_bf16.h>
#include <mma.h>

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

__device__ const uint64_t d_grid[256] = {DS4_IQ2XXS_GRID_VALUES};

struct RowsArgs {
  int n;
  int64_t x_row, y_row;
  const int32_t *live, *counts, *x_idx, *y_idx;
};

template <class F>
__global__ void __launch_bounds__(kThreads) grouped_mma_kernel(Args a, RowsArgs ra, const float* __restrict__ x,
                                                              float* __restrict__ y) {
  const int b = int(blockIdx.y);
  if (ra.live && b >= *ra.live) return;
  {
    const int64_t e = a.ids ? a.ids[b] : b;
    a.data += e * a.id_stride;
    if (a.scales) a.scales = static_cast<const uint8_t*>(a.scales) + e * a.id_scale_stride;
    if (a.biases) a.biases = static_cast<const uint8_t*>(a.biases) + e * a.id_scale_stride;
  }
  const int n = ra.counts ? min(ra.counts[b], kN) : ra.n;
  __shared__ __align__(32) __nv_bfloat16 ws[kTileRows * kLd];  // weights; reused for the output
  __shared__ __align__(32) __nv_bfloat16 xs[kN * kLd];
  __shared__ int64_t xo[kN], yo[kN];
  __shared__ uint64_t grid[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  if constexpr (std::is_same_v<F, IQ2_XXS>)
    for (int i = threadIdx.x; i < 256; i += kThreads) grid[i] = d_grid[i];
  if (threadIdx.x < kN) {
    const int i = threadIdx.x;
    const int64_t k = int64_t(b) * kGemvMaxRows + i;
    xo[i] = b * a.x_stride + (i < n ? (ra.x_idx ? ra.x_idx[k] : i) * ra.x_row : 0);
    yo[i] = b * a.y_stride + (i < n ? (ra.y_idx ? ra.y_idx[k] : i) * ra.y_row : 0);
  }
  __syncthreads();
  const int warp = threadIdx.x / 32;
  const int64_t row0 = int64_t(blockIdx.x) * kTileRows;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.f);
  for (int64_t k0 = 0; k0 < a.cols; k0 += kTileK) {
    // x rows -> BF16 (rows >= n are zeros): kN x kTileK values, pairs per thread
    for (int q = threadIdx.x; q < kN * kTileK / 2; q += kThreads) {
      const int i = q / (kTileK / 2), c = 2 * (q % (kTileK / 2));
      float2 v = make_float2(0.f, 0.f);
      if (i < n) v = *reinterpret_cast<const float2*>(x + xo[i] + k0 + c);
      *reinterpret_cast<__nv_bfloat162*>(xs + i * kLd + c) = __floats2bfloat162_rn(v.x, v.y);
    }
    // weights: kTileRows rows x 4 units, one unit per thread and pass
    for (int q = threadIdx.x; q < kTileRows * (kTileK / kUnit); q += kThreads) {
      const int r = q / (kTileK / kUnit), uu = q % (kTileK / kUnit);
      const int64_t row = min(row0 + r, a.rows - 1), u = k0 / kUnit + uu;
      const typename F::Raw raw = F::template load<FromGlobal>(a, a.data + row * a.row_stride, row, u);
      float w[kUnit];
      F::decode(raw, u, w, grid);
      uint4 v[4];
      uint32_t* p = reinterpret_cast<uint32_t*>(v);
#pragma unroll
      for (int k = 0; k < kUnit / 2; ++k) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(w[2 * k], w[2 * k + 1]);
        p[k] = *reinterpret_cast<const uint32_t*>(&h);
      }
      uint4* o = reinterpret_cast<uint4*>(ws + r * kLd + uu * kUnit);
#pragma unroll
      for (int k = 0; k < 4; ++k) o[k] = v[k];
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, ws + (16 * warp) * kLd + kk, kLd);
      wmma::load_matrix_sync(fb, xs + kk, kLd);  // element (k, i) at xs[i * kLd + k]
      wmma::mma_sync(acc, fa, fb, acc);
    }
    __syncthreads();
  }
  // acc: {16 weight rows, 16 x rows} of this warp -> shared (over the weight tile), then out
  float* out = reinterpret_cast<float*>(ws) + warp * 16 * 16;
  wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int q = threadIdx.x % 32; q < 16 * 16; q += 32) {
    const int r = q / 16, i = q % 16;  // i: x row; lanes write 16 rows of one x row apart
    const int64_t row = row0 + 16 * warp + r;
    if (i < n && row < a.rows) y[yo[i] + row] = out[r * 16 + i];
  }
}

template <class F>
void launch(const Args& a, const RowsArgs& ra, const float* x, float* y, unsigned batch, cudaStream_t s) {
  const dim3 blocks(unsigned((a.rows + kTileRows - 1) / kTileRows), batch);
  grouped_mma_kernel<F><<<blocks, kThreads, 0, s>>>(a, ra, x, y);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace

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
