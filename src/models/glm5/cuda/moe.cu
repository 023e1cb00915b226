// MoE routing and combination kernels (CPU: moe.cpp route_token / moe_forward). The experts'
// matrices run through backend/cuda gemv_batched with the ids this router writes.
#include <cfloat>
#include <climits>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/glm5/cuda/kernels.h"

namespace ds4::glm5::cuda {
namespace {

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

// One block of blockDim >= 32 per token. Shared: score {E}, choice {E}, rank {E}, group {G}.
__global__ void moe_route_kernel(const float* __restrict__ logits, const float* __restrict__ bias, RouteShape sh,
                                 int32_t* __restrict__ ids, float* __restrict__ weights, int64_t stride,
                                 bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float sm[];
  const int64_t E = sh.experts, K = sh.k;
  logits += int64_t(blockIdx.x) * stride;
  ids += int64_t(blockIdx.x) * K;
  weights += int64_t(blockIdx.x) * K;
  float* score = sm;
  float* choice = sm + E;
  int* rank = reinterpret_cast<int*>(sm + 2 * E);
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    score[e] = sigm(logits[e]);
    choice[e] = score[e] + bias[e];  // the bias steers the choice, not the weight
  }
  __syncthreads();
  if (sh.groups > 1 && sh.topk_groups < sh.groups) {
    // Group-limited routing (moe.cpp route_token): a group's score is the sum of its two best
    // choices (largest first, like the CPU's sum over its top-2); the experts of every group
    // outside the best topk_groups are masked out of the choice.
    const int64_t G = sh.groups, per = E / G;
    float* gscore = sm + 3 * E;
    for (int64_t g = threadIdx.x; g < G; g += blockDim.x) {
      float a = -INFINITY, b = -INFINITY;
      for (int64_t j = 0; j < per; ++j) {
        const float v = choice[g * per + j];
        if (v > a) b = a, a = v;
        else if (v > b) b = v;
      }
      gscore[g] = a + b;
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
      const int64_t g = e / per;
      int r = 0;
      for (int64_t o = 0; o < G; ++o) r += gscore[o] > gscore[g] || (gscore[o] == gscore[g] && o < g);
      if (r >= sh.topk_groups) choice[e] = -INFINITY;  // only this thread touches choice[e] here
    }
    __syncthreads();
  }
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    int r = 0;
    for (int64_t o = 0; o < E; ++o) r += choice[o] > choice[e] || (choice[o] == choice[e] && o < e);
    rank[e] = r;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  // The chosen experts by rank (the CPU's top-k order) for the normalizing sum.
  int32_t by_rank[64];
  for (int64_t e = 0; e < E; ++e)
    if (rank[e] < K) by_rank[rank[e]] = int32_t(e);
  float sum = 0.f;
  for (int64_t i = 0; i < K; ++i) sum += score[by_rank[i]];
  int slot = 0;
  for (int64_t e = 0; e < E; ++e) {
    if (rank[e] >= K) continue;
    float w = score[e];
    if (sh.norm_topk) w /= sum + 1e-20f;
    ids[slot] = int32_t(e);
    weights[slot++] = w * sh.scaling;
  }
}

// Without group-limited routing, one warp per token (issue #23: the block's rank loop over all
// experts and its one-thread tail cost ~25 us a token): lane l holds experts l + 32 j; K rounds
// of a warp argmax (value desc, index asc: the rank order above) pick the top-k in rank order;
// the score, the normalizing sum (rank order) and the weight are the block kernel's
// expressions, so ids and weights are the same bits. Lane i < K keeps pick i and writes it at
// its ascending slot.
constexpr int kRouteWarpPer = 16;  // experts per lane at most: E <= 512
__global__ void moe_route_warp_kernel(const float* __restrict__ logits, const float* __restrict__ bias, RouteShape sh,
                                      int32_t* __restrict__ ids, float* __restrict__ weights, int64_t stride,
                                      bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int E = int(sh.experts), K = int(sh.k), lane = int(threadIdx.x);
  logits += int64_t(blockIdx.x) * stride;
  ids += int64_t(blockIdx.x) * K;
  weights += int64_t(blockIdx.x) * K;
  float choice[kRouteWarpPer];
#pragma unroll
  for (int j = 0; j < kRouteWarpPer; ++j) {
    const int e = lane + 32 * j;
    choice[j] = e < E ? sigm(logits[e]) + bias[e] : 0.f;
  }
  unsigned taken = 0;  // bit j: expert lane + 32 j already picked
  int mine = -1;       // lane i < K: the expert of round i
  for (int i = 0; i < K; ++i) {
    float bv = -INFINITY;
    int be = INT_MAX;  // none (warp_best's)
#pragma unroll
    for (int j = 0; j < kRouteWarpPer; ++j) {
      const int e = lane + 32 * j;
      if (e < E && !(taken >> j & 1u) && (be == INT_MAX || choice[j] > bv)) bv = choice[j], be = e;  // e ascending
    }
    ds4::cuda::detail::warp_best(bv, be);
    if (be == INT_MAX) be = -1;  // nothing left (K > E: the host's checks exclude it)
    if (be >= 0 && be % 32 == lane) taken |= 1u << (be / 32);
    if (lane == i) mine = be;
  }
  const float score = mine >= 0 ? sigm(logits[mine]) : 0.f;
  float sum = 0.f;
  for (int i = 0; i < K; ++i) sum += __shfl_sync(0xffffffffu, score, i);
  int slot = 0;
  for (int i = 0; i < K; ++i) slot += __shfl_sync(0xffffffffu, mine, i) < mine;
  if (lane < K) {
    float w = score;
    if (sh.norm_topk) w /= sum + 1e-20f;
    ids[slot] = int32_t(mine);
    weights[slot] = w * sh.scaling;
  }
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ w, int64_t k,
                                   const float* __restrict__ sh, int64_t d, float* __restrict__ out, int64_t stride,
                                   bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  {
    const int64_t t = blockIdx.y;
    y += t * k * d, w += t * k, sh += t * stride, out += t * stride;
  }
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d) return;
  float r = sh[i];
  for (int64_t j = 0; j < k; ++j) r += w[j] * y[j * d + i];
  out[i] = r;
}

}  // namespace

void moe_route(const float* logits, const float* bias, const RouteShape& sh, int32_t* ids, float* weights,
               cudaStream_t s, const Rows& rows) {
  if (sh.k > 64 || sh.k > sh.experts)
    throw InputError("glm5 cuda: num_experts_per_tok " + std::to_string(sh.k) + " must be <= 64 and <= n_routed_experts");
  if ((sh.groups <= 1 || sh.topk_groups >= sh.groups) && sh.k <= 32 && sh.experts <= 32 * kRouteWarpPer) {
    ds4::cuda::gemv_detail::launch_small(moe_route_warp_kernel, dim3(unsigned(rows.count)), 32, 0, s, logits, bias, sh,
                                         ids, weights, rows.stride);
    return;
  }
  const size_t smem = size_t(3 * sh.experts + sh.groups) * sizeof(float);
  ds4::cuda::gemv_detail::launch_small(moe_route_kernel, dim3(unsigned(rows.count)), 256, smem, s, logits, bias, sh,
                                       ids, weights, rows.stride);
}

void moe_combine(const float* y, const float* w, int64_t k, const float* sh, int64_t d, float* out, cudaStream_t s,
                 const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(moe_combine_kernel, dim3(unsigned((d + 255) / 256), unsigned(rows.count)), 256,
                                       0, s, y, w, k, sh, d, out, rows.stride);
}

}  // namespace ds4::glm5::cuda
