#pragma once
// Multi-row MoE (prefill chunk / speculative verify) of any model: the routed (token, slot)
// pairs ids {rows, k} grouped per expert, so one grouped gemv_rows per expert matrix reads
// each used expert once for all the rows routed to it (GLM 5.x and DeepSeek V4 chunk.cu).
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

// Entries in order of first use: experts[u], counts[u] rows, tok[u * group_stride + i] = token
// t (the x row) and slot[u * group_stride + i] = t * k + j (the expert output row); *live =
// entries used. Every row picks k distinct experts, so no entry has more than `rows` rows;
// group_stride >= rows (kGemvMaxRows for gemv_rows' x_idx / y_idx).
struct MoeGroup {
  int32_t *experts, *live, *counts, *tok, *slot;
  int64_t group_stride;
};
// Throws ds4::InputError when rows > group_stride.
void moe_group(const int32_t* ids, int64_t rows, int64_t k, int64_t experts, const MoeGroup& g, cudaStream_t s);

}  // namespace ds4::cuda
