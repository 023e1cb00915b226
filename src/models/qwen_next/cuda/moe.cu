// MoE routing and combination kernels (CPU: moe.cpp). The experts' matrices run through
// backend/cuda gemv_batched (decode step) or grouped gemv_rows (chunk.cu) with the ids this
// router writes, so no host round trip. Over `Rows` row t = blockIdx.y (route: blockIdx.x)
// reads its row of the chunk's scratch and its K slots of the packed {rows, K} ids/weights.
#include <cfloat>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "core/error.h"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;

constexpr int kMaxTopK = 64;

constexpr int kRouteThreads = 256;

// The block's best (value desc, index asc) of the candidates each thread offers; every thread
// gets it. (v, i) = (-inf, n) offers nothing.
__device__ void block_best(float& v, int64_t& i) {
  __shared__ float wv[32];
  __shared__ int64_t wi[32];
  auto better = [](float a, int64_t ai, float b, int64_t bi) { return a > b || (a == b && ai < bi); };
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (better(ov, oi, v, i)) v = ov, i = oi;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  __syncthreads();  // wv / wi may still be read by the previous call
  if (lane == 0) wv[warp] = v, wi[warp] = i;
  __syncthreads();
  v = wv[0], i = wi[0];
  for (int w = 1; w < nw; ++w)
    if (better(wv[w], wi[w], v, i)) v = wv[w], i = wi[w];
}

// With `sh` (decode step): also moe_swiglu of the shared expert's {1, 2 I} row in place (the
// same expression as moe_swiglu_kernel), one launch less.
struct SharedAct {
  float* gu = nullptr;
  int64_t inter = 0;
};

// The router's start: the shared expert's swiglu (with `sh`), then the softmax of the row's E
// logits into prob {E} (block sums in kRouteThreads' order); ends with a barrier.
__device__ void route_softmax(const float* __restrict__ logits, int64_t E, const SharedAct& sh, float* prob) {
  for (int64_t c = threadIdx.x; c < sh.inter; c += blockDim.x) {
    const float g = sh.gu[c];
    sh.gu[c] = g / (1.f + expf(-g)) * sh.gu[sh.inter + c];
  }
  float m = -FLT_MAX;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) m = fmaxf(m, logits[e]);
  m = block_reduce(m, MaxOp{}, -FLT_MAX);
  float s = 0.f;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    prob[e] = expf(logits[e] - m);
    s += prob[e];
  }
  s = block_reduce(s, SumOp{}, 0.f);
  const float inv = 1.f / s;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) prob[e] *= inv;
  __syncthreads();
}

// One block: softmax over E router logits, top-k by (prob desc, index asc), the chosen
// experts written in ascending index order (the CPU adds expert outputs in that order).
// The top k are k rounds of a block argmax over the entries after the previous pick in that
// order (issue #23: the O(E^2) rank loop it replaces cost ~10 us a token and layer at E = 512);
// for numbers it is the same set as rank(e) < k, and the normalizing sum keeps its order, so
// ids and weights are bit for bit the old kernel's. (A top-k by warps with shuffles only, session
// 30, measured no faster in a decode step: -0.8 % on the H100, bench/results/session31-2026-12-07.)
__global__ void __launch_bounds__(kRouteThreads)
    moe_route_kernel(const float* __restrict__ logits, int64_t E, int64_t k, bool norm, int32_t* __restrict__ ids,
                     float* __restrict__ weights, int64_t rs, SharedAct sh, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  logits += blockIdx.x * rs, ids += blockIdx.x * k, weights += blockIdx.x * k;
  extern __shared__ float prob[];  // {E} then flags {E}
  int* chosen = reinterpret_cast<int*>(prob + E);
  __shared__ int64_t picks[kMaxTopK];
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) chosen[e] = 0;
  route_softmax(logits, E, sh, prob);
  float last_v = INFINITY;
  int64_t last_i = -1, n_picks = 0;
  for (int64_t r = 0; r < k; ++r) {
    float v = -INFINITY;
    int64_t i = E;
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
      const float p = prob[e];
      const bool after = p < last_v || (p == last_v && e > last_i);
      if (after && (p > v || (p == v && e < i))) v = p, i = e;
    }
    block_best(v, i);
    if (i >= E) break;  // k > E: every entry taken
    if (threadIdx.x == 0) chosen[i] = 1, picks[r] = i;
    last_v = v, last_i = i, n_picks = r + 1;
  }
  __syncthreads();  // chosen[] and picks[] to every thread
  float sel = 0.f;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
    if (chosen[e]) sel += prob[e];
  sel = block_reduce(sel, SumOp{}, 0.f);
  if (threadIdx.x < n_picks) {
    const int64_t e = picks[threadIdx.x];
    int slot = 0;  // ascending index order
    for (int64_t j = 0; j < n_picks; ++j) slot += picks[j] < e;
    ids[slot] = int32_t(e);
    weights[slot] = norm ? prob[e] / sel : prob[e];
  }
}

