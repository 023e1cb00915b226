// MoE routing and combination kernels (CPU: moe.cpp). The experts' matrices run through
// backend/cuda gemv_batched (decode step) or grouped gemv_rows (chunk.cu) with the ids this
// router writes, so no host round trip. Over `Rows` row t = blockIdx.y (route: blockIdx.x)
// reads its row of the chunk's scratch and its K slots of the packed {rows, K} ids/weights.
#include <cfloat>
#include <string>

#include "backend/cuda/check.h"
#include "core/error.h"
#include "models/qwen_next/cuda/kernels.h"
#include "models/qwen_next/cuda/pdl.cuh"

namespace ds4::qwen_next::cuda {
namespace {

constexpr int kMaxTopK = 64;

// The router runs as one warp per row (issue #23: the 256-thread block it replaces spent most
// of its ~10 us in barriers). Its sums keep that block's order exactly: lane l plays the
// block's threads l + 32 j (j < 8, "virtual warp" j), each summing its entries e = t, t + 256,
// .. in order; block_reduce's tree is rebuilt: a butterfly per virtual warp, then one over the
// 8 warp sums (lanes 8.. adding 0). So ids and weights are bit for bit the block's.
constexpr int kRouteVirtualThreads = 256;
constexpr int kRouteVirtualWarps = kRouteVirtualThreads / 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// block_reduce(SumOp) of the 256-thread block over the virtual threads' partial sums v[j].
__device__ __forceinline__ float virtual_block_sum(const float (&v)[kRouteVirtualWarps]) {
  const int lane = threadIdx.x % 32;
  float x = 0.f;
#pragma unroll
  for (int j = 0; j < kRouteVirtualWarps; ++j) {
    const float part = warp_sum(v[j]);
    if (lane == j) x = part;
  }
  return warp_sum(x);
}

// The warp's best (value desc, index asc) of the candidates each lane offers; every lane gets
// it. (v, i) = (-inf, n) offers nothing.
__device__ __forceinline__ void warp_best(float& v, int64_t& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
  }
}

// With `sh` (decode step): also moe_swiglu of the shared expert's {1, 2 I} row in place (the
// same expression as moe_swiglu_kernel), one launch less.
struct SharedAct {
  float* gu = nullptr;
  int64_t inter = 0;
};

// One warp per row: softmax over E router logits, top-k by (prob desc, index asc), the chosen
// experts written in ascending index order (the CPU adds expert outputs in that order). The
// top k are k rounds of a warp argmax over the entries after the previous pick in that order;
// for numbers it is the same set as rank(e) < k.
__global__ void __launch_bounds__(32) moe_route_kernel(const float* __restrict__ logits, int64_t E, int64_t k,
                                                       bool norm, int32_t* __restrict__ ids,
                                                       float* __restrict__ weights, int64_t rs, SharedAct sh) {
  pdl_launch_dependents();
  pdl_wait();  // the logits come from the in-projection gemv (a PDL launch)
  const int lane = threadIdx.x;
  logits += blockIdx.x * rs, ids += blockIdx.x * k, weights += blockIdx.x * k;
  for (int64_t c = lane; c < sh.inter; c += 32) {
    const float g = sh.gu[c];
    sh.gu[c] = g / (1.f + expf(-g)) * sh.gu[sh.inter + c];
  }
  extern __shared__ float prob[];  // {E} then flags {E}
  int* chosen = reinterpret_cast<int*>(prob + E);
  __shared__ int64_t picks[kMaxTopK];
  float m = -FLT_MAX;
  for (int64_t e = lane; e < E; e += 32) m = fmaxf(m, logits[e]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float part[kRouteVirtualWarps];
#pragma unroll
  for (int j = 0; j < kRouteVirtualWarps; ++j) {
    part[j] = 0.f;
    for (int64_t e = 32 * j + lane; e < E; e += kRouteVirtualThreads) {
      prob[e] = expf(logits[e] - m);
      part[j] += prob[e];
    }
  }
  const float inv = 1.f / virtual_block_sum(part);
  for (int64_t e = lane; e < E; e += 32) prob[e] *= inv, chosen[e] = 0;
  __syncwarp();
  float last_v = INFINITY;
  int64_t last_i = -1, n_picks = 0;
  for (int64_t r = 0; r < k; ++r) {
    float v = -INFINITY;
    int64_t i = E;
    for (int64_t e = lane; e < E; e += 32) {
      const float p = prob[e];
      const bool after = p < last_v || (p == last_v && e > last_i);
      if (after && (p > v || (p == v && e < i))) v = p, i = e;
    }
    warp_best(v, i);
    if (i >= E) break;  // k > E: every entry taken
    if (lane == 0) chosen[i] = 1, picks[r] = i;
    last_v = v, last_i = i, n_picks = r + 1;
  }
  __syncwarp();  // chosen[] and picks[] to every lane
#pragma unroll
  for (int j = 0; j < kRouteVirtualWarps; ++j) {
    part[j] = 0.f;
    for (int64_t e = 32 * j + lane; e < E; e += kRouteVirtualThreads)
      if (chosen[e]) part[j] += prob[e];
  }
  const float sel = virtual_block_sum(part);
  for (int64_t q = lane; q < n_picks; q += 32) {
    const int64_t e = picks[q];
    int slot = 0;  // ascending index order
    for (int64_t j = 0; j < n_picks; ++j) slot += picks[j] < e;
    ids[slot] = int32_t(e);
    weights[slot] = norm ? prob[e] / sel : prob[e];
  }
}

// gu row e at e * gs floats, act row e at e * as (in place over the gate half is fine:
// each element is read and written by one thread).
__global__ void moe_swiglu_kernel(const float* gu, int64_t k, int64_t I, float* act, int64_t gs, int64_t as) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= k * I) return;
  const int64_t e = i / I, c = i % I;
  const float g = gu[e * gs + c];
  act[e * as + c] = g / (1.f + expf(-g)) * gu[e * gs + I + c];
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ w, int64_t k,
                                   const float* __restrict__ sh, const float* __restrict__ sg, int64_t d,
                                   float* __restrict__ out, int64_t rs) {
  const int64_t row = blockIdx.y;
  y += row * k * d, w += row * k, sh += row * rs, sg += row * rs, out += row * rs;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d) return;
  float r = 0.f;
  for (int64_t j = 0; j < k; ++j) r += w[j] * y[j * d + i];
  out[i] = r + sh[i] * (1.f / (1.f + expf(-sg[0])));
}

