// Dequantization to BF16 (dequant.h): one thread per 32-weight unit, decoded by the format's
// gemv decoder (gemv_formats.cuh: the same bit operations as the GEMV, so both paths read a
// weight the same way) and written as four 16-byte stores; a warp writes 2 KiB contiguously.
#include <cuda_bf16.h>

#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/dequant.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/iq2xxs_grid.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

using namespace gemv_detail;

__device__ const uint64_t d_grid[256] = {DS4_IQ2XXS_GRID_VALUES};

template <class F, class T>  // T: __nv_bfloat16 or float
__global__ void __launch_bounds__(256) dequant_kernel(Args a, int64_t row0, int64_t rows, T* out) {
  __shared__ uint64_t grid[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  if constexpr (std::is_same_v<F, IQ2_XXS>) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) grid[i] = d_grid[i];
    __syncthreads();
  }
  if (a.ids) {  // dequant_bf16_experts: blockIdx.y = j, expert ids[j]'s matrix to out's j-th {rows, cols}
    const int64_t e = a.ids[blockIdx.y];
    a.data += e * a.id_stride;
    if (a.scales) a.scales = static_cast<const uint8_t*>(a.scales) + e * a.id_scale_stride;
    if (a.biases) a.biases = static_cast<const uint8_t*>(a.biases) + e * a.id_scale_stride;
    out += int64_t(blockIdx.y) * rows * a.cols;
  }
  const int64_t units = a.cols / kUnit;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * units) return;
  const int64_t r = i / units, u = i % units, row = row0 + r;
  const typename F::Raw raw = F::template load<FromGlobal>(a, a.data + row * a.row_stride, row, u);
  float w[kUnit];
  F::decode(raw, u, w, grid);
  if constexpr (std::is_same_v<T, float>) {
    float4* o = reinterpret_cast<float4*>(out + r * a.cols + u * kUnit);
#pragma unroll
    for (int k = 0; k < kUnit / 4; ++k) o[k] = make_float4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
  } else {
    uint4 v[4];
    uint32_t* p = reinterpret_cast<uint32_t*>(v);
#pragma unroll
    for (int k = 0; k < kUnit / 2; ++k) {
      const __nv_bfloat162 h = __floats2bfloat162_rn(w[2 * k], w[2 * k + 1]);  // .x = low half = element 2k
      p[k] = *reinterpret_cast<const uint32_t*>(&h);
    }
    uint4* o = reinterpret_cast<uint4*>(out + r * a.cols + u * kUnit);
#pragma unroll
    for (int k = 0; k < 4; ++k) o[k] = v[k];
  }
}

// Plain-float rows of any length (cols not a multiple of 32): one thread per element.
template <int kType, class T>  // 0 F32, 1 F16, 2 BF16
__global__ void dequant_plain_kernel(const uint8_t* data, int64_t row_stride, int64_t row0, int64_t rows, int64_t cols,
                                     T* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const uint8_t* p = data + (row0 + r) * row_stride;
  float w;
  if constexpr (kType == 0) w = reinterpret_cast<const float*>(p)[c];
  else {
    const uint16_t h = reinterpret_cast<const uint16_t*>(p)[c];
    w = kType == 1 ? f16_bits(h) : bf16_bits(h);
  }
  if constexpr (std::is_same_v<T, float>) out[i] = w;
  else out[i] = __float2bfloat16_rn(w);
}

__global__ void rows_to_bf16_kernel(const float* __restrict__ x, int64_t x_row, int64_t n, int64_t cols,
                                    __nv_bfloat16* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * cols) return;
  out[i] = __float2bfloat16_rn(x[(i / cols) * x_row + i % cols]);
}

unsigned blocks_for(int64_t items, int threads) { return unsigned((items + threads - 1) / threads); }

// `count` > 1 or a.ids: one grid row (blockIdx.y) per expert (dequant_bf16_experts).
template <class F, class T>
void launch(const Args& a, int64_t row0, int64_t rows, T* out, cudaStream_t s, int count) {
  const int64_t items = rows * (a.cols / kUnit);
  dequant_kernel<F, T><<<dim3(blocks_for(items, 256), unsigned(count)), 256, 0, s>>>(a, row0, rows, out);
  DS4_CUDA_CHECK_LAUNCH();
}

