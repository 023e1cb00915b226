// Block-format row decoders. Placeholder dispatch until each format lands; every format
// not implemented yet is a clear error, never silent garbage.
#include <string>

#include "core/error.h"
#include "core/weight.h"

namespace ds4 {

void dequantize_row_blocks(const WeightMatrix& w, int64_t, float*) {
  throw Error("dequantize: weight type " + std::string(dtype_name(w.type)) + " not supported yet");
}

}  // namespace ds4
