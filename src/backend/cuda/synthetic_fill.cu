// Device fill of random weight matrices (synthetic_fill.h): one thread per element, block or
// packed word; every value a pure function of (seed, index).
#include "backend/cuda/synthetic_fill.h"

#include <cmath>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/synthetic_fill_blocks.h"
#include "backend/cuda/weight_upload.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

namespace sy = ds4::synth;

enum class Kind : int { kF32, kF16, kBF16, kQ8_0, kQ4_K, kQ2_K };

// Unit u (an element or a block) of a matrix whose rows are `row_bytes` apart holding
// `per_row` units of `unit_bytes`.
__global__ void fill_units(uint8_t* base, int64_t rows, int64_t per_row, int64_t row_bytes, int unit_bytes, Kind k,
                           uint64_t seed, float amp) {
  const int64_t n = rows * per_row;
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < n; u += int64_t(gridDim.x) * blockDim.x) {
    uint8_t* p = base + (u / per_row) * row_bytes + (u % per_row) * unit_bytes;
    switch (k) {
      case Kind::kF32: {
        const float v = sy::plain(seed, uint64_t(u), 0.f, amp);
        *reinterpret_cast<float*>(p) = v;
        break;
      }
      case Kind::kF16: *reinterpret_cast<uint16_t*>(p) = sy::to_f16(sy::plain(seed, uint64_t(u), 0.f, amp)); break;
      case Kind::kBF16: *reinterpret_cast<uint16_t*>(p) = sy::to_bf16(sy::plain(seed, uint64_t(u), 0.f, amp)); break;
      case Kind::kQ8_0: sy::q8_0_block(p, seed, uint64_t(u), amp); break;
      case Kind::kQ4_K: sy::q4_k_block(p, seed, uint64_t(u), amp); break;
      case Kind::kQ2_K: sy::q2_k_block(p, seed, uint64_t(u), amp); break;
    }
  }
}

// MLX affine: n words, then g groups of scales and biases (contiguous {rows, groups}).
__global__ void fill_mlx(uint32_t* q, int64_t words, uint16_t* scales, uint16_t* biases, int64_t groups, int bits,
                         bool bf16, uint64_t seed, float amp) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) q[i] = sy::mlx_word(seed, uint64_t(i));
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
    scales[g] = sy::mlx_scale(seed, uint64_t(g), amp, bits, bf16);
    biases[g] = sy::mlx_bias(seed, uint64_t(g), amp, bf16);
  }
}

int grid_for(int64_t n) { return int(std::min<int64_t>((n + 255) / 256, 65535)); }

}  // namespace

void fill_random_matrix(const WeightMatrix& w, uint64_t seed, float amp, cudaStream_t stream) {
  if (w.rows <= 0 || w.cols <= 0) return;
  if (amp <= 0.f) amp = 1.0f / std::sqrt(float(w.cols));
  uint8_t* base = static_cast<uint8_t*>(const_cast<void*>(w.data));
  const int64_t rb = w.row_stride_bytes();
  auto units = [&](Kind k, int64_t per_row, int unit_bytes) {
    const int64_t n = w.rows * per_row;
    fill_units<<<grid_for(n), 256, 0, stream>>>(base, w.rows, per_row, rb, unit_bytes, k, seed, amp);
  };
  switch (w.type) {
    case DType::F32: units(Kind::kF32, w.cols, 4); break;
    case DType::F16: units(Kind::kF16, w.cols, 2); break;
    case DType::BF16: units(Kind::kBF16, w.cols, 2); break;
    case DType::Q8_0: units(Kind::kQ8_0, w.cols / sy::kQ8Elems, sy::kQ8Bytes); break;
    case DType::Q4_K: units(Kind::kQ4_K, w.cols / sy::kKElems, sy::kQ4KBytes); break;
    case DType::Q2_K: units(Kind::kQ2_K, w.cols / sy::kKElems, sy::kQ2KBytes); break;
    case DType::MLX_Q4:
    case DType::MLX_Q8: {
      const int bits = w.type == DType::MLX_Q4 ? 4 : 8;
      if (w.scale_type != DType::F16 && w.scale_type != DType::BF16)
        throw InputError("synthetic fill: MLX scale type " + std::string(dtype_name(w.scale_type)) + " is not F16/BF16");
      const int64_t words = int64_t(Uploader::data_bytes(w) / 4), groups = w.rows * (w.cols / w.group_size);
      fill_mlx<<<grid_for(std::max(words, groups)), 256, 0, stream>>>(
          static_cast<uint32_t*>(const_cast<void*>(w.data)), words, static_cast<uint16_t*>(const_cast<void*>(w.scales)),
          static_cast<uint16_t*>(const_cast<void*>(w.biases)), groups, bits, w.scale_type == DType::BF16, seed, amp);
      break;
    }
    default:
      throw InputError("synthetic fill: weight type " + std::string(dtype_name(w.type)) + " cannot be generated");
  }
  DS4_CUDA_CHECK(cudaGetLastError());
}

void SyntheticFiller::operator()(const WeightMatrix& w) {
  fill_random_matrix(w, sy::hash2(seed, count++), 0.f, stream);
  bytes += Uploader::data_bytes(w) + 2 * Uploader::scale_bytes(w);
}

void synthetic_row(uint64_t seed, int64_t row, int64_t cols, float amp, float* out) {
  const uint64_t s = sy::hash2(seed ^ 0xe3bull, uint64_t(row));
  for (int64_t i = 0; i < cols; ++i) out[i] = sy::plain(s, uint64_t(i), 0.f, amp);
}

}  // namespace ds4::cuda
