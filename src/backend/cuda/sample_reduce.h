#pragma once
// Sampling candidates of one logits row on the GPU, so a decode step copies back a few KiB
// instead of the whole {vocab} row (models/sample_candidates.h says what the host does with
// them; engine/sampler.h finishes the draw on them bit for bit).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ds4::cuda {

inline constexpr int kSampleReduceMaxK = 1024;  // ds4's top-k cap

// Result layout, int32 words: {argmax, count, finite, k, ids[k], logits[k] (float bits)}.
//   argmax: ds4 sample_argmax over the row (first id of the largest value > -inf; NaN never
//           wins; 0 when none), finite: finite values in the row, count = min(k, finite):
//   the largest finite logits, value descending, equal values lower id first (-0 == +0).
inline size_t sample_reduce_words(int k) { return 4 + 2 * size_t(k); }

// row {vocab} (device), out {sample_reduce_words(k)} (device); 1 <= k <= kSampleReduceMaxK.
// Exact (no arithmetic on the values, only comparisons), deterministic, graph-capturable
// (one kernel, no host sync).
void sample_reduce_f32(const float* row, int64_t vocab, int k, int32_t* out, cudaStream_t stream);

}  // namespace ds4::cuda
