#pragma once
// ds4's activation quantizers (core/act_quant.h) as warp-level device functions on values a
// lane already holds: quantize_act's kernels (act_quantize.cu) and the kernels that quantize
// what they compute (DeepSeek's fused swiglu / rmsnorm + quantize, issue #23) run the same code,
// so they write the same bytes. The arithmetic notes are act_quantize.cu's.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

namespace ds4::cuda::act_quant_detail {

__device__ __forceinline__ int8_t round_to_i8(float v) {
  const int q = __float2int_rn(v);
  return int8_t(q > 127 ? 127 : q < -128 ? -128 : q);
}

__device__ __forceinline__ uint32_t pack4(int8_t a, int8_t b, int8_t c, int8_t d) {
  return uint32_t(uint8_t(a)) | uint32_t(uint8_t(b)) << 8 | uint32_t(uint8_t(c)) << 16 | uint32_t(uint8_t(d)) << 24;
}

// Q8_0 over a warp's tile of 128 values: lane l holds values 4l .. 4l + 3 in f (zeros where
// !live; 8 lanes per 32-value block, whole blocks live or not). Every lane of the warp calls
// it. A live lane writes its 4 bytes at q (the tile's bytes + 4l) and lane 8k block k's scale
// at d (the tile's first scale + l / 8).
__device__ __forceinline__ void q8_0_tile(float4 f, bool live, int lane, int8_t* q, float* d) {
  // fmaxf skips NaN as the CPU's `fabs(x) > amax` does; the max is the same in any order.
  float amax = fmaxf(fmaxf(fabsf(f.x), fabsf(f.y)), fmaxf(fabsf(f.z), fabsf(f.w)));
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float s = __fdiv_rn(amax, 127.0f);
  const float inv = s != 0.0f ? __fdiv_rn(1.0f, s) : 0.0f;
  if (!live) return;
  *reinterpret_cast<uint32_t*>(q + 4 * lane) =
      pack4(round_to_i8(__fmul_rn(f.x, inv)), round_to_i8(__fmul_rn(f.y, inv)), round_to_i8(__fmul_rn(f.z, inv)),
            round_to_i8(__fmul_rn(f.w, inv)));
  if (lane % 8 == 0) d[lane / 8] = s;
}

// (value, index) of the first largest |x|: the larger |value| wins, the lower index on ties.
__device__ __forceinline__ void take_first_max(float& val, int& idx, float v, int i) {
  const float av = fabsf(v), a = fabsf(val);
  if (av > a || (av == a && i < idx)) val = v, idx = i;
}

// The 16 bsums of a Q8_K block from each lane's 8 quants (lanes 4g .. 4g + 3 hold group g in
// qv[0..3] and group 8 + g in qv[4..7]).
__device__ __forceinline__ void q8_k_bsums(const int8_t (&qv)[8], int lane, int16_t* bs) {
  int s0 = qv[0] + qv[1] + qv[2] + qv[3], s1 = qv[4] + qv[5] + qv[6] + qv[7];
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) {
    s0 += __shfl_xor_sync(0xffffffffu, s0, o);
    s1 += __shfl_xor_sync(0xffffffffu, s1, o);
  }
  if (lane % 4 == 0) bs[lane / 4] = int16_t(s0), bs[8 + lane / 4] = int16_t(s1);
}

// Q8_K over one 256-value block held by a whole warp: lane l holds values 4l .. 4l + 3 in
// v[0..3] and 128 + 4l .. in v[4..7]. Writes the block's 256 bytes at q, its 16 bsums at bs
// and its scale at *d; with q_lo, the low plane of quantize_act_q8_k_planes too (its bytes at
// q_lo, bsums at bs_lo, scale at *d_lo).
__device__ __forceinline__ void q8_k_block(const float (&v)[8], int lane, int8_t* q, int16_t* bs, float* d,
                                           int8_t* q_lo = nullptr, int16_t* bs_lo = nullptr, float* d_lo = nullptr) {
  // The lane's first largest |x| in index order (strictly larger, from 0, as the CPU scans:
  // zeros and NaN are never taken), then the warp's.
  float best = 0.0f;
  int idx = INT_MAX;
#pragma unroll
  for (int j = 0; j < 8; ++j)
    if (fabsf(v[j]) > fabsf(best)) best = v[j], idx = (j < 4 ? 4 * lane : 128 + 4 * lane) + (j & 3);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    take_first_max(best, idx, ov, oi);
  }
  if (fabsf(best) == 0.0f) {  // all zeros (or NaN): d = 0, q = 0, bsums = 0 (both planes)
    *reinterpret_cast<uint32_t*>(q + 4 * lane) = 0;
    *reinterpret_cast<uint32_t*>(q + 128 + 4 * lane) = 0;
    if (q_lo) *reinterpret_cast<uint32_t*>(q_lo + 4 * lane) = 0, *reinterpret_cast<uint32_t*>(q_lo + 128 + 4 * lane) = 0;
    if (lane < 16) bs[lane] = 0;
    if (lane < 16 && bs_lo) bs_lo[lane] = 0;
    if (lane == 0) *d = 0.0f;
    if (lane == 0 && d_lo) *d_lo = 0.0f;
    return;
  }
  const float iscale = __fdiv_rn(-127.0f, best);
  int8_t qv[8], ql[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float s = __fmul_rn(iscale, v[j]);
    qv[j] = round_to_i8(s);
    ql[j] = round_to_i8(__fmul_rn(__fsub_rn(s, float(qv[j])), 128.0f));  // (the low plane: exact residual)
  }
  *reinterpret_cast<uint32_t*>(q + 4 * lane) = pack4(qv[0], qv[1], qv[2], qv[3]);
  *reinterpret_cast<uint32_t*>(q + 128 + 4 * lane) = pack4(qv[4], qv[5], qv[6], qv[7]);
  q8_k_bsums(qv, lane, bs);
  const float dh = __fdiv_rn(1.0f, iscale);
  if (lane == 0) *d = dh;
  if (q_lo) {
    *reinterpret_cast<uint32_t*>(q_lo + 4 * lane) = pack4(ql[0], ql[1], ql[2], ql[3]);
    *reinterpret_cast<uint32_t*>(q_lo + 128 + 4 * lane) = pack4(ql[4], ql[5], ql[6], ql[7]);
    q8_k_bsums(ql, lane, bs_lo);
    if (lane == 0) *d_lo = __fmul_rn(dh, 0.0078125f);  // d / 128, exact
  }
}

}  // namespace ds4::cuda::act_quant_detail
