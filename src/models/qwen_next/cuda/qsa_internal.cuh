#pragma once
// Internal to qsa.cu and qsa_tc.cu: what the decode-step attention kernels and the tensor-core
// chunk kernel share: the kept-block list of a row and the merge of the key splits' partials.
#include <cuda_runtime.h>

#include <cstdint>

#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {

// The indices of the set flags among keep[0..nb), ascending, into kept[0..cap) (shared memory);
// returns how many (at most cap). Each thread of a W-warp block counts a contiguous run of flags,
// a block-wide exclusive scan gives each run's first slot, then the runs write their indices.
// Every thread of the block must call it (it synchronizes the block).
template <int W>
__device__ int64_t list_kept_blocks(const uint8_t* keep, int64_t nb, int32_t* kept, int64_t cap) {
  __shared__ int32_t warp_sum[W];
  const int64_t threads = W * 32, run = (nb + threads - 1) / threads;
  const int64_t r0 = int64_t(threadIdx.x) * run, r1 = r0 + run < nb ? r0 + run : nb;
  int32_t cnt = 0;
  for (int64_t b = r0; b < r1; ++b) cnt += keep[b] != 0;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int32_t incl = cnt;  // inclusive scan within the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) warp_sum[warp] = incl;
  __syncthreads();
  int32_t base = 0, total = 0;
  for (int w = 0; w < W; ++w) {
    if (w < warp) base += warp_sum[w];
    total += warp_sum[w];
  }
  int64_t slot = base + incl - cnt;
  for (int64_t b = r0; b < r1 && slot < cap; ++b)
    if (keep[b]) kept[slot++] = int32_t(b);
  __syncthreads();  // the list is visible to the block (and warp_sum may be reused)
  return total < cap ? total : cap;
}

// The partials of kQsaSplits key splits per row and head ({m, l, acc[hd]} at
// part + (split * heads + head) * (hd + 2); m = -inf: an empty split) rescaled to the global
// max, normalized and gated into att {heads, hd} (one launch over the rows; qsa.cu).
void qsa_merge_splits(const float* gate, const QsaShape& sh, const float* part, float* att, cudaStream_t s,
                      const Rows& rows);

// The tensor-core form of qsa_attend for a prefill chunk's rows (qsa_tc.cu): each row's visible
// keys as qsa_attend's split kernel sees them, the products on tensor cores (TF32), partials
// merged by qsa_merge_splits. Whether it takes the shape: qsa_attend_tc_supports.
bool qsa_attend_tc_supports(const QsaShape& sh);
bool qsa_tc();  // the setting (qsa_attend_set_tc, DS4_QSA_TC)
void qsa_attend_tc(const float* q, const float* gate, const QsaCache& c, const QsaShape& sh, const int32_t* pos,
                   const uint8_t* keep, float* part, float* att, cudaStream_t s, const Rows& rows);

}  // namespace ds4::qwen_next::cuda
