// Fused mHC (hyper_connections.h hc_pre_fused / hc_head_fused; issue #23). Unfused, one token's
// hc_pre was a gemv of fn over 16 column blocks (one launch) and then one 1024-thread block that
// reread all n * hidden stream values for the flat norm, summed the partials, ran Sinkhorn and
// collapsed: ~22 us of mostly latency per call, 86 calls per DeepSeek token, plus the hc_post
// launch before it. Here the column blocks of fn are the grid: block (s, t) stages row t's
// stream values of columns [s * cols, (s + 1) * cols) in shared memory (computing them as
// hc_post would, and storing them, when the hc_post is folded in), adds their squares and
// multiplies them by fn's column block s; the last block of the row to arrive (threadfence +
// atomic counter) sums the {splits, m + 1} partials in block order and does the split +
// collapse of the unfused kernel. Every sum has a fixed order that does not depend on the
// row count or on which block arrives last, so a decode step equals a chunk's row bit for bit.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <string>
#include <type_traits>

#include "backend/cuda/act_quantize.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/hc_device.cuh"
#include "backend/cuda/hyper_connections.h"

namespace ds4::cuda {
namespace {

namespace cg = cooperative_groups;
using namespace hc_detail;
using gemv_detail::pdl_launch_dependents;
using gemv_detail::pdl_wait;

// 32 warps: fn's 24 rows (n = 4) take one warp each (one round of weight loads), a 1024-column
// block is one value per thread, and the last block's collapse of a 4096-wide hidden is one or
// two float4 columns per thread (v1 had 512 threads: every step was two rounds of loads).
constexpr int kFusedThreads = 1024;
constexpr int kTailCols = 2;  // float4 columns per collapsing thread that collapse_regs holds

struct FusedArgs {
  const uint8_t* fn = nullptr;
  int m = 0;
  int64_t cols = 0;
  size_t split_stride = 0;
  const float *scale = nullptr, *base = nullptr;
  HcDims dims;
  float* x = nullptr;  // the streams: read, or written first when has_post
  HcPostIn post_in;
  bool has_post = false;
  const float* out_norm = nullptr;
  float *out = nullptr, *post = nullptr, *comb = nullptr;  // collapsed (or the head's out); post, comb
  float* partials = nullptr;
  unsigned* counters = nullptr;
  int64_t stride = 0;  // floats between rows' buffers (HcRows)
  int8_t* q8_0 = nullptr;  // HcFusedScratch::q8_0 (one row)
  float* q8_0_d = nullptr;
};

// 8 consecutive weights as floats (16-byte aligned: hc_fused_supported): F32 as two float4,
// F16 / BF16 as one 16-byte load of four pairs.
__device__ __forceinline__ float2 pair_f2(__half2 h) { return __half22float2(h); }
__device__ __forceinline__ float2 pair_f2(__nv_bfloat162 h) { return __bfloat1622float2(h); }
template <class W>
__device__ __forceinline__ void load8(const W* p, float (&v)[8]) {
  if constexpr (std::is_same_v<W, float>) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    using Pair = std::conditional_t<std::is_same_v<W, __half>, __half2, __nv_bfloat162>;
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    const Pair* h = reinterpret_cast<const Pair*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = pair_f2(h[i]);
      v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
  }
}

// acc + w v, each lane an fma (the collapse's step; the cluster form's is the same).
__device__ __forceinline__ float4 axpy4(float w, float4 v, float4 acc) {
  return make_float4(fmaf(w, v.x, acc.x), fmaf(w, v.y, acc.y), fmaf(w, v.z, acc.z), fmaf(w, v.w, acc.w));
}

// The collapsed row's sum of squares in the one order every form shares (the last block's
// collapse_regs of decode and chunk rows alike, and the cluster form, whose block s collapses run
// s): float4 columns in groups of 32 (each group's sq4 summed by a warp's butterfly: gsum[g]), the
// groups in `runs` consecutive runs of ceil(groups / runs), each run's sum from 0 in group order,
// then the runs' sums from 0 in run order.
constexpr int kMaxGroups = kTailCols * kFusedThreads / 32;
__device__ __forceinline__ float run_sum(const float* gsum, int first, int count) {
  float v = 0.f;
  for (int g = 0; g < count; ++g) v += gsum[first + g];
  return v;
}
__device__ __forceinline__ float runs_total(const float* gsum, int groups, int runs) {
  const int per = (groups + runs - 1) / runs;
  float v = 0.f;
  for (int r = 0; r < runs; ++r) {
    const int first = r * per, count = groups - first < per ? groups - first : per;
    v += run_sum(gsum, first, count > 0 ? count : 0);
  }
  return v;
}

// collapse() for the last block (threads t < nt of those that call it, named barrier bar): each
// thread's float4 columns d = t, t + nt (Q of them at most: h4 <= Q * nt) stay in registers, all
// their stream loads and the out_norm loads are issued together, and the norm multiplies the
// registers (collapse() rereads out and loads out_norm in a scalar loop: rounds of latency).
// With q8 (hc_fused_quant_supported, nt a multiple of 32, t = the thread's lane mod 32): each
// warp's float4 column set q is one 128-value tile, quantized as quantize_act does (Q8_0).
// The norm's sum of squares is runs_total's over `runs` runs (nt a multiple of 32: each warp's
// columns of one q are one group).
template <int Q>
__device__ void collapse_regs(const float* w, int n, int64_t hidden, const float* x, const float* out_norm, float eps,
                              float* out, int t, int nt, int bar, int runs, int8_t* q8 = nullptr,
                              float* q8_d = nullptr) {
  const int64_t h4 = hidden / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4 acc[Q], nv[Q];
#pragma unroll
  for (int q = 0; q < Q; ++q) acc[q] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int j0 = 0; j0 < n; j0 += 4) {
    float4 v[Q][4];
#pragma unroll
    for (int q = 0; q < Q; ++q)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j0 + j < n && t + int64_t(q) * nt < h4) v[q][j] = __ldcg(x4 + (j0 + j) * h4 + t + int64_t(q) * nt);
#pragma unroll
    for (int q = 0; q < Q; ++q)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j0 + j < n && t + int64_t(q) * nt < h4) acc[q] = axpy4(w[j0 + j], v[q][j], acc[q]);
  }
  float4* o4 = reinterpret_cast<float4*>(out);
  if (out_norm) {
    // the norm's loads go out here, after the stream loads (fewer live registers there: 1024
    // threads have 64 each) and before threads_sum's barriers, which hide their latency
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      const int64_t d = t + int64_t(q) * nt;
      nv[q] = d < h4 ? __ldg(reinterpret_cast<const float4*>(out_norm) + d) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    __shared__ float gsum[kMaxGroups];
    const int groups = int((h4 + 31) / 32);
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      const int64_t d = t + int64_t(q) * nt;
      const float g = detail::warp_reduce(d < h4 ? sq4(acc[q], 0.f) : 0.f, detail::SumOp{});
      if (t % 32 == 0 && d / 32 < groups) gsum[d / 32] = g;
    }
    bar_sync(bar, nt);
    const float r = rsqrtf(runs_total(gsum, groups, runs) / float(hidden) + eps);
