#pragma once
// Internal to the GEMV kernels (gemv.cu, gemv_act.cu): warp sums and programmatic dependent
// launch (sm_90 PDL), so both kernel families start, wait and reduce the same way; the models'
// small kernels launch through launch_small with pdl_begin.
#include <cuda_runtime.h>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"

namespace ds4::cuda::gemv_detail {

// The current device's SM count, asked once (launch shapes sized to fill the GPU).
inline int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    DS4_CUDA_CHECK(cudaGetDevice(&dev));
    DS4_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v > 0 ? v : 1;
  }();
  return n;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// gemv_rows' per-entry options (GemvRows in gemv.h); offsets in x's elements.
struct RowsArgs {
  int n;
  int64_t x_row, y_row;
  const int32_t *live, *counts, *x_idx, *y_idx;
  int idx_stride;  // x_idx / y_idx entries' stride (GemvRows::idx_stride)
  // Always 0; the compiler cannot know it: `v | (dep & zero)` makes v wait for dep (gemv.cu's
  // wide gemv_rows forms order their decode and loads so through ptxas's scheduling).
  uint32_t zero = 0;
};
inline RowsArgs rows_args(const GemvRows& r) {
  return RowsArgs{r.n, r.x_row, r.y_row, r.live, r.counts, r.x_idx, r.y_idx, r.idx_stride, 0};
}
// Whether a multi-row launch's entries are shaped by device data (live count, row counts, row
// gathers): rows_entry reads it (so not before a PDL wait), and an entry's input rows need not be
// n consecutive rows (so the launch cannot be split by rows). With the expert ids (Args::ids) such
// a launch is "routed".
inline bool rows_indexed(const RowsArgs& ra) { return ra.live || ra.counts || ra.x_idx || ra.y_idx; }

// This block's entry of a multi-row launch: false past *live; else entry(a) points `a` at the
// entry's expert and returns the entry b, and this fills the live count n and the input rows'
// x / y offsets (b * a.x_stride / a.y_stride included).
template <int N, class A, class Entry>
__device__ __forceinline__ bool rows_entry(A& a, const RowsArgs& ra, int& n, int64_t (&xo)[N], int64_t (&yo)[N],
                                           Entry&& entry) {
  if (ra.live && int(blockIdx.y) >= *ra.live) return false;
  const int64_t b = entry(a);
  n = ra.counts ? min(ra.counts[blockIdx.y], N) : ra.n;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int64_t k = int64_t(blockIdx.y) * ra.idx_stride + i;
    xo[i] = b * a.x_stride + (i < n ? (ra.x_idx ? ra.x_idx[k] : i) * ra.x_row : 0);
    yo[i] = b * a.y_stride + (i < n ? (ra.y_idx ? ra.y_idx[k] : i) * ra.y_row : 0);
  }
  return true;
}

// The end of a multi-row GEMV block: acc[r][i] (weight row row0 + r, input row i) summed over
// the block (warp shuffles, then the warps in order) and written to y[yo[i] + row0 + r] for the
// live inputs i < n and the rows that exist. The same code for gemv_rows and gemv_act(_rows),
// so a row's last additions are the same in every kernel that must match another bit for bit.
template <int R, int N, int kMaxWarps>
__device__ __forceinline__ void finish_rows(const float (&acc)[R][N], int64_t row0, int64_t rows, int n,
                                            const int64_t (&yo)[N], float* __restrict__ y) {
  __shared__ float part[R * N][kMaxWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Only the n live inputs are reduced: n is the same in every thread of the block (ra.n, or the
  // entry's count), so the shuffles stay whole-warp. A routed expert entry of a batch holds 1-2
  // of N = 16 inputs, and reducing all R * N sums made the finish the bulk of such a block's work.
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i >= n) break;
      const float s = warp_sum(acc[r][i]);
      if (lane == 0) part[r * N + i][warp] = s;
    }
  __syncthreads();
  for (int k = threadIdx.x; k < R * N; k += blockDim.x) {
    const int r = k / N, i = k % N;
    if (i >= n || row0 + r >= rows) continue;
    float s = 0.f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) s += part[k][w];
    y[yo[i] + row0 + r] = s;
  }
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