// gu row e at e * gs floats, act row e at e * as (in place over the gate half is fine:
// each element is read and written by one thread).
__global__ void moe_swiglu_kernel(const float* gu, int64_t k, int64_t I, float* act, int64_t gs, int64_t as,
                                  bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= k * I) return;
  const int64_t e = i / I, c = i % I;
  const float g = gu[e * gs + c];
  act[e * as + c] = g / (1.f + expf(-g)) * gu[e * gs + I + c];
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ w, int64_t k,
                                   const float* __restrict__ sh, const float* __restrict__ sg, int64_t d,
                                   float* __restrict__ out, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
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
                                         const float* __restrict__ inject, int64_t hc, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
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
  ds4::cuda::gemv_detail::launch_small(moe_combine_write_kernel, dim3(unsigned((d + 255) / 256)), 256, 0, s, y, w, k,
                                       sh, sg, d, out, h, inject, hc);
}

void moe_route(const float* logits, int64_t experts, int64_t k, bool norm, int32_t* ids, float* weights,
               cudaStream_t s, const Rows& rows, float* shared_gu, int64_t shared_inter) {
  if (shared_gu && rows.count != 1) throw InputError("qwen_next cuda: moe_route's shared swiglu is for one row");
  if (k < 1 || k > kMaxTopK || k > experts)
    throw InputError("qwen_next cuda: router top-" + std::to_string(k) + " of " + std::to_string(experts) +
                     " experts (1.." + std::to_string(kMaxTopK) + " and at most the experts)");
  const SharedAct sh{shared_gu, shared_gu ? shared_inter : 0};
  if (experts >= (int64_t(1) << 31)) throw InputError("qwen_next cuda: router of " + std::to_string(experts) + " experts");
  ds4::cuda::gemv_detail::launch_small(moe_route_kernel, dim3(unsigned(rows.count)), kRouteThreads, size_t(experts) * 8,
                                       s, logits, experts, k, norm, ids, weights, rows.stride, sh);
}

void moe_swiglu(const float* gu, int64_t k, int64_t inter, float* act, cudaStream_t s, int64_t gu_stride,
                int64_t act_stride) {
  if (gu_stride == 0) gu_stride = 2 * inter;
  if (act_stride == 0) act_stride = inter;
  ds4::cuda::gemv_detail::launch_small(moe_swiglu_kernel, dim3(unsigned((k * inter + 255) / 256)), 256, 0, s, gu, k,
                                       inter, act, gu_stride, act_stride);
}

void moe_combine(const float* y, const float* w, int64_t k, const float* sh, const float* sg, int64_t d,
                 float* out, cudaStream_t s, const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(moe_combine_kernel, dim3(unsigned((d + 255) / 256), unsigned(rows.count)), 256,
                                       0, s, y, w, k, sh, sg, d, out, rows.stride);
}

}  // namespace ds4::qwen_next::cuda