#pragma unroll
    for (int q = 0; q < Q; ++q)
      acc[q] = make_float4(acc[q].x * r * nv[q].x, acc[q].y * r * nv[q].y, acc[q].z * r * nv[q].z, acc[q].w * r * nv[q].w);
  }
#pragma unroll
  for (int q = 0; q < Q; ++q) {
    const int64_t d = t + int64_t(q) * nt;
    if (d < h4) o4[d] = acc[q];
    // a warp's d are 32 consecutive float4 (= one 128-value tile), all live or none
    if (q8 && d - t % 32 < h4) act_quant_detail::q8_0_tile(acc[q], d < h4, t % 32, q8 + (d / 32) * 128, q8_d + (d / 32) * 4);
  }
}

// The last block's collapse by threads t < nt: in registers when the columns fit, else collapse().
// (q8: the host checked that this takes collapse_regs: hc_pre_fused's checks.)
__device__ __forceinline__ void tail_collapse(const float* w, int n, int64_t hidden, const float* x,
                                              const float* out_norm, float eps, float* out, bool vec, int t, int nt,
                                              int bar, int runs, int8_t* q8 = nullptr, float* q8_d = nullptr) {
  const bool norm_vec = !out_norm || (reinterpret_cast<uintptr_t>(out_norm) & 15u) == 0;
  if (vec && norm_vec && hidden / 4 <= int64_t(kTailCols) * nt)
    collapse_regs<kTailCols>(w, n, hidden, x, out_norm, eps, out, t, nt, bar, runs, q8, q8_d);
  else
    collapse<true>(w, n, hidden, x, out_norm, eps, out, vec, t, nt, bar);
}

