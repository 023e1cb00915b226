#pragma once
// Random weights generated in device memory for the synthetic full-size models (issue #10):
// a matrix view the Uploader reserved (weight_upload.h, fill mode) is filled by a kernel from
// a seed, in its own format (F32/F16/BF16, Q8_0, Q4_K, Q2_K, MLX affine q4/q8 with F16/BF16
// scales), so the whole model never exists in host memory. The per-block generators are
// synthetic_fill_blocks.h (shared with the CPU checks).
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "core/weight.h"

namespace ds4::cuda {

// Fills w.data (and MLX w.scales / w.biases), device pointers, with values in [-amp, amp]
// (amp <= 0: 1 / sqrt(cols)). Deterministic in (seed, element index). Throws ds4::InputError
// for a type it cannot generate (IQ2_XXS, F8).
void fill_random_matrix(const WeightMatrix& w, uint64_t seed, float amp, cudaStream_t stream);

// The Uploader's fill hook: matrix n of an upload (in bind order) gets seed hash(seed, n).
struct SyntheticFiller {
  uint64_t seed = 1;
  uint64_t count = 0;
  size_t bytes = 0;  // filled so far (data + scales + biases)
  cudaStream_t stream = nullptr;
  void operator()(const WeightMatrix& w);
};

// A host row generator with the same hash (the synthetic models' embedding rows, made per
// token on the host as the real models dequantize theirs): out[i] in [-amp, amp].
void synthetic_row(uint64_t seed, int64_t row, int64_t cols, float amp, float* out);

}  // namespace ds4::cuda
