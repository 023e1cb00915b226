#pragma once
// Routed experts of a prefill chunk on tensor cores: the grouped form of gemv_rows (entries =
// up to 16 rows routed to one expert, see moe_group.h). Each thread decodes its weight units
// (the GEMV's format decoders, or byte-permuted BF16 value tables for IQ2_XXS and Q2_K:
// grouped_mma_frag.cuh) straight into mma.sync m16n8k16 A fragments, with the K order of a
// 128-column tile permuted so that every decoded weight is used by its own lane; the entries'
// x rows go to BF16 in shared memory in the same order (BF16 operands, FP32 accumulate). An
// expert routed more than 16 rows of the chunk (moe_group gives it consecutive entries) shares
// each decoded fragment between up to kGroupedMmaMaxEntries of them (G = 2 for 17..32 rows per
// expert on average, 4 above). Within BF16 rounding of gemv_rows (both operands rounded to
// BF16: ~2^-9 relative each), not bit for bit; the result does not depend on how entries share
// blocks (the same MMAs in the same K order per entry).
#include <cuda_runtime.h>

#include "backend/cuda/gemv.h"
#include "core/weight.h"

namespace ds4::cuda {

inline constexpr int kGroupedMmaMaxEntries = 4;
// Entries per block: 0 = by rows_per_expert (the default), else 1, 2 or kGroupedMmaMaxEntries
// forced (the bench and the test compare them). The environment variable
// DS4_GROUPED_MMA_ENTRIES (0, 1, 2 or 4) is read on first use. Not thread safe against launches
// in flight on other threads.
void grouped_mma_set_entries_per_block(int n);
int grouped_mma_entries_per_block();
// x rows through a cp.async ring of 3-4 tiles in shared memory instead of registers one tile
// ahead (off by default until measured; the same bits either way). DS4_GROUPED_MMA_XRING (0 or 1)
// is read on first use. Not thread safe against launches in flight on other threads.
void grouped_mma_set_x_ring(bool on);
bool grouped_mma_x_ring();

// Whether grouped_mma_bf16 takes this weight: every gemv format, cols a multiple of 128.
bool grouped_mma_supports(const WeightMatrix& w);

// The same arguments and meaning as gemv_rows (r.n <= kGemvMaxRows rows per entry; batch ids,
// live, counts, x_idx, y_idx as there); rows_per_expert: the chunk's (token, expert) pairs over
// the experts, which picks the kernel (0: one block per entry). Throws ds4::InputError when
// !grouped_mma_supports(w).
void grouped_mma_bf16(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t stream,
                      int64_t rows_per_expert = 0);

// The same with x rows already rounded to BF16 (rows_to_bf16, dequant.h: the same rounding, so
// the same bits as grouped_mma_bf16 on the FP32 rows): r.x_row and r.batch.x_stride count BF16
// elements (multiples of 8; x_bf16 16-byte aligned; InputError otherwise; x_idx rows as ever). The
// tiles are cp.async'd straight into shared memory: half the bytes of FP32 x and no conversion
// per block. The models' chunks take it when grouped_mma_x16() (routed_experts.h grouped_experts
// with a BF16 scratch): DS4_GROUPED_MMA_X16 (0 or 1, read on first use; unset = 1: on by default
// since session 27, H100: GLM 2K prefill 2190 -> 2409 tok/s, Qwen 3850 -> 4165,
// bench/results/session27-2026-12-06 call 1).
void grouped_mma_bf16_x16(const WeightMatrix& w, const void* x_bf16, float* y, const GemvRows& r, cudaStream_t stream,
                          int64_t rows_per_expert = 0);
bool grouped_mma_x16();
void grouped_mma_set_x16(bool on);
// Blocks per SM the BF16-x kernel at kGroupedMmaMaxEntries entries is compiled for: 1 (168
// registers for Q2_K) or 2 (<= 128; the default since session 27: GLM 2K prefill 2421 -> 2622
// tok/s on an H100, bench/results/session27-2026-12-06 call 2). DS4_GROUPED_MMA_OCC (1 or 2, read
// on first use; unset = 2). The same bits either way (test_cuda_matmul). Not thread safe against
// launches in flight on other threads.
void grouped_mma_set_occupancy(int blocks_per_sm);
int grouped_mma_occupancy();

// Whether a chunk may run its experts on tensor cores (`tensor_chunk`: a tensor-core prefill
// chunk with expert MMAs enabled) with both expert matrices in a supported layout; the models
// pick the path through plan_experts (routed_experts.h).
inline bool grouped_mma_usable(bool tensor_chunk, const WeightMatrix& gate_up, const WeightMatrix& down) {
  return tensor_chunk && grouped_mma_supports(gate_up) && grouped_mma_supports(down);
}

}  // namespace ds4::cuda