// Where column i of a staged row lies in shared memory: the row's 8-column groups g = i / 8 keep
// their first four values as float4 g of the row's first half and the last four as float4 g of
// its second half, so lane l of the product (group l of every 32) reads two consecutive-float4
// runs: conflict-free 16-byte loads. (In column order each lane read 8 scalars 32 bytes apart
// from the next lane's: 8-way bank conflicts, the products kernel's whole cost in a chunk: 270 us
// of a DeepSeek 512-row hc_pre on the H100, session 25.)
__device__ __forceinline__ int64_t staged_slot(int64_t i, int64_t cols) {
  return (i & 4) * (cols / 8) + (i >> 3) * 4 + (i & 3);
}

// Phases 1-2 for rows t0 .. t0 + nr - 1 (nr <= R) of column block s: the rows' stream values
// (computed as hc_post would and stored, when has_post) staged in shared memory (staged_slot),
// each row's sum of squares (block_reduce), and fn's column block times them: warp w owns fn
// rows w, w + warps, ...; lane l columns 8l..8l+7 of every 256, then the warp's butterfly sum;
// one load of a weight serves all R rows. Each row's sums are the same operations in the same
// order for any R, so the two-kernel rows form equals the one-row form bit for bit. With `part`
// (the cluster form, one row), the row's {m + 1} partials go to that shared array instead.
template <class W, int R>
__device__ void products(const FusedArgs& a, int64_t t0, int nr, int64_t s, float4* xs4, float* part = nullptr) {
  float* xs = reinterpret_cast<float*>(xs4);
  const int64_t c0 = s * a.cols, H = a.dims.hidden;
  const int n = int(a.dims.n_hc), m = a.m;
  float ss[R];
#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
    ss[rr] = 0.f;
    if (rr >= nr) continue;
    const int64_t o = (t0 + rr) * a.stride;
    float* x = a.x + o;
    float* xr = xs + rr * a.cols;
    if (a.has_post) {
      const float *b = a.post_in.experts ? nullptr : a.post_in.block_out + o, *r = a.post_in.residual + o;
      const float *pp = a.post_in.post + o, *pc = a.post_in.comb + o;
      for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) {
        const int64_t col = c0 + i, d = col % H;
        float v;
        if (a.post_in.experts) {
          const float bd = combine_value(a.post_in.experts, a.post_in.weights, a.post_in.k, a.post_in.shared, H, d);
          v = post_value(n, H, col / H, 0, &bd, r + d, pp, pc);
        } else {
          v = post_value(n, H, col / H, d, b, r, pp, pc);
        }
        x[col] = v;
        xr[staged_slot(i, a.cols)] = v;
        ss[rr] = fmaf(v, v, ss[rr]);
      }
    } else {
      for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) {
        const float v = __ldcg(x + c0 + i);
        xr[staged_slot(i, a.cols)] = v;
        ss[rr] = fmaf(v, v, ss[rr]);
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < R; ++rr) ss[rr] = detail::block_reduce(ss[rr], detail::SumOp{}, 0.f);  // (publishes xs)
  const W* w = reinterpret_cast<const W*>(a.fn + size_t(s) * a.split_stride);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, warps = int(blockDim.x) / 32;
  for (int r = warp; r < m; r += warps) {
    const W* wr = w + int64_t(r) * a.cols;
    float acc[R];
#pragma unroll
    for (int rr = 0; rr < R; ++rr) acc[rr] = 0.f;
    const int64_t half4 = a.cols / 8;  // float4s in a staged row's half
#pragma unroll 4
    for (int64_t c = int64_t(lane) * 8; c < a.cols; c += 256) {
      float v[8];
      load8(wr + c, v);
#pragma unroll
      for (int rr = 0; rr < R; ++rr) {
        const float4 lo = xs4[rr * 2 * half4 + c / 8], hi = xs4[rr * 2 * half4 + half4 + c / 8];
        const float xv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[rr] = fmaf(v[j], xv[j], acc[rr]);
      }
    }
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      acc[rr] = detail::warp_reduce(acc[rr], detail::SumOp{});
      if (lane == 0 && rr < nr) (part ? part[r] : a.partials[(t0 + rr) * a.stride + s * (m + 1) + r]) = acc[rr];
    }
  }
  if (threadIdx.x == 0)
    for (int rr = 0; rr < nr; ++rr) (part ? part[m] : a.partials[(t0 + rr) * a.stride + s * (m + 1) + m]) = ss[rr];
}

