#pragma once
// Weights and activations to BF16 for the tensor-core path (matmul_rows.h): a multi-row
// product dequantizes a tile of weight rows once and multiplies it with every input row.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/gemv.h"
#include "core/weight.h"

namespace ds4::cuda {

// out {rows, w.cols} row-major BF16 (device, 16-byte aligned) = rows row0 .. row0 + rows - 1
// of `w` decoded by the GEMV's own format decoders (gemv_formats.cuh decode), then rounded to
// nearest BF16. Every format gemv() takes (gemv_supports); the same shape rules as gemv().
void dequant_bf16(const WeightMatrix& w, int64_t row0, int64_t rows, void* out, cudaStream_t stream);

// Whole expert matrices for a grouped GEMM (grouped_gemm.h): out + j * w.rows * w.cols = expert
// experts.ids[j] (device ids; w's data, scales and biases advanced by ids[j] * id_stride /
// id_scale_stride bytes) decoded as dequant_bf16, for j < experts.count (1..65535); the x / y
// strides are not used. cols a multiple of 32 (and of 256 for the K-quants and IQ2_XXS).
void dequant_bf16_experts(const WeightMatrix& w, const GemvBatch& experts, void* out, cudaStream_t stream);

// The same decode written as f32 (the TF32 path of matmul_rows): out {rows, w.cols} floats.
void dequant_f32(const WeightMatrix& w, int64_t row0, int64_t rows, float* out, cudaStream_t stream);

// The FP16 operands of MatmulPrecision::kF16 (matmul_rows.h), each scaled by a power of two that
// brings its largest magnitude to [2^14, 2^15) (exact: FP16 then keeps TF32's 11 significant bits
// for every value within 2^-14 of the largest and never overflows):
//   rows_to_f16_scaled  out {n, cols} contiguous FP16 = the f32 rows x + i * x_row times 2^k(x);
//                       *x_max_bits (device) = their largest |x| as float bits;
//   dequant_f16_scaled  rows row0 .. of w as dequant_bf16 decodes them, times 2^k(tile), to FP16,
//                       where *w_max_bits (device) holds the tile's largest |weight| (measured
//                       first when `measure`, else kept from an earlier measuring call); then
//                       *alpha (device) = 1 / (2^k(x) 2^k(w)), the GEMM's alpha that undoes both.
// w.cols a multiple of 32 (InputError otherwise: the caller takes another precision).
void rows_to_f16_scaled(const float* x, int64_t x_row, int64_t n, int64_t cols, void* out, unsigned* x_max_bits,
                        cudaStream_t stream);
void dequant_f16_scaled(const WeightMatrix& w, int64_t row0, int64_t rows, void* out, unsigned* w_max_bits,
                        bool measure, const unsigned* x_max_bits, float* alpha, cudaStream_t stream);

// out {n, cols} row-major BF16 (contiguous) = the f32 rows x + i * x_row, rounded to nearest.
void rows_to_bf16(const float* x, int64_t x_row, int64_t n, int64_t cols, void* out, cudaStream_t stream);

}  // namespace ds4::cuda
