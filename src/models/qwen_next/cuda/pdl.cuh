#pragma once
// Programmatic dependent launch (sm_90) for the decode step's own kernels, as gemv.cu does for
// the gemvs (and switched with it: DS4_GEMV_PDL=0 turns both off): a kernel launched with
// launch_pdl may start while the kernel before it finishes; it calls pdl_launch_dependents()
// (so the kernel after it may start early too) and pdl_wait() before its first read of
// anything the kernels before it wrote. Both instructions are no-ops in a plain launch (the
// chunk's launches of the same kernels).
#include <cuda_runtime.h>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"

namespace ds4::qwen_next::cuda {

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

template <class... KArgs, class... Args>
void launch_pdl(void (*k)(KArgs...), dim3 blocks, int threads, size_t smem, cudaStream_t s, Args... args) {
  if (!ds4::cuda::gemv_pdl()) {
    k<<<blocks, threads, smem, s>>>(KArgs(args)...);
    DS4_CUDA_CHECK_LAUNCH();
    return;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = blocks;
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  DS4_CUDA_CHECK(cudaLaunchKernelEx(&cfg, k, KArgs(args)...));
}

}  // namespace ds4::qwen_next::cuda