// mix {m + 1}: the row's products and sum of squares, summed over the column blocks -> the flat
// norm factor applied (the head: folded into its weights), pre. The whole block calls it (it
// ends with a barrier).
template <bool kHead>
__device__ void mix_to_pre(const FusedArgs& a, float* mix, float* pre) {
  const int n = int(a.dims.n_hc), m = a.m;
  const float rn = rsqrtf(mix[m] / float(n * a.dims.hidden) + a.dims.norm_eps);  // the flat rmsnorm factor
  if constexpr (kHead) {
    if (int(threadIdx.x) < n)
      pre[threadIdx.x] = sigm(mix[threadIdx.x] * rn * a.scale[0] + a.base[threadIdx.x]) + a.dims.hc_eps;
  } else {
    if (int(threadIdx.x) < m) mix[threadIdx.x] *= rn;
    if (int(threadIdx.x) < n)
      pre[threadIdx.x] = sigm(mix[threadIdx.x] * a.scale[0] + a.base[threadIdx.x]) + a.dims.hc_eps;
  }
  __syncthreads();
}

// Warp 0: the Sinkhorn split of the normalized mix -> row o's post and comb.
__device__ __forceinline__ void split_post_comb(const FusedArgs& a, const float* mix, int64_t o) {
  __shared__ float p_pre[kMaxHc], p_post[kMaxHc], p_comb[kMaxHc * kMaxHc];
  const int n = int(a.dims.n_hc);
  sinkhorn_split(mix, a.scale, a.base, n, a.dims.sinkhorn_iters, a.dims.hc_eps, p_pre, p_post, p_comb);
  if (int(threadIdx.x) < n) a.post[o + threadIdx.x] = p_post[threadIdx.x];
  for (int i = threadIdx.x; i < n * n; i += 32) a.comb[o + i] = p_comb[i];
}

// Phase 3 for row t once every column block's partials are stored (splits of them): their sums
// in block order, the flat norm factor, pre (the head's weights); then warp 0 runs Sinkhorn for
// post and comb while the other warps collapse (the split's serial chain and the collapse's
// loads overlap). The whole block calls it.
template <bool kHead>
__device__ void tail(const FusedArgs& a, int64_t t, int64_t splits) {
  __shared__ float mix[(2 + kMaxHc) * kMaxHc + 1], pre[kMaxHc];
  const int64_t o = t * a.stride, H = a.dims.hidden;
  const int n = int(a.dims.n_hc), m = a.m;
  const float* x = a.x + o;
  if (int(threadIdx.x) <= m) mix[threadIdx.x] = sum_splits<true>(a.partials + o + threadIdx.x, splits, m + 1);
  __syncthreads();
  mix_to_pre<kHead>(a, mix, pre);
  const bool vec = vec4_ok(x, H) && vec4_ok(a.out + o, H);
  if (kHead) {
    tail_collapse(pre, n, H, x, a.out_norm, a.dims.norm_eps, a.out + o, vec, int(threadIdx.x), int(blockDim.x), 0,
                  int(splits));
    return;
  }
  if (threadIdx.x < 32) {
    split_post_comb(a, mix, o);
  } else {
    tail_collapse(pre, n, H, x, a.out_norm, a.dims.norm_eps, a.out + o, vec, int(threadIdx.x) - 32,
                  int(blockDim.x) - 32, 1, int(splits), a.q8_0, a.q8_0_d);
  }
}

// Programmatic dependent launch (gemv_pdl): the blocks start while the kernel before finishes;
// until pdl_wait they touch only fn (immutable): one bulk prefetch of column block s into L2.
// Every other read comes after the wait, and none goes through the non-coherent path (gemv.cu:
// ptxas may hoist an __ldg above the wait).
template <class W>
__device__ __forceinline__ void start(const FusedArgs& a, int64_t s, bool prefetch) {
  pdl_launch_dependents();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (prefetch && threadIdx.x == 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a.fn + size_t(s) * a.split_stride),
                 "r"(unsigned(a.m * a.cols * sizeof(W)))
                 : "memory");
#endif
  pdl_wait();
}

// One launch (decode, short chunks): block (s, t) does phases 1-2 for row t, and the row's last
// block to arrive (threadfence + atomic counter) phase 3.
template <class W, bool kHead>
__global__ void __launch_bounds__(kFusedThreads) hc_fused_kernel(FusedArgs a) {
  extern __shared__ float4 xs[];  // {cols} floats: this block's stream values (staged_slot)
  __shared__ bool last;
  start<W>(a, blockIdx.x, blockIdx.y == 0);
  products<W, 1>(a, blockIdx.y, 1, blockIdx.x, xs);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(a.counters + blockIdx.y, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) a.counters[blockIdx.y] = 0;  // ready for the next call
  tail<kHead>(a, blockIdx.y, gridDim.x);
}

