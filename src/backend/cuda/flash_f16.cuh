#pragma once
// One block's flash attention on FP16 tensor cores, shared by the prefill chunks' attention
// kernels whose heads all read one KV row per key, which is both key and value (DeepSeek V4's
// attend_tc FP16 form: MQA over window / compressed rows; GLM's mla_attend_tc FP16 form: MLA over
// the selected latent rows). 64 query heads of one row (4 m16 tiles; heads past `heads` are zero)
// against nk key rows of hd FP32 values, gathered by key_row(j) into a double-buffered shared
// ring (cp.async, 32-key tiles). Products: mma.sync m16n8k16 on FP16 operands (the same 10-bit
// mantissa as TF32, rounded to nearest even; FP16's range: values past 65504 would become inf),
// FP32 accumulate. Why FP16 rather than TF32: a TF32 block rereads Q from shared memory for every
// key tile, ~24 KB of reads per key at hd 512 (ncu, H100: tensor pipe 9.9 %); here Q is FP16 (A
// fragments by ldmatrix), a tile's A fragment serves two 8-key n-tiles, and the key tile stays FP32
// with its B fragments rounded as they are read: ~12 KB per key.
//   S = Q K^T * scale (warp w: heads 16 (w / 2) .., keys 16 (w % 2) ..), an online softmax per
//   head in FP32 (running max and exp-sum; a lane per key), O = O exp(m_old - m_new) + P V
//   (P in FP16; warp w: value n-tiles w, w + 8, ...).
// The caller launches kThreads threads with smem_bytes(hd) (+ its own) of dynamic shared memory
// and writes the outputs from acc (row 16 mt + g (+ 8), columns 8 nt + 2t, + 1: the C fragment of
// n-tile warp + 8 i) and the per-head max / exp-sum the block leaves in shared memory.
// (Known and still open after session 29's measurement: the V reads and the score stores meet 2-way
// bank conflicts at hd = 512.)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/mma_sync.cuh"

