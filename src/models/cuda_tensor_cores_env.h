#pragma once
// The serving binary's switch for tensor-core prefill chunks of every CUDA model:
// DS4_CUDA_TENSOR_CORES=0 keeps every chunk on the exact path (bit-identical to decode steps),
// for exactness checks of the served model against a float32 reference (e.g. the fuzz corpus
// on CUDA); 1 or unset: tensor cores (each model's default for serving). Any other value is an
// InputError naming the variable, so a typo never silently picks a path.
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace ds4 {

// The first prefill chunk size a served CUDA model runs on tensor cores: one past the largest
// exact chunk (chunk_rows, at most 16: no verify window, DSpark K5 block or draft chain reaches
// it). Measured on an H200 (bench/results/session20-2026-12-05 call 3, fresh state per prompt
// length): from 17 rows the tensor-core chunk is at least as fast as 16-row exact chunks for
// DeepSeek (0.93x at 17 tokens, 1.07x at 32, 1.51x at 64) and GLM / Qwen ran 17..63-token
// prompts 3-4x slower on exact chunks than a 64-token prompt on tensor cores (GLM 48 tokens
// 0.47 s vs 64 tokens 0.15 s; Qwen 0.31 s vs 0.08 s) while their threshold was 64.
inline constexpr int kServedTensorCoreRows = 17;

inline bool cuda_tensor_cores_from_env() {
  const char* e = std::getenv("DS4_CUDA_TENSOR_CORES");
  if (e == nullptr) return true;
  const std::string v = e;
  if (v != "0" && v != "1") throw InputError("DS4_CUDA_TENSOR_CORES must be 0 or 1, got '" + v + "'");
  return v == "1";
}

}  // namespace ds4
