// Grouping of a chunk's routed (token, slot) pairs per expert; see moe_group.h.
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/moe_group.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

// One block; a single thread walks the pairs in (token, slot) order (at most 16 x k of them:
// cheaper than any parallel scheme's barriers), the others only clear the expert map.
__global__ void moe_group_kernel(const int32_t* __restrict__ ids, int64_t rows, int64_t k, int64_t experts,
                                 MoeGroup g) {
  extern __shared__ int32_t entry_of[];  // {experts}: entry of each expert, -1 unused
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) entry_of[e] = -1;
  __syncthreads();
  if (threadIdx.x != 0) return;
  int32_t used = 0;
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[t * k + j];
      int32_t u = entry_of[e];
      if (u < 0) {
        u = entry_of[e] = used++;
        g.experts[u] = e;
        g.counts[u] = 0;
      }
      const int32_t i = g.counts[u]++;
      g.tok[u * g.group_stride + i] = int32_t(t);
      g.slot[u * g.group_stride + i] = int32_t(t * k + j);
    }
  *g.live = used;
}

}  // namespace

void moe_group(const int32_t* ids, int64_t rows, int64_t k, int64_t experts, const MoeGroup& g, cudaStream_t s) {
  if (rows > g.group_stride)
    throw InputError("cuda moe_group: " + std::to_string(rows) + " rows > group stride " + std::to_string(g.group_stride));
  moe_group_kernel<<<1, 256, size_t(experts) * sizeof(int32_t), s>>>(ids, rows, k, experts, g);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
