#pragma once
// For the PDL tests (test_gemv_pdl, test_gemv_act): a kernel that lets the next kernel start at
// once (griddepcontrol.launch_dependents first), spins for spin_ns, then copies src -> dst and
// ids_src -> ids_dst: a programmatic dependent that reads dst or ids_dst before its
// griddepcontrol.wait sees the stale values. Launch it with one block.
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda_test {

__global__ void late_writer(const float* src, float* dst, int64_t n, const int32_t* ids_src, int32_t* ids_dst,
                            int n_ids, unsigned long long spin_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (threadIdx.x == 0) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < spin_ns);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  for (int i = threadIdx.x; i < n_ids; i += blockDim.x) ids_dst[i] = ids_src[i];
}

}  // namespace ds4::cuda_test
