// Picks the row decoder for a weight type and SIMD level (one file per format holds the
// decoders themselves).
#include <string>

#include "core/error.h"
#include "core/quant.h"

namespace ds4 {

RowDecodeFn row_decoder(DType t, SimdLevel level) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::F8_E4M3: return plain_decoder(t, level);
    case DType::Q8_0: return q8_0_decoder(level);
    case DType::Q4_K: return q4_k_decoder(level);
    case DType::Q2_K: return q2_k_decoder(level);
    case DType::IQ2_XXS: return iq2_xxs_decoder(level);
    case DType::MLX_Q4: case DType::MLX_Q8: return mlx_decoder(level);
    default: throw Error("weight type " + std::string(dtype_name(t)) + " has no decoder (not a weight type)");
  }
}

int64_t decode_granularity(const WeightMatrix& w) {
  if (w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8) {
    if (w.group_size <= 0 || w.cols % w.group_size != 0)
      throw Error("MLX weight: group size " + std::to_string(w.group_size) + " does not divide " + std::to_string(w.cols) + " cols");
    return w.group_size;
  }
  return block_geometry(w.type).elements;
}

}  // namespace ds4
