#pragma once
// The routed experts of a multi-row forward (the models' chunk paths), after moe_group: the one
// entry point that picks how a chunk's entries (GemvRows of moe_group's layout) are multiplied.
//   kGemv  gemv_rows: each row as the decode step computes it (not a tensor-core chunk, or a
//          format / shape grouped_mma_bf16 does not take);
//   kMma   grouped_mma_bf16 (grouped_mma.h): in-kernel decode, BF16 MMAs; small chunks;
//   kGemm  GroupedGemm (grouped_gemm.h): experts decoded to BF16, cuBLAS grouped GEMMs; chunks
//          of at least grouped_gemm_min_rows() pairs per expert, when the model has one.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/gemv.h"
#include "backend/cuda/grouped_gemm.h"
#include "core/weight.h"

namespace ds4::cuda {

enum class ExpertPath : uint8_t { kGemv, kMma, kGemm };

// Once per MoE layer, after moe_group and before the two projections: the path of both (kGemm
// when grouped_mma_usable, gg is non-null with grouped_gemm_mode() != 0, rows_per_expert (the
// chunk's pairs over the experts) >= grouped_gemm_min_rows(), gg takes both matrices and `s` is
// not capturing a graph; else kMma or kGemv). kGemm plans r's grouping: a sync of `s`.
ExpertPath plan_experts(bool tensor_chunk, const WeightMatrix& gate_up, const WeightMatrix& down, const GemvRows& r,
                        int64_t rows_per_expert, GroupedGemm* gg, cudaStream_t s);

// One projection of the planned entries (r's live, ids and counts as planned; x_idx, y_idx,
// rows and strides its own): y rows = W_e x rows on `path` (rows_per_expert picks
// grouped_mma_bf16's kernel).
// With `x16` (optional: room for x_rows * w.cols BF16, 16-byte aligned, idle during the call) and
// grouped_mma_x16() on, a kMma projection first rounds x's x_rows rows (r.x_row apart) to BF16
// there (rows_to_bf16) and runs grouped_mma_bf16_x16 on them: the same bits; r.batch.x_stride
// must be 0 then (InputError).
void grouped_experts(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, ExpertPath path,
                     cudaStream_t s, int64_t rows_per_expert, GroupedGemm* gg, void* x16 = nullptr,
                     int64_t x_rows = 0);

}  // namespace ds4::cuda
