#pragma once
// y = W x for n = 1..16 quantized activation rows at once on int8 tensor cores (mma.sync
// m16n8k32 s8 x s8 -> s32): the multi-row twin of gemv_act (gemv_act.h) for Q8_0, Q2_K and
// IQ2_XXS weights, reading each weight byte once for all rows.
//
// Numerics: every weight block's f32 term is gemv_act's (the same exact integers -- the MMA
// sums the same int8 products -- and the same f32 expression, ds4's), only the order of the f32
// sum over a row's blocks differs: a thread block owns 8 or 16 weight rows and splits the row's
// blocks over W warps in stages of S blocks (warp w takes stages w, w + W, ...; inside a stage
// blocks in order), each warp adds its terms left to right, then the W warp sums are added in
// warp order. W and S depend only on the weight (type, rows, cols: gemv_act_mma_split), never
// on n or on the other input rows, so row i of a launch is the same bits for any n and any
// companions (test_gemv_act_mma checks both, and the order against a host emulation).
#include <cuda_runtime.h>

#include "backend/cuda/gemv_act.h"

namespace ds4::cuda {

// The most input rows one launch takes.
constexpr int kGemvActMmaMaxRows = 16;

// The K split of gemv_act_mma for a weight: warps per row (W) and weight blocks per stage (S);
// the f32 order above. Throws InputError for a type without an act product.
struct GemvActMmaSplit {
  int warps, stage_blocks;
};
GemvActMmaSplit gemv_act_mma_split(DType type, int64_t rows, int64_t cols);

// y row i (y + i * y_row floats, rows values) = W x row i for i < n, x row i at
// q + i * x_row values (d + i * x_row / block, bsums + i * x_row / 16): x_row a multiple of the
// block and of 16, >= w.cols; y_row >= w.rows when n > 1 (any for one row); x.block ==
// act_block_for(w.type), x.n == w.cols; q 8-byte and bsums 8-byte aligned. n in 1..16. Throws
// InputError otherwise. Launched as a programmatic
// dependent when gemv_pdl() (weights are staged before the wait, x read after it).
void gemv_act_mma(const WeightMatrix& w, const ActQ8View& x, float* y, int n, int64_t x_row, int64_t y_row,
                  cudaStream_t stream);

// Bench knob: 8-row tiles per thread block (0 = auto, 1 or 2). Never changes a result.
void gemv_act_mma_set_tiles(int tiles);

}  // namespace ds4::cuda