// A PDL kernel's first statement: its dependents may launch (when `trigger`), and it reads and
// writes nothing before the kernel it depends on has finished. The small kernels (launch_small)
// pass the launch's small_kernel_pdl() as their last argument, so with DS4_SMALL_PDL off they
// neither launch as dependents nor let the next kernel (a PDL gemv) start early: the code before.
__device__ __forceinline__ void pdl_begin(bool trigger = true) {
  if (trigger) pdl_launch_dependents();
  pdl_wait();
}

// Launches kernel k with `smem` bytes of dynamic shared memory, its blocks grouped in thread block
// clusters of `cluster` blocks (dim3(1, 1, 1): no cluster attribute), as a programmatic dependent
// of the kernel before it on `stream` when `pdl` (the kernel must then pdl_wait before reading
// what that kernel writes).
template <class... KArgs, class... Args>
void launch_cluster_maybe_pdl(bool pdl, dim3 cluster, void (*k)(KArgs...), dim3 blocks, int threads, size_t smem,
                              cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = blocks;
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x, attr[n].val.clusterDim.y = cluster.y, attr[n].val.clusterDim.z = cluster.z;
    ++n;
  }
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  DS4_CUDA_CHECK(cudaLaunchKernelEx(&cfg, k, std::forward<Args>(args)...));
}

// The same without clusters.
template <class... KArgs, class... Args>
void launch_maybe_pdl_smem(bool pdl, void (*k)(KArgs...), dim3 blocks, int threads, size_t smem, cudaStream_t stream,
                           Args&&... args) {
  launch_cluster_maybe_pdl(pdl, dim3(1, 1, 1), k, blocks, threads, smem, stream, std::forward<Args>(args)...);
}

// The same without dynamic shared memory.
template <class... KArgs, class... Args>
void launch_maybe_pdl(bool pdl, void (*k)(KArgs...), dim3 blocks, int threads, cudaStream_t stream, Args&&... args) {
  if (!pdl) {
    k<<<blocks, threads, 0, stream>>>(std::forward<Args>(args)...);
    DS4_CUDA_CHECK_LAUNCH();
    return;
  }
  launch_maybe_pdl_smem(true, k, blocks, threads, 0, stream, std::forward<Args>(args)...);
}

// Grids of at most this many blocks an SM launch as programmatic dependents (launch_small). Every
// small kernel of a batch-1 decode step fits (Qwen's largest: 192 blocks, H100 ncu, session 33);
// a prefill chunk's grids do not: with every small launch PDL, Qwen's 2K / 8K prefill lost 2.8 %
// while its decode gained 4.2 % (H100, session 33 call 2).
constexpr int64_t kSmallPdlBlocksPerSm = 2;

// A small kernel (its last parameter `bool pdl_trigger`, its first statement pdl_begin(pdl_trigger))
// as a programmatic dependent, triggering its own dependents, when small_kernel_pdl() and the grid
// is at most kSmallPdlBlocksPerSm blocks an SM; else a plain launch that triggers nothing.
template <class... KArgs, class... Args>
void launch_small(void (*k)(KArgs...), dim3 blocks, int threads, size_t smem, cudaStream_t stream, Args&&... args) {
  const int64_t grid = int64_t(blocks.x) * blocks.y * blocks.z;
  const bool pdl = small_kernel_pdl() && grid <= kSmallPdlBlocksPerSm * sm_count();
  launch_maybe_pdl_smem(pdl, k, blocks, threads, smem, stream, std::forward<Args>(args)..., pdl);
}

}  // namespace ds4::cuda::gemv_detail
