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

// out {n, cols} row-major BF16 (contiguous) = the f32 rows x + i * x_row, rounded to nearest.
void rows_to_bf16(const float* x, int64_t x_row, int64_t n, int64_t cols, void* out, cudaStream_t stream);

}  // namespace ds4::cuda
