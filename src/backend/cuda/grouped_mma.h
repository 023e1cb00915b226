#pragma once
// Routed experts of a prefill chunk on tensor cores: the grouped form of gemv_rows (entries =
// up to 16 rows routed to one expert, see moe_group.h) with each entry's weight tile decoded
// to BF16 in shared memory (the GEMV's own format decoders) and multiplied with the entry's
// rows by warp MMAs (BF16 in, FP32 accumulate). When the chunk routes more than 16 rows to an
// expert on average (rows_per_expert = pairs / experts > kGemvMaxRows: 1024-row chunks and up),
// consecutive entries of one expert (moe_group lays them out so) share one decoded tile, up to
// kGroupedMmaMaxEntries of them (64 rows) per block; else each entry reads its expert once, as
// in gemv_rows, but the multiply-adds run on tensor cores. Within BF16 rounding of gemv_rows
// (both operands rounded to BF16: ~2^-9 relative each), not bit for bit; the result does not
// depend on how entries share blocks.
#include <cuda_runtime.h>

#include "backend/cuda/gemv.h"
#include "core/weight.h"

namespace ds4::cuda {

inline constexpr int kGroupedMmaMaxEntries = 4;
// Which kernel: 0 = by rows_per_expert (the default), 1 = one block per entry, kGroupedMmaMaxEntries
// = shared tiles (the bench and the test compare them). The environment variable
// DS4_GROUPED_MMA_ENTRIES (0, 1 or 4) is read on first use. Not thread safe against launches in
// flight on other threads.
void grouped_mma_set_entries_per_block(int n);
int grouped_mma_entries_per_block();

// Whether grouped_mma_bf16 takes this weight: every gemv format, cols a multiple of 128.
bool grouped_mma_supports(const WeightMatrix& w);

// The same arguments and meaning as gemv_rows (r.n <= kGemvMaxRows rows per entry; batch ids,
// live, counts, x_idx, y_idx as there); rows_per_expert: the chunk's (token, expert) pairs over
// the experts, which picks the kernel (0: one block per entry). Throws ds4::InputError when
// !grouped_mma_supports(w).
void grouped_mma_bf16(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t stream,
                      int64_t rows_per_expert = 0);

// Whether a chunk may run its experts on tensor cores (`tensor_chunk`: a tensor-core prefill
// chunk with expert MMAs enabled) with both expert matrices in a supported layout; the models
// pick the path through plan_experts (routed_experts.h).
inline bool grouped_mma_usable(bool tensor_chunk, const WeightMatrix& gate_up, const WeightMatrix& down) {
  return tensor_chunk && grouped_mma_supports(gate_up) && grouped_mma_supports(down);
}

}  // namespace ds4::cuda
