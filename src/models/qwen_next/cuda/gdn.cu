// Gated DeltaNet decode kernels (CPU: gdn.cpp, the recurrent form delta_rule_head). Over
// `Rows` (chunk.cu) the per-row kernels take blockIdx.y as the row and the recurrence loops
// the rows in order inside one launch, so every row equals its decode step.
#include "backend/cuda/check.h"
#include "backend/cuda/delta_rule.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::SumOp;

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

// beta {vh} = sigmoid(b), g {vh} = -exp(a_log) softplus(a + dt_bias), in place.
__global__ void gdn_gates_kernel(float* __restrict__ b, float* __restrict__ a, const float* __restrict__ a_log,
                                 const float* __restrict__ dt_bias, GdnShape g, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  b += blockIdx.x * rs, a += blockIdx.x * rs;  // one block per row
  for (int64_t h = threadIdx.x; h < g.v_heads; h += blockDim.x) {
    b[h] = sigm(b[h]);
    const float x = a[h] + dt_bias[h];
    const float sp = x > 20.f ? x : log1pf(expf(x));
    a[h] = -expf(a_log[h]) * sp;
  }
}

__global__ void gdn_gated_norm_kernel(float* __restrict__ o, const float* __restrict__ z, const float* __restrict__ w,
                                      GdnShape g, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
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

// conv1d_step_kernel's channel c for one token (backend/cuda/conv1d.cu, dilation 1, silu):
// the same multiply-add order, state shift and activation.
__device__ __forceinline__ float conv_silu(const float* __restrict__ x_new, const float* __restrict__ w,
                                           float* __restrict__ state, int64_t C, int K, int64_t c) {
  const int s = K - 1;
  const float xn = x_new[c];
  float acc = 0.f;
  for (int j = 0; j < K; ++j) {
    const float v = j < s ? state[int64_t(j) * C + c] : xn;
    acc += w[c * K + j] * v;
  }
  for (int r = 0; r + 1 < s; ++r) state[int64_t(r) * C + c] = state[int64_t(r + 1) * C + c];
  if (s > 0) state[int64_t(s - 1) * C + c] = xn;
  return acc / (1.f + expf(-acc));
}

// One launch for conv1d_step_f32 + delta_rule_qk_l2norm + gdn_gates_kernel of a decode step.
// Blocks [0, qk_blocks): a warp per q/k head, its lanes on channels lane, lane + 32, .. as
// qk_l2norm_kernel (same sum order, eps and q scale); the blocks after: a thread per value
// channel, and the first of them the gates.
constexpr int kPrepThreads = 128;
__global__ void __launch_bounds__(kPrepThreads)
    gdn_conv_prep_kernel(const float* __restrict__ raw, const float* __restrict__ conv_w, float* __restrict__ state,
                         int K, float* __restrict__ qkv, float* __restrict__ b, float* __restrict__ a,
                         const float* __restrict__ a_log, const float* __restrict__ dt_bias, GdnShape g,
                         int64_t qk_blocks, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t kd = g.k_dim, C = 2 * g.k_heads * kd + g.v_heads * g.v_dim;
  if (int64_t(blockIdx.x) < qk_blocks) {
    const int64_t head = int64_t(blockIdx.x) * (kPrepThreads / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (head >= 2 * g.k_heads) return;
    constexpr int kMaxPerLane = 8;  // k_dim <= 256 (checked by the caller)
    float y[kMaxPerLane];
    float ss = 0.f;
#pragma unroll
    for (int m = 0; m < kMaxPerLane; ++m) {
      const int64_t i = lane + 32 * m;
      if (i < kd) {
        y[m] = conv_silu(raw, conv_w, state, C, K, head * kd + i);
        ss += y[m] * y[m];
      }
    }
    ss = ds4::cuda::detail::warp_reduce(ss, SumOp{});
    const float r = rsqrtf(ss + 1e-6f);  // FLA l2norm: eps on the sum
    const float qscale = head < g.k_heads ? rsqrtf(float(kd)) : 1.f;
#pragma unroll
    for (int m = 0; m < kMaxPerLane; ++m) {
      const int64_t i = lane + 32 * m;
      if (i < kd) qkv[head * kd + i] = (y[m] * r) * qscale;
    }
    return;
  }
  const int64_t vb = int64_t(blockIdx.x) - qk_blocks;
  const int64_t c = 2 * g.k_heads * kd + vb * kPrepThreads + threadIdx.x;
  if (c < C) qkv[c] = conv_silu(raw, conv_w, state, C, K, c);
  if (vb == 0)
    for (int64_t h = threadIdx.x; h < g.v_heads; h += kPrepThreads) {  // gdn_gates_kernel
      b[h] = sigm(b[h]);
      const float x = a[h] + dt_bias[h];
      const float sp = x > 20.f ? x : log1pf(expf(x));
      a[h] = -expf(a_log[h]) * sp;
    }
}

}  // namespace

bool gdn_conv_prep_fusable(const GdnShape& g) { return g.k_dim <= 256; }

void gdn_conv_prep(const float* raw, const float* conv_w, float* conv_state, int64_t conv_k, float* qkv, float* b,
                   float* a, const float* a_log, const float* dt_bias, const GdnShape& g, cudaStream_t s) {
  const int64_t qk_blocks = (2 * g.k_heads + kPrepThreads / 32 - 1) / (kPrepThreads / 32);
  const int64_t v_blocks = (g.v_heads * g.v_dim + kPrepThreads - 1) / kPrepThreads;
  ds4::cuda::gemv_detail::launch_small(gdn_conv_prep_kernel, dim3(unsigned(qk_blocks + (v_blocks > 0 ? v_blocks : 1))),
                                       kPrepThreads, 0, s, raw, conv_w, conv_state, int(conv_k), qkv, b, a, a_log,
                                       dt_bias, g, qk_blocks);
}

static ds4::cuda::DeltaRuleShape delta_shape(const GdnShape& g) {
  return ds4::cuda::DeltaRuleShape{g.k_heads, g.v_heads, g.k_dim, g.v_dim, false};
}

void gdn_prep(float* qkv, float* b, float* a, const float* a_log, const float* dt_bias, const GdnShape& g,
              cudaStream_t s, const Rows& rows) {
  ds4::cuda::delta_rule_qk_l2norm_rows(qkv, delta_shape(g), ds4::cuda::DeltaRuleRows{rows.count, rows.stride}, s);
  ds4::cuda::gemv_detail::launch_small(gdn_gates_kernel, dim3(unsigned(rows.count)), 128, 0, s, b, a, a_log, dt_bias, g,
                                       rows.stride);
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
  ds4::cuda::gemv_detail::launch_small(gdn_gated_norm_kernel, dim3(unsigned(g.v_heads), unsigned(rows.count)), 128, 0,
                                       s, o, z, w, g, rows.stride);
}

}  // namespace ds4::qwen_next::cuda
