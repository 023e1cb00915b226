// mHC kernels (CPU: backend/cpu/hyper_connections.cpp). The n x n Sinkhorn projection is a
// few hundred flops: one warp does it in the CPU's order, the block then streams hidden.
#include "backend/cuda/check.h"
#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/hc_device.cuh"

namespace ds4::cuda {
namespace {

using namespace hc_detail;

// One block per token: 1024 threads cover a 4096-wide hidden as float4 in one pass.
constexpr int kHcThreads = 1024;

// Rows (HcRows): block row blockIdx.y works on its token's buffers, all `stride` floats apart.
__global__ void __launch_bounds__(kHcThreads) hc_pre_kernel(const float* __restrict__ mix_raw, const float* __restrict__ scale,
                              const float* __restrict__ base, HcDims dims, const float* __restrict__ x,
                              const float* __restrict__ out_norm, float* __restrict__ collapsed,
                              float* __restrict__ post, float* __restrict__ comb, int64_t stride) {
  {
    const int64_t o = int64_t(blockIdx.y) * stride;
    mix_raw += o, x += o, collapsed += o, post += o, comb += o;
  }
  __shared__ float mix[(2 + kMaxHc) * kMaxHc], pre[kMaxHc], p_post[kMaxHc], p_comb[kMaxHc * kMaxHc];
  const int n = int(dims.n_hc);
  const bool vec = vec4_ok(x, dims.hidden) && vec4_ok(collapsed, dims.hidden);
  const int m_dim = (2 + n) * n;  // <= 288 < kHcThreads: one mix sum per thread
  // The mix sums before the norm's loads, so both are in flight together (same arithmetic).
  const float mix_sum = int(threadIdx.x) < m_dim ? sum_splits(mix_raw + threadIdx.x, dims.mix_splits, m_dim) : 0.f;
  const float r = flat_norm_factor(x, n * dims.hidden, dims.norm_eps, vec);
  if (int(threadIdx.x) < m_dim) mix[threadIdx.x] = mix_sum * r;
  __syncthreads();
  if (threadIdx.x < 32) {
    sinkhorn_split(mix, scale, base, n, dims.sinkhorn_iters, dims.hc_eps, pre, p_post, p_comb);
    if (int(threadIdx.x) < n) post[threadIdx.x] = p_post[threadIdx.x];
    for (int i = threadIdx.x; i < n * n; i += 32) comb[i] = p_comb[i];
  }
  __syncthreads();
  collapse(pre, n, dims.hidden, x, out_norm, dims.norm_eps, collapsed, vec);
}

__global__ void hc_post_kernel(int n, int64_t hidden, const float* __restrict__ b, const float* __restrict__ r,
                               const float* __restrict__ post, const float* __restrict__ comb,
                               float* __restrict__ out, int64_t stride) {
  {
    const int64_t o = int64_t(blockIdx.y) * stride;
    b += o, r += o, post += o, comb += o, out += o;
  }
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * hidden) return;
  out[i] = post_value(n, hidden, i / hidden, i % hidden, b, r, post, comb);
}

__global__ void __launch_bounds__(kHcThreads) hc_head_kernel(const float* __restrict__ mix_raw, const float* __restrict__ scale,
                               const float* __restrict__ base, HcDims dims, const float* __restrict__ x,
                               const float* __restrict__ out_norm, float* __restrict__ out, int64_t stride) {
  {
    const int64_t o = int64_t(blockIdx.y) * stride;
    mix_raw += o, x += o, out += o;
  }
  __shared__ float w[kMaxHc];
  const int n = int(dims.n_hc);
  const bool vec = vec4_ok(x, dims.hidden) && vec4_ok(out, dims.hidden);
  const float r = flat_norm_factor(x, n * dims.hidden, dims.norm_eps, vec);
  if (threadIdx.x < n) {
    const float v = sum_splits(mix_raw + threadIdx.x, dims.mix_splits, n);
    w[threadIdx.x] = sigm(v * r * scale[0] + base[threadIdx.x]) + dims.hc_eps;
  }
  __syncthreads();
  collapse(w, n, dims.hidden, x, out_norm, dims.norm_eps, out, vec);
}

__global__ void hc_expand_kernel(const float* __restrict__ x, int n, int64_t hidden, float* __restrict__ h,
                                 int64_t stride) {
  x += int64_t(blockIdx.y) * stride, h += int64_t(blockIdx.y) * stride;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n * hidden) h[i] = x[i % hidden];
}

