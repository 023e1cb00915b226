#pragma once
// Dynamic shared memory above the default 48 KiB: a kernel must opt in (a host-side attribute,
// legal inside a graph capture). Set once per kernel, for the most any of its launches takes.
#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

#include "backend/cuda/check.h"

namespace ds4::cuda {

template <auto kKernel>
void opt_in_smem_once(size_t max_bytes) {
  static std::once_flag once;  // per kernel (a throw leaves it unset: the next launch tries again)
  std::call_once(once, [max_bytes] {
    DS4_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(max_bytes)));
  });
}

}  // namespace ds4::cuda
