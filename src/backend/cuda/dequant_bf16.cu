// Dequantization to BF16 (dequant.h): one thread per 32-weight unit, decoded by the format's
// gemv decoder (gemv_formats.cuh: the same bit operations as the GEMV, so both paths read a
// weight the same way) and written as four 16-byte stores; a warp writes 2 KiB contiguously.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/dequant.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/iq2xxs_grid.h"
#include "backend/cuda/reduce.cuh"
#include "core/error.h"

namespace ds4::cuda {
namespace {

using namespace gemv_detail;

__device__ const uint64_t d_grid[256] = {DS4_IQ2XXS_GRID_VALUES};

// IQ2_XXS's codebook into the block's shared copy (the whole block calls it; other formats: nothing).
template <class F>
__device__ __forceinline__ void stage_grid(uint64_t* grid) {
  if constexpr (std::is_same_v<F, IQ2_XXS>) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) grid[i] = d_grid[i];
    __syncthreads();
  }
}

// 2^k with max_abs * 2^k < 2^15 <= 65504 (FP16's largest finite is 65504): the power of two that
// brings a tile's or a chunk's largest magnitude to [2^14, 2^15) (dequant_f16_scaled, rows_to_f16_scaled);
// powers of two keep the scaling exact. max_bits: the float bits of a non-negative max (as
// atomicMax on unsigned orders them); 0, Inf or NaN give 1 (Inf and NaN flow through as they are).
__device__ __forceinline__ float pow2_to_f16_range(unsigned max_bits) {
  const float m = __uint_as_float(max_bits);
  if (!(m > 0.f) || isinf(m)) return 1.f;
  int e;
  frexpf(m, &e);  // m = f 2^e, f in [0.5, 1): m < 2^e
  return ldexpf(1.f, max(-100, min(100, 15 - e)));
}

// One thread per 32-weight unit, a warp per 32 consecutive units (flattened over the rows: unit
// i = r * units + u writes out + i * 32, so a warp's output is one contiguous span). A thread
// decodes its unit into registers; the warp then writes its span through shared memory as
// 16-byte stores of consecutive addresses (a thread's own unit written directly would spread
// each store instruction over 32 cache lines: 30 % of copy bandwidth, session 24 call 1).
// T: float, __nv_bfloat16 or __half; sc.w_max: null, or (__half) the device max of the tile whose
// power-of-two scale (pow2_to_f16_range) every weight is multiplied by, and then *sc.alpha = the
// GEMM's alpha that undoes it and x's scale (*sc.x_max).
constexpr int kDequantWarps = 8, kUnitPad = kUnit + 4;  // +4 floats: conflict-free 16-byte rows

struct F16Scales {
  const unsigned* w_max = nullptr;  // the tile's absmax bits (absmax_kernel)
  const unsigned* x_max = nullptr;  // the rows' absmax bits (rows_absmax_kernel)
  float* alpha = nullptr;
};

