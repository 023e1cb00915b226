// Tensor-core attend() for wide prefill chunks (issue #22): the same key rows, sink softmax
// and split-K merge as attention.cu, with the two products on tensor cores (mma.sync
// m16n8k8, TF32 operands rounded to nearest, FP32 accumulate), flash-attention style.
// All heads share the one KV row (MQA), so a query row's heads are the M dimension: block
// (head group, key split, row) takes 16 * MT heads of one row (TcShape) over up to kTcSplit of
// that row's key rows, in tiles of KT rows (cp.async, double-buffered, gathered through the
// row's own ring slots / selected entries, so causality and the indexer's choice are exactly
// attend()'s): scores S = Q K^T, an online softmax in FP32 (running max and exp-sum per head),
// O = O * exp(m_old - m_new) + P V (K == V: the tile serves both products). Each block
// writes attend()'s partials (max, exp-sum, unnormalized output), and attend_merge adds the
// sink and rotates the rope tail back. Only tensor-core chunks take it (chunk.cu): decode,
// verify and exact chunks keep attend() bit for bit.
#include <cuda_runtime.h>

#include <atomic>
#include <cfloat>
#include <cstdint>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/flash_f16.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "backend/cuda/mma_sync.cuh"
#include "models/deepseek_v4/cuda/attend_rows.cuh"
#include "models/deepseek_v4/cuda/kernels.h"

