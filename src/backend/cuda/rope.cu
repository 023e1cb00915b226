// RoPE: one thread per rotated pair. The angle is computed in f32 from the integer
// position (as the reference implementations do), with the accurate sincosf.
#include <cmath>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/rope.h"

namespace ds4::cuda {
namespace {

struct RopeLaunch {
  int64_t total;           // tokens * heads * pairs
  int64_t pairs_per_head;  // rot_dim / 2
  int64_t heads;
  int64_t head_dim;
  float log2_theta_over_half;
};

template <RopeStyle kStyle>
__global__ void rope_kernel(float* x, const int32_t* __restrict__ pos, RopeLaunch p) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // {tokens, heads, pairs}
  if (idx >= p.total) return;
  const int64_t i = idx % p.pairs_per_head;
  const int64_t th = idx / p.pairs_per_head;  // token * heads + head
  // freq_i = theta^(-i / half) = 2^(-i * log2(theta) / half)
  const float freq = exp2f(-float(i) * p.log2_theta_over_half);
  float s, c;
  sincosf(float(pos[th / p.heads]) * freq, &s, &c);
  float* h = x + th * p.head_dim;
  const int64_t a = kStyle == RopeStyle::kNeox ? i : 2 * i;
  const int64_t b = kStyle == RopeStyle::kNeox ? i + p.pairs_per_head : 2 * i + 1;
  const float x0 = h[a], x1 = h[b];
  h[a] = x0 * c - x1 * s;
  h[b] = x0 * s + x1 * c;
}

}  // namespace

void rope_f32(float* x, const RopeParams& p, cudaStream_t stream) {
  if (p.rot_dim <= 0 || p.rot_dim % 2 != 0 || p.rot_dim > p.head_dim)
    throw InputError("cuda rope: rot_dim " + std::to_string(p.rot_dim) + " must be even and in (0, head_dim " +
                     std::to_string(p.head_dim) + "]");
  const int64_t half = p.rot_dim / 2;
  const RopeLaunch l{p.tokens * p.heads * half, half, p.heads, p.head_dim, float(std::log2(double(p.theta)) / double(half))};
  if (l.total <= 0) return;
  const int threads = 256;
  const unsigned blocks = unsigned((l.total + threads - 1) / threads);
  if (p.style == RopeStyle::kNeox)
    rope_kernel<RopeStyle::kNeox><<<blocks, threads, 0, stream>>>(x, p.positions, l);
  else
    rope_kernel<RopeStyle::kInterleaved><<<blocks, threads, 0, stream>>>(x, p.positions, l);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
