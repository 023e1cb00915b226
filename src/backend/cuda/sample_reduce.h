#pragma once
// Sampling candidates of one logits row on the GPU, so a decode step copies back a few KiB
// instead of the whole {vocab} row (models/sample_candidates.h says what the host does with
// them; engine/sampler.h finishes the draw on them bit for bit).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ds4::cuda {

inline constexpr int kSampleReduceMaxK = 1024;  // ds4's top-k cap

// Result layout, int32 words: {argmax, count, finite, k, exp_sum (a double in 2 words),
// ids[k], logits[k] (float bits)}.
//   argmax: ds4 sample_argmax over the row (first id of the largest value > -inf; NaN never
//           wins; 0 when none), finite: finite values in the row, count = min(k, finite):
//   the largest finite logits, value descending, equal values lower id first (-0 == +0).
//   exp_sum: sum of exp(double(l) / T - double(max) / T) in float64 (MTPLX's softmax
//   normaliser; the order of the sum and the device exp differ from the host's by a relative
//   1e-10 at most) when *temperature > 0 and every value is finite; else NaN.
inline constexpr int kSampleReduceHeader = 6;
inline size_t sample_reduce_words(int k) { return kSampleReduceHeader + 2 * size_t(k); }

// row {vocab} (device), out {sample_reduce_words(k)} (device, 8-byte aligned); 1 <= k <=
// kSampleReduceMaxK; temperature: device scalar read when the kernel runs (a captured graph
// takes each request's value), or null for no exp_sum. The candidates are exact (only
// comparisons), deterministic; one kernel, no host sync: graph-capturable.
void sample_reduce_f32(const float* row, int64_t vocab, int k, const double* temperature, int32_t* out,
                       cudaStream_t stream);

// The same for n rows in one launch (a block each; a decode batch's rows): row i at rows + i *
// row_stride floats (row_stride >= vocab), its result at out + i * sample_reduce_words(k),
// its temperature temperatures[i] (device, n of them; null: no exp_sum). Row i's result equals
// sample_reduce_f32 on that row alone.
void sample_reduce_f32_rows(const float* rows, size_t row_stride, int64_t n, int64_t vocab, int k,
                            const double* temperatures, int32_t* out, cudaStream_t stream);

}  // namespace ds4::cuda
