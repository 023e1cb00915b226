// Gated delta rule decode kernels (see delta_rule.h).
#include "backend/cuda/check.h"
#include "backend/cuda/delta_rule.h"
#include "backend/cuda/delta_rule_column.cuh"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/seq_rows.cuh"
#include "core/error.h"

namespace ds4::cuda {
namespace {

// One warp per q/k head (2 * k_heads of them).
__global__ void qk_l2norm_kernel(float* __restrict__ qkv, DeltaRuleShape sh, int64_t stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  qkv += int64_t(blockIdx.y) * stride;  // token (rows variant)
  const int64_t head = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (head >= 2 * sh.k_heads) return;
  float* p = qkv + head * sh.k_dim;
  float ss = 0.f;
  for (int64_t i = lane; i < sh.k_dim; i += 32) ss += p[i] * p[i];
  ss = detail::warp_reduce(ss, detail::SumOp{});
  const float r = rsqrtf(ss + 1e-6f);  // FLA l2norm: eps on the sum
  const float qscale = head < sh.k_heads ? rsqrtf(float(sh.k_dim)) : 1.f;
  for (int64_t i = lane; i < sh.k_dim; i += 32) p[i] = (p[i] * r) * qscale;
}

// A decode batch (rows.seq): block row blockIdx.y is one sequence's single token on its own S.
// (Templates: the kernels' pointers are __restrict__-qualified.)
template <class Cp, class P>
__device__ __forceinline__ void seq_token(Cp& qkv, Cp& g, Cp& beta, P& S, P& o, DeltaRuleRows& rows) {
  if (!rows.seq.at) return;
  const int64_t t = blockIdx.y, off = t * rows.stride;
  S = detail::shifted(S, detail::seq_shift(rows.seq, t));
  qkv += off, g += off, beta += off, o += off;
  rows.count = 1;
}

// One block per value head; thread j owns column j of S {k_dim, v_dim}. Shared memory holds
// q, k and the per-row decay exp(g) {3, k_dim} of the current token; tokens run in order.
__global__ void delta_rule_kernel(const float* __restrict__ qkv, const float* __restrict__ g,
                                  const float* __restrict__ beta, float* __restrict__ S, float* __restrict__ o,
                                  DeltaRuleShape sh, DeltaRuleRows rows, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float qkd[];
  seq_token(qkv, g, beta, S, o, rows);
  const int64_t h = blockIdx.x, kd = sh.k_dim, vd = sh.v_dim, kh = h / (sh.v_heads / sh.k_heads);
  float* decay = qkd + 2 * kd;
  float* Sh = S + h * kd * vd;
  for (int64_t t = 0; t < rows.count; ++t) {
    const int64_t off = t * rows.stride;
    const float* q = qkv + off + kh * kd;
    const float* k = qkv + off + sh.k_heads * kd + kh * kd;
    const float* v = qkv + off + 2 * sh.k_heads * kd + h * vd;
    if (t > 0) __syncthreads();  // the previous token's q, k, decay are no longer read
    for (int64_t i = threadIdx.x; i < kd; i += blockDim.x) {
      qkd[i] = q[i];
      qkd[kd + i] = k[i];
      decay[i] = expf(sh.per_channel_gate ? g[off + h * kd + i] : g[off + h]);
    }
    __syncthreads();
    const float bt = beta[off + h];
    for (int64_t j = threadIdx.x; j < vd; j += blockDim.x) {
      float mem = 0.f;
      for (int64_t i = 0; i < kd; ++i) mem += (Sh[i * vd + j] * decay[i]) * qkd[kd + i];
      const float delta = (v[j] - mem) * bt;
      float acc = 0.f;
      for (int64_t i = 0; i < kd; ++i) {
        const float s = Sh[i * vd + j] * decay[i] + qkd[kd + i] * delta;
        Sh[i * vd + j] = s;
        acc += s * qkd[i];
      }
      o[off + h * vd + j] = acc;
      if (rows.states)
        for (int64_t i = 0; i < kd; ++i) rows.states[t * rows.state_stride + h * kd * vd + i * vd + j] = Sh[i * vd + j];
    }
  }
}

// delta_rule_kernel with a compile-time k_dim: each column of S lives in registers for all the
// launch's tokens (S is read and written once per launch, its loads all in flight together,
// instead of two dependent passes over global memory per token), split over P consecutive
// lanes (detail::delta_rule_column: thread = column tid / P, part tid % P; P = 4 cuts each
// token's two 128-long dependent FMA chains to 32, session 24). P = 1 is delta_rule_kernel's
// row order; P > 1 adds P partial sums (the CPU model within rounding). Over many tokens the
// next token's q, k, gate, beta and v are loaded into registers while the current one
// computes. PER: key channels fetched per thread (PER x blockDim.x >= KD).
template <int KD, int PER, int P>
__global__ void __launch_bounds__(P == 1 ? 256 : 512)
    delta_rule_reg_kernel(const float* __restrict__ qkv, const float* __restrict__ g, const float* __restrict__ beta,
                          float* __restrict__ S, float* __restrict__ o, DeltaRuleShape sh, DeltaRuleRows rows,
                          bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  using L = detail::ColumnLayout<KD, P>;
  extern __shared__ float4 qkd4[];
  float* qkd = reinterpret_cast<float*>(qkd4);  // L's {q, k, decay} of the current token
  seq_token(qkv, g, beta, S, o, rows);
  const int64_t h = blockIdx.x, vd = sh.v_dim, kh = h / (sh.v_heads / sh.k_heads);
  const int64_t j = threadIdx.x / P;
  const int p = int(threadIdx.x % P);
  const bool live = j < vd;
  float* Sh = S + h * KD * vd;
  float st[KD / P] = {};
  if (live) detail::load_column<KD, P>(st, Sh, vd, j, p);
  // Token t's inputs in registers: this thread's channels i = threadIdx.x + u * blockDim.x,
  // beta and v[j].
  float nq[PER], nk[PER], ng[PER], nb = 0.f, nv = 0.f;
  auto fetch = [&](int64_t t) {
    const int64_t off = t * rows.stride;
    const float* q = qkv + off + kh * KD;
    const float* k = qkv + off + sh.k_heads * KD + kh * KD;
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int64_t i = threadIdx.x + int64_t(u) * blockDim.x;
      if (i < KD) {
        nq[u] = q[i];
        nk[u] = k[i];
        ng[u] = sh.per_channel_gate ? g[off + h * KD + i] : g[off + h];
      }
    }
    nb = beta[off + h];
    if (live) nv = qkv[off + 2 * sh.k_heads * KD + h * vd + j];
  };
  if (rows.count > 0) fetch(0);
  for (int64_t t = 0; t < rows.count; ++t) {
    const int64_t off = t * rows.stride;
    if (t > 0) __syncthreads();  // the previous token's q, k, decay are no longer read
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int i = int(threadIdx.x) + u * int(blockDim.x);
      if (i < KD) {
        const int a = L::at(i);
        qkd[a] = nq[u];
        qkd[L::kVec + a] = nk[u];
        qkd[2 * L::kVec + a] = expf(ng[u]);
      }
    }
    const float bt = nb, vj = nv;
    __syncthreads();
    if (t + 1 < rows.count) fetch(t + 1);  // in flight while this token computes
    const float oj = detail::delta_rule_column<KD, P>(st, qkd, vj, bt, p);  // (every lane: the shuffles)
    if (!live) continue;
    if (p == 0) o[off + h * vd + j] = oj;
    if (rows.states) detail::store_column<KD, P>(st, rows.states + t * rows.state_stride + h * KD * vd, vd, j, p);
  }
  if (live) detail::store_column<KD, P>(st, Sh, vd, j, p);
}

