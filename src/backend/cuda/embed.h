#pragma once
// Embedding rows looked up on the GPU by device-side token ids (a draft head feeds its own
// argmax back without a host round trip). Value for value what core dequantize_row gives.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/weight.h"

namespace ds4::cuda {

// F32 (copy), F16 / BF16 (widened), Q8_0 (q * d, the f16 scale widened) and MLX_Q4 / MLX_Q8
// (s * q + b per group, each product and sum rounded on its own, no contraction): the same
// f32 operations as core/quant_*, so the rows equal the host's dequantize_row bit for bit.
// Other types: false.
bool embed_rows_supports(DType type);

// out row i {w.cols} (at i * out_stride floats) = row ids[i * id_stride] of `w` (device
// pointers, laid out as gemv reads it), i < n. An id outside [0, w.rows) gives a row of NaN
// (a bad id shows in the logits instead of reading out of bounds). Throws InputError for an
// unsupported type or an MLX group that does not divide the columns. Graph-capturable (no
// host sync).
void embed_rows_f32(const WeightMatrix& w, const int32_t* ids, int64_t id_stride, int64_t n, float* out,
                    int64_t out_stride, cudaStream_t stream);

}  // namespace ds4::cuda