namespace ds4::deepseek_v4::cuda {
namespace {

using detail::key_row;
using detail::to_row;
using detail::visible_rows;
using ds4::cuda::mma::cp_async16;
using ds4::cuda::mma::cp_commit;
using ds4::cuda::mma::cp_next_tile;
using ds4::cuda::mma::mma_tf32;
using ds4::cuda::mma::tf32;

constexpr int kTcWarps = 8;
constexpr int kTcThreads = 32 * kTcWarps;
constexpr int64_t kTcSplit = 512;   // key rows per block: the Flash's CSA rows (128 + 512) in 2 splits
constexpr int kMaxHd = 512;         // Q and two key tiles of 512 dims: 205 KB of shared memory (TF32; the FP16 form 214 KB)
static_assert(kTcSplit % kAttnChunk == 0, "the partial slots are sized for kAttnChunk-row chunks");

// A block's shape: MT m16 tiles of heads (16 * MT heads of one row; past the config's heads:
// masked) and KT key rows per tile, so that the scores are one 16x8 tile per warp. MT 4 (64
// heads, 16-key tiles) reads each key tile once for the Flash's 64 heads; MT 2 (32 heads,
// 32-key tiles) for up to 32 heads.
template <int MT>
struct TcShape {
  static constexpr int heads = 16 * MT, keys = 8 * kTcWarps / MT;
  static constexpr int p_stride = keys + 4;  // P rows: A fragments (g, t) on distinct banks
  static_assert(MT * (keys / 8) == kTcWarps, "the scores: one 16x8 tile per warp");
  static_assert(32 % keys == 0 && (heads / kTcWarps) % (32 / keys) == 0, "the softmax: lanes per head");
};

// Reductions over the `W` lanes of a head (aligned groups of W lanes).
template <int W>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <int W>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Row stride of Q and the key tiles: fragments (g, t) on distinct banks.
__host__ __device__ inline int64_t tc_ld(int64_t hd) { return hd + 8; }
template <int MT>
size_t tc_shared_bytes(int64_t hd) {
  using S = TcShape<MT>;
  const int64_t ld = tc_ld(hd);
  return size_t((S::heads + 2 * S::keys) * ld + S::heads * S::p_stride + S::heads) * 4 +
         size_t(kTcSplit) * sizeof(float*);
}

// NT: value n-tiles (8 columns) per warp, >= hd / 64; warp w takes n-tiles w, w + 8, ...
template <int MT, int NT>
__global__ void __launch_bounds__(kTcThreads, 1) attend_tc_kernel(AttendArgs a, const int32_t* __restrict__ pos,
                                                                  Rows rr) {
  using S = TcShape<MT>;
  constexpr int HB = S::heads, KT = S::keys, PS = S::p_stride;
  constexpr int HW = HB / kTcWarps, HP = 32 / KT;  // heads per warp in the softmax, per pass
  extern __shared__ float4 sm4[];
  const int64_t p = to_row(a, blockIdx.z, rr, pos), c = blockIdx.y;
  int64_t n_win;
  const int64_t rows = visible_rows(a, p, n_win), k0 = c * kTcSplit;
  if (k0 >= rows) return;  // the grid is sized for max_ctx
  const int hd = int(a.hd), ld = hd + 8, h0 = int(blockIdx.x) * HB, units = hd / 4, n_tiles = hd / 8;
  const int nk = int(rows - k0 < kTcSplit ? rows - k0 : kTcSplit), tiles = (nk + KT - 1) / KT;
  uint32_t* qs = reinterpret_cast<uint32_t*>(sm4);       // {HB, ld} TF32 bits
  float* ks = reinterpret_cast<float*>(qs + HB * ld);    // {2, KT, ld} FP32 (rounded when read)
  float* ps = ks + 2 * KT * ld;                          // {HB, PS}: scores, then TF32 probabilities
  float* alpha = ps + HB * PS;                           // {HB}: this tile's rescale of O
  const float** rp = reinterpret_cast<const float**>(alpha + HB);  // {kTcSplit}
  for (int r = threadIdx.x; r < nk; r += kTcThreads) rp[r] = key_row(a, k0 + r, n_win, p);
  for (int i = threadIdx.x; i < HB * units; i += kTcThreads) {
    const int h = i / units, u = i - h * units;
    const float4 v = h0 + h < a.heads ? reinterpret_cast<const float4*>(a.q + int64_t(h0 + h) * hd)[u]
                                      : make_float4(0.f, 0.f, 0.f, 0.f);
    uint32_t* d = qs + h * ld + 4 * u;
    d[0] = tf32(v.x), d[1] = tf32(v.y), d[2] = tf32(v.z), d[3] = tf32(v.w);
  }
  __syncthreads();
  auto load = [&](int j) {
    float* dst = ks + (j & 1) * KT * ld;
    for (int i = threadIdx.x; i < KT * units; i += kTcThreads) {
      const int r = i / units, u = i - r * units, kr = j * KT + r;
      const bool ok = kr < nk;
      cp_async16(dst + r * ld + 4 * u, ok ? rp[kr] + 4 * u : a.q, ok);
    }
    cp_commit();
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const float scale = 1.0f / sqrtf(float(hd));
  float m_h[HW / HP], l_h[HW / HP];  // pass i: head warp * HW + i * HP + lane / KT (same in its KT lanes)
#pragma unroll
  for (int i = 0; i < HW / HP; ++i) m_h[i] = -FLT_MAX, l_h[i] = 0.f;
  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][i][e] = 0.f;
  load(0);
  for (int j = 0; j < tiles; ++j) {
    cp_next_tile(j, tiles, load);
    __syncthreads();
    const float* kt = ks + (j & 1) * KT * ld;
    {  // scores: the warp's heads [16 mt, +16) x keys [8 nt, +8); four accumulators over the
       // features (k step 4i + s into sc[s]), so a chain of dependent MMAs is hd / 32 long
      const int mt = warp / (KT / 8), nt = warp % (KT / 8);
      float sc[4][4] = {};
      const uint32_t* qa = qs + (mt * 16 + g) * ld + t;
      const float* kb = kt + (nt * 8 + g) * ld + t;
      auto step = [&](float(&acc)[4], int k8) {
        const uint32_t af[4] = {qa[k8], qa[k8 + 8 * ld], qa[k8 + 4], qa[k8 + 8 * ld + 4]};
        mma_tf32(acc, af, tf32(kb[k8]), tf32(kb[k8 + 4]));
      };
      int kk = 0;
#pragma unroll 2
      for (; kk + 32 <= hd; kk += 32)
#pragma unroll
        for (int s = 0; s < 4; ++s) step(sc[s], kk + 8 * s);
      if (kk < hd) step(sc[0], kk), step(sc[1], kk + 8);  // hd % 32 == 16
      const int key = nt * 8 + 2 * t, kg = j * KT + key;
      float* pr = ps + (mt * 16 + g) * PS + key;
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = ((sc[0][e] + sc[1][e]) + (sc[2][e] + sc[3][e])) * scale;
      pr[0] = kg < nk ? v[0] : -FLT_MAX;
      pr[1] = kg + 1 < nk ? v[1] : -FLT_MAX;
      pr[8 * PS] = kg < nk ? v[2] : -FLT_MAX;
      pr[8 * PS + 1] = kg + 1 < nk ? v[3] : -FLT_MAX;
    }
    __syncthreads();
    // online softmax, KT lanes per head (a key each), HP heads per pass; the tile's first key is
    // always valid, so the new max is finite and masked keys weigh exactly 0
    const int kl = lane % KT;
#pragma unroll
    for (int i = 0; i < HW / HP; ++i) {
      const int h = warp * HW + i * HP + lane / KT;
      float* pr = ps + h * PS;
      const bool ok = j * KT + kl < nk;
      const float sc = ok ? pr[kl] : -FLT_MAX;
      const float mn = fmaxf(m_h[i], group_max<KT>(sc));
      const float e = ok ? expf(sc - mn) : 0.f;
      const float al = expf(m_h[i] - mn);
      l_h[i] = l_h[i] * al + group_sum<KT>(e);
      m_h[i] = mn;
      pr[kl] = __uint_as_float(tf32(e));
      if (kl == 0) alpha[h] = al;
    }
    __syncthreads();
    {  // values: O = O * alpha + P V over the warp's n-tiles
      float al[MT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) al[mt][0] = alpha[mt * 16 + g], al[mt][1] = alpha[mt * 16 + g + 8];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < NT; ++i)
          acc[mt][i][0] *= al[mt][0], acc[mt][i][1] *= al[mt][0], acc[mt][i][2] *= al[mt][1],
              acc[mt][i][3] *= al[mt][1];
#pragma unroll
      for (int kk = 0; kk < KT; kk += 8) {
        uint32_t af[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const float* pa = ps + (mt * 16 + g) * PS + kk + t;
          af[mt][0] = __float_as_uint(pa[0]), af[mt][1] = __float_as_uint(pa[8 * PS]);
          af[mt][2] = __float_as_uint(pa[4]), af[mt][3] = __float_as_uint(pa[8 * PS + 4]);
        }
        const float* vb = kt + (kk + t) * ld + g;
#pragma unroll
        for (int i = 0; i < NT; ++i) {
          const int nt = warp + kTcWarps * i;
          if (nt < n_tiles) {
            const uint32_t b0 = tf32(vb[nt * 8]), b1 = tf32(vb[4 * ld + nt * 8]);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) mma_tf32(acc[mt][i], af[mt], b0, b1);
          }
        }
      }
    }
    __syncthreads();  // the next iteration loads into this tile's buffer
  }
#pragma unroll
  for (int i = 0; i < HW / HP; ++i) {
    const int h = h0 + warp * HW + i * HP + lane / KT;
    if (lane % KT == 0 && h < a.heads) {
      float* ml = a.part_ml + (c * a.heads + h) * 2;
      ml[0] = m_h[i], ml[1] = l_h[i];
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      const int nt = warp + kTcWarps * i;
      if (nt >= n_tiles) continue;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int h = h0 + mt * 16 + g + 8 * half;
        if (h < a.heads)
          *reinterpret_cast<float2*>(a.part + (c * a.heads + h) * hd + nt * 8 + 2 * t) =
              make_float2(acc[mt][i][2 * half], acc[mt][i][2 * half + 1]);
      }
    }
}

