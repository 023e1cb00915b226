// DeepSeek V4 MoE routing and combination kernels (CPU: moe.cpp). The experts' matrices run
// through backend/cuda gemv_batched with the ids this router writes: no host round trip.
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/hc_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/deepseek_v4/cuda/kernels.h"
#include "models/deepseek_v4/config.h"

namespace ds4::deepseek_v4::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;

constexpr int kMaxK = 64;

__device__ __forceinline__ float score_of(int f, float x) {
  if (f == int(ScoreFunc::kSqrtSoftplus)) return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
  if (f == int(ScoreFunc::kSigmoid)) return 1.0f / (1.0f + expf(-x));
  return x;  // softmax: normalized over the row below
}

// One block per token: scores, then the chosen experts (hash table row, or top-k of score +
// bias with ties to the lower index, in rank order as topk_f32) and their normalized, scaled
// weights. Token t (blockIdx.x) reads logits / token at t * stride, writes ids / weights at t * K.
__global__ void route_kernel(RouteArgs a, int64_t stride) {
  {
    const int64_t t = blockIdx.x;
    a.logits += t * stride, a.token += t * stride, a.ids += t * a.k, a.weights += t * a.k;
  }
  extern __shared__ float4 p4[];  // {E} scores, then {E} biased (float4: 16-byte aligned)
  float* p = reinterpret_cast<float*>(p4);
  float* biased = p + a.experts;
  __shared__ int chosen[kMaxK];
  const int64_t E = a.experts, K = a.k;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) p[e] = score_of(a.score, a.logits[e]);
  if (a.score == int(ScoreFunc::kSoftmax)) {
    __syncthreads();
    float m = -FLT_MAX;
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) m = fmaxf(m, p[e]);
    m = block_reduce(m, MaxOp{}, -FLT_MAX);
    float s = 0.f;
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) s += (p[e] = expf(p[e] - m));
    s = block_reduce(s, SumOp{}, 0.f);
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) p[e] /= s;
  }
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) biased[e] = p[e] + (a.bias ? a.bias[e] : 0.f);
  __syncthreads();
  if (a.tid2eid) {
    if (threadIdx.x < K) chosen[threadIdx.x] = a.tid2eid[int64_t(*a.token) * K + threadIdx.x];
  } else {
    // rank of e = experts ahead of it (greater, or equal at a lower index); E % 4 == 0 (256 in
    // Flash): four at a time from one broadcast float4 read (issue #23: the scalar scan was most
    // of this kernel's time)
    const bool by4 = E % 4 == 0;
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
      const float be = biased[e];
      int rank = 0;
      if (by4) {
        const float4* b4 = reinterpret_cast<const float4*>(biased);
        for (int64_t q = 0; q < E / 4; ++q) {
          const float4 v = b4[q];
          const int64_t o = 4 * q;
          rank += int(v.x > be || (v.x == be && o < e)) + int(v.y > be || (v.y == be && o + 1 < e)) +
                  int(v.z > be || (v.z == be && o + 2 < e)) + int(v.w > be || (v.w == be && o + 3 < e));
        }
      } else {
        for (int64_t o = 0; o < E; ++o) rank += int(biased[o] > be || (biased[o] == be && o < e));
      }
      if (rank < K) chosen[rank] = int(e);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int64_t k = 0; k < K; ++k) sum += p[chosen[k]];
    const float norm = a.norm_topk ? sum + 1e-20f : 1.0f;  // HF: weights / (sum + 1e-20)
    for (int64_t k = 0; k < K; ++k) {
      a.ids[k] = chosen[k];
      a.weights[k] = p[chosen[k]] / norm * a.routed_scale;
    }
  }
}

__global__ void swiglu_clamp_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t rows,
                                    int64_t cols, int64_t in_stride, float limit, float* __restrict__ y,
                                    int64_t out_stride) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  float gv = g[r * in_stride + c], uv = u[r * in_stride + c];
  if (limit > 0.f) {
    gv = fminf(gv, limit);
    uv = fminf(fmaxf(uv, -limit), limit);
  }
  y[r * out_stride + c] = gv / (1.f + expf(-gv)) * uv;
}

__global__ void combine_kernel(const float* __restrict__ y, const float* __restrict__ w, int64_t k,
                               const float* __restrict__ sh, int64_t d, float* __restrict__ out, int64_t stride) {
  {
    const int64_t t = blockIdx.y;
    y += t * k * d, w += t * k, sh += t * stride, out += t * stride;
  }
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d) return;
  out[i] = ds4::cuda::hc_detail::combine_value(y, w, k, sh, d, i);  // (the fused hc_pre's prologue recomputes it)
}

}  // namespace

void moe_route(const RouteArgs& a, cudaStream_t s, const Rows& rows) {
  if (a.k < 1 || a.k > kMaxK || a.k > a.experts)
    throw InputError("deepseek_v4 cuda: experts_used " + std::to_string(a.k) + " unsupported (1.." +
                     std::to_string(kMaxK) + ")");
  route_kernel<<<unsigned(rows.count), 256, size_t(a.experts) * 8, s>>>(a, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void swiglu_clamp(const float* g, const float* u, int64_t rows, int64_t cols, int64_t in_stride, float limit,
                  float* y, cudaStream_t s, int64_t out_stride) {
  swiglu_clamp_kernel<<<unsigned((rows * cols + 255) / 256), 256, 0, s>>>(g, u, rows, cols, in_stride, limit, y,
                                                                          out_stride ? out_stride : cols);
  DS4_CUDA_CHECK_LAUNCH();
}

void moe_combine(const float* y, const float* w, int64_t k, const float* sh, int64_t d, float* out,
                 cudaStream_t s, const Rows& rows) {
  combine_kernel<<<dim3(unsigned((d + 255) / 256), unsigned(rows.count)), 256, 0, s>>>(y, w, k, sh, d, out, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::deepseek_v4::cuda
