// GLM 5.x final collapse (CPU: layer.cpp hc_mean): the unweighted mean of the hyper-connection
// streams (HF Glm5NextTextHyperHead), then the final RMSNorm.
#include "backend/cuda/check.h"
#include "backend/cuda/reduce.cuh"
#include "models/glm5/cuda/kernels.h"

namespace ds4::glm5::cuda {
namespace {

// One block per token. Each thread rereads only the values it wrote: no barrier between the passes.
__global__ void hc_mean_norm_kernel(const float* __restrict__ x, int n, int64_t hidden, const float* __restrict__ w,
                                    float eps, float* __restrict__ out, int64_t stride) {
  x += int64_t(blockIdx.x) * stride;
  out += int64_t(blockIdx.x) * stride;
  float ss = 0.f;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < n; ++s) acc += x[s * hidden + d];
    acc /= float(n);
    out[d] = acc;
    ss = fmaf(acc, acc, ss);
  }
  ss = ds4::cuda::detail::block_reduce(ss, ds4::cuda::detail::SumOp{}, 0.f);
  const float r = rsqrtf(ss / float(hidden) + eps);
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) out[d] = (out[d] * r) * w[d];
}

// The same mean without the norm (the MTP head's pre, mtp.cpp: hc_mean with no norm).
__global__ void hc_mean_kernel(const float* __restrict__ x, int n, int64_t hidden, float* __restrict__ out,
                               int64_t stride) {
  x += int64_t(blockIdx.x) * stride;
  out += int64_t(blockIdx.x) * stride;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < n; ++s) acc += x[s * hidden + d];
    out[d] = acc / float(n);
  }
}

}  // namespace

void hc_mean(const float* x, int64_t n, int64_t hidden, float* out, cudaStream_t s, const Rows& rows) {
  hc_mean_kernel<<<unsigned(rows.count), 512, 0, s>>>(x, int(n), hidden, out, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void hc_mean_norm(const float* x, int64_t n, int64_t hidden, const float* norm, float eps, float* out, cudaStream_t s,
                  const Rows& rows) {
  hc_mean_norm_kernel<<<unsigned(rows.count), 512, 0, s>>>(x, int(n), hidden, norm, eps, out, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::glm5::cuda
