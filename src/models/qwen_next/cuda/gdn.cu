// Gated DeltaNet decode kernels (CPU: gdn.cpp, the recurrent form delta_rule_head). Over
// `Rows` (chunk.cu) the per-row kernels take blockIdx.y as the row and the recurrence loops
// the rows in order inside one launch, so every row equals its decode step.
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
                                 const float* __restrict__ dt_bias, GdnShape g, int64_t rs) {
  b += blockIdx.x * rs, a += blockIdx.x * rs;  // one block per row
  for (int64_t h = threadIdx.x; h < g.v_heads; h += blockDim.x) {
    b[h] = sigm(b[h]);
    const float x = a[h] + dt_bias[h];
    const float sp = x > 20.f ? x : log1pf(expf(x));
    a[h] = -expf(a_log[h]) * sp;
  }
}

__global__ void gdn_gated_norm_kernel(float* __restrict__ o, const float* __restrict__ z,
                                      const float* __restrict__ w, GdnShape g, int64_t rs) {
  const int64_t vd = g.v_dim;
  float* oh = o + blockIdx.y * rs + blockIdx.x * vd;
  const float* zh = z + blockIdx.y * rs + blockIdx.x * vd;
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
              cudaStream_t s, const Rows& rows) {
  ds4::cuda::delta_rule_qk_l2norm_rows(qkv, delta_shape(g), ds4::cuda::DeltaRuleRows{rows.count, rows.stride}, s);
  gdn_gates_kernel<<<unsigned(rows.count), 128, 0, s>>>(b, a, a_log, dt_bias, g, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

// The recurrent core is shared with GLM's KDA (backend/cuda/delta_rule.h): scalar decay per head.
// states (optional): S after each row, {rows, v_heads, k_dim, v_dim} at state_stride floats.
void gdn_recurrent(const float* qkv, const float* g, const float* beta, float* S, float* o, const GdnShape& sh,
                   cudaStream_t s, const Rows& rows, float* states) {
  ds4::cuda::DeltaRuleRows r{rows.count, rows.stride};
  r.states = states;
  r.state_stride = sh.v_heads * sh.k_dim * sh.v_dim;
  ds4::cuda::delta_rule_rows(qkv, g, beta, S, o, delta_shape(sh), r, s);
}

void gdn_gated_norm(float* o, const float* z, const float* w, const GdnShape& g, cudaStream_t s, const Rows& rows) {
  gdn_gated_norm_kernel<<<dim3(unsigned(g.v_heads), unsigned(rows.count)), 128, 0, s>>>(o, z, w, g, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::qwen_next::cuda
