#pragma once
// Internal to the mHC kernels (hyper_connections.cu, hc_fused.cu): the Sinkhorn split, the
// flat norm factor, the collapse and hc_post's per-value formula, shared so the unfused and
// fused kernels compute every value with the same operations in the same order.
#include <cstdint>

#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/reduce.cuh"

namespace ds4::cuda {
// Argument checks of every mHC entry point (hyper_connections.cu): InputError when out of range.
void check_dims(const HcDims& d);
void check_rows(const HcRows& rows);
}  // namespace ds4::cuda

namespace ds4::cuda::hc_detail {

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

// Run by the first warp: lane r < n owns row r (softmax, row passes) and column r (column
// passes), so each sum keeps the CPU's order; phases are separated by __syncwarp. For n > 5
// (n * n > 32 cells); sinkhorn_split below takes n <= 5 in registers.
__device__ inline void sinkhorn_split_shared(const float* mix, const float* scale, const float* base, int n, int iters,
                                      float eps, float* comb) {
  const int lane = threadIdx.x;
  if (lane < n) {
    const float* cm = mix + 2 * n + lane * n;
    const float* cb = base + 2 * n + lane * n;
    float* row = comb + lane * n;  // softmax over the row, then + eps
    float mx = -INFINITY;
    for (int c = 0; c < n; ++c) {
      row[c] = cm[c] * scale[2] + cb[c];
      mx = fmaxf(mx, row[c]);
    }
    float sum = 0.f;
    for (int c = 0; c < n; ++c) sum += (row[c] = expf(row[c] - mx));
    for (int c = 0; c < n; ++c) row[c] = row[c] / sum + eps;
  }
  __syncwarp();
  for (int it = 0; it < (iters > 1 ? iters : 1); ++it) {  // the CPU always does one column pass
    if (it > 0) {  // rows (not on the first pass: columns come first)
      if (lane < n) {
        float sum = 0.f;
        for (int c = 0; c < n; ++c) sum += comb[lane * n + c];
        for (int c = 0; c < n; ++c) comb[lane * n + c] /= (sum + eps);
      }
      __syncwarp();
    }
    if (lane < n) {
      float sum = 0.f;
      for (int r = 0; r < n; ++r) sum += comb[r * n + lane];
      for (int r = 0; r < n; ++r) comb[r * n + lane] /= (sum + eps);
    }
    __syncwarp();
  }
}

// sinkhorn_split keeps the matrix in registers for n <= kRegHc (n * n <= 32 lanes).
constexpr int kRegHc = 5;

// The sum of the n <= kRegHc cells of lane `first`, `first + step`, ... of v, in that order (the
// CPU's). All kRegHc shuffles issue back to back before the adds (a loop over a runtime n waited
// a shuffle latency per cell: ~40 dependent rounds per Sinkhorn call; issue #23).
__device__ __forceinline__ float gather_sum(float v, int first, int step, int n) {
  float c[kRegHc];
#pragma unroll
  for (int k = 0; k < kRegHc; ++k) c[k] = __shfl_sync(0xffffffffu, v, (first + k * step) & 31);
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < kRegHc; ++k)
    if (k < n) sum += c[k];
  return sum;
}
// The largest of the n <= kRegHc cells from lane `first` on (step 1), likewise.
__device__ __forceinline__ float gather_max(float v, int first, int n) {
  float c[kRegHc];
#pragma unroll
  for (int k = 0; k < kRegHc; ++k) c[k] = __shfl_sync(0xffffffffu, v, (first + k) & 31);
  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < kRegHc; ++k)
    if (k < n) mx = fmaxf(mx, c[k]);
  return mx;
}