template <class F, class T>
__global__ void __launch_bounds__(kDequantWarps * 32) dequant_kernel(Args a, int64_t row0, int64_t rows, T* out,
                                                                      F16Scales sc) {
  __shared__ uint64_t grid[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  __shared__ __align__(16) float tile[kDequantWarps][32 * kUnitPad];
  stage_grid<F>(grid);
  if (a.ids) {  // dequant_bf16_experts: blockIdx.y = j, expert ids[j]'s matrix to out's j-th {rows, cols}
    const int64_t e = a.ids[blockIdx.y];
    a.data += e * a.id_stride;
    if (a.scales) a.scales = static_cast<const uint8_t*>(a.scales) + e * a.id_scale_stride;
    if (a.biases) a.biases = static_cast<const uint8_t*>(a.biases) + e * a.id_scale_stride;
    out += int64_t(blockIdx.y) * rows * a.cols;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t units = a.cols / kUnit, total = rows * units;
  const int64_t u0 = (int64_t(blockIdx.x) * kDequantWarps + warp) * 32;
  if (u0 >= total) return;  // (no block-wide barrier below)
  const float mul = sc.w_max ? pow2_to_f16_range(*sc.w_max) : 1.f;
  if (sc.alpha && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)  // (powers of two: exact)
    *sc.alpha = 1.f / (mul * pow2_to_f16_range(*sc.x_max));
  float* sm = tile[warp];
  if (const int64_t i = u0 + lane; i < total) {
    const int64_t r = i / units, u = i % units;
    const typename F::Raw raw = F::template load<FromGlobal>(a, a.data + (row0 + r) * a.row_stride, row0 + r, u);
    float w[kUnit];
    F::decode(raw, u, w, grid);
#pragma unroll
    for (int k = 0; k < kUnit / 4; ++k)
      *reinterpret_cast<float4*>(sm + lane * kUnitPad + 4 * k) =
          make_float4(w[4 * k] * mul, w[4 * k + 1] * mul, w[4 * k + 2] * mul, w[4 * k + 3] * mul);
  }
  __syncwarp();
  const int64_t nu = total - u0 < 32 ? total - u0 : 32;  // units of this warp
  T* o = out + u0 * kUnit;
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {  // element e = j * 128 + lane * 4: unit e / 32, offset e % 32
      const int e = j * 128 + lane * 4, unit = e >> 5;
      if (unit < nu) *reinterpret_cast<float4*>(o + e) = *reinterpret_cast<const float4*>(sm + unit * kUnitPad + (e & 31));
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // element e = j * 256 + lane * 8
      const int e = j * 256 + lane * 8, unit = e >> 5;
      if (unit >= nu) continue;
      const float4 p = *reinterpret_cast<const float4*>(sm + unit * kUnitPad + (e & 31));
      const float4 q = *reinterpret_cast<const float4*>(sm + unit * kUnitPad + (e & 31) + 4);
      uint4 v;
      if constexpr (std::is_same_v<T, __half>) {
        const __half2 h0 = __floats2half2_rn(p.x, p.y), h1 = __floats2half2_rn(p.z, p.w);
        const __half2 h2 = __floats2half2_rn(q.x, q.y), h3 = __floats2half2_rn(q.z, q.w);
        v = make_uint4(*reinterpret_cast<const uint32_t*>(&h0), *reinterpret_cast<const uint32_t*>(&h1),
                       *reinterpret_cast<const uint32_t*>(&h2), *reinterpret_cast<const uint32_t*>(&h3));
      } else {  // .x = low half = the even element
        const __nv_bfloat162 h0 = __floats2bfloat162_rn(p.x, p.y), h1 = __floats2bfloat162_rn(p.z, p.w);
        const __nv_bfloat162 h2 = __floats2bfloat162_rn(q.x, q.y), h3 = __floats2bfloat162_rn(q.z, q.w);
        v = make_uint4(*reinterpret_cast<const uint32_t*>(&h0), *reinterpret_cast<const uint32_t*>(&h1),
                       *reinterpret_cast<const uint32_t*>(&h2), *reinterpret_cast<const uint32_t*>(&h3));
      }
      *reinterpret_cast<uint4*>(o + e) = v;
    }
  }
}

// The largest |weight| of rows row0 .. row0 + rows - 1 as float bits, atomicMax into *max_bits
// (zeroed before): the scale of a tile's FP16 form (dequant_f16_scaled).
template <class F>
__global__ void __launch_bounds__(256) absmax_kernel(Args a, int64_t row0, int64_t rows, unsigned* max_bits) {
  __shared__ uint64_t grid[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  stage_grid<F>(grid);
  const int64_t units = a.cols / kUnit, total = rows * units;
  float m = 0.f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / units, u = i % units;
    const typename F::Raw raw = F::template load<FromGlobal>(a, a.data + (row0 + r) * a.row_stride, row0 + r, u);
    float w[kUnit];
    F::decode(raw, u, w, grid);
#pragma unroll
    for (int k = 0; k < kUnit; ++k) m = fmaxf(m, fabsf(w[k]));  // (fmaxf drops NaN: the scale ignores it)
  }
  m = detail::warp_reduce(m, detail::MaxOp{});
  if ((threadIdx.x & 31) == 0 && m > 0.f) atomicMax(max_bits, __float_as_uint(m));
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
  else if constexpr (std::is_same_v<T, __half>) out[i] = __float2half_rn(w);
  else out[i] = __float2bfloat16_rn(w);
}

// The chunk rows' conversions (rows_absmax, rows_to_f16_scaled, rows_to_bf16): a block per row and
// slice of kSliceCols columns (blockIdx.x, blockIdx.y), the columns as float4 when the row starts
// 16-byte aligned and cols % 4 == 0 (every model chunk), else one float at a time. The flattened forms these replace computed each element's row and
// column with 64-bit divisions and ran ALU-bound at ~0.5 TB/s (ncu, session 27 call 2: the pair
// of kF16 conversions was 15 % of a DeepSeek prefill layer); the values are the same (max is exact
// in any order, each element converted by the same expression).
constexpr int kRowThreads = 256;
constexpr int64_t kSliceCols = 4096;  // a multiple of 4: slices keep the float4 alignment

// each(c, v) for this block's columns c .. c + W - 1 (W = 4 or 1) of row xr
template <bool kVec, class Each>
__device__ __forceinline__ void walk_row(const float* __restrict__ xr, int64_t cols, Each&& each) {
  const int64_t c0 = int64_t(blockIdx.y) * kSliceCols, c1 = min(cols, c0 + kSliceCols);
  if constexpr (kVec) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int64_t c = c0 / 4 + threadIdx.x; c < c1 / 4; c += blockDim.x) each(4 * c, x4[c]);
  } else {
    for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) each(c, make_float4(xr[c], 0.f, 0.f, 0.f));
  }
}

