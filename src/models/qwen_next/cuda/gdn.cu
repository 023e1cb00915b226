// Gated DeltaNet decode kernels (CPU: gdn.cpp, the recurrent form delta_rule_head).
#include "backend/cuda/check.h"
#include "backend/cuda/delta_rule.h"
#include "backend/cuda/reduce.cuh"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::SumOp;

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

// beta {vh} = sigmoid(b), g {vh} = -exp(a_log) softplus(a + dt_bias), in place.
__global__ void gdn_gates_kernel(float* __restrict__ b, float* __restrict__ a, const float* __restrict__ a_log,
                                 const float* __restrict__ dt_bias, GdnShape g) {
  for (int64_t h = threadIdx.x; h < g.v_heads; h += blockDim.x) {
    b[h] = sigm(b[h]);
    const float x = a[h] + dt_bias[h];
    const float sp = x > 20.f ? x : log1pf(expf(x));
    a[h] = -expf(a_log[h]) * sp;
  }
}

__global__ void gdn_gated_norm_kernel(float* __restrict__ o, const float* __restrict__ z,
                                      const float* __restrict__ w, GdnShape g) {
  const int64_t vd = g.v_dim;
  float* oh = o + blockIdx.x * vd;
  const float* zh = z + blockIdx.x * vd;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < vd; i += blockDim.x) ss += oh[i] * oh[i];
  ss = block_reduce(ss, SumOp{}, 0.f);
  const float r = rsqrtf(ss / float(vd) + g.eps);
  for (int64_t i = threadIdx.x; i < vd; i += blockDim.x) {
    const float act = g.gate_sigmoid ? sigm(zh[i]) : zh[i] * sigm(zh[i]);
    oh[i] = ((oh[i] * r) * w[i]) * act;
  }
}

}  // namespace

static ds4::cuda::DeltaRuleShape delta_shape(const GdnShape& g) {
  return ds4::cuda::DeltaRuleShape{g.k_heads, g.v_heads, g.k_dim, g.v_dim, false};
}

void gdn_prep(float* qkv, float* b, float* a, const float* a_log, const float* dt_bias, const GdnShape& g,
              cudaStream_t s) {
  ds4::cuda::delta_rule_qk_l2norm(qkv, delta_shape(g), s);
  gdn_gates_kernel<<<1, 128, 0, s>>>(b, a, a_log, dt_bias, g);
  DS4_CUDA_CHECK_LAUNCH();
}

// The recurrent core is shared with GLM's KDA (backend/cuda/delta_rule.h): scalar decay per head.
void gdn_recurrent(const float* qkv, const float* g, const float* beta, float* S, float* o, const GdnShape& sh,
                   cudaStream_t s) {
  ds4::cuda::delta_rule_step(qkv, g, beta, S, o, delta_shape(sh), s);
}

void gdn_gated_norm(float* o, const float* z, const float* w, const GdnShape& g, cudaStream_t s) {
  gdn_gated_norm_kernel<<<unsigned(g.v_heads), 128, 0, s>>>(o, z, w, g);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::qwen_next::cuda