template <int MT, int NT>
void launch_tc(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  const size_t shm = tc_shared_bytes<MT>(a.hd);
  DS4_CUDA_CHECK(cudaFuncSetAttribute(attend_tc_kernel<MT, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  constexpr int HB = TcShape<MT>::heads;
  const dim3 grid(unsigned((a.heads + HB - 1) / HB), unsigned((a.max_rows + kTcSplit - 1) / kTcSplit),
                  unsigned(rows.count));
  attend_tc_kernel<MT, NT><<<grid, kTcThreads, shm, s>>>(a, pos, rows);
  DS4_CUDA_CHECK_LAUNCH();
}

template <int MT>
void launch_tc_hd(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  const int64_t per_warp = (a.hd / 8 + kTcWarps - 1) / kTcWarps;
  if (per_warp <= 1)
    launch_tc<MT, 1>(a, pos, s, rows);
  else if (per_warp <= 2)
    launch_tc<MT, 2>(a, pos, s, rows);
  else if (per_warp <= 4)
    launch_tc<MT, 4>(a, pos, s, rows);
  else
    launch_tc<MT, 8>(a, pos, s, rows);
}

// The FP16 form (64 heads, heads > 32): the same blocks, key rows and partials, the products on
// FP16 tensor cores (backend/cuda/flash_f16.cuh says why and how).
namespace ff = ds4::cuda::flash_f16;
static_assert(ff::kThreads == kTcThreads, "one block shape");

constexpr size_t tc_f16_shared_bytes(int64_t hd) { return ff::smem_bytes(hd) + size_t(kTcSplit) * sizeof(float*); }
static_assert(tc_f16_shared_bytes(kMaxHd) <= ff::kMaxSmem && kMaxHd / 64 <= 8, "the FP16 form takes every supported head_dim");

template <int NT>
__global__ void __launch_bounds__(ff::kThreads, 1) attend_tc_f16_kernel(AttendArgs a, const int32_t* __restrict__ pos,
                                                                       Rows rr) {
  extern __shared__ float4 sm4[];
  const int64_t p = to_row(a, blockIdx.z, rr, pos), c = blockIdx.y;
  int64_t n_win;
  const int64_t rows = visible_rows(a, p, n_win), k0 = c * kTcSplit;
  if (k0 >= rows) return;  // the grid is sized for max_ctx
  const int hd = int(a.hd), h0 = int(blockIdx.x) * ff::kHeads;
  const int nk = int(rows - k0 < kTcSplit ? rows - k0 : kTcSplit);
  unsigned char* smem = reinterpret_cast<unsigned char*>(sm4);
  const float** rp = reinterpret_cast<const float**>(smem + ff::smem_bytes(hd));  // {kTcSplit}
  for (int r = threadIdx.x; r < nk; r += ff::kThreads) rp[r] = key_row(a, k0 + r, n_win, p);
  float acc[ff::kMt][NT][4];
  const ff::HeadStats st = ff::block<NT>(smem, a.q + int64_t(h0) * hd, int(a.heads) - h0, hd, nk,
                                         1.0f / sqrtf(float(hd)), [&](int j) { return rp[j]; }, acc);
  if (threadIdx.x < ff::kHeads && h0 + int(threadIdx.x) < a.heads) {
    float* ml = a.part_ml + (c * a.heads + h0 + threadIdx.x) * 2;
    ml[0] = st.max[threadIdx.x], ml[1] = st.exp_sum[threadIdx.x];
  }
  ff::for_each_pair<NT>(acc, hd, [&](int hl, int col, float v0, float v1) {
    const int h = h0 + hl;
    if (h < a.heads) *reinterpret_cast<float2*>(a.part + (c * a.heads + h) * hd + col) = make_float2(v0, v1);
  });
}

template <int NT>
void launch_tc_f16(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  const size_t shm = tc_f16_shared_bytes(a.hd);
  ds4::cuda::opt_in_smem_once<attend_tc_f16_kernel<NT>>(tc_f16_shared_bytes(kMaxHd));
  const dim3 grid(unsigned((a.heads + ff::kHeads - 1) / ff::kHeads), unsigned((a.max_rows + kTcSplit - 1) / kTcSplit),
                  unsigned(rows.count));
  attend_tc_f16_kernel<NT><<<grid, ff::kThreads, shm, s>>>(a, pos, rows);
  DS4_CUDA_CHECK_LAUNCH();
}

void launch_tc_f16_hd(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  const int64_t per_warp = (a.hd / 8 + kTcWarps - 1) / kTcWarps;
  if (per_warp <= 2)
    launch_tc_f16<2>(a, pos, s, rows);
  else if (per_warp <= 4)
    launch_tc_f16<4>(a, pos, s, rows);
  else
    launch_tc_f16<8>(a, pos, s, rows);
}

// DS4_ATTEND_TC_F16 (0 or 1; unset = 1: session 29 measured a 30-layer 2048-row chunk's attend at
// 0.60x of the TF32 form's, prefill 2K +7.6 %) or attend_tc_set_f16.
std::atomic<int> g_f16{-1};
bool f16_on() { return ds4::cuda::env_setting(g_f16, "DS4_ATTEND_TC_F16", {0, 1}, "0 or 1", 1) == 1; }

}  // namespace

void attend_tc_set_f16(bool on) { g_f16.store(on ? 1 : 0, std::memory_order_relaxed); }
bool attend_tc_f16() { return f16_on(); }

// head_dim: a multiple of 16 (the score loop takes k8 steps in pairs) and at most kMaxHd
// (Q and two key tiles in shared memory); anything else runs attend().
bool attend_tc_supported(const AttendArgs& a) { return a.hd >= 16 && a.hd % 16 == 0 && a.hd <= kMaxHd && a.heads > 0; }

void attend_tc(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  if (!attend_tc_supported(a)) return attend(a, pos, s, rows);
  if (a.heads > TcShape<2>::heads && f16_on())
    launch_tc_f16_hd(a, pos, s, rows);
  else if (a.heads > TcShape<2>::heads)
    launch_tc_hd<4>(a, pos, s, rows);
  else
    launch_tc_hd<2>(a, pos, s, rows);
  attend_merge(a, kTcSplit, pos, s, rows);
}

}  // namespace ds4::deepseek_v4::cuda