// experts: null for one matrix (count 1), else the device ids of `count` experts at the
// given strides (whole matrices: row0 0, rows w.rows).
template <class T>
void dequant(const WeightMatrix& w, int64_t row0, int64_t rows, T* out, cudaStream_t s,
             const GemvBatch* experts = nullptr) {
  if (!gemv_supports(w.type))
    throw InputError("cuda dequant_bf16: weight type " + std::string(dtype_name(w.type)) + " is not supported");
  if (row0 < 0 || rows < 1 || row0 + rows > w.rows)
    throw InputError("cuda dequant_bf16: rows " + std::to_string(row0) + "+" + std::to_string(rows) + " outside " +
                     std::to_string(w.rows));
  const bool plain = w.type == DType::F32 || w.type == DType::F16 || w.type == DType::BF16;
  const bool k_block = w.type == DType::Q4_K || w.type == DType::Q2_K || w.type == DType::IQ2_XXS;
  if (experts && (experts->count < 1 || experts->count > 65535 || !experts->ids || w.cols % kUnit != 0))
    throw InputError("cuda dequant_bf16_experts: " + std::to_string(experts->count) + " experts of " +
                     std::to_string(w.cols) + " cols (1..65535 experts by device ids, cols a multiple of 32)");
  if (plain && w.cols % kUnit != 0) {
    const auto* d = static_cast<const uint8_t*>(w.data);
    T* o = out;
    const unsigned b = blocks_for(rows * w.cols, 256);
    const int64_t rsb = w.row_stride_bytes();
    if (w.type == DType::F32) dequant_plain_kernel<0, T><<<b, 256, 0, s>>>(d, rsb, row0, rows, w.cols, o);
    else if (w.type == DType::F16) dequant_plain_kernel<1, T><<<b, 256, 0, s>>>(d, rsb, row0, rows, w.cols, o);
    else dequant_plain_kernel<2, T><<<b, 256, 0, s>>>(d, rsb, row0, rows, w.cols, o);
    DS4_CUDA_CHECK_LAUNCH();
    return;
  }
  if (w.cols <= 0 || w.cols % (k_block ? 256 : kUnit) != 0)
    throw InputError("cuda dequant_bf16: " + std::string(dtype_name(w.type)) + " cols " + std::to_string(w.cols));
  Args a{static_cast<const uint8_t*>(w.data), w.row_stride_bytes(), w.scales, w.biases, 0, 0, w.rows, w.cols,
         nullptr, 0, 0, 0, 0};
  int count = 1;
  if (experts) {
    a.ids = experts->ids, a.id_stride = int64_t(experts->id_stride);
    a.id_scale_stride = int64_t(experts->id_scale_stride);
    count = experts->count;
  }
  const bool mlx = w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8;
  if (mlx) {
    int shift = 0;
    while ((int64_t(1) << shift) < w.group_size) ++shift;
    if (w.group_size < 32 || (int64_t(1) << shift) != w.group_size || w.cols % w.group_size != 0 || !w.scales ||
        !w.biases || (w.scale_type != DType::F16 && w.scale_type != DType::BF16))
      throw InputError("cuda dequant_bf16: bad MLX group / scales");
    a.group_shift = shift;
    a.groups_per_row = w.cols / w.group_size;
  }
  const bool bf16s = w.scale_type == DType::BF16;
  switch (w.type) {
    case DType::F32: return launch<F32>(a, row0, rows, out, s, count);
    case DType::BF16: return launch<Half16<true>>(a, row0, rows, out, s, count);
    case DType::F16: return launch<Half16<false>>(a, row0, rows, out, s, count);
    case DType::Q8_0: return launch<Q8_0>(a, row0, rows, out, s, count);
    case DType::Q4_K: return launch<Q4_K>(a, row0, rows, out, s, count);
    case DType::Q2_K: return launch<Q2_K>(a, row0, rows, out, s, count);
    case DType::IQ2_XXS: return launch<IQ2_XXS>(a, row0, rows, out, s, count);
    case DType::MLX_Q4:
      return bf16s ? launch<MlxAffine<4, true>>(a, row0, rows, out, s, count)
                   : launch<MlxAffine<4, false>>(a, row0, rows, out, s, count);
    case DType::MLX_Q8:
      return bf16s ? launch<MlxAffine<8, true>>(a, row0, rows, out, s, count)
                   : launch<MlxAffine<8, false>>(a, row0, rows, out, s, count);
    default: break;
  }
}

}  // namespace

void dequant_bf16(const WeightMatrix& w, int64_t row0, int64_t rows, void* out, cudaStream_t s) {
  dequant(w, row0, rows, static_cast<__nv_bfloat16*>(out), s);
}

void dequant_bf16_experts(const WeightMatrix& w, const GemvBatch& experts, void* out, cudaStream_t s) {
  dequant(w, 0, w.rows, static_cast<__nv_bfloat16*>(out), s, &experts);
}

void dequant_f32(const WeightMatrix& w, int64_t row0, int64_t rows, float* out, cudaStream_t s) {
  dequant(w, row0, rows, out, s);
}

void rows_to_bf16(const float* x, int64_t x_row, int64_t n, int64_t cols, void* out, cudaStream_t s) {
  if (n < 1 || cols < 1) return;
  rows_to_bf16_kernel<<<blocks_for(n * cols, 256), 256, 0, s>>>(x, x_row, n, cols, static_cast<__nv_bfloat16*>(out));
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
