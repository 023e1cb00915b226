// Embedding row lookup by device-side ids (embed.h).
#include "backend/cuda/embed.h"

#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "backend/cuda/check.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

enum Kind { kF32, kF16, kBf16, kQ8 };

// One block per row; the f32 product q * d is what the host decoder computes.
__global__ void embed_rows_kernel(const uint8_t* __restrict__ data, int64_t rows, int64_t cols, int64_t row_bytes,
                                  int kind, const int32_t* __restrict__ ids, int64_t id_stride, float* out,
                                  int64_t out_stride) {
  const int64_t id = ids[int64_t(blockIdx.x) * id_stride];
  float* o = out + int64_t(blockIdx.x) * out_stride;
  if (id < 0 || id >= rows) {
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = NAN;
    return;
  }
  const uint8_t* r = data + id * row_bytes;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v;
    if (kind == kF32) {
      v = reinterpret_cast<const float*>(r)[c];
    } else if (kind == kF16) {
      v = __half2float(reinterpret_cast<const __half*>(r)[c]);
    } else if (kind == kBf16) {
      v = __uint_as_float(uint32_t(reinterpret_cast<const uint16_t*>(r)[c]) << 16);
    } else {  // Q8_0 block {f16 d, int8 q[32]}, 34 bytes: even offsets, so d is 2-byte aligned
      const uint8_t* b = r + (c / 32) * 34;
      const float d = __half2float(*reinterpret_cast<const __half*>(b));
      v = float(reinterpret_cast<const int8_t*>(b + 2)[c % 32]) * d;
    }
    o[c] = v;
  }
}

int kind_of(DType t) {
  switch (t) {
    case DType::F32: return kF32;
    case DType::F16: return kF16;
    case DType::BF16: return kBf16;
    case DType::Q8_0: return kQ8;
    default: return -1;
  }
}

}  // namespace

bool embed_rows_supports(DType type) { return kind_of(type) >= 0; }

void embed_rows_f32(const WeightMatrix& w, const int32_t* ids, int64_t id_stride, int64_t n, float* out,
                    int64_t out_stride, cudaStream_t stream) {
  const int kind = kind_of(w.type);
  if (kind < 0) throw InputError("cuda embed_rows: no device lookup for " + std::string(dtype_name(w.type)));
  if (n <= 0) return;
  embed_rows_kernel<<<unsigned(n), 256, 0, stream>>>(static_cast<const uint8_t*>(w.data), w.rows, w.cols,
                                                       w.row_stride_bytes(), kind, ids, id_stride, out, out_stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
