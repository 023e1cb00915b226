#pragma once
// Internal to the GEMV kernels (gemv.cu, gemv_act.cu): warp sums and programmatic dependent
// launch (sm_90 PDL), so both kernel families start, wait and reduce the same way.
#include <cuda_runtime.h>

#include "backend/cuda/check.h"

namespace ds4::cuda::gemv_detail {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Programmatic dependent launch (sm_90): launch_dependents lets the next kernel's blocks be
// scheduled once every block of this grid has started; wait blocks until the grid this one
// depends on has finished and its writes are visible. Both are no-ops without the launch
// attribute (gemv_pdl off, or a kernel launched plainly).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Launches kernel k, as a programmatic dependent of the kernel before it on `stream` when
// `pdl` (the kernel must then pdl_wait before reading what that kernel writes).
template <class... KArgs, class... Args>
void launch_maybe_pdl(bool pdl, void (*k)(KArgs...), dim3 blocks, int threads, cudaStream_t stream, Args&&... args) {
  if (!pdl) {
    k<<<blocks, threads, 0, stream>>>(std::forward<Args>(args)...);
    DS4_CUDA_CHECK_LAUNCH();
    return;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = blocks;
  cfg.blockDim = dim3(unsigned(threads));
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  DS4_CUDA_CHECK(cudaLaunchKernelEx(&cfg, k, std::forward<Args>(args)...));
}

}  // namespace ds4::cuda::gemv_detail
