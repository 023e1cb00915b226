#pragma once
// Element and block types of weights and tensors, with their storage geometry.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ds4 {

enum class DType : uint8_t {
  F32, F16, BF16, F8_E4M3,       // plain floats
  I8, U8, I32, U32, I64,         // integers
  Q8_0, Q4_K, Q2_K, IQ2_XXS,     // ggml block formats (row = whole blocks)
  MLX_Q4, MLX_Q8,                // MLX affine: packed u32 + per-group scales and biases
};

// Elements per block and bytes per block (plain types: 1 element per "block").
struct BlockGeometry {
  int64_t elements;
  int64_t bytes;
};

BlockGeometry block_geometry(DType t);
std::string_view dtype_name(DType t);
// Bytes of a row of `n` elements; throws ds4::Error if n is not a whole number of blocks.
int64_t row_bytes(DType t, int64_t n);

}  // namespace ds4
