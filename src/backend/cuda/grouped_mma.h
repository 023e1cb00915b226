#pragma once
// Routed experts of a prefill chunk on tensor cores: the grouped form of gemv_rows (entries =
// up to 16 rows routed to one expert, see moe_group.h) with each entry's weight tile decoded
// to BF16 in shared memory (the GEMV's own format decoders) and multiplied with the entry's
// rows by warp MMAs (BF16 in, FP32 accumulate). Consecutive entries of the same expert (an
// expert with more than 16 rows of a chunk: moe_group puts its entries next to each other)
// share one decoded tile, up to kGroupedMmaMaxEntries of them (64 rows) per block; other
// entries read their expert once each, as in gemv_rows, but the multiply-adds run on tensor
// cores. Within BF16 rounding of gemv_rows (both operands rounded to BF16: ~2^-9 relative
// each), not bit for bit; the result does not depend on how entries share blocks.
#include <cuda_runtime.h>

#include "backend/cuda/gemv.h"
#include "core/weight.h"

namespace ds4::cuda {

inline constexpr int kGroupedMmaMaxEntries = 4;
// Entries of one expert per block (1..kGroupedMmaMaxEntries; default the maximum, or the
// environment variable DS4_GROUPED_MMA_ENTRIES read on first use). 1 = one block per entry
// (each entry decodes its expert again): the bench's baseline. Not thread safe against
// launches in flight on other threads.
void grouped_mma_set_entries_per_block(int n);
int grouped_mma_entries_per_block();

// Whether grouped_mma_bf16 takes this weight: every gemv format, cols a multiple of 128.
bool grouped_mma_supports(const WeightMatrix& w);

// The same arguments and meaning as gemv_rows (r.n <= kGemvMaxRows rows per entry; batch ids,
// live, counts, x_idx, y_idx as there). Throws ds4::InputError when !grouped_mma_supports(w).
void grouped_mma_bf16(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t stream);

// The routed experts of a multi-row forward (the models' chunk paths): whether a chunk may run
// its experts on tensor cores (`tensor_chunk`: a tensor-core prefill chunk with expert MMAs
// enabled, and both expert matrices in a supported layout), and the product itself: BF16 MMAs
// when `mma`, else gemv_rows (each row as the decode step computes it).
inline bool grouped_mma_usable(bool tensor_chunk, const WeightMatrix& gate_up, const WeightMatrix& down) {
  return tensor_chunk && grouped_mma_supports(gate_up) && grouped_mma_supports(down);
}
inline void grouped_experts(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, bool mma,
                            cudaStream_t stream) {
  if (mma) grouped_mma_bf16(w, x, y, r, stream);
  else gemv_rows(w, x, y, r, stream);
}

}  // namespace ds4::cuda
