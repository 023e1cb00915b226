#pragma once
// Dynamic shared memory above the default 48 KiB: a kernel must opt in (a host-side attribute,
// legal inside a graph capture). Set once per kernel and device (the attribute is the current
// device's), for the most any of the kernel's launches takes.
#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

#include "backend/cuda/check.h"

namespace ds4::cuda {

template <auto kKernel>
void opt_in_smem_once(size_t max_bytes) {
  constexpr int kDevices = 16;  // devices past these set it at every call
  static std::once_flag once[kDevices];  // (a throw leaves one unset: the next launch tries again)
  auto set = [max_bytes] {
    DS4_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(max_bytes)));
  };
  int device = 0;
  DS4_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kDevices) return set();
  std::call_once(once[device], set);
}

}  // namespace ds4::cuda
