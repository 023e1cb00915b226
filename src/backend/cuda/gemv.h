#pragma once
// Matrix-vector product y = W x on the GPU for every weight format we load. At batch 1
// (decode) this is the op that reads the model's bytes, so it is written to stream the
// weights once at close to copy bandwidth; x stays in f32.
#include <cuda_runtime.h>

#include "core/weight.h"

namespace ds4::cuda {

// y[rows] = W[rows x cols] x[cols], f32 accumulation. `w.data` (and for MLX `w.scales`,
// `w.biases`), `x` and `y` are device pointers; `x` 16-byte aligned.
// Formats: BF16, F16, Q8_0, Q4_K, Q2_K, IQ2_XXS (ggml block layouts), MLX_Q4 / MLX_Q8
// (affine, group a multiple of 32, F16 or BF16 scales and biases).
// Throws ds4::InputError for another type, cols not a multiple of 32 (of 256 for the
// K-quants and IQ2_XXS), or a bad MLX group.
void gemv(const WeightMatrix& w, const float* x, float* y, cudaStream_t stream);

// How the block formats whose blocks are not 16-byte aligned (Q8_0, Q2_K, IQ2_XXS) are read.
//   kDirect: each thread loads its unit's bytes with 2- or 4-byte loads.
//   kStaged: each warp first copies a span of whole blocks into shared memory with
//            coalesced 16-byte loads, then decodes from there (needs a 16-byte aligned
//            row stride and data pointer; see gemv_can_stage).
//   kAuto:   staged where it can, else direct. Other formats ignore the choice.
enum class GemvPath : uint8_t { kAuto, kDirect, kStaged };

struct GemvOptions {
  GemvPath path = GemvPath::kAuto;
  // Rows per thread block (x is loaded once per 32 weights and reused for each of them):
  // 0 = the format's default (fewer bits per weight -> more rows); 1, 2, 4 or 8 to tune.
  int rows_per_block = 0;
};
void gemv(const WeightMatrix& w, const float* x, float* y, cudaStream_t stream, const GemvOptions& opt);
bool gemv_can_stage(const WeightMatrix& w);

// Whether gemv() takes this type (so callers can report unsupported weights up front).
bool gemv_supports(DType type);

}  // namespace ds4::cuda
