// PLE gating kernels (CPU: ple.cpp). The n-gram hashing and the table gather stay on the
// host (the real table is an SSD sidecar of ~51B parameters); the gathered row arrives with
// the step's inputs, and everything after it runs here. Over `Rows` (chunk.cu) row t =
// blockIdx.y reads and writes its own row scratch; the dilated conv between gate and add
// advances row by row inside conv1d_rows_f32.
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::SumOp;

// One block per residual stream k (everything is per stream):
//   kn = rmsnorm(key_k) nk, qn = rmsnorm(h_k) nq, g = signed_sqrt(kn . qn / sqrt(d)),
//   gv_k = sigmoid(g) val, gvn_k = rmsnorm(gv_k) nc.
__global__ void ple_gate_kernel(const float* __restrict__ key, const float* __restrict__ val,
                                const float* __restrict__ h, const float* __restrict__ nk, const float* __restrict__ nq,
                                const float* __restrict__ nc, int64_t d, float eps, float* __restrict__ gv,
                                float* __restrict__ gvn, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t row = blockIdx.y;
  key += row * rs, val += row * rs, h += row * rs, gv += row * rs, gvn += row * rs;
  const int64_t o = blockIdx.x * d;
  float sk = 0.f, sq = 0.f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    sk += key[o + i] * key[o + i];
    sq += h[o + i] * h[o + i];
  }
  sk = block_reduce(sk, SumOp{}, 0.f);
  sq = block_reduce(sq, SumOp{}, 0.f);
  const float rk = rsqrtf(sk / float(d) + eps), rq = rsqrtf(sq / float(d) + eps);
  float dot = 0.f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    dot += ((key[o + i] * rk) * nk[o + i]) * ((h[o + i] * rq) * nq[o + i]);
  dot = block_reduce(dot, SumOp{}, 0.f);
  float g = dot * rsqrtf(float(d));
  g = sqrtf(fmaxf(fabsf(g), 1e-6f)) * float((g > 0.f) - (g < 0.f));
  const float sg = 1.f / (1.f + expf(-g));
  float sv = 0.f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float x = sg * val[i];
    gv[o + i] = x;
    sv += x * x;
  }
  sv = block_reduce(sv, SumOp{}, 0.f);
  const float rv = rsqrtf(sv / float(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) gvn[o + i] = (gv[o + i] * rv) * nc[o + i];
}

__global__ void ple_add_kernel(float* __restrict__ h, const float* __restrict__ gv, const float* __restrict__ conv,
                               int64_t n, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  h += blockIdx.y * rs, gv += blockIdx.y * rs, conv += blockIdx.y * rs;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) h[i] += gv[i] + conv[i];
}

}  // namespace

void ple_gate(const float* key, const float* val, const float* h, const float* norm_key, const float* norm_query,
              const float* norm_conv, int64_t hc, int64_t d, float eps, float* gv, float* gvn, cudaStream_t s,
              const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(ple_gate_kernel, dim3(unsigned(hc), unsigned(rows.count)), 256, 0, s, key, val,
                                       h, norm_key, norm_query, norm_conv, d, eps, gv, gvn, rows.stride);
}

void ple_add(float* h, const float* gv, const float* conv, int64_t n, cudaStream_t s, const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(ple_add_kernel, dim3(unsigned((n + 255) / 256), unsigned(rows.count)), 256, 0, s,
                                       h, gv, conv, n, rows.stride);
}

}  // namespace ds4::qwen_next::cuda
