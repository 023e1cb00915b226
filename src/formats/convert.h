#pragma once
// HF / MLX safetensors -> GGUF conversion with per-tensor-class quantization. Tensor names
// are kept as in the source (models bind HF names for both formats); MLX affine triples
// (<p>.weight U32 + <p>.scales + <p>.biases) become one tensor <p>.weight.
#include <cstdint>
#include <functional>
#include <string>

#include "core/dtype.h"

namespace ds4 {

struct ConvertOptions {
  DType quant = DType::F16;          // 2-D+ float weights
  DType quant_experts = DType::F16;  // routed-expert tensors (names with "experts"/"_exps"/"switch_mlp")
  bool experts_set = false;          // false: experts use `quant`
  // Called after each tensor: (tensors done, total, bytes written so far, name).
  std::function<void(size_t, size_t, uint64_t, const std::string&)> progress;
};

struct ConvertReport {
  size_t tensors = 0;
  uint64_t bytes = 0;
  size_t kept_f32 = 0;          // 1-D tensors and norms
  size_t fallback_f16 = 0;      // requested block type did not divide the row length
  size_t copied_integer = 0;    // I8/I32/I64 copied as-is
};

// Parses "F32", "F16", "BF16", "Q8_0", "Q4_K" (case-insensitive); throws InputError otherwise.
DType parse_convert_type(const std::string& s);

ConvertReport convert_to_gguf(const std::string& in, const std::string& out, const ConvertOptions& opt);

}  // namespace ds4
