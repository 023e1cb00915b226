// Gated DeltaNet decode kernels (CPU: gdn.cpp, the recurrent form delta_rule_head).
#include "backend/cuda/check.h"
#include "backend/cuda/reduce.cuh"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

// One warp per q/k head (2 * k_heads of them); block 0 also computes beta and g.
__global__ void gdn_prep_kernel(float* __restrict__ qkv, float* __restrict__ b, float* __restrict__ a,
                                const float* __restrict__ a_log, const float* __restrict__ dt_bias, GdnShape g) {
  const int64_t head = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (head < 2 * g.k_heads) {
    float* p = qkv + head * g.k_dim;
    float ss = 0.f;
    for (int64_t i = lane; i < g.k_dim; i += 32) ss += p[i] * p[i];
    ss = warp_reduce(ss, SumOp{});
    const float r = rsqrtf(ss + 1e-6f);  // FLA l2norm: eps on the sum
    const float qscale = head < g.k_heads ? rsqrtf(float(g.k_dim)) : 1.f;
    for (int64_t i = lane; i < g.k_dim; i += 32) p[i] = (p[i] * r) * qscale;
  }
  if (blockIdx.x == 0)
    for (int64_t h = threadIdx.x; h < g.v_heads; h += blockDim.x) {
      b[h] = sigm(b[h]);
      const float x = a[h] + dt_bias[h];
      const float sp = x > 20.f ? x : log1pf(expf(x));
      a[h] = -expf(a_log[h]) * sp;
    }
}

// One block per value head; thread j owns column j of S {k_dim, v_dim}:
//   S = e^g S;  delta = beta (v - S^T k);  S += k delta^T;  o = S^T q.
__global__ void gdn_recurrent_kernel(const float* __restrict__ qkv, const float* __restrict__ g,
                                     const float* __restrict__ beta, float* __restrict__ S, float* __restrict__ o,
                                     GdnShape sh) {
  extern __shared__ float qk[];  // {2, k_dim}
  const int64_t h = blockIdx.x, kd = sh.k_dim, vd = sh.v_dim, kh = h / (sh.v_heads / sh.k_heads);
  const float* q = qkv + kh * kd;
  const float* k = qkv + sh.k_heads * kd + kh * kd;
  const float* v = qkv + 2 * sh.k_heads * kd + h * vd;
  for (int64_t i = threadIdx.x; i < kd; i += blockDim.x) {
    qk[i] = q[i];
    qk[kd + i] = k[i];
  }
  __syncthreads();
  const float decay = expf(g[h]), bt = beta[h];
  float* Sh = S + h * kd * vd;
  for (int64_t j = threadIdx.x; j < vd; j += blockDim.x) {
    float mem = 0.f;
    for (int64_t i = 0; i < kd; ++i) mem += (Sh[i * vd + j] * decay) * qk[kd + i];
    const float delta = (v[j] - mem) * bt;
    float acc = 0.f;
    for (int64_t i = 0; i < kd; ++i) {
      const float s = Sh[i * vd + j] * decay + qk[kd + i] * delta;
      Sh[i * vd + j] = s;
      acc += s * qk[i];
    }
    o[h * vd + j] = acc;
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

void gdn_prep(float* qkv, float* b, float* a, const float* a_log, const float* dt_bias, const GdnShape& g,
              cudaStream_t s) {
  const int64_t heads = 2 * g.k_heads;
  gdn_prep_kernel<<<unsigned((heads + 3) / 4), 128, 0, s>>>(qkv, b, a, a_log, dt_bias, g);
  DS4_CUDA_CHECK_LAUNCH();
}

void gdn_recurrent(const float* qkv, const float* g, const float* beta, float* S, float* o, const GdnShape& sh,
                   cudaStream_t s) {
  const int threads = int(sh.v_dim < 256 ? (sh.v_dim + 31) / 32 * 32 : 256);
  gdn_recurrent_kernel<<<unsigned(sh.v_heads), threads, size_t(2 * sh.k_dim) * sizeof(float), s>>>(qkv, g, beta, S,
                                                                                                  o, sh);
  DS4_CUDA_CHECK_LAUNCH();
}

void gdn_gated_norm(float* o, const float* z, const float* w, const GdnShape& g, cudaStream_t s) {
  gdn_gated_norm_kernel<<<unsigned(g.v_heads), 128, 0, s>>>(o, z, w, g);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::qwen_next::cuda
