// Top-k selection of indexer score rows (topk_select.h). One block per row:
//  1. radix select of the k-th largest key: 4 passes over the row, each a 256-bin shared
//     histogram of the next 8 key bits among the keys that match the bits chosen so far;
//  2. the keys above it all kept, and of the keys equal to it the `need` lowest indices,
//     found by an index-ordered fill: every warp owns a contiguous index range, so one scan
//     of 32 per-warp counts gives each warp its first tie rank and output slot.
// Comparisons only, so the set is exact and every run gives the same bytes.
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/topk_select.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

// Order-preserving key: key(a) > key(b) iff a > b as floats, key(a) == key(b) iff a == b,
// for every non-NaN pair (-0.0 is folded onto +0.0 first, so they compare equal as floats
// do). NaN gets key 0, below -inf (0x007fffff): it is never kept over a number.
__device__ __forceinline__ uint32_t topk_key(float f) {
  uint32_t u = __float_as_uint(f);
  const uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0u;
  if (mag == 0u) u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// (kThreads, 1): with the bound alone ptxas aimed at 2 blocks an SM and spilled to stay in 32
// registers; one block of 1024 has 64 available (43 used, no spill, sm_90a).
__global__ void __launch_bounds__(kThreads, 1) topk_select_kernel(TopkSelectArgs a, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  __shared__ unsigned hist[256];
  __shared__ unsigned warp_gt[kWarps], warp_eq[kWarps];
  __shared__ uint32_t s_prefix;
  __shared__ unsigned s_need;
  const int64_t row = blockIdx.x;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t at =
      a.n.shift ? int64_t(*reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(a.n.pos) +
                                                            a.n.shift[row * a.n.shift_stride]))
                : int64_t(a.n.pos[row * a.n.pos_stride]) + row * a.n.row_step;
  const int64_t n = (at + 1) / a.n.ratio;
  const float* __restrict__ x = a.scores + row * a.score_stride;
  uint8_t* keep = a.keep ? a.keep + row * a.keep_stride : nullptr;
  int32_t* list = a.list ? a.list + row * a.list_stride : nullptr;
  if (n <= a.k || a.k < 1) {  // all kept (the caller may not have scored the row), or none
    const bool all = n <= a.k;
    for (int64_t i = tid; i < n; i += kThreads) {
      if (keep) keep[i] = all;
      if (list && all) list[i] = int32_t(i);
    }
    if (tid == 0 && list) a.count[row * a.count_stride] = all ? int32_t(n > 0 ? n : 0) : 0;
    return;
  }

  // 1. The k-th largest key T, 8 bits a pass from the top; `need` counts the entries still
  // to take among those whose key matches `prefix` on the bits in `mask` (>= 1 throughout:
  // the matching entries number >= need, so some bin always holds the need-th one).
  uint32_t prefix = 0, mask = 0;
  unsigned need = unsigned(a.k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();
    // Uniform trip count per warp (the match below needs all 32 lanes); lanes that share a
    // bin add once through their leader, so a row of equal scores costs one atomic a warp.
    for (int64_t base = 0; base < n; base += kThreads) {
      const int64_t i = base + tid;
      bool in = false;
      unsigned bin = 0;
      if (i < n) {
        const uint32_t key = topk_key(x[i]);
        in = (key & mask) == prefix;
        bin = (key >> shift) & 0xffu;
      }
      const unsigned peers = __match_any_sync(kFull, in ? bin : 0x100u);
      if (in && lane == __ffs(peers) - 1) atomicAdd(&hist[bin], unsigned(__popc(peers)));
    }
    __syncthreads();
    if (warp == 0) {  // lane l owns bins 255 - 8l down to 248 - 8l: a suffix count from the top
      const unsigned* h = hist + 255 - 8 * lane;  // h[-j]: this lane's j-th bin from the top
      unsigned mine = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) mine += h[-j];
      unsigned incl = mine;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned v = __shfl_up_sync(kFull, incl, o);
        if (lane >= o) incl += v;
      }
      unsigned above = incl - mine;  // entries in the bins above this lane's
      if (above < need && need <= incl) {  // exactly one lane
        int j = 0;
        while (above + h[-j] < need) above += h[-j++];
        s_prefix = prefix | (uint32_t(255 - 8 * lane - j) << shift);
        s_need = need - above;
      }
    }
    __syncthreads();
    prefix = s_prefix, need = s_need, mask |= 0xffu << shift;
  }
  const uint32_t T = prefix;  // k - need entries have a key > T; take `need` of those == T

  // 2. Warp w owns [lo, hi), contiguous and 32-aligned: counts, then the ordered fill.
  const int64_t per = ((n + kWarps - 1) / kWarps + 31) / 32 * 32;
  const int64_t lo = warp * per < n ? warp * per : n, hi = lo + per < n ? lo + per : n;
  unsigned gt = 0, eq = 0;
  for (int64_t i = lo + lane; i < hi; i += 32) {
    const uint32_t key = topk_key(x[i]);
    gt += key > T;
    eq += key == T;
  }
  gt = __reduce_add_sync(kFull, gt), eq = __reduce_add_sync(kFull, eq);
  if (lane == 0) warp_gt[warp] = gt, warp_eq[warp] = eq;
  __syncthreads();
  const unsigned eq_before = __reduce_add_sync(kFull, lane < warp ? warp_eq[lane] : 0u);
  const unsigned gt_before = __reduce_add_sync(kFull, lane < warp ? warp_gt[lane] : 0u);
  // The ties taken are the first `need` in index order: min(eq_before, need) lie before w.
  unsigned tie = eq_before, out = gt_before + (eq_before < need ? eq_before : need);
  const unsigned below = (1u << lane) - 1u;
  for (int64_t base = lo; base < hi; base += 32) {  // warp-uniform bounds
    const int64_t i = base + lane;
    const bool valid = i < hi;
    const uint32_t key = valid ? topk_key(x[i]) : 0u;
    const unsigned ties = __ballot_sync(kFull, valid && key == T);
    const bool sel = valid && (key > T || (key == T && tie + unsigned(__popc(ties & below)) < need));
    const unsigned sels = __ballot_sync(kFull, sel);
    if (valid && keep) keep[i] = sel;
    if (sel && list) list[out + unsigned(__popc(sels & below))] = int32_t(i);
    tie += unsigned(__popc(ties)), out += unsigned(__popc(sels));
  }
  if (tid == 0 && list) a.count[row * a.count_stride] = int32_t(a.k);
}

}  // namespace

void topk_select_f32(const TopkSelectArgs& a, cudaStream_t stream) {
  if (a.rows <= 0) return;
  if (!a.n.pos || a.n.ratio < 1) throw InputError("topk_select_f32: a device position and a ratio >= 1 are required");
  if (!a.keep && !a.list) throw InputError("topk_select_f32: neither a keep mask nor a list to write");
  if (a.list && !a.count) throw InputError("topk_select_f32: a list needs a count");
  if (a.k > int64_t(INT32_MAX)) throw InputError("topk_select_f32: k exceeds int32");
  ds4::cuda::gemv_detail::launch_small(topk_select_kernel, dim3(unsigned(a.rows)), kThreads, 0, stream, a);
}

}  // namespace ds4::cuda
