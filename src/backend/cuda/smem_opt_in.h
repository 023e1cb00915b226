#pragma once
// Dynamic shared memory above the default 48 KiB: a kernel must opt in (a host-side attribute,
// legal inside a graph capture). Set once per kernel and device (the attribute is the current
// device's), for the most any of the kernel's launches takes.
#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

#include "backend/cuda/check.h"

namespace ds4::cuda {

namespace smem_opt_in_detail {
// Runs set() once per device for the tag type (devices past kDevices run it at every call).
template <class Tag, class Set>
void once_per_device(Set set) {
  constexpr int kDevices = 16;
  static std::once_flag once[kDevices];  // (a throw leaves one unset: the next launch tries again)
  int device = 0;
  DS4_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kDevices) return set(device);
  std::call_once(once[device], set, device);
}
template <auto kKernel, int kForm>
struct Tag {};
}  // namespace smem_opt_in_detail

template <auto kKernel>
void opt_in_smem_once(size_t max_bytes) {
  smem_opt_in_detail::once_per_device<smem_opt_in_detail::Tag<kKernel, 0>>([max_bytes](int) {
    DS4_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(max_bytes)));
  });
}

// The same for a kernel whose launches take shape-dependent sizes up to the device's limit: opts
// in once to everything the kernel may take beside its static shared memory (the device's
// per-block opt-in limit minus the kernel's static part), so no launch sets the attribute again.
template <auto kKernel>
void opt_in_smem_max_once() {
  smem_opt_in_detail::once_per_device<smem_opt_in_detail::Tag<kKernel, 1>>([](int device) {
    int optin = 0;
    DS4_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaFuncAttributes attr{};
    DS4_CUDA_CHECK(cudaFuncGetAttributes(&attr, kKernel));
    DS4_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        optin - int(attr.sharedSizeBytes)));
  });
}

}  // namespace ds4::cuda
