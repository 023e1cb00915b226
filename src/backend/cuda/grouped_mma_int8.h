#pragma once
// Routed experts of a tensor-core prefill chunk on INTEGER tensor cores, for models whose
// numerics quantize activations (core/act_quant.h: DeepSeek ds4-layout files): the chunk's
// expert input rows are quantized once (quantize_act, Q8_0 / Q8_K blocks), the weights decode
// to int8 A fragments (IQ2_XXS: signed grid values 8 / 25 / 43; Q2_K: q * scale <= 45, the
// mins through the activation's bsums; Q8_0: the bytes) and mma.sync m16n8k32 s8 sums them in
// int32. The f32 part is ds4's: one term per activation block in column order, the same
// expressions as ds4::dot_act (no contraction), so every output equals dot_act on the host
// bit for bit (test_grouped_mma_int8 compares with memcmp): a stricter contract than
// gemv_act_rows' (which sums its block terms in another order and agrees to rounding).
// The BF16 path (grouped_mma.h) stays for models without activation quantization.
#include <cuda_runtime.h>

#include "backend/cuda/gemv.h"
#include "core/act_quant.h"
#include "core/weight.h"

namespace ds4::cuda {

// Q2_K / IQ2_XXS weights staged through shared memory by coalesced 16-byte copies, a 256-column
// super-block per stage, instead of per-lane loads of the bytes each lane decodes (matrices whose
// data starts 16-byte aligned; others keep the unstaged kernel). On by default (the same bits
// either way; H100, 512-row chunks: IQ2_XXS gate|up 1.60x, Q2_K 1.2x the unstaged kernel,
// bench/results/session22-2026-12-06). DS4_GROUPED_MMA_INT8_STAGED (0 or 1; unset = 1) is read on
// first use. Not thread safe against launches in flight on other threads.
void grouped_mma_int8_set_staged(bool on);
bool grouped_mma_int8_staged();
// Blocks per SM of the staged kernel at 4 entries per block (IQ2_XXS / Q2_K; a 2048-row DeepSeek
// chunk): 1, or 2 (3-stage rings, <= 128 registers). The same bits either way.
// DS4_GROUPED_MMA_INT8_OCC (1 or 2; unset = 2) is read on first use; a value other than 1 or 2
// throws InputError. Not thread safe against launches in flight on other threads.
void grouped_mma_int8_set_occupancy(int blocks_per_sm);
int grouped_mma_int8_occupancy();
// Whether grouped_mma_int8 on w takes the staged kernel now (the setting, the format, alignment).
bool grouped_mma_int8_stages(const WeightMatrix& w);

// Whether grouped_mma_int8 takes this weight: Q8_0 (cols a multiple of 128), Q2_K or IQ2_XXS
// (cols a multiple of 256).
bool grouped_mma_int8_supports(const WeightMatrix& w);

// gemv_act_rows' contract (gemv_act.h): x = quantized input row 0 (x.block ==
// act_block_for(w.type), x.n == w.cols), input row i at q + i * r.x_row values (r.x_row and
// r.batch.x_stride multiples of the activation block, 16-byte aligned q); batch ids, live,
// counts, x_idx, y_idx as gemv_rows. rows_per_expert picks the entries per block as
// grouped_mma_bf16 does (grouped_mma_set_entries_per_block forces it for both kernels).
// Throws ds4::InputError for an unsupported weight or mismatched operands.
void grouped_mma_int8(const WeightMatrix& w, const ActQ8View& x, float* y, const GemvRows& r, cudaStream_t stream,
                      int64_t rows_per_expert = 0);

// Two activation planes (quantize_act_planes: models without ds4's activation quantization, whose
// tensor-core chunks want more than 8 bits of x; issue #22, GLM's experts): as grouped_mma_int8,
// x = the high plane of input row 0 (Q8_K, x.n == w.cols), input row i's high plane at
// x + i * r.x_row values and its low plane x.n values after it (r.x_row >= 2 x.n), at most 8
// input rows per entry (r.n <= 8, r.idx_stride 8: moe_group with a stride of 8). Each output =
// dot_act(high) + dot_act(low), that sum rounded once: ~3e-5 of an activation block's largest
// |x| per value (BF16 operands: 2^-9 of each value). Q2_K / IQ2_XXS weights.
void grouped_mma_int8_planes(const WeightMatrix& w, const ActQ8View& x, float* y, const GemvRows& r, cudaStream_t stream,
                             int64_t rows_per_expert = 0);

// A dense product of a tensor-core chunk on the same kernels (issue #22: a DeepSeek chunk's Q8_0
// projections): for groups g < count (weight data + g * w_stride bytes) and rows i < n,
// y + g * y_stride + i * y_row = W_g (quantized row x + g * x_stride + i * x_row), strides in
// values (x) and floats (y). Each output equals dot_act of its row and weight row bit for bit,
// as grouped_mma_int8's. x as grouped_mma_int8's (x.n == w.cols; x_row and x_stride multiples
// of the activation block and of 16). The rows go in slices of 16, up to 4 slices of one group
// per block sharing the decoded weight tile. Throws ds4::InputError as grouped_mma_int8.
struct DenseGroups {
  int count = 1;
  size_t w_stride = 0;
  int64_t x_stride = 0, y_stride = 0;
};
void grouped_mma_int8_dense(const WeightMatrix& w, const ActQ8View& x, int64_t x_row, float* y, int64_t y_row, int64_t n,
                            const DenseGroups& groups, cudaStream_t stream);

}  // namespace ds4::cuda
