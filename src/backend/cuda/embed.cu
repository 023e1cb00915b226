// Embedding row lookup by device-side ids (embed.h). grid {column tiles of 256, rows}: one
// thread per value; an embedding row is a few thousand values, read once.
#include "backend/cuda/embed.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cuda/check.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr int64_t kMaxGridY = 65535;

__device__ __forceinline__ float half_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

// An MLX scale or bias (F32, F16 or BF16), as core's load_scale reads it.
__device__ __forceinline__ float scale_at(const void* p, int64_t i, DType t) {
  if (t == DType::F32) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return t == DType::BF16 ? bf16_bits(h) : half_bits(h);
}

// Element c of row id (0 <= id < w.rows).
__device__ __forceinline__ float decode(const WeightMatrix& w, const uint8_t* row, int64_t id, int64_t c) {
  switch (w.type) {
    case DType::F32: return reinterpret_cast<const float*>(row)[c];
    case DType::F16: return half_bits(reinterpret_cast<const uint16_t*>(row)[c]);
    case DType::BF16: return bf16_bits(reinterpret_cast<const uint16_t*>(row)[c]);
    case DType::Q8_0: {  // block {f16 d, int8 q[32]}, 34 bytes: even offsets, so d is 2-byte aligned
      const uint8_t* b = row + (c / 32) * 34;
      const float d = half_bits(*reinterpret_cast<const uint16_t*>(b));
      return __fmul_rn(float(reinterpret_cast<const int8_t*>(b + 2)[c % 32]), d);
    }
    case DType::MLX_Q4:
    case DType::MLX_Q8: {  // u32 words of 32/bits values, low bits first; w = s*q + b per (row, group)
      const int bits = w.type == DType::MLX_Q4 ? 4 : 8, per = 32 / bits;
      const uint32_t word = reinterpret_cast<const uint32_t*>(row)[c / per];
      const uint32_t q = (word >> (bits * (c % per))) & ((1u << bits) - 1u);
      const int64_t g = id * (w.cols / w.group_size) + c / w.group_size;
      return __fadd_rn(__fmul_rn(scale_at(w.scales, g, w.scale_type), float(q)), scale_at(w.biases, g, w.scale_type));
    }
    default: return NAN;  // embed_rows_f32 admits the types above only
  }
}

__global__ void embed_rows_kernel(WeightMatrix w, int64_t row_bytes, const int32_t* __restrict__ ids,
                                  int64_t id_stride, int64_t n, float* out, int64_t out_stride) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w.cols) return;
  for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
    const int64_t id = ids[i * id_stride];
    float* o = out + i * out_stride;
    o[c] = id < 0 || id >= w.rows ? NAN : decode(w, static_cast<const uint8_t*>(w.data) + id * row_bytes, id, c);
  }
}

}  // namespace

bool embed_rows_supports(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::MLX_Q4 ||
         t == DType::MLX_Q8;
}

void embed_rows_f32(const WeightMatrix& w, const int32_t* ids, int64_t id_stride, int64_t n, float* out,
                    int64_t out_stride, cudaStream_t stream) {
  if (!embed_rows_supports(w.type))
    throw InputError("cuda embed_rows: no device lookup for " + std::string(dtype_name(w.type)));
  if ((w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8) && (w.group_size <= 0 || w.cols % w.group_size != 0))
    throw InputError("cuda embed_rows: MLX group " + std::to_string(w.group_size) + " does not divide " +
                     std::to_string(w.cols) + " columns");
  if (n <= 0 || w.cols <= 0) return;
  const dim3 grid(unsigned((w.cols + kThreads - 1) / kThreads), unsigned(std::min(n, kMaxGridY)));
  embed_rows_kernel<<<grid, kThreads, 0, stream>>>(w, w.row_stride_bytes(), ids, id_stride, n, out, out_stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
