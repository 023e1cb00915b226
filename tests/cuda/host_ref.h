#pragma once
// Host side of the CUDA op tests: random weights in every format we load, with finite,
// realistic scales. The reference decoder is the CPU backend's (core dequantize_row).
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/weight.h"

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

// The host view core's decoders take (pointers into `w`).
WeightMatrix host_view(const HostWeight& w);

// cuda::topk_select_f32's definition on one row: keep[i] = 1 for the min(n, k) entries first
// in (score descending, index ascending), NaN below every number (NaNs by index), -0 == +0;
// list = the kept indices ascending. O(n log n) sort.
void topk_select_ref(const float* x, int64_t n, int64_t k, std::vector<uint8_t>& keep, std::vector<int32_t>& list);
// The per-model rank kernels' literal definition (O(n^2), small rows only): keep[i] =
// #{j : x[j] > x[i] || (x[j] == x[i] && j < i)} < k. Equal to topk_select_ref on NaN-free rows.
void topk_rank_ref(const float* x, int64_t n, int64_t k, std::vector<uint8_t>& keep);

}  // namespace ds4::cuda_test
