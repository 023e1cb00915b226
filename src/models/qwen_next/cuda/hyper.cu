// Hyper-connection read/write kernels (CPU: hyper.cpp). A decode row is one token wide, so
// each is a single small launch; the matrices in between go through backend/cuda gemv. The
// chunk (chunk.cu) runs the same kernels over `Rows` (blockIdx.y = row, every pointer offset
// by row * stride floats): row t does exactly the decode step's arithmetic.
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::SumOp;

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

// One block per stream: rmsnorm of that stream's d values.
__global__ void hc_norm_kernel(const float* __restrict__ h, const float* __restrict__ w, int64_t d, float eps,
                               float* __restrict__ out, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  h += blockIdx.y * rs, out += blockIdx.y * rs;
  const float* x = h + blockIdx.x * d;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += x[i] * x[i];
  ss = block_reduce(ss, SumOp{}, 0.f);
  const float r = rsqrtf(ss / float(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) out[blockIdx.x * d + i] = (x[i] * r) * w[blockIdx.x * d + i];
}

__global__ void hc_low_act_kernel(float* low, int64_t r, float inv_hc, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  low += blockIdx.y * rs;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < r) {
    const float v = low[i] * inv_hc;
    low[i] = v / (1.f + expf(-v));
  }
}

__global__ void hc_combine_kernel(const float* __restrict__ mix, const float* __restrict__ normed, int64_t hc,
                                  int64_t d, float* __restrict__ mixed, float* __restrict__ inject, int64_t rs,
                                  bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  mix += blockIdx.y * rs, normed += blockIdx.y * rs, mixed += blockIdx.y * rs;
  if (inject) inject += blockIdx.y * rs;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const float inv_hc = 1.f / float(hc);
  if (i < d) {
    float s = 0.f;
    for (int64_t k = 0; k < hc; ++k) s += sigm(mix[k * d + i]) * normed[k * d + i];
    mixed[i] = s * inv_hc;
  }
  if (inject && i < hc) inject[i] = 2.f * sigm(inject[i] * inv_hc);
}

__global__ void hc_write_kernel(float* __restrict__ h, const float* __restrict__ out, const float* __restrict__ inject,
                                int64_t hc, int64_t d, int64_t rs, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  h += blockIdx.y * rs, out += blockIdx.y * rs, inject += blockIdx.y * rs;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < hc * d) h[i] += out[i % d] * inject[i / d];
}

__global__ void hc_broadcast_kernel(const float* __restrict__ x, int64_t hc, int64_t d, float* __restrict__ h,
                                    bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < hc * d) h[i] = x[i % d];
}

unsigned blocks(int64_t n, int t) { return unsigned((n + t - 1) / t); }

}  // namespace

void hc_norm(const float* h, const float* w, int64_t hc, int64_t d, float eps, float* normed, cudaStream_t s,
             const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(hc_norm_kernel, dim3(unsigned(hc), unsigned(rows.count)), 256, 0, s, h, w, d,
                                       eps, normed, rows.stride);
}

void hc_low_act(float* low, int64_t r, int64_t hc, cudaStream_t s, const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(hc_low_act_kernel, dim3(blocks(r, 128), unsigned(rows.count)), 128, 0, s, low, r,
                                       1.f / float(hc), rows.stride);
}

void hc_combine(const float* mix, const float* normed, int64_t hc, int64_t d, float* mixed, float* inject,
                cudaStream_t s, const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(hc_combine_kernel, dim3(blocks(d > hc ? d : hc, 128), unsigned(rows.count)), 128,
                                       0, s, mix, normed, hc, d, mixed, inject, rows.stride);
}

void hc_write(float* h, const float* out, const float* inject, int64_t hc, int64_t d, cudaStream_t s,
              const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(hc_write_kernel, dim3(blocks(hc * d, 256), unsigned(rows.count)), 256, 0, s, h,
                                       out, inject, hc, d, rows.stride);
}

void hc_broadcast(const float* x, int64_t hc, int64_t d, float* h, cudaStream_t s) {
  ds4::cuda::gemv_detail::launch_small(hc_broadcast_kernel, dim3(blocks(hc * d, 256)), 256, 0, s, x, hc, d, h);
}

}  // namespace ds4::qwen_next::cuda
