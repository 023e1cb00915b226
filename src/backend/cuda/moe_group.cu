// Grouping of a chunk's routed (token, slot) pairs per expert; see moe_group.h.
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/moe_group.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

// One block; a single thread walks the pairs in (token, slot) order (16 x k of them in a
// verify chunk: cheaper than any parallel scheme's barriers), the others only clear the
// expert map and stage the ids in shared memory (a prefill chunk has thousands of pairs).
constexpr int64_t kStagedPairs = 8192;
__global__ void moe_group_kernel(const int32_t* __restrict__ ids, int64_t rows, int64_t k, int64_t experts,
                                 MoeGroup g) {
  extern __shared__ int32_t smem[];
  int32_t* entry_of = smem;           // {experts}: open entry of each expert, -1 none
  int32_t* fill = smem + experts;     // {experts}: rows in that entry
  int32_t* staged = fill + experts;   // {pairs} when pairs <= kStagedPairs
  const int64_t pairs = rows * k;
  const bool stage = pairs <= kStagedPairs;
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) entry_of[e] = -1, fill[e] = 0;
  if (stage)
    for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) staged[i] = ids[i];
  __syncthreads();
  if (threadIdx.x != 0) return;
  int32_t used = 0;
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = stage ? staged[t * k + j] : ids[t * k + j];
      int32_t u = entry_of[e];
      if (u < 0 || fill[e] == g.group_stride) {
        u = entry_of[e] = used++;
        fill[e] = 0;
        g.experts[u] = e;
      }
      const int32_t i = fill[e]++;
      g.counts[u] = i + 1;
      g.tok[u * g.group_stride + i] = int32_t(t);
      g.slot[u * g.group_stride + i] = int32_t(t * k + j);
    }
  *g.live = used;
}

}  // namespace

void moe_group(const int32_t* ids, int64_t rows, int64_t k, int64_t experts, const MoeGroup& g, cudaStream_t s) {
  if (g.group_stride < 1) throw InputError("cuda moe_group: group stride " + std::to_string(g.group_stride));
  const int64_t pairs = rows * k;
  const size_t shm = size_t(2 * experts + (pairs <= kStagedPairs ? pairs : 0)) * sizeof(int32_t);
  moe_group_kernel<<<1, 256, shm, s>>>(ids, rows, k, experts, g);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