// The cluster form of hc_fused_kernel (cluster_form on the host): row t's `splits` blocks are
// one thread block cluster. Phases 1-2 leave each block's partials in its shared memory; behind a
// cluster barrier every block sums them (distributed shared memory, block order: the tail's
// sums), block 0's first warp runs Sinkhorn, and each block collapses its own run of the hidden
// columns (runs_total's run s: warps 1 .. per, one group each) from the stream values the
// blocks staged; the runs' sums of squares are exchanged behind a second barrier, and a third
// keeps each block's shared memory until the others have read it. No fence, no
// atomic counter, no last block reading the whole row again: the tail's work spread over the
// row's SMs, in the same operations and order as the tail (decode == chunk rows, bit for bit).
constexpr int kMaxClusterSplits = 16;  // (non-portable above 8: cluster_form asks the occupancy)
// A cluster barrier in two halves (every thread of the cluster's blocks arrives, then waits):
// arrive releases this thread's writes, wait acquires the others'. (.aligned: the whole warp
// executes it together; the __syncwarp reconverges it after a divergent branch before.)
__device__ __forceinline__ void cluster_arrive() {
  __syncwarp();
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
// The value at `p` in the shared memory of each of the cluster's first `splits` blocks, summed
// from 0 in block order (all loads issued before the adds).
__device__ __forceinline__ float ranks_sum(cg::cluster_group& cl, float* p, int splits) {
  float v[kMaxClusterSplits];
#pragma unroll
  for (int j = 0; j < kMaxClusterSplits; ++j) v[j] = j < splits ? *cl.map_shared_rank(p, j) : 0.f;
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < kMaxClusterSplits; ++j)
    if (j < splits) sum += v[j];
  return sum;
}
template <class W, bool kHead>
__global__ void __launch_bounds__(kFusedThreads) hc_cluster_kernel(FusedArgs a) {
  extern __shared__ float4 xs[];  // {cols} floats: this block's stream values (staged_slot)
  __shared__ float part[(2 + kMaxHc) * kMaxHc + 1], mix[(2 + kMaxHc) * kMaxHc + 1], pre[kMaxHc];
  __shared__ float gsum[32], run_ss;
  cg::cluster_group cl = cg::this_cluster();
  const int s = int(cl.block_rank()), splits = int(cl.num_blocks());
  const int64_t t = blockIdx.y, o = t * a.stride, H = a.dims.hidden, h4 = H / 4;
  const int n = int(a.dims.n_hc), m = a.m;
  start<W>(a, s, t == 0);
  products<W, 1>(a, t, 1, s, xs, part);
  cl.sync();  // every block's partials and staged values are in its shared memory
  if (int(threadIdx.x) <= m) mix[threadIdx.x] = ranks_sum(cl, part + threadIdx.x, splits);  // (sum_splits' order)
  __syncthreads();
  mix_to_pre<kHead>(a, mix, pre);
  // Two more cluster barriers, split into arrive / wait: #2 publishes each run's sum of squares,
  // #3 keeps every block's shared memory until the others' reads of it are done. Warp 0 has
  // nothing to publish: it arrives at #2 first, and block 0's runs Sinkhorn before waiting, so
  // the split's serial chain overlaps the collapse, as in the tail.
  if (threadIdx.x < 32) {
    cluster_arrive();  // #2
    if (!kHead && s == 0) split_post_comb(a, mix, o);
    cluster_wait();
    cluster_arrive();  // #3
    cluster_wait();
    return;
  }
  // run s: float4 columns [s * per * 32, (s + 1) * per * 32), warp 1 + g holding group g of it
  const int per = int(h4 / 32 / splits), w = int(threadIdx.x) / 32 - 1, lane = int(threadIdx.x) % 32;
  const bool mine = w < per;
  const int64_t d = (int64_t(s) * per + (mine ? w : 0)) * 32 + lane;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f), nv = acc;
  if (mine) {
    for (int j0 = 0; j0 < n; j0 += 4) {  // 4 streams' loads in flight, as collapse_regs
      float4 v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j0 + j < n) {
          const int64_t col = (j0 + j) * H + 4 * d;  // staged by block col / cols
          v[j] = *cl.map_shared_rank(xs + staged_slot(col % a.cols, a.cols) / 4, unsigned(col / a.cols));
        }
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j0 + j < n) acc = axpy4(pre[j0 + j], v[j], acc);
    }
    if (a.out_norm) nv = reinterpret_cast<const float4*>(a.out_norm)[d];
  }
  if (a.out_norm) {  // this run's groups (gsum), their sum by the first collapsing thread
    const float g = detail::warp_reduce(mine ? sq4(acc, 0.f) : 0.f, detail::SumOp{});
    if (mine && lane == 0) gsum[w] = g;
    bar_sync(1, kFusedThreads - 32);
    if (threadIdx.x == 32) run_ss = run_sum(gsum, 0, per);
  }
  cluster_arrive();  // #2
  cluster_wait();
  if (a.out_norm) {
    const float ss = ranks_sum(cl, &run_ss, splits);  // (runs_total's order)
    const float rs = rsqrtf(ss / float(H) + a.dims.norm_eps);
    acc = make_float4(acc.x * rs * nv.x, acc.y * rs * nv.y, acc.z * rs * nv.z, acc.w * rs * nv.w);
  }
  cluster_arrive();  // #3: this block's reads of the others' shared memory are done
  if (mine) {
    reinterpret_cast<float4*>(a.out + o)[d] = acc;
    if (a.q8_0) act_quant_detail::q8_0_tile(acc, true, lane, a.q8_0 + (d / 32) * 128, a.q8_0_d + (d / 32) * 4);
  }
  cluster_wait();
}

