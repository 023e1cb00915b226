// Device row decode for embedding lookups; see embed_row.h. One thread per column: an
// embedding row is a few thousand values, read once.
#include "backend/cuda/embed_row.h"

#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "backend/cuda/check.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

__device__ __forceinline__ float half_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

__device__ __forceinline__ float scale_at(const void* p, int64_t i, DType t) {
  if (t == DType::F32) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return t == DType::BF16 ? bf16_bits(h) : half_bits(h);
}

__global__ void embed_row_kernel(WeightMatrix w, int64_t row_bytes, const int32_t* __restrict__ id_p,
                                 float* __restrict__ out) {
  const int64_t id = *id_p, cols = w.cols;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  if (id < 0 || id >= w.rows) {
    out[c] = NAN;
    return;
  }
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + id * row_bytes;
  float v = 0.f;
  switch (w.type) {
    case DType::F32: v = reinterpret_cast<const float*>(row)[c]; break;
    case DType::F16: v = half_bits(reinterpret_cast<const uint16_t*>(row)[c]); break;
    case DType::BF16: v = bf16_bits(reinterpret_cast<const uint16_t*>(row)[c]); break;
    case DType::Q8_0: {  // {f16 d; i8 q[32]}: 34 bytes, 2-byte aligned
      const uint8_t* b = row + (c / 32) * 34;
      const float d = half_bits(uint16_t(b[0] | (b[1] << 8)));
      v = __fmul_rn(d, float(int8_t(b[2 + c % 32])));
      break;
    }
    case DType::MLX_Q4:
    case DType::MLX_Q8: {  // u32 words of 32/bits values, low bits first; w = s*q + b per group
      const int bits = w.type == DType::MLX_Q4 ? 4 : 8, per = 32 / bits;
      const uint32_t word = reinterpret_cast<const uint32_t*>(row)[c / per];
      const uint32_t q = (word >> (bits * (c % per))) & ((1u << bits) - 1u);
      const int64_t g = id * (cols / w.group_size) + c / w.group_size;
      v = __fadd_rn(__fmul_rn(scale_at(w.scales, g, w.scale_type), float(q)), scale_at(w.biases, g, w.scale_type));
      break;
    }
    default: v = NAN;
  }
  out[c] = v;
}

}  // namespace

bool embed_row_supports(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::MLX_Q4 ||
         t == DType::MLX_Q8;
}

void embed_row_f32(const WeightMatrix& w, const int32_t* id, float* out, cudaStream_t stream) {
  if (!embed_row_supports(w.type))
    throw InputError("embed_row_f32: no device row decode for " + std::string(dtype_name(w.type)));
  if ((w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8) && (w.group_size <= 0 || w.cols % w.group_size != 0))
    throw InputError("embed_row_f32: MLX group " + std::to_string(w.group_size) + " does not divide " +
                     std::to_string(w.cols) + " columns");
  const unsigned threads = 256, blocks = unsigned((w.cols + threads - 1) / threads);
  embed_row_kernel<<<blocks, threads, 0, stream>>>(w, w.row_stride_bytes(), id, out);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