unsigned blocks(int64_t n, int t) { return unsigned((n + t - 1) / t); }

}  // namespace

void check_dims(const HcDims& d) {
  if (d.n_hc < 1 || d.n_hc > kMaxHc)
    throw InputError("cuda hyper-connections: n_hc " + std::to_string(d.n_hc) + " outside [1, 16]");
  if (d.mix_splits < 1) throw InputError("cuda hyper-connections: mix_splits " + std::to_string(d.mix_splits));
}

void check_rows(const HcRows& rows) {
  if (rows.count < 1 || rows.count > 65535) throw InputError("cuda hyper-connections: rows " + std::to_string(rows.count));
}

void hc_pre_f32(const float* mix_raw, const float* scale, const float* base, const HcDims& d, const float* x,
                const float* out_norm, float* collapsed, float* post, float* comb, cudaStream_t s) {
  hc_pre_f32(mix_raw, scale, base, d, x, out_norm, collapsed, post, comb, HcRows{}, s);
}

void hc_pre_f32(const float* mix_raw, const float* scale, const float* base, const HcDims& d, const float* x,
                const float* out_norm, float* collapsed, float* post, float* comb, const HcRows& rows, cudaStream_t s) {
  check_dims(d);
  check_rows(rows);
  hc_pre_kernel<<<dim3(1, unsigned(rows.count)), kHcThreads, 0, s>>>(mix_raw, scale, base, d, x, out_norm, collapsed, post,
                                                              comb, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void hc_post_f32(const HcDims& d, const float* block_out, const float* residual, const float* post,
                 const float* comb, float* out, cudaStream_t s) {
  hc_post_f32(d, block_out, residual, post, comb, out, HcRows{}, s);
}

void hc_post_f32(const HcDims& d, const float* block_out, const float* residual, const float* post,
                 const float* comb, float* out, const HcRows& rows, cudaStream_t s) {
  check_dims(d);
  check_rows(rows);
  const dim3 grid(blocks(d.n_hc * d.hidden, 256), unsigned(rows.count));
  hc_post_kernel<<<grid, 256, 0, s>>>(int(d.n_hc), d.hidden, block_out, residual, post, comb, out, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void hc_head_f32(const float* mix_raw, const float* scale, const float* base, const HcDims& d, const float* x,
                 const float* out_norm, float* out, cudaStream_t s) {
  hc_head_f32(mix_raw, scale, base, d, x, out_norm, out, HcRows{}, s);
}

void hc_head_f32(const float* mix_raw, const float* scale, const float* base, const HcDims& d, const float* x,
                 const float* out_norm, float* out, const HcRows& rows, cudaStream_t s) {
  check_dims(d);
  check_rows(rows);
  hc_head_kernel<<<dim3(1, unsigned(rows.count)), kHcThreads, 0, s>>>(mix_raw, scale, base, d, x, out_norm, out, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void hc_expand_f32(const float* x, const HcDims& d, float* h, cudaStream_t s) {
  hc_expand_f32(x, d, h, HcRows{}, s);
}

void hc_expand_f32(const float* x, const HcDims& d, float* h, const HcRows& rows, cudaStream_t s) {
  check_dims(d);
  check_rows(rows);
  const dim3 grid(blocks(d.n_hc * d.hidden, 256), unsigned(rows.count));
  hc_expand_kernel<<<grid, 256, 0, s>>>(x, int(d.n_hc), d.hidden, h, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
