// mHC kernels (CPU: backend/cpu/hyper_connections.cpp). The n x n Sinkhorn projection is a
// few hundred flops: one warp does it in the CPU's order, the block then streams hidden.
#include "backend/cuda/check.h"
#include "backend/cuda/hyper_connections.h"

namespace ds4::cuda {
namespace {

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

// Run by the first warp: lane r < n owns row r (softmax, row passes) and column r (column
// passes), so each sum keeps the CPU's order; phases are separated by __syncwarp.
__device__ void sinkhorn_split(const float* mix, const float* scale, const float* base, int n, int iters, float eps,
                               float* pre, float* post, float* comb) {
  const int lane = threadIdx.x;
  if (lane < n) {
    pre[lane] = sigm(mix[lane] * scale[0] + base[lane]) + eps;
    post[lane] = 2.f * sigm(mix[n + lane] * scale[1] + base[n + lane]);
    const float* cm = mix + 2 * n + lane * n;
    const float* cb = base + 2 * n + lane * n;
    float* row = comb + lane * n;  // softmax over the row, then + eps
    float mx = -INFINITY;
    for (int c = 0; c < n; ++c) {
      row[c] = cm[c] * scale[2] + cb[c];
      mx = fmaxf(mx, row[c]);
    }
    float sum = 0.f;
    for (int c = 0; c < n; ++c) sum += (row[c] = expf(row[c] - mx));
    for (int c = 0; c < n; ++c) row[c] = row[c] / sum + eps;
  }
  __syncwarp();
  for (int it = 0; it < (iters > 1 ? iters : 1); ++it) {  // the CPU always does one column pass
    if (it > 0) {  // rows (not on the first pass: columns come first)
      if (lane < n) {
        float sum = 0.f;
        for (int c = 0; c < n; ++c) sum += comb[lane * n + c];
        for (int c = 0; c < n; ++c) comb[lane * n + c] /= (sum + eps);
      }
      __syncwarp();
    }
    if (lane < n) {
      float sum = 0.f;
      for (int r = 0; r < n; ++r) sum += comb[r * n + lane];
      for (int r = 0; r < n; ++r) comb[r * n + lane] /= (sum + eps);
    }
    __syncwarp();
  }
}

__global__ void hc_pre_kernel(const float* __restrict__ mix, const float* __restrict__ scale,
                              const float* __restrict__ base, int n, int64_t hidden, int iters, float eps,
                              const float* __restrict__ x, float* __restrict__ collapsed, float* __restrict__ post,
                              float* __restrict__ comb) {
  __shared__ float pre[kMaxHc], p_post[kMaxHc], p_comb[kMaxHc * kMaxHc];
  if (threadIdx.x < 32) {
    sinkhorn_split(mix, scale, base, n, iters, eps, pre, p_post, p_comb);
    if (int(threadIdx.x) < n) post[threadIdx.x] = p_post[threadIdx.x];
    for (int i = threadIdx.x; i < n * n; i += 32) comb[i] = p_comb[i];
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < n; ++j) acc += pre[j] * x[j * hidden + d];
    collapsed[d] = acc;
  }
}

__global__ void hc_post_kernel(int n, int64_t hidden, const float* __restrict__ b, const float* __restrict__ r,
                               const float* __restrict__ post, const float* __restrict__ comb,
                               float* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * hidden) return;
  const int64_t k = i / hidden, d = i % hidden;
  float acc = post[k] * b[d];
  for (int j = 0; j < n; ++j) acc += comb[j * n + k] * r[j * hidden + d];
  out[i] = acc;
}

__global__ void hc_head_kernel(const float* __restrict__ mix, const float* __restrict__ scale,
                               const float* __restrict__ base, int n, int64_t hidden, float eps,
                               const float* __restrict__ x, float* __restrict__ out) {
  __shared__ float w[kMaxHc];
  if (threadIdx.x < n) w[threadIdx.x] = sigm(mix[threadIdx.x] * scale[0] + base[threadIdx.x]) + eps;
  __syncthreads();
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < n; ++j) acc += w[j] * x[j * hidden + d];
    out[d] = acc;
  }
}

__global__ void hc_expand_kernel(const float* __restrict__ x, int n, int64_t hidden, float* __restrict__ h) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n * hidden) h[i] = x[i % hidden];
}

void check_dims(const HcDims& d) {
  if (d.n_hc < 1 || d.n_hc > kMaxHc)
    throw InputError("cuda hyper-connections: n_hc " + std::to_string(d.n_hc) + " outside [1, 16]");
}
unsigned blocks(int64_t n, int t) { return unsigned((n + t - 1) / t); }

}  // namespace

void hc_pre_f32(const float* mix, const float* scale, const float* base, const HcDims& d, const float* x,
                float* collapsed, float* post, float* comb, cudaStream_t s) {
  check_dims(d);
  hc_pre_kernel<<<1, 256, 0, s>>>(mix, scale, base, int(d.n_hc), d.hidden, d.sinkhorn_iters, d.hc_eps, x, collapsed,
                                  post, comb);
  DS4_CUDA_CHECK_LAUNCH();
}

void hc_post_f32(const HcDims& d, const float* block_out, const float* residual, const float* post,
                 const float* comb, float* out, cudaStream_t s) {
  check_dims(d);
  hc_post_kernel<<<blocks(d.n_hc * d.hidden, 256), 256, 0, s>>>(int(d.n_hc), d.hidden, block_out, residual, post,
                                                                 comb, out);
  DS4_CUDA_CHECK_LAUNCH();
}

void hc_head_f32(const float* mix, const float* scale, const float* base, const HcDims& d, const float* x,
                 float* out, cudaStream_t s) {
  check_dims(d);
  hc_head_kernel<<<1, 256, 0, s>>>(mix, scale, base, int(d.n_hc), d.hidden, d.hc_eps, x, out);
  DS4_CUDA_CHECK_LAUNCH();
}

void hc_expand_f32(const float* x, const HcDims& d, float* h, cudaStream_t s) {
  check_dims(d);
  hc_expand_kernel<<<blocks(d.n_hc * d.hidden, 256), 256, 0, s>>>(x, int(d.n_hc), d.hidden, h);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