// Many rows (prefill chunks): phases 1-2 for kRowsPerBlock rows per block (fn read once for
// them), then phase 3 as a second launch, one block per row. (8 rows per block measured no
// faster on the H100, session 23 call 3: hc_pre + hc_post_pre of a 512-row DeepSeek chunk 20.2 ms
// vs 19.1 ms at 4 in session 22; the same bits for any count.)
constexpr int kRowsPerBlock = 4;
constexpr int64_t kTwoLaunchRows = 64;  // from this many rows
template <class W>
__global__ void __launch_bounds__(kFusedThreads) hc_products_kernel(FusedArgs a, int64_t rows) {
  extern __shared__ float4 xs[];  // {kRowsPerBlock, cols} floats (staged_slot)
  start<W>(a, blockIdx.x, blockIdx.y == 0);
  const int64_t t0 = int64_t(blockIdx.y) * kRowsPerBlock;
  products<W, kRowsPerBlock>(a, t0, int(rows - t0 < kRowsPerBlock ? rows - t0 : kRowsPerBlock), blockIdx.x, xs);
}
template <bool kHead>
__global__ void __launch_bounds__(kFusedThreads) hc_tail_kernel(FusedArgs a, int64_t splits) {
  pdl_launch_dependents();
  pdl_wait();
  tail<kHead>(a, blockIdx.x, splits);
}

template <class... KArgs, class... Args>
void launch_pdl(void (*k)(KArgs...), dim3 grid, size_t smem, cudaStream_t s, Args... args) {
  gemv_detail::launch_maybe_pdl_smem(gemv_pdl(), k, grid, kFusedThreads, smem, s, args...);
}

std::atomic<int> g_cluster{-1};  // hc_fused_cluster

// Whether the fused kernel may take this shape and these buffers in the cluster form: the tail's
// collapse_regs would (vectors, the hidden in its registers, so the tail shares its order), each
// block's run is whole groups of 32 float4 columns (whole Q8_0 tiles) on at most 31 warps, and the
// device holds all the rows' clusters at once (asked once per device, kernel and size; above 8
// blocks a non-portable size). Rows past one wave of clusters take the old kernel: a cluster's
// blocks share a GPC, so fewer 16-block clusters than 16-block groups fit at once (H100, session
// 39: 16 rows in clusters lost 2.9 % of DeepSeek's 16-stream step, 2 rows' waves to 3).
template <class W, bool kHead>
bool cluster_form(const HcFn& fn, const FusedArgs& a, const HcRows& rows) {
  const int64_t H = a.dims.hidden, splits = fn.splits;
  auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!hc_fused_cluster() || splits < 2 || splits > kMaxClusterSplits || H % (128 * splits) != 0 ||
      H / 128 / splits > kFusedThreads / 32 - 1 || H / 4 > int64_t(kTailCols) * (kFusedThreads - 32) || !a16(a.x) ||
      !a16(a.out) || (a.out_norm && !a16(a.out_norm)) || (rows.count > 1 && rows.stride % 4 != 0))
    return false;
  constexpr int kDevices = 16;  // (a device past these: the old kernel)
  // per device and size: 0 unknown, else 1 + the clusters the device holds at once
  static std::atomic<int> fits[kDevices][kMaxClusterSplits + 1] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices) return false;
  std::atomic<int>& f = fits[dev][splits];
  if (f.load(std::memory_order_relaxed) == 0) {
    // The first call may come while a step's graph is being captured (the engine captures its
    // first decode step): in the thread's relaxed capture mode these queries neither fail nor
    // invalidate the capture, whatever mode the capture began in.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    auto* k = hc_cluster_kernel<W, kHead>;
    bool ok = cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(unsigned(splits)), cfg.blockDim = dim3(kFusedThreads);
    cfg.dynamicSmemBytes = size_t(fn.cols) * sizeof(float);
    cudaLaunchAttribute at{};
    at.id = cudaLaunchAttributeClusterDimension;
    at.val.clusterDim.x = unsigned(splits), at.val.clusterDim.y = 1, at.val.clusterDim.z = 1;
    cfg.attrs = &at, cfg.numAttrs = 1;
    int clusters = 0;
    ok = ok && cudaOccupancyMaxActiveClusters(&clusters, k, &cfg) == cudaSuccess && clusters > 0;
    (void)cudaGetLastError();  // (a refusal is an answer here, not an error to leave behind)
    (void)cudaThreadExchangeStreamCaptureMode(&mode);  // the thread's mode as it was
    f.store(ok ? 1 + clusters : 1, std::memory_order_relaxed);
  }
  return rows.count <= f.load(std::memory_order_relaxed) - 1;
}

