// MoE routing and combination kernels (CPU: moe.cpp). The experts' matrices run through
// backend/cuda gemv_batched with the ids this router writes, so no host round trip.
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
                                 int32_t* __restrict__ ids, float* __restrict__ weights) {
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

__global__ void moe_swiglu_kernel(const float* __restrict__ gu, int64_t k, int64_t I, float* __restrict__ act) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= k * I) return;
  const int64_t e = i / I, c = i % I;
  const float g = gu[e * 2 * I + c];
  act[i] = g / (1.f + expf(-g)) * gu[e * 2 * I + I + c];
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ w, int64_t k,
                                   const float* __restrict__ sh, const float* __restrict__ sg, int64_t d,
                                   float* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d) return;
  float r = 0.f;
  for (int64_t j = 0; j < k; ++j) r += w[j] * y[j * d + i];
  out[i] = r + sh[i] * (1.f / (1.f + expf(-sg[0])));
}

}  // namespace

void moe_route(const float* logits, int64_t experts, int64_t k, bool norm, int32_t* ids, float* weights,
               cudaStream_t s) {
  moe_route_kernel<<<1, 256, size_t(experts) * 8, s>>>(logits, experts, k, norm, ids, weights);
  DS4_CUDA_CHECK_LAUNCH();
}

void moe_swiglu(const float* gu, int64_t k, int64_t inter, float* act, cudaStream_t s) {
  moe_swiglu_kernel<<<unsigned((k * inter + 255) / 256), 256, 0, s>>>(gu, k, inter, act);
  DS4_CUDA_CHECK_LAUNCH();
}

void moe_combine(const float* y, const float* w, int64_t k, const float* sh, const float* sg, int64_t d,
                 float* out, cudaStream_t s) {
  moe_combine_kernel<<<unsigned((d + 255) / 256), 256, 0, s>>>(y, w, k, sh, sg, d, out);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::qwen_next::cuda