// moe_combine_kernel's row, then hc_write's update of every stream with it (decode step: one
// launch instead of two; the same expressions, so the same bits as the pair).
__global__ void moe_combine_write_kernel(const float* __restrict__ y, const float* __restrict__ w, int64_t k,
                                         const float* __restrict__ sh, const float* __restrict__ sg, int64_t d,
                                         float* __restrict__ out, float* __restrict__ h,
                                         const float* __restrict__ inject, int64_t hc) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d) return;
  float r = 0.f;
  for (int64_t j = 0; j < k; ++j) r += w[j] * y[j * d + i];
  out[i] = r + sh[i] * (1.f / (1.f + expf(-sg[0])));
  const float o = out[i];
  for (int64_t s = 0; s < hc; ++s) h[s * d + i] += o * inject[s];
}

}  // namespace

void moe_combine_write(const float* y, const float* w, int64_t k, const float* sh, const float* sg, int64_t d,
                       float* out, float* h, const float* inject, int64_t hc, cudaStream_t s) {
  launch_pdl(moe_combine_write_kernel, dim3(unsigned((d + 255) / 256)), 256, 0, s, y, w, k, sh, sg, d, out, h, inject,
             hc);
}

void moe_route(const float* logits, int64_t experts, int64_t k, bool norm, int32_t* ids, float* weights,
               cudaStream_t s, const Rows& rows, float* shared_gu, int64_t shared_inter) {
  if (shared_gu && rows.count != 1) throw InputError("qwen_next cuda: moe_route's shared swiglu is for one row");
  if (k < 1 || k > kMaxTopK || k > experts)
    throw InputError("qwen_next cuda: router top-" + std::to_string(k) + " of " + std::to_string(experts) +
                     " experts (1.." + std::to_string(kMaxTopK) + " and at most the experts)");
  const SharedAct sh{shared_gu, shared_gu ? shared_inter : 0};
  launch_pdl(moe_route_kernel, dim3(unsigned(rows.count)), 32, size_t(experts) * 8, s, logits, experts, k, norm, ids,
             weights, rows.stride, sh);
}

void moe_swiglu(const float* gu, int64_t k, int64_t inter, float* act, cudaStream_t s, int64_t gu_stride,
                int64_t act_stride) {
  if (gu_stride == 0) gu_stride = 2 * inter;
  if (act_stride == 0) act_stride = inter;
  moe_swiglu_kernel<<<unsigned((k * inter + 255) / 256), 256, 0, s>>>(gu, k, inter, act, gu_stride, act_stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void moe_combine(const float* y, const float* w, int64_t k, const float* sh, const float* sg, int64_t d,
                 float* out, cudaStream_t s, const Rows& rows) {
  moe_combine_kernel<<<dim3(unsigned((d + 255) / 256), unsigned(rows.count)), 256, 0, s>>>(y, w, k, sh, sg, d, out,
                                                                                         rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::qwen_next::cuda