namespace ds4::cuda::flash_f16 {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kHeads = 64, kMt = kHeads / 16, kKeys = 32;
constexpr int kPStride = kKeys + 8;  // halves: 80-byte rows, ldmatrix rows on distinct banks
constexpr int kSStride = kKeys + 4;  // floats: the scores
constexpr int kHeadsPerWarp = kHeads / kWarps;  // in the softmax (a head's 32 keys: one per lane)

// Row strides: Q in halves (rows 16 bytes apart mod 128: ldmatrix conflict-free), the key tile in floats.
__host__ __device__ constexpr int q_ld(int hd) { return hd + 8; }
__host__ __device__ constexpr int k_ld(int hd) { return hd + 8; }

// Q {64, q_ld} halves, the key ring {2, 32, k_ld} floats, P {64, kPStride} halves, the scores
// {64, kSStride} floats, the tile's rescale {64}, the final max and exp-sum {64} each. hd = 512:
// 214,784 bytes. Every part starts 16-byte aligned (hd a multiple of 16).
__host__ __device__ constexpr size_t smem_bytes(int64_t hd) {
  return size_t(kHeads * q_ld(int(hd))) * 2 + size_t(2 * kKeys * k_ld(int(hd))) * 4 + size_t(kHeads * kPStride) * 2 +
         size_t(kHeads * kSStride) * 4 + size_t(3 * kHeads) * 4;
}

// The per-head results the block leaves in shared memory (after its last barrier).
struct HeadStats {
  const float* max;      // {64}: the running max of scale * q.k (-FLT_MAX where no key)
  const float* exp_sum;  // {64}: sum of exp(score - max) (0 where no key)
};

// Shared memory a block may take (H100 / H200: 227 KB).
constexpr size_t kMaxSmem = 232448;

// The whole block calls it. q: the 64 heads' rows {heads (< 64: the rest zero), hd} in global
// memory (also the dummy source of the masked copies); hd a multiple of 16 with NT >= hd / 64;
// key_row(j) for j < nk: a 16-byte aligned global row of hd floats. acc: the unnormalized
// output. Shared memory from `smem` on (smem_bytes(hd)); the caller's own shared data may lie
// past it, written before the call (the first barrier here publishes it).
template <int NT, class KeyRow>
__device__ HeadStats block(unsigned char* smem, const float* __restrict__ q, int heads, int hd, int nk, float scale,
                           KeyRow key_row, float (&acc)[kMt][NT][4]) {
  using ds4::cuda::mma::cp_async16;
  using ds4::cuda::mma::cp_commit;
  using ds4::cuda::mma::cp_next_tile;
  using ds4::cuda::mma::half2_bits;
  using ds4::cuda::mma::ldmatrix_x4;
  using ds4::cuda::mma::mma_f16;
  constexpr int KT = kKeys, PS = kPStride, SS = kSStride, HW = kHeadsPerWarp;
  const int qld = q_ld(hd), ld = k_ld(hd), units = hd / 4, n_tiles = hd / 8, tiles = (nk + KT - 1) / KT;
  __half* qs = reinterpret_cast<__half*>(smem);              // {64, qld}
  float* ks = reinterpret_cast<float*>(qs + kHeads * qld);    // {2, KT, ld}
  __half* ph = reinterpret_cast<__half*>(ks + 2 * KT * ld);  // {64, PS}: the probabilities
  float* ss = reinterpret_cast<float*>(ph + kHeads * PS);     // {64, SS}: the scores
  float* alpha = ss + kHeads * SS;                            // {64}: this tile's rescale of O
  float* m_s = alpha + kHeads;                                // {64}
  float* l_s = m_s + kHeads;                                  // {64}
  for (int i = threadIdx.x; i < kHeads * units; i += kThreads) {
    const int h = i / units, u = i - h * units;
    const float4 v = h < heads ? reinterpret_cast<const float4*>(q + int64_t(h) * hd)[u] : make_float4(0.f, 0.f, 0.f, 0.f);
    uint32_t* d = reinterpret_cast<uint32_t*>(qs + h * qld + 4 * u);
    d[0] = half2_bits(v.x, v.y), d[1] = half2_bits(v.z, v.w);
  }
  __syncthreads();
  auto load = [&](int j) {
    float* dst = ks + (j & 1) * KT * ld;
    for (int i = threadIdx.x; i < KT * units; i += kThreads) {
      const int r = i / units, u = i - r * units, kr = j * KT + r;
      const bool ok = kr < nk;
      cp_async16(dst + r * ld + 4 * u, ok ? key_row(kr) + 4 * u : q, ok);
    }
    cp_commit();
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  float m_h[HW], l_h[HW];  // head warp * HW + i (the same in every lane)
#pragma unroll
  for (int i = 0; i < HW; ++i) m_h[i] = -FLT_MAX, l_h[i] = 0.f;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][i][e] = 0.f;
  if (tiles > 0) load(0);
  for (int j = 0; j < tiles; ++j) {
    cp_next_tile(j, tiles, load);
    __syncthreads();
    const float* kt = ks + (j & 1) * KT * ld;
    {  // scores: the warp's heads [16 mt, +16) x keys [8 nb, +16) (two n-tiles on one A fragment);
       // two accumulators per n-tile over alternate k steps (chains of hd / 32 MMAs)
      const int mt = warp >> 1, nb = 2 * (warp & 1);
      float sc[2][2][4] = {};
      const __half* qa = qs + (mt * 16 + (lane & 15)) * qld + 8 * (lane >> 4);
      const float* kb[2] = {kt + (nb * 8 + g) * ld + 2 * t, kt + (nb * 8 + 8 + g) * ld + 2 * t};
      auto step = [&](int s, int k16) {
        uint32_t af[4];
        ldmatrix_x4(af, qa + k16);
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const float2 lo = *reinterpret_cast<const float2*>(kb[n] + k16);
          const float2 hi = *reinterpret_cast<const float2*>(kb[n] + k16 + 8);
          mma_f16(sc[n][s], af, half2_bits(lo.x, lo.y), half2_bits(hi.x, hi.y));
        }
      };
      int kk = 0;
#pragma unroll 2
      for (; kk + 32 <= hd; kk += 32) step(0, kk), step(1, kk + 16);
      if (kk < hd) step(0, kk);  // hd % 32 == 16
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int key = (nb + n) * 8 + 2 * t, kg = j * KT + key;
        float* pr = ss + (mt * 16 + g) * SS + key;
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = (sc[n][0][e] + sc[n][1][e]) * scale;
        pr[0] = kg < nk ? v[0] : -FLT_MAX;
        pr[1] = kg + 1 < nk ? v[1] : -FLT_MAX;
        pr[8 * SS] = kg < nk ? v[2] : -FLT_MAX;
        pr[8 * SS + 1] = kg + 1 < nk ? v[3] : -FLT_MAX;
      }
    }
    __syncthreads();
    // online softmax, a lane per key, one head per pass; the tile's first key is always valid, so
    // the new max is finite and masked keys weigh exactly 0
    const bool ok = j * KT + lane < nk;
#pragma unroll
    for (int i = 0; i < HW; ++i) {
      const int h = warp * HW + i;
      const float sc = ok ? ss[h * SS + lane] : -FLT_MAX;
      float mx = sc;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float mn = fmaxf(m_h[i], mx);
      const float e = ok ? expf(sc - mn) : 0.f;
      float sum = e;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      const float al = expf(m_h[i] - mn);
      l_h[i] = l_h[i] * al + sum;
      m_h[i] = mn;
      ph[h * PS + lane] = __float2half_rn(e);
      if (lane == 0) alpha[h] = al;
    }
    __syncthreads();
    {  // values: O = O * alpha + P V over the warp's n-tiles (V = the key tile, B rounded to FP16)
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const float a0 = alpha[mt * 16 + g], a1 = alpha[mt * 16 + g + 8];
#pragma unroll
        for (int i = 0; i < NT; ++i) acc[mt][i][0] *= a0, acc[mt][i][1] *= a0, acc[mt][i][2] *= a1, acc[mt][i][3] *= a1;
      }
#pragma unroll
      for (int kk = 0; kk < KT; kk += 16) {
        uint32_t af[kMt][4];
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) ldmatrix_x4(af[mt], ph + (mt * 16 + (lane & 15)) * PS + kk + 8 * (lane >> 4));
        const float* vb = kt + (kk + 2 * t) * ld + g;
#pragma unroll
        for (int i = 0; i < NT; ++i) {
          const int nt = warp + kWarps * i;
          if (nt < n_tiles) {
            const float* v = vb + nt * 8;
            const uint32_t b0 = half2_bits(v[0], v[ld]), b1 = half2_bits(v[8 * ld], v[9 * ld]);
#pragma unroll
            for (int mt = 0; mt < kMt; ++mt) mma_f16(acc[mt][i], af[mt], b0, b1);
          }
        }
      }
    }
    __syncthreads();  // the next iteration loads into this tile's buffer
  }
  if (lane == 0)
#pragma unroll
    for (int i = 0; i < HW; ++i) m_s[warp * HW + i] = m_h[i], l_s[warp * HW + i] = l_h[i];
  __syncthreads();
  return HeadStats{m_s, l_s};
}

// Calls out(head, col, v0, v1) for each pair of output values this thread holds in acc: head
// < 64 the block's head row, col the first of the two value columns (even, < hd).
template <int NT, class Out>
__device__ __forceinline__ void for_each_pair(const float (&acc)[kMt][NT][4], int hd, Out out) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane >> 2, t = lane & 3, n_tiles = hd / 8;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      const int nt = warp + kWarps * i;
      if (nt >= n_tiles) continue;
#pragma unroll
      for (int half = 0; half < 2; ++half)
        out(mt * 16 + g + 8 * half, nt * 8 + 2 * t, acc[mt][i][2 * half], acc[mt][i][2 * half + 1]);
    }
}

}  // namespace ds4::cuda::flash_f16
