#pragma once
// Host side of the CUDA op tests and benches: random weights in every format we load and
// a reference decoder written from the layouts element by element (gguf/quants.py, MLX
// affine), deliberately unlike the GPU's unit decoders so the two check each other.
// TODO(#10): once src/core's CPU decoders land (foundation), also compare against them.
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace ds4::cuda_test {

struct HostWeight {
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> data;    // {rows, row_bytes}
  std::vector<uint8_t> scales;  // MLX: {rows, cols / group_size} of scale_type
  std::vector<uint8_t> biases;
  DType scale_type = DType::F16;
  int64_t group_size = 0;
};

// Random weight of the given format, with finite, realistic scales (|w| ~ 0.01 .. 0.1).
HostWeight random_weight(DType type, int64_t rows, int64_t cols, std::mt19937_64& rng, int64_t group_size = 64,
                         DType scale_type = DType::F16);

// out[cols] = row r of w in f32.
void dequantize_row_ref(const HostWeight& w, int64_t r, float* out);

float f16_to_float(uint16_t h);
uint16_t float_to_f16(float f);

}  // namespace ds4::cuda_test
