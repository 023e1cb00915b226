// mla_attend for a tensor-core prefill chunk (issue #22). The chunk's MLA attention was 14 % of a
// 512-row GLM chunk as FP32 GEMMs over gathered rows (chunk_gemm.cu mla_attend_gemm: every
// token's selected latent rows copied out, ~4 MB per token; bench/results/session23-2026-12-06
// call 4). Here the selected rows are read in place into shared memory and the products run on
// tensor cores (mma.sync m16n8k8, TF32 operands rounded to nearest, FP32 accumulate), flash
// style: block (group of 16 heads, token) walks the token's selection in tiles of kKeys latent
// rows (cp.async; the rows are both the keys and the values):
//   S = Q L^T (warps w and w + 4: keys 8 (w % 4) .., the two halves of kv_lora, summed in the
//   softmax), times the scale; an online softmax per head in FP32 (running max, exp-sum);
//   O = O exp(m_old - m_new) + P L (warp w: the 8-column tiles w, w + 8, ... of kv_lora).
// o_lat = O / l. Only a tensor-core chunk of one state takes it (chunk.cu): decode steps, batches
// and exact chunks keep mla_attend bit for bit.
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/flash_f16.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "backend/cuda/mma_sync.cuh"
#include "core/error.h"
#include "models/glm5/cuda/kernels.h"

