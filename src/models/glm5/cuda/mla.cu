// MLA decode kernels (CPU: mla.cpp): the latent cache append and the absorbed attention
// over the selected latent rows. The W_uk / W_uv products are batched gemvs (model_cuda.cu).
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/reduce.cuh"
#include "models/glm5/cuda/kernels.h"

namespace ds4::glm5::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;

__global__ void mla_append_kernel(const float* __restrict__ kv, const float* __restrict__ w, float* __restrict__ latent,
                                  const int32_t* __restrict__ pos, MlaShape sh) {
  const int64_t n = sh.kv_lora;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += kv[i] * kv[i];
  ss = block_reduce(ss, SumOp{}, 0.f);
  const float r = rsqrtf(ss / float(n) + sh.eps);
  float* row = latent + int64_t(*pos) * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] = (kv[i] * r) * w[i];
}

// One block per head. Scores of the kept rows (others -inf), softmax, weighted row sum.
__global__ void mla_attend_kernel(const float* __restrict__ q_lat, const float* __restrict__ latent,
                                  const uint8_t* __restrict__ keep, const int32_t* __restrict__ pos, MlaShape sh,
                                  float* __restrict__ scores, float* __restrict__ o_lat) {
  extern __shared__ float q[];  // {kv_lora}
  const int64_t h = blockIdx.x, n = sh.kv_lora, last = *pos;
  const int64_t tail = (last + 1) / sh.kpool * sh.kpool;  // first row of the incomplete pool
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) q[i] = q_lat[h * n + i];
  __syncthreads();
  float* sc = scores + h * sh.max_ctx;
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x) {
    float s = -INFINITY;
    if (j >= tail || keep[j / sh.kpool]) {
      const float* row = latent + j * n;
      float d = 0.f;
      for (int64_t i = 0; i < n; ++i) d += q[i] * row[i];
      s = d * sh.scale;
      m = fmaxf(m, s);
    }
    sc[j] = s;
  }
  m = block_reduce(m, MaxOp{}, -FLT_MAX);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x) {
    const float e = sc[j] == -INFINITY ? 0.f : expf(sc[j] - m);
    sc[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, SumOp{}, 0.f);  // its barriers also publish sc[]
  const float inv = 1.f / sum;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float acc = 0.f;
    for (int64_t j = 0; j <= last; ++j)
      if (sc[j] != 0.f) acc += (sc[j] * inv) * latent[j * n + i];
    o_lat[h * n + i] = acc;
  }
}

}  // namespace

void mla_append(const float* kv, const float* w, float* latent, const int32_t* pos, const MlaShape& sh,
                cudaStream_t s) {
  mla_append_kernel<<<1, 256, 0, s>>>(kv, w, latent, pos, sh);
  DS4_CUDA_CHECK_LAUNCH();
}

void mla_attend(const float* q_lat, const float* latent, const uint8_t* keep, const int32_t* pos, const MlaShape& sh,
                float* scores, float* o_lat, cudaStream_t s) {
  mla_attend_kernel<<<unsigned(sh.heads), 256, size_t(sh.kv_lora) * sizeof(float), s>>>(q_lat, latent, keep, pos, sh,
                                                                                      scores, o_lat);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::glm5::cuda