template <class W, bool kHead>
void launch_cluster(const HcFn& fn, const FusedArgs& a, const HcRows& rows, cudaStream_t s) {
  gemv_detail::launch_cluster_maybe_pdl(gemv_pdl(), dim3(unsigned(fn.splits)), hc_cluster_kernel<W, kHead>,
                                        dim3(unsigned(fn.splits), unsigned(rows.count)), kFusedThreads,
                                        size_t(fn.cols) * sizeof(float), s, a);
}

template <class W, bool kHead>
void launch_kernel(const HcFn& fn, const FusedArgs& a, const HcRows& rows, cudaStream_t s) {
  const size_t col_bytes = size_t(fn.cols) * sizeof(float);
  if (rows.count < kTwoLaunchRows) {
    if (cluster_form<W, kHead>(fn, a, rows))
      launch_cluster<W, kHead>(fn, a, rows, s);
    else
      launch_pdl(hc_fused_kernel<W, kHead>, dim3(unsigned(fn.splits), unsigned(rows.count)), col_bytes, s, a);
    return;
  }
  const unsigned groups = unsigned((rows.count + kRowsPerBlock - 1) / kRowsPerBlock);
  launch_pdl(hc_products_kernel<W>, dim3(unsigned(fn.splits), groups), col_bytes * kRowsPerBlock, s, a, rows.count);
  launch_pdl(hc_tail_kernel<kHead>, dim3(unsigned(rows.count)), 0, s, a, fn.splits);
}

template <bool kHead>
void launch(const HcFn& fn, const FusedArgs& a, const HcRows& rows, cudaStream_t s) {
  switch (fn.type) {
    case DType::F32: launch_kernel<float, kHead>(fn, a, rows, s); break;
    case DType::F16: launch_kernel<__half, kHead>(fn, a, rows, s); break;
    case DType::BF16: launch_kernel<__nv_bfloat16, kHead>(fn, a, rows, s); break;
    default: throw InputError("cuda hc fused: fn type not supported");
  }
}

FusedArgs common_args(const HcFn& fn, const float* scale, const float* base, const HcDims& d, float* x,
                      const HcPostIn* post_in, const float* out_norm, float* out, const HcFusedScratch& sc,
                      const HcRows& rows, bool head) {
  check_dims(d);
  check_rows(rows);
  if (!hc_fused_supported(fn, d, head))
    throw InputError("cuda hc fused: fn {" + std::to_string(fn.m) + " x " + std::to_string(fn.splits) + " x " +
                     std::to_string(fn.cols) + "} of this type does not fit the fused kernel");
  if (!scale || !base || !x || !out || !sc.partials || !sc.counters)
    throw InputError("cuda hc fused: null buffer");
  if (post_in && ((!post_in->block_out && !post_in->experts) || !post_in->residual || !post_in->post || !post_in->comb))
    throw InputError("cuda hc fused: null hc_post input");
  if (post_in && post_in->experts && (rows.count != 1 || !post_in->weights || !post_in->shared || post_in->k < 1))
    throw InputError("cuda hc fused: a MoE block output needs one row, weights, shared and k >= 1");
  FusedArgs a;
  a.fn = static_cast<const uint8_t*>(fn.data);
  a.m = int(fn.m);
  a.cols = fn.cols;
  a.split_stride = fn.split_stride;
  a.scale = scale, a.base = base, a.dims = d, a.x = x;
  if (post_in) a.post_in = *post_in, a.has_post = true;
  a.out_norm = out_norm, a.out = out;
  a.partials = sc.partials, a.counters = sc.counters;
  a.stride = rows.stride;
  return a;
}