// Run by the first warp (all 32 lanes): pre, post and the Sinkhorn-projected comb {n, n}.
// n <= kRegHc (issue #23: the shared-memory form was a serial chain of ~40 passes through shared
// memory per call): lane r * n + c holds cell (r, c) in a register; a row or column sum
// gathers its n cells by shuffles and adds them in the CPU's order, then each cell divides
// by it, as the shared form does, so the results are the same operations in the same order.
__device__ inline void sinkhorn_split(const float* mix, const float* scale, const float* base, int n, int iters,
                                      float eps, float* pre, float* post, float* comb) {
  const int lane = threadIdx.x;
  if (lane < n) {
    pre[lane] = sigm(mix[lane] * scale[0] + base[lane]) + eps;
    post[lane] = 2.f * sigm(mix[n + lane] * scale[1] + base[n + lane]);
  }
  if (n > kRegHc) {
    sinkhorn_split_shared(mix, scale, base, n, iters, eps, comb);
    return;
  }
  const bool cell = lane < n * n;
  const int r = cell ? lane / n : 0, c = cell ? lane % n : 0;  // idle lanes shadow cell (0, 0)
  float v = mix[2 * n + r * n + c] * scale[2] + base[2 * n + r * n + c];
  const float mx = gather_max(v, r * n, n);
  v = expf(v - mx);
  v = v / gather_sum(v, r * n, 1, n) + eps;
  for (int it = 0; it < (iters > 1 ? iters : 1); ++it) {  // the CPU always does one column pass
    if (it > 0) v /= (gather_sum(v, r * n, 1, n) + eps);  // rows (columns come first)
    v /= (gather_sum(v, c, n, n) + eps);
  }
  if (cell) comb[lane] = v;
  __syncwarp();
}

// Both passes below read x as float4 when it allows (hidden % 4 == 0, 16-byte aligned) with
// several independent loads per thread in flight: these kernels run as one block per token,
// so one SM's memory latency, not bandwidth, is their cost (issue #23: hc_pre was 37 us).
__device__ __forceinline__ bool vec4_ok(const float* x, int64_t hidden) {
  return hidden % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
}

__device__ __forceinline__ float sq4(float4 v, float ss) {
  return fmaf(v.w, v.w, fmaf(v.z, v.z, fmaf(v.y, v.y, fmaf(v.x, v.x, ss))));
}

// x (or partials) as the collapse (sum_splits) reads them: through the read-only cache (__ldg) when
// they were written before the kernel started, through L2 (__ldcg) when other blocks of the same
// kernel wrote them (hc_fused.cu).
template <bool kCoherent>
__device__ __forceinline__ float4 load_x4(const float4* p) {
  if constexpr (kCoherent) return __ldcg(p);
  else return __ldg(p);
}
template <bool kCoherent>
__device__ __forceinline__ float load_x(const float* p) {
  if constexpr (kCoherent) return __ldcg(p);
  else return __ldg(p);
}

// sum_sp parts[sp * stride] for sp < splits, in that order, with up to 16 loads in flight (a
// plain loop waited a memory latency per split: 16 of them for DeepSeek's HC mix); kCoherent:
// through L2 (hc_fused.cu: other blocks of the same kernel wrote them).
template <bool kCoherent = false>
__device__ __forceinline__ float sum_splits(const float* parts, int64_t splits, int64_t stride) {
  constexpr int kBatch = 16;
  float v = 0.f;
  for (int64_t sp0 = 0; sp0 < splits; sp0 += kBatch) {
    float p[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) p[j] = sp0 + j < splits ? load_x<kCoherent>(parts + (sp0 + j) * stride) : 0.f;
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      if (sp0 + j < splits) v += p[j];
  }
  return v;
}

// rsqrt(mean(x^2) + eps) over the n * hidden stream values (the CPU's flat rmsnorm factor).
__device__ inline float flat_norm_factor(const float* x, int64_t count, float eps, bool vec) {
  float ss = 0.f;
  const int64_t bd = blockDim.x;
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int64_t n4 = count / 4;
    int64_t i = threadIdx.x;
    for (; i + 3 * bd < n4; i += 4 * bd) {
      const float4 a = __ldg(x4 + i), b = __ldg(x4 + i + bd), c = __ldg(x4 + i + 2 * bd), d = __ldg(x4 + i + 3 * bd);
      ss = sq4(d, sq4(c, sq4(b, sq4(a, ss))));
    }
    for (; i < n4; i += bd) ss = sq4(__ldg(x4 + i), ss);
  } else {
    for (int64_t i = threadIdx.x; i < count; i += bd) ss = fmaf(x[i], x[i], ss);
  }
  ss = detail::block_reduce(ss, detail::SumOp{}, 0.f);
  return rsqrtf(ss / float(count) + eps);
}

