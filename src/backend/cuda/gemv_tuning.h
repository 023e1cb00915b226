#pragma once
// Tuning knobs of the GEMV kernels for benches (bench_cuda_gemv sweeps them); the engine
// never sets them. Not thread safe against launches in flight on other threads.
#include <cstdint>

#include "core/dtype.h"

namespace ds4::cuda {

// Threads per block of the direct and multi-row GEMV kernels: 0 = the default (128, fewer for
// narrow rows), else 32, 64 or 128. Each thread then takes every threads-th unit of its rows,
// so this changes the summation order of gemv and gemv_rows alike (they stay bit-identical to
// each other; results move by rounding). Throws InputError for another value.
void gemv_set_threads(int threads);
int gemv_threads();
// Weight rows per thread block of gemv_rows over up to 8 input rows: 0 = the default (per format
// and input count, gemv.cu rows_default: the wide form at 4 or 8 rows where it measured faster,
// else the earlier form: MLX 2, its units decoded once for every input row, other formats 4), else
// 2, 4 or 8 (4 and 8: the wide form, decoding per input row in order so that R weight rows fit in
// registers; each x unit is loaded, scaled and summed once for R weight rows). DS4_GEMV_ROWS_R
// sets it too (read on first use, for the models' A/B). Never changes a result (a row's units,
// sums and reductions are gemv's). Throws InputError otherwise.
void gemv_set_rows_weight_rows(int rows);

// Rows per thread block of gemv_act / gemv_act_batched (gemv_act.h): 0 = the default (per
// format, gemv_act.cu act_rows_per_block), else 2, 4 or 8. Never changes a result (each row is
// one block's threads over the same units in the same order). Throws InputError otherwise.
void gemv_act_set_rows_per_block(int rows);
// Lanes per 256-weight block of gemv_act's Q2_K and IQ2_XXS kernels: 0 = the default (4: 64
// weights per lane), else 4 or 8 (32 weights per lane, the Q2_KC split). Changes the order of
// the f32 sum over blocks (results move by rounding; gemv_act_rows follows the same setting, so
// it still equals gemv_act bit for bit). Throws InputError otherwise.
void gemv_act_set_lanes(int lanes);
// IQ2_XXS (4 lanes) sign masks from a table staged in shared memory (true; the first version)
// instead of computed (false, the default: iq2_sign_mask, no shared-memory traffic). The same
// masks: results are the same bit for bit either way; for the bench's comparison.
void gemv_act_set_iq2_sign_table(bool on);
// IQ2_XXS decoded by byte permutes (true: gemv_act_formats.cuh ActIQ2_XXSP / ActIQ2_XXS4P, at
// either lanes setting; wins over the sign table) instead of grid bytes and sign masks (false,
// the default). The same signed integers: the same results bit for bit; for the bench.
void gemv_act_set_iq2_permute(bool on);
// IQ2_XXS (4 lanes) by ActIQ2_XXS4L (gemv_act_formats.cuh: aligned 16-byte weight loads, byte
// permutes from 32 lane copies of the tables in dynamic shared memory, many row groups per block)
// instead of the decoders above. The same signed integers in the same split: the same results
// bit for bit; for the bench's and the tests' comparison until it is measured. Overrides the two
// settings above (not the lanes: at 8 lanes the others decode).
void gemv_act_set_iq2_lane_tables(bool on);
// Q2_K (4 lanes) quant bytes by two aligned 16-byte loads per unit (true: gemv_act_formats.cuh
// ActQ2_K4A) instead of four 4-byte loads (false, the default). The same bytes: the same results
// bit for bit; for the bench's and the tests' comparison until it is measured.
void gemv_act_set_q2k_aligned(bool on);
// Row groups per thread block of gemv_act, gemv_act_batched and gemv_act_rows: 0 = the default
// (gemv_act.cu act_groups_per_block; gemv_act_rows 1, routed 4 / 2), else 1, 2, 4, 8, 16 or 32
// groups of rows-per-block rows that one block walks in turn. Never changes a result. Throws
// InputError otherwise.
void gemv_act_set_groups(int groups);
// Weight rows per thread block of gemv_act_rows over more than 4 input rows (decode batches,
// verify windows): 0 = the default (2), else 2, 4 or 8. More rows reuse each activation load for
// more weight rows but hold R x N accumulators in registers (fewer blocks per SM). Never changes a
// result (each row's units, sums and reduction order are those of gemv_act). Throws InputError
// otherwise.
void gemv_act_set_rows_kernel_rows(int rows);
// Q8_0 gemv_act_rows over 9..16 plain input rows as two launches of at most 8 inputs (true, the
// default: gemv_act.cu launch_rows says why) or one 16-input launch (false). Never changes a
// result; for the bench's same-run comparison.
void gemv_act_set_q8_split(bool on);
// Q8_0 gemv_act_rows over plain input rows on int8 tensor cores in gemv_act's order
// (gemv_act_rows_mma.h) or on the dp4a rows kernel: 0 = auto (the default: tensor cores from
// gemv_act.cu's kRowsMmaMin rows), 1 = tensor cores from 2 rows, -1 = never. Never changes a
// result; for the tests and the bench's same-run comparison. Throws InputError otherwise.
void gemv_act_set_rows_mma(int mode);
// What gemv_act / gemv_act_batched launch for a weight of this type and shape (batch entries)
// under the current settings (the bench prints it): rows per block, lanes per weight block
// (Q8_0: 1), threads per block, row groups per block, whether IQ2_XXS decodes by byte permutes
// or by the lane tables, whether Q2_K takes the aligned loads. Throws InputError for a type gemv_act
// does not take.
struct GemvActConfig {
  int rows_per_block, lanes, threads, groups;
  bool iq2_permute, iq2_lane_tables, q2k_aligned;
};
GemvActConfig gemv_act_config(DType type, int64_t rows, int64_t cols, int64_t batch = 1);

}  // namespace ds4::cuda
