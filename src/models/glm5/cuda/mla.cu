// MLA decode kernels (CPU: mla.cpp): the latent cache append and the absorbed attention
// over the selected latent rows (scores, softmax, weighted sum: three kernels, each latent
// row read once for all heads in the first and once per 8 heads in the last). The W_uk / W_uv
// products are batched gemvs (model_cuda.cu).
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/reduce.cuh"
#include "models/glm5/cuda/kernels.h"

namespace ds4::glm5::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;

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

// Scores {heads, max_ctx} of every visible row: one warp per latent row (grid-stride), the
// row held in registers and dotted with every head's query, so each row is read once for
// all heads. Rows outside the selection get -inf.
__global__ void mla_scores_kernel(const float* __restrict__ q_lat, const float* __restrict__ latent,
                                  const uint8_t* __restrict__ keep, const int32_t* __restrict__ pos, MlaShape sh,
                                  float* __restrict__ scores) {
  constexpr int kPer = kMaxKvLora / 32;
  const int lane = threadIdx.x % 32;
  const int64_t n = sh.kv_lora, last = *pos, tail = (last + 1) / sh.kpool * sh.kpool;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t j = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; j <= last; j += warps) {
    if (j < tail && !keep[j / sh.kpool]) {
      for (int64_t h = lane; h < sh.heads; h += 32) scores[h * sh.max_ctx + j] = -INFINITY;
      continue;
    }
    float r[kPer];
    const float* row = latent + j * n;
#pragma unroll
    for (int t = 0; t < kPer; ++t) r[t] = lane + 32 * t < n ? row[lane + 32 * t] : 0.f;
    for (int64_t h = 0; h < sh.heads; ++h) {
      const float* q = q_lat + h * n;
      float d = 0.f;
#pragma unroll
      for (int t = 0; t < kPer; ++t)
        if (lane + 32 * t < n) d += __ldg(q + lane + 32 * t) * r[t];
      d = warp_reduce(d, SumOp{});
      if (lane == 0) scores[h * sh.max_ctx + j] = d * sh.scale;
    }
  }
}

// One block per head: scores -> probabilities in place (exp(s - max) / sum; -inf -> 0).
__global__ void mla_softmax_kernel(const int32_t* __restrict__ pos, MlaShape sh, float* __restrict__ scores) {
  float* sc = scores + int64_t(blockIdx.x) * sh.max_ctx;
  const int64_t last = *pos;
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x) m = fmaxf(m, sc[j]);
  m = block_reduce(m, MaxOp{}, -FLT_MAX);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x) {
    const float e = sc[j] == -INFINITY ? 0.f : expf(sc[j] - m);
    sc[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, SumOp{}, 0.f);
  const float inv = 1.f / sum;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x) sc[j] *= inv;
}

// o_lat[h][i] = sum_j p[h][j] latent[j][i], ascending j. Block: 8 warps = 8 heads over one
// 32-wide column chunk (blockIdx.x), so the chunk of each row is read from L1 by all 8.
// Lanes first load 32 probabilities at once and only rows with p != 0 are visited.
__global__ void mla_output_kernel(const float* __restrict__ probs, const float* __restrict__ latent,
                                  const int32_t* __restrict__ pos, MlaShape sh, float* __restrict__ o_lat) {
  const int lane = threadIdx.x % 32;
  const int64_t h = int64_t(blockIdx.y) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t i = int64_t(blockIdx.x) * 32 + lane, n = sh.kv_lora, last = *pos;
  if (h >= sh.heads) return;
  const float* p = probs + h * sh.max_ctx;
  float acc = 0.f;
  for (int64_t j0 = 0; j0 <= last; j0 += 32) {
    const float pj = j0 + lane <= last ? p[j0 + lane] : 0.f;
    unsigned live = __ballot_sync(0xffffffffu, pj != 0.f);
    while (live) {
      const int b = __ffs(live) - 1;
      live &= live - 1;
      const float w = __shfl_sync(0xffffffffu, pj, b);
      if (i < n) acc += w * latent[(j0 + b) * n + i];
    }
  }
  if (i < n) o_lat[h * n + i] = acc;
}

}  // namespace

void mla_append(const float* kv, const float* w, float* latent, const int32_t* pos, const MlaShape& sh,
                cudaStream_t s) {
  mla_append_kernel<<<1, 256, 0, s>>>(kv, w, latent, pos, sh);
  DS4_CUDA_CHECK_LAUNCH();
}

void mla_attend(const float* q_lat, const float* latent, const uint8_t* keep, const int32_t* pos, const MlaShape& sh,
                float* scores, float* o_lat, cudaStream_t s) {
  if (sh.kv_lora > kMaxKvLora)
    throw InputError("glm5 cuda: kv_lora_rank " + std::to_string(sh.kv_lora) + " > " + std::to_string(kMaxKvLora));
  // Grid-stride over rows: a fixed grid serves every position (the step is a CUDA graph).
  mla_scores_kernel<<<256, 256, 0, s>>>(q_lat, latent, keep, pos, sh, scores);
  DS4_CUDA_CHECK_LAUNCH();
  mla_softmax_kernel<<<unsigned(sh.heads), 256, 0, s>>>(pos, sh, scores);
  DS4_CUDA_CHECK_LAUNCH();
  const dim3 grid(unsigned((sh.kv_lora + 31) / 32), unsigned((sh.heads + 7) / 8));
  mla_output_kernel<<<grid, 256, 0, s>>>(scores, latent, pos, sh, o_lat);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::glm5::cuda
