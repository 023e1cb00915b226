#include "core/dtype.h"

#include <string>

#include "core/error.h"

namespace ds4 {

BlockGeometry block_geometry(DType t) {
  switch (t) {
    case DType::F32: return {1, 4};
    case DType::F16: return {1, 2};
    case DType::BF16: return {1, 2};
    case DType::F8_E4M3: return {1, 1};
    case DType::I8: return {1, 1};
    case DType::U8: return {1, 1};
    case DType::I32: return {1, 4};
    case DType::U32: return {1, 4};
    case DType::I64: return {1, 8};
    case DType::Q8_0: return {32, 34};
    case DType::Q4_K: return {256, 144};
    case DType::Q2_K: return {256, 84};
    case DType::IQ2_XXS: return {256, 66};
    case DType::MLX_Q4: return {8, 4};   // 8 nibbles per u32 (scales/biases stored apart)
    case DType::MLX_Q8: return {4, 4};
  }
  throw Error("unknown dtype");
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F8_E4M3: return "F8_E4M3";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::I32: return "I32";
    case DType::U32: return "U32";
    case DType::I64: return "I64";
    case DType::Q8_0: return "Q8_0";
    case DType::Q4_K: return "Q4_K";
    case DType::Q2_K: return "Q2_K";
    case DType::IQ2_XXS: return "IQ2_XXS";
    case DType::MLX_Q4: return "MLX_Q4";
    case DType::MLX_Q8: return "MLX_Q8";
  }
  return "?";
}

int64_t row_bytes(DType t, int64_t n) {
  BlockGeometry g = block_geometry(t);
  if (n < 0 || n % g.elements != 0)
    throw Error("row of " + std::to_string(n) + " elements is not whole " + std::string(dtype_name(t)) +
                " blocks of " + std::to_string(g.elements));
  return n / g.elements * g.bytes;
}

}  // namespace ds4
