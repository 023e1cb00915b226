#pragma once
// MLX q4 (group 64) GEMV on BF16 tensor cores with FP32-level activations (issue #23; session 30,
// unrun: an experiment beside gemv, opt-in; the rows form: session 31, unrun).
//
// Why: gemv's MLX q4 decoder spends ~3 instructions a weight on CUDA cores (mask, magic-number
// subtract, FMA), and Qwen's decode products ran at ~32 % of the copy bandwidth on the H100
// (bench/results/session30-2026-12-06, call 1: 40 % of a decode step). Here the 4-bit values go
// to mma.sync m16n8k16 as exact BF16 integers (one LOP3 and one HSUB2 per two weights), and x is
// split exactly into three BF16 parts x = x0 + x1 + x2 (8 + 8 + 8 mantissa bits) that ride as
// three columns of the MMA's B operand, so every product q * x_i is exact and the sums are FP32
// accumulations: the result agrees with gemv's to FP32 rounding, not bit for bit (another order).
// Per group of 64 columns and row: scale * sum(q x) + bias * sum(x), as MlxAffine.
#include <cuda_runtime.h>

#include "backend/cuda/gemv.h"
#include "core/weight.h"

namespace ds4::cuda {

// MLX_Q4, group_size 64, F16 or BF16 scales, cols a multiple of 64 up to kMlx4TcMaxCols, an
// 8-byte aligned data pointer.
inline constexpr int64_t kMlx4TcMaxCols = 16384;
bool gemv_mlx4_tc_supports(const WeightMatrix& w);

// y = W x (gemv's contract), or the batch's entries as gemv_batched (ids read on the device).
// Launches as a programmatic dependent when gemv_pdl(). Throws InputError for an unsupported w.
void gemv_mlx4_tc(const WeightMatrix& w, const float* x, float* y, const GemvBatch& batch, cudaStream_t stream);

// The rows form (gemv_rows' contract: n <= kGemvMaxRows input rows, batch entries by ids, live,
// counts, x_idx / y_idx): every row equals gemv_mlx4_tc's result for it alone bit for bit (the
// same staging and per-row arithmetic; row i independent of n and of the rows beside it), so a
// chunk's or a decode batch's rows equal decode steps on this path as gemv_rows' do on gemv's.
// Plain launches. Throws InputError for an unsupported w or GemvRows.
void gemv_mlx4_tc_rows(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t stream);

// Whether gemv / gemv_batched / gemv_rows (default options) send the weights gemv_mlx4_tc supports here:
// DS4_MLX4_TC (0 or 1; unset = 0: unmeasured; gemv_rows takes gemv_mlx4_tc_rows then, so decode
// steps and chunk / batch rows stay equal on either path) or gemv_mlx4_tc_set; products that ask
// for cuda_cores (GemvOptions / GemvRows / MatmulBatch: Qwen's fused hyper-connection read) keep
// gemv's kernels. For the model benches' A/B.
bool gemv_mlx4_tc_on();
void gemv_mlx4_tc_set(bool on);
// m16 tiles of weight rows per block (1, 2 or 4: 16, 32 or 64 rows; they share each group's x
// fragments and its staging): DS4_MLX4_TC_TILES or gemv_mlx4_tc_set_tiles; 0 or unset = by shape
// (the one-row kernel 2 where the grid keeps 2.5 blocks an SM, else 1; the rows kernel up to 4, 2
// for 9-16 rows, while it keeps 1.5; a set value is capped there too). Changes no result (each
// row's sums are its own). InputError for another value.
int gemv_mlx4_tc_tiles();
void gemv_mlx4_tc_set_tiles(int tiles);

}  // namespace ds4::cuda
