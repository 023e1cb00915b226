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
void moe_group(const int32_t* ids, int64_t rows, int64_t k, int64_t experts, const MoeGroup& g, cudaStream_t s);

}  // namespace ds4::cuda
