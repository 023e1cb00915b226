#pragma once
// Manifold-constrained hyper-connections (mHC) for one decode token on the GPU: the CUDA
// form of backend/cpu/hyper_connections.h (DeepSeek V4 and GLM 5.x), same shapes and the
// same HcShape. The mix projection itself is the caller's: mix = fn(rmsnorm(x flat)) with
// rmsnorm_f32(weight nullptr, eps norm_eps) and gemv.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cpu/hyper_connections.h"

namespace ds4::cuda {

inline constexpr int64_t kMaxHcStreams = 16;

// mix {(2+n)*n} -> pre (kept internal), post_comb {n + n*n} = post {n} then comb {n, n}
// (hc_split_sinkhorn_f32), and collapsed {hidden} = sum_j pre[j] x[j] for x {n, hidden}.
// scale {3}, base {(2+n)*n} device pointers.
void hc_pre(const float* mix, const float* scale, const float* base, const cpu::HcShape& s, const float* x,
            float* collapsed, float* post_comb, cudaStream_t stream);

// x[k] = post[k] * block_out + sum_j comb[j, k] x[j], in place on x {n, hidden}.
void hc_post(const cpu::HcShape& s, const float* block_out, const float* post_comb, float* x, cudaStream_t stream);

// out {hidden} = mean over the n streams of x {n, hidden} (GLM 5.x final collapse).
void hc_mean(const float* x, int64_t n, int64_t hidden, float* out, cudaStream_t stream);

}  // namespace ds4::cuda
