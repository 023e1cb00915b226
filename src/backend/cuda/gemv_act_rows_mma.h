#pragma once
// gemv_act_rows' product of Q8_0 weights over 2..16 plain input rows on int8 tensor cores, in
// gemv_act's f32 order: row i of the result is gemv_act's on input row i, bit for bit, so a
// decode batch, a verify window and a prefill chunk below the tensor-core GEMM size give each
// row what its own decode step gives (issue #24: batched = alone), while every weight byte is
// read once for all rows (the dp4a rows kernel re-reads each row's activations per weight row
// and cost 5-7x one gemv_act at 16 rows on the H100, bench_cuda_gemv --act-mma, session 18).
//
// The order it reproduces (gemv_act.cu, Q8_0: one lane per 32-value block): T = min(128, 32
// ceil(blocks / 32)) slots; slot s adds, from 0, the f32 terms (d_w d_x) isum of blocks s, s + T,
// s + 2T, ... in turn; each 32 slots are added by warp_sum's xor tree (distance 16 first), and the
// T / 32 warp sums, from 0, in warp order. Here slot group w of a thread block (1, 2 or 4 warps)
// owns slots 32w .. 32w + 31: it stages their blocks of 8 or 16 weight rows in shared memory, and
// for each slot (in the bit-reversed order that lets a stack form the xor tree's pairs as they
// complete; the group's warps take whole subtrees) takes one m16n8k32 product per block and step
// (16 input rows x 8 weight rows: the block's exact integer sums), forms gemv_act's terms and adds
// them in gemv_act's order.
// Internal to the backend: gemv_act_rows (gemv_act.cu) dispatches here.
#include <cuda_runtime.h>

#include "backend/cuda/gemv_act.h"

namespace ds4::cuda {

// Whether gemv_act_rows_q8_mma takes a product of w: Q8_0 with rows of at most 4 x 128 blocks
// (16384 values; the slots' blocks of all steps are staged at once).
bool gemv_act_rows_q8_mma_fits(const WeightMatrix& w);

// y row i (y + i * y_row floats) = W x row i for i < n, n in 1..16, input row i at q + i * x_row
// values (d + i * x_row / 32). The caller (gemv_act_rows) has checked the weight, the activation
// and x_row; this checks fits() and n. Launched as a programmatic dependent when gemv_pdl()
// (weights are staged before the wait, activations read after it).
void gemv_act_rows_q8_mma(const WeightMatrix& w, const ActQ8View& x, float* y, int n, int64_t x_row, int64_t y_row,
                          cudaStream_t stream);

// Bench knobs, never changing a result: 8-row tiles per thread block (0 = auto, 1 or 2); warps
// per slot group (0 = auto, 2 or 4; rows staged 16 bytes at a time only, the others take 1).
void gemv_act_rows_q8_mma_set_tiles(int tiles);
void gemv_act_rows_q8_mma_set_split(int split);

}  // namespace ds4::cuda