// A prefill chunk (many tokens of one sequence, issue #22): delta_rule_reg_kernel's column
// arithmetic (the same delta_rule_column: bit for bit the same) with the inputs of
// kStagedTokens tokens staged in shared memory per barrier pair instead of per token. The
// columns of a head are independent (each its own delta), so a block takes kStagedThreads / P of
// them: grid (value head, column block). One block per head (16 warps) held a chunk's tokens on
// v_heads SMs (48 of 132 for Qwen) and issued 4 scalar shared loads per row and token: 1.22 ms
// per 1024-row launch, 20 % of a Qwen chunk (session 28's survey). Session 29 (H100, same call):
// Qwen 2K prefill 4293 -> 4634 tok/s, GLM (160 experts) 2888 -> 3023.
// Shared memory: kStagedTokens x ColumnLayout's {q, k, decay}, v {kStagedTokens, columns}, beta.
constexpr int kStagedTokens = 16;
constexpr int kStagedThreads = 128;

template <int KD, int P>
__host__ __device__ constexpr size_t staged_smem_bytes() {
  return size_t(kStagedTokens * (3 * detail::ColumnLayout<KD, P>::kVec + kStagedThreads / P + 1)) * sizeof(float);
}

template <int KD, int P>
__global__ void __launch_bounds__(kStagedThreads)
    delta_rule_staged_kernel(const float* __restrict__ qkv, const float* __restrict__ g, const float* __restrict__ beta,
                             float* __restrict__ S, float* __restrict__ o, DeltaRuleShape sh, DeltaRuleRows rows,
                             bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  using L = detail::ColumnLayout<KD, P>;
  constexpr int kCols = kStagedThreads / P;
  extern __shared__ float4 sm4[];
  float* qkd = reinterpret_cast<float*>(sm4);       // [kStagedTokens][3 * L::kVec]
  float* vs = qkd + kStagedTokens * 3 * L::kVec;    // [kStagedTokens][kCols]
  float* bs = vs + kStagedTokens * kCols;           // [kStagedTokens]
  const int64_t h = blockIdx.x, vd = sh.v_dim, kh = h / (sh.v_heads / sh.k_heads);
  const int64_t c0 = int64_t(blockIdx.y) * kCols, j = c0 + threadIdx.x / P;
  const int p = int(threadIdx.x % P);
  const bool live = j < vd;
  float* Sh = S + h * KD * vd;
  float st[KD / P] = {};
  if (live) detail::load_column<KD, P>(st, Sh, vd, j, p);
  for (int64_t t0 = 0; t0 < rows.count; t0 += kStagedTokens) {
    const int nt = int(rows.count - t0 < kStagedTokens ? rows.count - t0 : kStagedTokens);
    if (t0 > 0) __syncthreads();  // the previous tokens' inputs are no longer read
    for (int idx = threadIdx.x; idx < nt * KD; idx += kStagedThreads) {
      const int u = idx / KD, i = idx % KD, a = u * 3 * L::kVec + L::at(i);
      const int64_t off = (t0 + u) * rows.stride;
      qkd[a] = qkv[off + kh * KD + i];
      qkd[L::kVec + a] = qkv[off + sh.k_heads * KD + kh * KD + i];
      qkd[2 * L::kVec + a] = expf(sh.per_channel_gate ? g[off + h * KD + i] : g[off + h]);
    }
    for (int idx = threadIdx.x; idx < nt * kCols; idx += kStagedThreads) {
      const int u = idx / kCols, c = idx % kCols;
      vs[idx] = c0 + c < vd ? qkv[(t0 + u) * rows.stride + 2 * sh.k_heads * KD + h * vd + c0 + c] : 0.f;
    }
    if (threadIdx.x < nt) bs[threadIdx.x] = beta[(t0 + threadIdx.x) * rows.stride + h];
    __syncthreads();
#pragma unroll 1
    for (int u = 0; u < nt; ++u) {
      const int64_t t = t0 + u;
      const float oj = detail::delta_rule_column<KD, P>(st, qkd + u * 3 * L::kVec, vs[u * kCols + threadIdx.x / P], bs[u], p);
      if (!live) continue;
      if (p == 0) o[t * rows.stride + h * vd + j] = oj;
      if (rows.states) detail::store_column<KD, P>(st, rows.states + t * rows.state_stride + h * KD * vd, vd, j, p);
    }
  }
  if (live) detail::store_column<KD, P>(st, Sh, vd, j, p);
}

}  // namespace