size_t weight_bytes(DType t) { return t == DType::F32 ? 4 : 2; }

std::atomic<int> g_split_target{-1};

}  // namespace

// Off until a device run of its tests (session 38 wrote it without one: runbook, session 38).
bool hc_fused_cluster() { return env_setting(g_cluster, "DS4_HC_CLUSTER", {0, 1}, "0 or 1", 1) == 1; }
void hc_fused_set_cluster(bool on) { g_cluster.store(on ? 1 : 0, std::memory_order_relaxed); }

bool hc_fused_cluster_form(const HcFn& fn, const HcDims& d, bool head, const float* x, const float* out,
                           const float* out_norm, const HcRows& rows) {
  if (rows.count >= kTwoLaunchRows || !hc_fused_supported(fn, d, head)) return false;
  FusedArgs a;
  a.dims = d, a.x = const_cast<float*>(x), a.out = const_cast<float*>(out), a.out_norm = out_norm;
  auto form = [&](auto w) {
    using W = decltype(w);
    return head ? cluster_form<W, true>(fn, a, rows) : cluster_form<W, false>(fn, a, rows);
  };
  switch (fn.type) {
    case DType::F32:
      return form(float{});
    case DType::F16:
      return form(__half{});
    case DType::BF16:
      return form(__nv_bfloat16{});
    default:
      return false;
  }
}

int64_t hc_split_target() {
  return env_setting(g_split_target, "DS4_HC_SPLITS", {1, 2, 4, 8, 16, 32, 64}, "a power of two from 1 to 64",
                     int(kHcSplitsDefault));
}

bool hc_fused_quant_supported(const HcDims& d) {
  return d.hidden > 0 && d.hidden % 128 == 0 && d.hidden / 4 <= int64_t(kTailCols) * (kFusedThreads - 32);
}

bool hc_fused_supported(const HcFn& fn, const HcDims& d, bool head) {
  if (fn.type != DType::F32 && fn.type != DType::F16 && fn.type != DType::BF16) return false;
  if (d.n_hc < 1 || d.n_hc > kMaxHc || fn.splits < 1 || fn.splits > 65535) return false;
  if (fn.cols < 8 || fn.cols % 8 != 0 || fn.cols > kHcFusedMaxCols || fn.splits * fn.cols != d.n_hc * d.hidden)
    return false;
  if (fn.m != (head ? d.n_hc : (2 + d.n_hc) * d.n_hc)) return false;
  if (fn.splits > 1 && fn.split_stride < size_t(fn.m * fn.cols) * weight_bytes(fn.type)) return false;
  return fn.data && reinterpret_cast<uintptr_t>(fn.data) % 16 == 0 && fn.split_stride % 16 == 0;
}

void hc_pre_fused(const HcFn& fn, const float* scale, const float* base, const HcDims& d, float* x,
                  const HcPostIn* post_in, const float* out_norm, float* collapsed, float* post, float* comb,
                  const HcFusedScratch& sc, const HcRows& rows, cudaStream_t s) {
  FusedArgs a = common_args(fn, scale, base, d, x, post_in, out_norm, collapsed, sc, rows, false);
  if (!post || !comb) throw InputError("cuda hc fused: null post / comb");
  a.post = post, a.comb = comb;
  if (sc.q8_0 || sc.q8_0_d) {  // the tail must take collapse_regs (tail_collapse's conditions) with whole tiles
    auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (!hc_fused_quant_supported(d) || rows.count != 1 || !sc.q8_0 || !sc.q8_0_d || !a16(sc.q8_0) || !a16(x) ||
        !a16(collapsed) || (out_norm && !a16(out_norm)))
      throw InputError("cuda hc fused: quantizing the collapsed row needs one row, hidden a multiple of 128 (at most " +
                       std::to_string(4 * kTailCols * (kFusedThreads - 32)) + ") and 16-byte aligned buffers");
    a.q8_0 = sc.q8_0, a.q8_0_d = sc.q8_0_d;
  }
  launch<false>(fn, a, rows, s);
}

void hc_head_fused(const HcFn& fn, const float* scale, const float* base, const HcDims& d, float* x,
                   const HcPostIn* post_in, const float* out_norm, float* out, const HcFusedScratch& sc,
                   const HcRows& rows, cudaStream_t s) {
  launch<true>(fn, common_args(fn, scale, base, d, x, post_in, out_norm, out, sc, rows, true), rows, s);
}

}  // namespace ds4::cuda