// Sum of v over the nt threads t = 0 .. nt-1 that call it (nt a multiple of 32, at most 1024;
// threads [first, first + nt) of the block, warp-aligned), synchronized by named barrier `bar`
// (0 with the whole block: then it is detail::block_reduce, the same operations in the same order).
__device__ __forceinline__ void bar_sync(int bar, int nt) {
  asm volatile("bar.sync %0, %1;" ::"r"(bar), "r"(nt) : "memory");
}
__device__ inline float threads_sum(float v, int t, int nt, int bar) {
  __shared__ float part[32];
  v = detail::warp_reduce(v, detail::SumOp{});
  bar_sync(bar, nt);  // `part` may still be read by a previous call
  if (t % 32 == 0) part[t / 32] = v;
  bar_sync(bar, nt);
  v = t % 32 < nt / 32 ? part[t % 32] : 0.f;
  return detail::warp_reduce(v, detail::SumOp{});
}

// out {hidden} = sum_j w[j] x[j], then (out_norm) rmsnorm with out_norm, by threads t < nt of
// those that call it (named barrier bar: threads_sum). Each thread's second pass reads values
// other threads wrote, after threads_sum's barriers. The n stream loads of a column are issued
// four at a time.
template <bool kCoherent = false>
__device__ void collapse(const float* w, int n, int64_t hidden, const float* x, const float* out_norm, float eps,
                         float* out, bool vec, int t, int nt, int bar) {
  float ss = 0.f;
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* o4 = reinterpret_cast<float4*>(out);
    const int64_t h4 = hidden / 4;
    for (int64_t d = t; d < h4; d += nt) {
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int j0 = 0; j0 < n; j0 += 4) {  // 4 streams' loads in flight (registers: 1024 threads)
        float4 v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (j0 + j < n) v[j] = load_x4<kCoherent>(x4 + (j0 + j) * h4 + d);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (j0 + j < n) {
            const float wj = w[j0 + j];
            acc.x += wj * v[j].x, acc.y += wj * v[j].y, acc.z += wj * v[j].z, acc.w += wj * v[j].w;
          }
      }
      o4[d] = acc;
      ss = sq4(acc, ss);
    }
  } else {
    for (int64_t d = t; d < hidden; d += nt) {
      float acc = 0.f;
      for (int j = 0; j < n; ++j) acc += w[j] * load_x<kCoherent>(x + j * hidden + d);
      out[d] = acc;
      ss = fmaf(acc, acc, ss);
    }
  }
  if (!out_norm) return;
  ss = threads_sum(ss, t, nt, bar);
  const float r = rsqrtf(ss / float(hidden) + eps);
  for (int64_t d = t; d < hidden; d += nt) out[d] = out[d] * r * out_norm[d];
}
// The whole block (the unfused kernels).
template <bool kCoherent = false>
__device__ void collapse(const float* w, int n, int64_t hidden, const float* x, const float* out_norm, float eps,
                         float* out, bool vec) {
  collapse<kCoherent>(w, n, hidden, x, out_norm, eps, out, vec, int(threadIdx.x), int(blockDim.x), 0);
}

// hc_post's out[k * hidden + d] = post[k] * block_out[d] + sum_j comb[j, k] residual[j][d], the
// streams in order (explicit fmaf: the fused kernel's prologue must round exactly like this).
// The residual loads go out 4 at a time before their fmas (a runtime-n loop waited a load
// latency per stream: the fused kernel's prologue is on a decode step's critical path).
__device__ __forceinline__ float post_value(int n, int64_t hidden, int64_t k, int64_t d, const float* b,
                                            const float* r, const float* post, const float* comb) {
  float acc = post[k] * b[d];
  for (int j0 = 0; j0 < n; j0 += 4) {
    float rv[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) rv[j] = j0 + j < n ? r[(j0 + j) * hidden + d] : 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (j0 + j < n) acc = fmaf(comb[(j0 + j) * n + k], rv[j], acc);
  }
  return acc;
}

// A MoE block's output at i: sum_j w[j] y[j * d + i] + sh[i], the experts in order (DeepSeek's
// moe_combine and the fused hc_pre's prologue, HcPostIn::experts: the same rounding).
// The expert loads go out 8 at a time before their fmas, as post_value's.
__device__ __forceinline__ float combine_value(const float* y, const float* w, int64_t k, const float* sh, int64_t d,
                                              int64_t i) {
  float r = 0.f;
  for (int64_t j0 = 0; j0 < k; j0 += 8) {
    float yv[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) yv[j] = j0 + j < k ? y[(j0 + j) * d + i] : 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j0 + j < k) r = fmaf(w[j0 + j], yv[j], r);
  }
  return r + sh[i];
}

}  // namespace ds4::cuda::hc_detail