void delta_rule_qk_l2norm_rows(float* qkv, const DeltaRuleShape& sh, const DeltaRuleRows& rows, cudaStream_t stream) {
  if (rows.count <= 0) return;
  const int64_t heads = 2 * sh.k_heads;
  ds4::cuda::gemv_detail::launch_small(qk_l2norm_kernel, dim3(unsigned((heads + 3) / 4), unsigned(rows.count)), 128, 0,
                                       stream, qkv, sh, rows.stride);
}

void delta_rule_rows(const float* qkv, const float* g, const float* beta, float* S, float* o, const DeltaRuleShape& sh,
                     const DeltaRuleRows& rows, cudaStream_t stream) {
  if (rows.count <= 0) return;
  if (rows.seq.at && rows.states) throw InputError("cuda delta_rule_rows: a decode batch's tokens keep no state records");
  const size_t smem = size_t(3 * sh.k_dim) * sizeof(float);
  const dim3 grid(unsigned(sh.v_heads), rows.seq.at ? unsigned(rows.count) : 1u);  // (value head, sequence)
  const bool staged = !rows.seq.at && rows.count > 2 * kStagedTokens;              // a prefill chunk
  // (value head, column block) for the staged kernel
  auto staged_grid = [&](int P) { return dim3(unsigned(sh.v_heads), unsigned((sh.v_dim + kStagedThreads / P - 1) / (kStagedThreads / P))); };
  if (sh.k_dim == 128 && sh.v_dim <= 128) {
    // GLM 5.x KDA and Qwen GDN (128 x 128 heads): 4 lanes per column, whole columns per warp
    constexpr int P = 4;
    const int threads = int(P * ((sh.v_dim + 7) / 8 * 8));
    const size_t reg_smem = size_t(3 * detail::ColumnLayout<128, P>::kVec) * sizeof(float);
    if (staged)
      ds4::cuda::gemv_detail::launch_small(delta_rule_staged_kernel<128, P>, dim3(staged_grid(P)), kStagedThreads,
                                           staged_smem_bytes<128, P>(), stream, qkv, g, beta, S, o, sh, rows);
    else if (threads >= 128)
      ds4::cuda::gemv_detail::launch_small(delta_rule_reg_kernel<128, 1, P>, dim3(grid), threads, reg_smem, stream, qkv,
                                           g, beta, S, o, sh, rows);
    else
      ds4::cuda::gemv_detail::launch_small(delta_rule_reg_kernel<128, 4, P>, dim3(grid), threads, reg_smem, stream, qkv,
                                           g, beta, S, o, sh, rows);
  } else if (sh.k_dim == 128 && sh.v_dim <= 256) {  // wider value heads: a lane per column
    const int threads = int((sh.v_dim + 31) / 32 * 32);
    const size_t reg_smem = size_t(3 * detail::ColumnLayout<128, 1>::kVec) * sizeof(float);
    if (staged)
      ds4::cuda::gemv_detail::launch_small(delta_rule_staged_kernel<128, 1>, dim3(staged_grid(1)), kStagedThreads,
                                           staged_smem_bytes<128, 1>(), stream, qkv, g, beta, S, o, sh, rows);
    else
      ds4::cuda::gemv_detail::launch_small(delta_rule_reg_kernel<128, 1, 1>, dim3(grid), threads, reg_smem, stream, qkv,
                                           g, beta, S, o, sh, rows);
  } else {
    const int threads = int(sh.v_dim < 256 ? (sh.v_dim + 31) / 32 * 32 : 256);
    ds4::cuda::gemv_detail::launch_small(delta_rule_kernel, dim3(grid), threads, smem, stream, qkv, g, beta, S, o, sh,
                                         rows);
  }
  DS4_CUDA_CHECK_LAUNCH();
}

void delta_rule_qk_l2norm(float* qkv, const DeltaRuleShape& sh, cudaStream_t stream) {
  delta_rule_qk_l2norm_rows(qkv, sh, DeltaRuleRows{}, stream);
}

void delta_rule_step(const float* qkv, const float* g, const float* beta, float* S, float* o,
                     const DeltaRuleShape& sh, cudaStream_t stream) {
  delta_rule_rows(qkv, g, beta, S, o, sh, DeltaRuleRows{}, stream);
}

}  // namespace ds4::cuda