namespace ds4::glm5::cuda {
namespace {

using ds4::cuda::mma::a_frag_tf32;
using ds4::cuda::mma::cp_async16;
using ds4::cuda::mma::cp_commit;
using ds4::cuda::mma::cp_wait;
using ds4::cuda::mma::flash_pv;
using ds4::cuda::mma::mma_tf32;
using ds4::cuda::mma::tf32;

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kKeys = 32;                  // latent rows per tile: 4 n-tiles of S, each over two warps
constexpr int kNt = kMaxKvLora / 8 / kWarps;  // O's 8-column tiles per warp at most (8)
constexpr int kPStride = kKeys + 4;

// Row stride of Q and the tile: kv_lora + 4 puts the S phase's reads on distinct banks.
__host__ __device__ inline int64_t tile_ld(int64_t d) { return d + 4; }

size_t smem_bytes(const MlaShape& sh) {
  const int64_t ld = tile_ld(sh.kv_lora);
  return size_t(16 * ld + int64_t(kKeys) * ld + 2 * 16 * kPStride + 3 * 16) * sizeof(float);
}

__global__ void __launch_bounds__(kThreads) mla_attend_tc_kernel(const float* __restrict__ q_lat,
                                                                 const float* __restrict__ latent,
                                                                 const int32_t* __restrict__ sel_idx,
                                                                 const int32_t* __restrict__ sel_count, MlaShape sh,
                                                                 float* __restrict__ o_lat, int64_t rs) {
  extern __shared__ __align__(16) float smem[];
  const int64_t D = sh.kv_lora, ld = tile_ld(D);
  float* Qs = smem;                      // {16, ld}: the group's queries (TF32-rounded), heads past `heads` zero
  float* T = Qs + 16 * ld;               // {kKeys, ld}: the tile's latent rows
  float* Pa = T + int64_t(kKeys) * ld;   // {16, kPStride}: S over the first half of D, then the weights
  float* Pb = Pa + 16 * kPStride;        // {16, kPStride}: S over the second half
  float* m_s = Pb + 16 * kPStride;
  float* l_s = m_s + 16;
  float* corr_s = l_s + 16;
  const int64_t row = blockIdx.y, h0 = int64_t(blockIdx.x) * 16;
  q_lat += row * rs, sel_idx += row * rs, o_lat += row * rs;
  const int64_t n = sel_count[row * rs];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  for (int64_t i = threadIdx.x; i < 16 * D; i += kThreads) {
    const int64_t h = i / D, e = i % D;
    Qs[h * ld + e] = h0 + h < sh.heads ? __uint_as_float(tf32(q_lat[(h0 + h) * D + e])) : 0.f;
  }
  if (threadIdx.x < 16) m_s[threadIdx.x] = -INFINITY, l_s[threadIdx.x] = 0.f;
  const int64_t chunks = D / 4;
  auto load = [&](int64_t jb) {
    for (int64_t i = threadIdx.x; i < int64_t(kKeys) * chunks; i += kThreads) {
      const int64_t r = i / chunks, e = 4 * (i % chunks), j = jb + r;
      const bool ok = j < n;
      cp_async16(T + r * ld + e, ok ? latent + int64_t(sel_idx[j]) * D + e : latent, ok);
    }
    cp_commit();
  };
  float o[kNt][4];
#pragma unroll
  for (int i = 0; i < kNt; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  const int nts = int(D / 8);
  const int64_t half = D / 2;  // (D % 16 == 0: each half whole k-steps)
  if (n > 0) load(0);
  for (int64_t jb = 0; jb < n; jb += kKeys) {
    cp_wait<0>();
    __syncthreads();  // the tile (and at the first, Q and m / l) in place
    {                 // S: keys 8 (warp % 4) .., dims [half * (warp / 4), + half)
      const int nt = warp % 4, k_lo = int(half) * (warp / 4);
      float sc[4] = {0.f, 0.f, 0.f, 0.f};
      const float* kr = T + int64_t(8 * nt + g) * ld;
      for (int64_t k0 = k_lo; k0 < k_lo + half; k0 += 8) {
        uint32_t a[4];
        a_frag_tf32(Qs, ld, k0, g, t, a);
        mma_tf32(sc, a, tf32(kr[k0 + t]), tf32(kr[k0 + t + 4]));
      }
      float* P = warp < 4 ? Pa : Pb;
#pragma unroll
      for (int i = 0; i < 4; ++i) P[(g + (i < 2 ? 0 : 8)) * kPStride + 8 * nt + 2 * t + (i & 1)] = sc[i];
    }
    __syncthreads();  // both halves of S in place
    // the online softmax: warp w takes heads 2w, 2w + 1 (lane: key jb + lane)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = 2 * warp + hh;
      const float v = jb + lane < n ? (Pa[r * kPStride + lane] + Pb[r * kPStride + lane]) * sh.scale : -INFINITY;
      float mx = v;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_old = m_s[r], m_new = fmaxf(m_old, mx);  // (the tile's first key is visible: finite)
      const float p = expf(v - m_new);
      float sum = p;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      Pa[r * kPStride + lane] = __uint_as_float(tf32(p));
      __syncwarp();
      if (lane == 0) {
        const float corr = expf(m_old - m_new);  // m_old = -inf: 0
        corr_s[r] = corr;
        l_s[r] = l_s[r] * corr + sum;
        m_s[r] = m_new;
      }
    }
    __syncthreads();  // the weights and corr in place
    flash_pv<kNt, kWarps, kKeys>(o, Pa, kPStride, T, ld, corr_s, warp, nts, g, t);  // O = O corr + P L
    __syncthreads();  // every warp is done with the tile and the weights
    if (jb + kKeys < n) load(jb + kKeys);
  }
  // o_lat = O / l (an empty selection: zeros; the barrier publishes m / l when no tile ran)
  __syncthreads();
  const float i0 = l_s[g] > 0.f ? 1.f / l_s[g] : 0.f, i1 = l_s[g + 8] > 0.f ? 1.f / l_s[g + 8] : 0.f;
  ds4::cuda::mma::for_each_acc(o, warp, kWarps, nts, g, t, [&](int r, int col, float v) {
    const int64_t h = h0 + r;
    if (h < sh.heads) o_lat[h * D + col] = v * (r == g ? i0 : i1);
  });
}

// DS4_MLA_TC (0 or 1; unset = 1) or mla_attend_set_tc.
std::atomic<int> g_tc{-1};

// The FP16 form (more than 32 heads; the default since session 29, DS4_MLA_TC_F16=0 for the TF32 kernel above):
// a block per 64 heads of a token instead of 16, so each selected latent row is read once for all
// of GLM's 64 heads (the kernel above reads it 4 times, one tile at a time: 22 % of a 2048-row
// chunk, 16.4 ms per layer on the H100), through a double-buffered ring of 32-row tiles, with the
// products on FP16 tensor cores (backend/cuda/flash_f16.cuh). o_lat = O / l (an empty selection:
// zeros), as above.
namespace ff = ds4::cuda::flash_f16;
static_assert(ff::smem_bytes(kMaxKvLora) <= ff::kMaxSmem && kMaxKvLora / 64 <= 8,
              "the FP16 form takes every kv_lora mla_attend_tc_supports");

template <int NT>
__global__ void __launch_bounds__(ff::kThreads, 1) mla_attend_tc_f16_kernel(const float* __restrict__ q_lat,
                                                                           const float* __restrict__ latent,
                                                                           const int32_t* __restrict__ sel_idx,
                                                                           const int32_t* __restrict__ sel_count,
                                                                           MlaShape sh, float* __restrict__ o_lat,
                                                                           int64_t rs) {
  extern __shared__ float4 sm4[];
  const int64_t row = blockIdx.y;
  const int D = int(sh.kv_lora), h0 = int(blockIdx.x) * ff::kHeads;
  q_lat += row * rs, sel_idx += row * rs, o_lat += row * rs;
  const int n = int(sel_count[row * rs]);
  float acc[ff::kMt][NT][4];
  const ff::HeadStats st = ff::block<NT>(reinterpret_cast<unsigned char*>(sm4), q_lat + int64_t(h0) * D,
                                         int(sh.heads) - h0, D, n, sh.scale,
                                         [&](int j) { return latent + int64_t(sel_idx[j]) * D; }, acc);
  ff::for_each_pair<NT>(acc, D, [&](int hl, int col, float v0, float v1) {
    if (h0 + hl >= sh.heads) return;
    const float l = st.exp_sum[hl], inv = l > 0.f ? 1.f / l : 0.f;
    float* o = o_lat + int64_t(h0 + hl) * D + col;
    o[0] = v0 * inv, o[1] = v1 * inv;
  });
}

template <int NT>
void launch_f16(const float* q_lat, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* o_lat, cudaStream_t s, const Rows& rows) {
  const size_t smem = ff::smem_bytes(sh.kv_lora);
  ds4::cuda::opt_in_smem_once<mla_attend_tc_f16_kernel<NT>>(ff::smem_bytes(kMaxKvLora));
  const dim3 grid(unsigned((sh.heads + ff::kHeads - 1) / ff::kHeads), unsigned(rows.count));
  mla_attend_tc_f16_kernel<NT><<<grid, ff::kThreads, smem, s>>>(q_lat, latent, sel_idx, sel_count, sh, o_lat,
                                                               rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

// DS4_MLA_TC_F16 (0 or 1; unset = 1: session 29 measured a 2048-row chunk's MLA attend at 0.45x of the
// TF32 form's, prefill 2K +7.3 %, 8K +12 %) or mla_attend_set_tc_f16.
std::atomic<int> g_tc_f16{-1};
bool tc_f16_on() { return ds4::cuda::env_setting(g_tc_f16, "DS4_MLA_TC_F16", {0, 1}, "0 or 1", 1) == 1; }

// Whether a call takes the FP16 form: asked for, more than 32 heads (fewer fill a 64-head block
// less than half), and q rows 16-byte aligned (its float4 loads; the latent rows' cp.async needs
// the same of the TF32 kernel already).
bool takes_f16(const float* q_lat, const MlaShape& sh, const Rows& rows) {
  return tc_f16_on() && sh.heads > 32 && reinterpret_cast<uintptr_t>(q_lat) % 16 == 0 && rows.stride % 4 == 0;
}

}  // namespace

void mla_attend_set_tc(bool on) { g_tc.store(on ? 1 : 0, std::memory_order_relaxed); }
void mla_attend_set_tc_f16(bool on) { g_tc_f16.store(on ? 1 : 0, std::memory_order_relaxed); }
bool mla_attend_tc_f16() { return tc_f16_on(); }
bool mla_attend_tc_takes_f16(const float* q_lat, const MlaShape& sh, const Rows& rows) { return takes_f16(q_lat, sh, rows); }

bool mla_attend_tc_on() { return ds4::cuda::env_setting(g_tc, "DS4_MLA_TC", {0, 1}, "0 or 1", 1) == 1; }

bool mla_attend_tc_supports(const MlaShape& sh) {
  return sh.heads >= 1 && sh.kv_lora >= 16 && sh.kv_lora % 16 == 0 && sh.kv_lora <= kMaxKvLora &&
         smem_bytes(sh) <= size_t(227) * 1024;
}

void mla_attend_tc(const float* q_lat, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                   const MlaShape& sh, float* o_lat, cudaStream_t s, const Rows& rows) {
  if (!mla_attend_tc_supports(sh))
    throw InputError("glm5 cuda: mla_attend_tc takes kv_lora a multiple of 16 up to " + std::to_string(kMaxKvLora));
  if (rows.count < 1 || rows.count > 65535 || rows.seq.at)
    throw InputError("glm5 cuda: mla_attend_tc takes 1..65535 rows of one state");
  if (takes_f16(q_lat, sh, rows)) {
    const int64_t per_warp = (sh.kv_lora / 8 + ff::kWarps - 1) / ff::kWarps;  // value n-tiles per warp
    if (per_warp <= 2) return launch_f16<2>(q_lat, latent, sel_idx, sel_count, sh, o_lat, s, rows);
    if (per_warp <= 4) return launch_f16<4>(q_lat, latent, sel_idx, sel_count, sh, o_lat, s, rows);
    return launch_f16<8>(q_lat, latent, sel_idx, sel_count, sh, o_lat, s, rows);
  }
  const size_t smem = smem_bytes(sh);
  DS4_CUDA_CHECK(cudaFuncSetAttribute(mla_attend_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid(unsigned((sh.heads + 15) / 16), unsigned(rows.count));
  mla_attend_tc_kernel<<<grid, kThreads, smem, s>>>(q_lat, latent, sel_idx, sel_count, sh, o_lat, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::glm5::cuda
