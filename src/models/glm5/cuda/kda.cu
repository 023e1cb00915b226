// KDA decode kernels around the shared delta rule (CPU: kda.cpp forget_gate and the gated
// output norm; the recurrence itself is backend/cuda/delta_rule.h).
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/glm5/cuda/kernels.h"

namespace ds4::glm5::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::SumOp;

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }

__global__ void kda_gates_kernel(float* __restrict__ g, float* __restrict__ beta, const float* __restrict__ a_log,
                                 const float* __restrict__ dt_bias, KdaShape sh, int64_t stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  g += int64_t(blockIdx.y) * stride;
  beta += int64_t(blockIdx.y) * stride;
  const int64_t qkv = sh.heads * sh.head_dim;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < qkv) {
    const float rate = expf(a_log[i / sh.head_dim]);
    const float v = g[i] + dt_bias[i];
    // Safe gate: a sigmoid bounded below by linear_lower_bound keeps exp(g) away from 0.
    g[i] = sh.has_lower_bound ? sh.lower_bound * sigm(rate * v) : -rate * softplus(v);
  }
  if (i < sh.heads) beta[i] = sigm(beta[i]);
}

// One block per head (and token: blockIdx.y).
__global__ void kda_gated_norm_kernel(float* __restrict__ o, const float* __restrict__ gate,
                                      const float* __restrict__ w, KdaShape sh, int64_t stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t hd = sh.head_dim;
  float* oh = o + int64_t(blockIdx.y) * stride + blockIdx.x * hd;
  const float* gh = gate + int64_t(blockIdx.y) * stride + blockIdx.x * hd;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) ss += oh[i] * oh[i];
  ss = block_reduce(ss, SumOp{}, 0.f);
  const float r = rsqrtf(ss / float(hd) + sh.eps);
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) oh[i] = ((oh[i] * r) * w[i]) * sigm(gh[i]);
}

}  // namespace

void kda_gates(float* g, float* beta, const float* a_log, const float* dt_bias, const KdaShape& sh, cudaStream_t s,
               const Rows& rows) {
  const int64_t n = sh.heads * sh.head_dim > sh.heads ? sh.heads * sh.head_dim : sh.heads;
  const dim3 grid(unsigned((n + 255) / 256), unsigned(rows.count));
  ds4::cuda::gemv_detail::launch_small(kda_gates_kernel, dim3(grid), 256, 0, s, g, beta, a_log, dt_bias, sh,
                                       rows.stride);
}

void kda_gated_norm(float* o, const float* gate, const float* w, const KdaShape& sh, cudaStream_t s,
                    const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(kda_gated_norm_kernel, dim3(unsigned(sh.heads), unsigned(rows.count)), 128, 0, s,
                                       o, gate, w, sh, rows.stride);
}

}  // namespace ds4::glm5::cuda