dim3 row_grid(int64_t n, int64_t cols) { return dim3(unsigned(n), unsigned((cols + kSliceCols - 1) / kSliceCols)); }

template <bool kVec>
__global__ void __launch_bounds__(kRowThreads) rows_absmax_kernel(const float* __restrict__ x, int64_t x_row,
                                                                   int64_t cols, unsigned* max_bits) {
  float m = 0.f;
  walk_row<kVec>(x + int64_t(blockIdx.x) * x_row, cols, [&](int64_t, float4 v) {
    m = fmaxf(m, fabsf(v.x));
    if constexpr (kVec) m = fmaxf(fmaxf(m, fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  });
  m = detail::block_reduce(m, detail::MaxOp{}, 0.f);
  if (threadIdx.x == 0 && m > 0.f) atomicMax(max_bits, __float_as_uint(m));
}

// T __half (times the chunk's power of two, from *max_bits) or __nv_bfloat16 (unscaled, max_bits unread);
// out {n, cols}.
template <bool kVec, class T>
__global__ void __launch_bounds__(kRowThreads) rows_convert_kernel(const float* __restrict__ x, int64_t x_row,
                                                                    int64_t cols, const unsigned* max_bits,
                                                                    T* __restrict__ out) {
  constexpr bool kF16 = std::is_same_v<T, __half>;
  const float k = kF16 ? pow2_to_f16_range(*max_bits) : 1.f;
  T* o = out + int64_t(blockIdx.x) * cols;  // (columns c of the whole row: walk_row gives absolute c)
  auto cvt = [k](float a) {  // (BF16 copies unscaled: not even a multiply by 1, which would canonicalize NaNs)
    if constexpr (kF16) return __float2half_rn(a * k);
    else return __float2bfloat16_rn(a);
  };
  walk_row<kVec>(x + int64_t(blockIdx.x) * x_row, cols, [&](int64_t c, float4 v) {
    if constexpr (kVec) {
      union {
        T h[4];
        uint2 u;
      } p;
      p.h[0] = cvt(v.x), p.h[1] = cvt(v.y), p.h[2] = cvt(v.z), p.h[3] = cvt(v.w);
      *reinterpret_cast<uint2*>(o + c) = p.u;  // 8-byte aligned: out from the allocator, cols % 4 == 0
    } else {
      o[c] = cvt(v.x);
    }
  });
}

// Whether rows x + i * x_row (and out, {n, cols} of 2-byte values) take the float4 form.
bool rows_vectorizable(const float* x, int64_t x_row, int64_t cols, const void* out) {
  return reinterpret_cast<uintptr_t>(x) % 16 == 0 && x_row % 4 == 0 && cols % 4 == 0 &&
         reinterpret_cast<uintptr_t>(out) % 8 == 0;
}

template <class T>
void launch_rows_convert(const float* x, int64_t x_row, int64_t n, int64_t cols, const unsigned* max_bits, T* out,
                         cudaStream_t s) {
  if (rows_vectorizable(x, x_row, cols, out))
    rows_convert_kernel<true, T><<<row_grid(n, cols), kRowThreads, 0, s>>>(x, x_row, cols, max_bits, out);
  else
    rows_convert_kernel<false, T><<<row_grid(n, cols), kRowThreads, 0, s>>>(x, x_row, cols, max_bits, out);
}

unsigned blocks_for(int64_t items, int threads) { return unsigned((items + threads - 1) / threads); }

// `count` > 1 or a.ids: one grid row (blockIdx.y) per expert (dequant_bf16_experts).
// out null: the absmax of the rows into *sc.w_max instead (dequant_f16_scaled's first pass).
template <class F, class T>
void launch(const Args& a, int64_t row0, int64_t rows, T* out, cudaStream_t s, int count, const F16Scales& sc) {
  const int64_t items = rows * (a.cols / kUnit);
  if (!out) {
    absmax_kernel<F><<<std::min<unsigned>(blocks_for(items, 256), 1024), 256, 0, s>>>(
        a, row0, rows, const_cast<unsigned*>(sc.w_max));
  } else {
    dequant_kernel<F, T><<<dim3(blocks_for(items, kDequantWarps * 32), unsigned(count)), kDequantWarps * 32, 0, s>>>(
        a, row0, rows, out, sc);
  }
  DS4_CUDA_CHECK_LAUNCH();
}

// experts: null for one matrix (count 1), else the device ids of `count` experts at the
// given strides (whole matrices: row0 0, rows w.rows).
// sc.w_max (T = __half): with out, the tile's absmax that scales it; without out (null), the
// absmax pass that writes it.
template <class T>
void dequant(const WeightMatrix& w, int64_t row0, int64_t rows, T* out, cudaStream_t s,
             const GemvBatch* experts = nullptr, const F16Scales& sc = {}) {
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
    if (sc.w_max) throw InputError("cuda dequant_f16_scaled: cols " + std::to_string(w.cols) + " (a multiple of 32)");
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
    case DType::F32: return launch<F32>(a, row0, rows, out, s, count, sc);
    case DType::BF16: return launch<Half16<true>>(a, row0, rows, out, s, count, sc);
    case DType::F16: return launch<Half16<false>>(a, row0, rows, out, s, count, sc);
    case DType::Q8_0: return launch<Q8_0>(a, row0, rows, out, s, count, sc);
    case DType::Q4_K: return launch<Q4_K>(a, row0, rows, out, s, count, sc);
    case DType::Q2_K: return launch<Q2_K>(a, row0, rows, out, s, count, sc);
    case DType::IQ2_XXS: return launch<IQ2_XXS>(a, row0, rows, out, s, count, sc);
    case DType::MLX_Q4:
      return bf16s ? launch<MlxAffine<4, true>>(a, row0, rows, out, s, count, sc)
                   : launch<MlxAffine<4, false>>(a, row0, rows, out, s, count, sc);
    case DType::MLX_Q8:
      return bf16s ? launch<MlxAffine<8, true>>(a, row0, rows, out, s, count, sc)
                   : launch<MlxAffine<8, false>>(a, row0, rows, out, s, count, sc);
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

void dequant_f16_scaled(const WeightMatrix& w, int64_t row0, int64_t rows, void* out, unsigned* w_max_bits,
                        bool measure, const unsigned* x_max_bits, float* alpha, cudaStream_t s) {
  const F16Scales sc{w_max_bits, x_max_bits, alpha};
  if (measure) {
    DS4_CUDA_CHECK(cudaMemsetAsync(w_max_bits, 0, sizeof(unsigned), s));
    dequant<__half>(w, row0, rows, nullptr, s, nullptr, sc);
  }
  dequant(w, row0, rows, static_cast<__half*>(out), s, nullptr, sc);
}

namespace {
// A block per row and column slice: the grid's x and y dimensions bound one call's shape.
void check_row_grid(int64_t n, int64_t cols, const char* what) {
  if (n > int64_t(0x7fffffff) || (cols + kSliceCols - 1) / kSliceCols > 65535)
    throw InputError(std::string("cuda ") + what + ": " + std::to_string(n) + " rows of " + std::to_string(cols));
}
}  // namespace

void rows_to_f16_scaled(const float* x, int64_t x_row, int64_t n, int64_t cols, void* out, unsigned* max_bits,
                        cudaStream_t s) {
  if (n < 1 || cols < 1) return;
  check_row_grid(n, cols, "rows_to_f16_scaled");
  DS4_CUDA_CHECK(cudaMemsetAsync(max_bits, 0, sizeof(unsigned), s));
  if (rows_vectorizable(x, x_row, cols, out))
    rows_absmax_kernel<true><<<row_grid(n, cols), kRowThreads, 0, s>>>(x, x_row, cols, max_bits);
  else
    rows_absmax_kernel<false><<<row_grid(n, cols), kRowThreads, 0, s>>>(x, x_row, cols, max_bits);
  launch_rows_convert(x, x_row, n, cols, max_bits, static_cast<__half*>(out), s);
  DS4_CUDA_CHECK_LAUNCH();
}

void rows_to_bf16(const float* x, int64_t x_row, int64_t n, int64_t cols, void* out, cudaStream_t s) {
  if (n < 1 || cols < 1) return;
  check_row_grid(n, cols, "rows_to_bf16");
  launch_rows_convert(x, x_row, n, cols, nullptr, static_cast<__nv_bfloat16*>(out), s);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
