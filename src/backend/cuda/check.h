#pragma once
// CUDA error checking: every runtime call and every launch is checked, and a failure
// becomes a ds4::Error naming the call, the file:line and the CUDA error string.
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace ds4::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);

}  // namespace ds4::cuda

#define DS4_CUDA_CHECK(call)                                                   \
  do {                                                                         \
    cudaError_t ds4_err_ = (call);                                             \
    if (ds4_err_ != cudaSuccess)                                               \
      ::ds4::cuda::throw_cuda_error(ds4_err_, #call, __FILE__, __LINE__);      \
  } while (0)

// After a kernel launch: catches bad launch configurations at once (not the kernel's
// own faults, which surface at the next synchronizing call).
#define DS4_CUDA_CHECK_LAUNCH() DS4_CUDA_CHECK(cudaGetLastError())
