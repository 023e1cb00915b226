// MoE routing and combination kernels (CPU: moe.cpp). The experts' matrices run through
// backend/cuda gemv_batched (decode step) or grouped gemv_rows (chunk.cu) with the ids this
// router writes, so no host round trip. Over `Rows` row t = blockIdx.y (route: blockIdx.x)
// reads its row of the chunk's scratch and its K slots of the packed {rows, K} ids/weights.
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/reduce.cuh"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;

// One block: softmax over E router logits, top-k by (prob desc, index asc), the chosen
// experts written in ascending index order (the CPU adds expert outputs in that order).
__global__ void moe_route_kernel(const float* __restrict__ logits, int64_t E, int64_t k, bool norm,
                                 int32_t* __restrict__ ids, float* __restrict__ weights, int64_t rs) {
  logits += blockIdx.x * rs, ids += blockIdx.x * k, weights += blockIdx.x * k;
  extern __shared__ float prob[];  // {E} then flags {E}
  int* chosen = reinterpret_cast<int*>(prob + E);
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
  float sel = 0.f;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    int64_t rank = 0;
    for (int64_t o = 0; o < E; ++o) rank += prob[o] > prob[e] || (prob[o] == prob[e] && o < e);
    chosen[e] = rank < k;
    if (rank < k) sel += prob[e];
  }
  sel = block_reduce(sel, SumOp{}, 0.f);  // also publishes chosen[]
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    if (!chosen[e]) continue;
    int slot = 0;
    for (int64_t o = 0; o < e; ++o) slot += chosen[o];
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

}  // namespace

void moe_route(const float* logits, int64_t experts, int64_t k, bool norm, int32_t* ids, float* weights,
               cudaStream_t s, const Rows& rows) {
  moe_route_kernel<<<unsigned(rows.count), 256, size_t(experts) * 8, s>>>(logits, experts, k, norm, ids, weights,
                                                                          rows.stride);
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
