#pragma once
// One row of a weight matrix decoded to f32 on the GPU, the row picked by an id in device
// memory: an embedding lookup whose token comes from a kernel (an argmax of a draft head's
// logits), so a draft chain needs no host round trip between its steps.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/weight.h"

namespace ds4::cuda {

// Whether embed_row_f32 decodes this type: F32, F16, BF16, Q8_0, MLX_Q4, MLX_Q8.
bool embed_row_supports(DType type);

// out {w.cols} = row *id of w (device pointers; w laid out as gemv reads it). Bit for bit the
// CPU's dequantize_row (core/quant_*: the same f32 products, no contraction). An id outside
// [0, w.rows) writes NaN everywhere, so a bad id shows in the logits instead of reading
// out of bounds. Throws InputError for an unsupported type. Graph-capturable.
void embed_row_f32(const WeightMatrix& w, const int32_t* id, float* out, cudaStream_t stream);

}  // namespace ds4::cuda
