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

inline bool cuda_tensor_cores_from_env() {
  const char* e = std::getenv("DS4_CUDA_TENSOR_CORES");
  if (e == nullptr) return true;
  const std::string v = e;
  if (v != "0" && v != "1") throw InputError("DS4_CUDA_TENSOR_CORES must be 0 or 1, got '" + v + "'");
  return v == "1";
}

}  // namespace ds4
