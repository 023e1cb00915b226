// mHC decode kernels (see hyper_connections.h; CPU: backend/cpu/hyper_connections.cpp).
#include "backend/cuda/check.h"
#include "backend/cuda/hyper_connections.h"

namespace ds4::cuda {
namespace {

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

// The split of hc_split_sinkhorn_f32 by one thread (n <= kMaxHcStreams; a few hundred flops):
// pre {n}, post {n}, comb {n, n}, in the CPU's operation order.
__device__ void split_sinkhorn(const float* mix, const float* scale, const float* base, int n, int iters, float eps,
                               float* pre, float* post, float* comb) {
  for (int i = 0; i < n; ++i) {
    pre[i] = sigm(mix[i] * scale[0] + base[i]) + eps;
    post[i] = 2.0f * sigm(mix[n + i] * scale[1] + base[n + i]);
  }
  const float* cm = mix + 2 * n;
  const float* cb = base + 2 * n;
  for (int r = 0; r < n; ++r) {
    float* row = comb + r * n;
    float mx = -INFINITY;
    for (int c = 0; c < n; ++c) {
      row[c] = cm[r * n + c] * scale[2] + cb[r * n + c];
      mx = fmaxf(mx, row[c]);
    }
    float sum = 0;
    for (int c = 0; c < n; ++c) sum += (row[c] = expf(row[c] - mx));
    for (int c = 0; c < n; ++c) row[c] = row[c] / sum + eps;
  }
  for (int it = 0; it < (iters < 1 ? 1 : iters); ++it) {
    if (it > 0)  // column pass first, then (iters - 1) x (rows, columns)
      for (int r = 0; r < n; ++r) {
        float sum = 0;
        for (int c = 0; c < n; ++c) sum += comb[r * n + c];
        for (int c = 0; c < n; ++c) comb[r * n + c] /= (sum + eps);
      }
    for (int c = 0; c < n; ++c) {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += comb[r * n + c];
      for (int r = 0; r < n; ++r) comb[r * n + c] /= (sum + eps);
    }
  }
}

// Every block splits (cheap) into shared memory; block 0 publishes post and comb; each
// thread collapses one hidden column.
__global__ void hc_pre_kernel(const float* __restrict__ mix, const float* __restrict__ scale,
                              const float* __restrict__ base, int n, int iters, float eps, const float* __restrict__ x,
                              int64_t hidden, float* __restrict__ collapsed, float* __restrict__ post_comb) {
  __shared__ float pre[kMaxHcStreams], pc[kMaxHcStreams + kMaxHcStreams * kMaxHcStreams];
  if (threadIdx.x == 0) split_sinkhorn(mix, scale, base, n, iters, eps, pre, pc, pc + n);
  __syncthreads();
  if (blockIdx.x == 0)
    for (int i = threadIdx.x; i < n + n * n; i += blockDim.x) post_comb[i] = pc[i];
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= hidden) return;
  float acc = 0.f;
  for (int j = 0; j < n; ++j) acc += pre[j] * x[j * hidden + d];
  collapsed[d] = acc;
}

__global__ void hc_post_kernel(const float* __restrict__ b, const float* __restrict__ post_comb, int n, int64_t hidden,
                               float* __restrict__ x) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= hidden) return;
  float r[kMaxHcStreams];
  for (int j = 0; j < n; ++j) r[j] = x[j * hidden + d];
  const float* comb = post_comb + n;
  for (int k = 0; k < n; ++k) {
    float o = post_comb[k] * b[d];
    for (int j = 0; j < n; ++j) o += comb[j * n + k] * r[j];
    x[k * hidden + d] = o;
  }
}

__global__ void hc_mean_kernel(const float* __restrict__ x, int n, int64_t hidden, float* __restrict__ out) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= hidden) return;
  float acc = 0.f;
  for (int s = 0; s < n; ++s) acc += x[s * hidden + d];
  out[d] = acc / float(n);
}

void check_streams(int64_t n) {
  if (n < 1 || n > kMaxHcStreams)
    throw InputError("cuda hyper-connections: n_hc " + std::to_string(n) + " outside [1, " +
                     std::to_string(kMaxHcStreams) + "]");
}

unsigned blocks(int64_t hidden) { return unsigned((hidden + 255) / 256); }

}  // namespace

void hc_pre(const float* mix, const float* scale, const float* base, const cpu::HcShape& s, const float* x,
            float* collapsed, float* post_comb, cudaStream_t stream) {
  check_streams(s.n_hc);
  hc_pre_kernel<<<blocks(s.hidden), 256, 0, stream>>>(mix, scale, base, int(s.n_hc), s.sinkhorn_iters, s.hc_eps, x,
                                                      s.hidden, collapsed, post_comb);
  DS4_CUDA_CHECK_LAUNCH();
}

void hc_post(const cpu::HcShape& s, const float* block_out, const float* post_comb, float* x, cudaStream_t stream) {
  check_streams(s.n_hc);
  hc_post_kernel<<<blocks(s.hidden), 256, 0, stream>>>(block_out, post_comb, int(s.n_hc), s.hidden, x);
  DS4_CUDA_CHECK_LAUNCH();
}

void hc_mean(const float* x, int64_t n, int64_t hidden, float* out, cudaStream_t stream) {
  check_streams(n);
  hc_mean_kernel<<<blocks(hidden), 256, 0, stream>>>(x, int(n), hidden, out);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
