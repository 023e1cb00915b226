#pragma once
// Multi-row MoE (prefill chunk / speculative verify) of any model: the routed (token, slot)
// pairs ids {rows, k} grouped per expert, so one grouped gemv_rows per expert matrix reads
// each used expert once for all the rows routed to it (GLM 5.x and DeepSeek V4 chunk.cu).
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

// Entries in order of expert id: experts[u], counts[u] rows, tok[u * group_stride + i] = token
// t (the x row) and slot[u * group_stride + i] = t * k + j (the expert output row); *live =
// entries used. An expert's rows keep (t, j) order. An expert with more than group_stride rows
// (kGemvMaxRows for gemv_rows' x_idx / y_idx) fills ceil(rows / group_stride) consecutive
// entries, all full but the last (grouped_mma_bf16 shares one decoded weight tile between
// such neighbours), so a chunk of any size is read as
// at most moe_group_entries(rows, k, experts, group_stride) entries (the buffers' size:
// experts and counts {entries}, tok and slot {entries, group_stride}). With rows <=
// group_stride no expert splits (one entry per used expert, as before).
struct MoeGroup {
  int32_t *experts, *live, *counts, *tok, *slot;
  int64_t group_stride;
};
inline int64_t moe_group_entries(int64_t rows, int64_t k, int64_t experts, int64_t group_stride) {
  const int64_t pairs = rows * k;
  return (pairs < experts ? pairs : experts) + pairs / group_stride;
}
// A small multi-row pass (a decode batch's or verify window's rows) on the exact kernels groups
// at most kMoeSmallStride rows per entry: its experts hold 1-2 rows each, and gemv_rows /
// gemv_act_rows size their registers by the entry width (n <= 4: 4 rows x 4 inputs per block;
// up to 16: 2 x 16), which ran a 16-token batch's experts at ~1/3 of the speed of 16 single
// launches (bench_cuda_gemv --routed, H100, 2026-12-05). Larger passes, and the tensor-core
// grouped kernels (16-row tiles), keep kGemvMaxRows.
inline constexpr int kMoeSmallStride = 4;
inline constexpr int64_t kMoeSmallRows = 16;
inline int64_t moe_group_stride(int64_t rows, bool tensor_cores) {
  return !tensor_cores && rows <= kMoeSmallRows ? kMoeSmallStride : 16;
}
// Entries to size a pass's buffers for, whichever stride moe_group_stride picks for up to `rows`
// rows: experts / counts {capacity}, tok / slot {capacity, 16}.
inline int64_t moe_group_capacity(int64_t rows, int64_t k, int64_t experts) {
  const int64_t big = moe_group_entries(rows, k, experts, 16);
  const int64_t small = moe_group_entries(rows < kMoeSmallRows ? rows : kMoeSmallRows, k, experts, kMoeSmallStride);
  return big > small ? big : small;
}
void moe_group(const int32_t* ids, int64_t rows, int64_t k, int64_t experts, const MoeGroup& g, cudaStream_t s);

}  // namespace ds4::cuda
