// MoE routing and combination kernels (CPU: moe.cpp). The experts' matrices run through
// backend/cuda gemv_batched (decode step) or grouped gemv_rows (chunk.cu) with the ids this
// router writes, so no host round trip. Over `Rows` row t = blockIdx.y (route: blockIdx.x)
// reads its row of the chunk's scratch and its K slots of the packed {rows, K} ids/weights.
#include <atomic>
#include <cfloat>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/reduce.cuh"
#include "core/error.h"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_best;

constexpr int kMaxTopK = 64;

constexpr int kRouteThreads = 256;
constexpr int kRouteWarps = kRouteThreads / 32;

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

// One round of a warp's top-k walk: the best candidate (value desc, index asc) strictly after
// (last_v, last_i) in that order among the lane's values vals[j] with ids idx(j), j = lane,
// lane + 32, ... < n; (-inf, none) when none is left. NaN is never taken (its compares are false).
template <class Val, class Idx>
__device__ __forceinline__ void next_best(Val vals, Idx idx, int n, int none, float last_v, int last_i, float& v,
                                          int& i) {
  v = -INFINITY, i = none;
  for (int j = int(threadIdx.x % 32); j < n; j += 32) {
    const float p = vals(j);
    const int e = idx(j);
    const bool after = p < last_v || (p == last_v && e > last_i);
    if (after && (p > v || (p == v && e < i))) v = p, i = e;
  }
  warp_best(v, i);
}

// With `sh` (decode step): also moe_swiglu of the shared expert's {1, 2 I} row in place (the
// same expression as moe_swiglu_kernel), one launch less.
struct SharedAct {
  float* gu = nullptr;
  int64_t inter = 0;
};

// Both routers' start: the shared expert's swiglu (with `sh`), then the softmax of the row's E
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
// ids and weights are bit for bit the old kernel's. The default (moe_route_warps_kernel is
// unmeasured).
__global__ void __launch_bounds__(kRouteThreads) moe_route_kernel(const float* __restrict__ logits, int64_t E, int64_t k,
                                                                 bool norm, int32_t* __restrict__ ids,
                                                                 float* __restrict__ weights, int64_t rs, SharedAct sh) {
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

// moe_route_kernel's contract with the top k by warps (DS4_QWEN_ROUTE_WARPS=1; session 30,
// unmeasured, off): each warp walks its share of the experts (its 32-expert strips) k rounds in
// that order, shuffles only, and offers its first k; warp 0 walks the offers the same way (the k
// block-argmax rounds above, two barriers each, took 11.2 us a token and layer at E = 512, k = 10
// on the H100: 6.8 % of a Qwen decode step, session 30's kernel table). The same set. The weights
// are the CPU's (moe.cpp): the chosen probabilities summed in double in pick order, each divided in
// double and rounded once (the block kernel's float block sum differs by rounding).
__global__ void __launch_bounds__(kRouteThreads) moe_route_warps_kernel(const float* __restrict__ logits, int64_t E_,
                                                                       int64_t k_, bool norm, int32_t* __restrict__ ids,
                                                                       float* __restrict__ weights, int64_t rs,
                                                                       SharedAct sh) {
  const int E = int(E_), k = int(k_);  // (moe_route: E < 2^31, k <= kMaxTopK)
  logits += blockIdx.x * rs, ids += blockIdx.x * k, weights += blockIdx.x * k;
  extern __shared__ float prob[];  // {E}
  __shared__ float offer_v[kRouteWarps * kMaxTopK];
  __shared__ int offer_i[kRouteWarps * kMaxTopK];
  route_softmax(logits, E, sh, prob);
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  // warp w's experts: strips w, w + warps, ... of 32 (lane l: 32 strip + l)
  const int strips = (E + 31) / 32, mine = strips > warp ? (strips - warp + kRouteWarps - 1) / kRouteWarps : 0;
  {
    float last_v = INFINITY, v;
    int last_i = -1, i;
    for (int r = 0; r < k; ++r) {
      next_best([&](int j) { const int e = 32 * (warp + kRouteWarps * (j / 32)) + j % 32; return e < E ? prob[e] : -INFINITY; },
                [&](int j) { return 32 * (warp + kRouteWarps * (j / 32)) + j % 32; }, 32 * mine, E, last_v, last_i, v, i);
      if (lane == 0) offer_v[warp * k + r] = v, offer_i[warp * k + r] = i;
      last_v = v, last_i = i;
    }
  }
  __syncthreads();
  if (warp != 0) return;
  __shared__ int picks[kMaxTopK];
  int n_picks = 0;
  {
    float last_v = INFINITY, v;
    int last_i = -1, i;
    for (int r = 0; r < k; ++r) {
      next_best([&](int j) { return offer_i[j] < E ? offer_v[j] : -INFINITY; }, [&](int j) { return offer_i[j]; },
                kRouteWarps * k, E, last_v, last_i, v, i);
      if (i >= E) break;  // (k <= E: not reached)
      if (lane == 0) picks[r] = i;
      last_v = v, last_i = i, n_picks = r + 1;
    }
  }
  __syncwarp();
  double sel = 0.0;  // moe.cpp: the chosen probabilities in pick order, in double
  for (int r = 0; r < n_picks; ++r) sel += double(prob[picks[r]]);
  for (int r = lane; r < n_picks; r += 32) {
    const int e = picks[r];
    int slot = 0;  // ascending index order
    for (int j = 0; j < n_picks; ++j) slot += picks[j] < e;
    ids[slot] = int32_t(e);
    weights[slot] = norm ? float(double(prob[e]) / sel) : prob[e];
  }
}

// DS4_QWEN_ROUTE_WARPS (0 or 1; unset = 0 until measured): which top-k moe_route launches.
std::atomic<int> g_route_warps{-1};
bool route_warps() { return ds4::cuda::env_setting(g_route_warps, "DS4_QWEN_ROUTE_WARPS", {0, 1}, "0 or 1", 0) == 1; }

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
  moe_combine_write_kernel<<<unsigned((d + 255) / 256), 256, 0, s>>>(y, w, k, sh, sg, d, out, h, inject, hc);
  DS4_CUDA_CHECK_LAUNCH();
}

void moe_route(const float* logits, int64_t experts, int64_t k, bool norm, int32_t* ids, float* weights,
               cudaStream_t s, const Rows& rows, float* shared_gu, int64_t shared_inter) {
  if (shared_gu && rows.count != 1) throw InputError("qwen_next cuda: moe_route's shared swiglu is for one row");
  if (k < 1 || k > kMaxTopK || k > experts)
    throw InputError("qwen_next cuda: router top-" + std::to_string(k) + " of " + std::to_string(experts) +
                     " experts (1.." + std::to_string(kMaxTopK) + " and at most the experts)");
  const SharedAct sh{shared_gu, shared_gu ? shared_inter : 0};
  if (experts >= (int64_t(1) << 31)) throw InputError("qwen_next cuda: router of " + std::to_string(experts) + " experts");
  auto* kernel = route_warps() ? moe_route_warps_kernel : moe_route_kernel;
  kernel<<<unsigned(rows.count), kRouteThreads, size_t(experts) * 8, s>>>(logits, experts, k, norm, ids, weights,
                                                                          rows.stride, sh);
  DS4_CUDA_CHECK_LAUNCH();
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
