#pragma once
// Internal to gemv.cu: one decoder per weight format. Each decodes a "unit" of 32
// consecutive weights of one row and dots it with the matching 32 values of x.
//
// A decoder has:
//   Raw                          the unit's bytes in registers
//   kRows                        rows per thread block (x is loaded once per unit and
//                                reused for kRows rows: fewer bits per weight -> more rows,
//                                so the x reads from L1 stay below the weight stream)
//   load<L>(args, row_bytes, row, unit)
//                                only loads (so the kRows loads are all in flight together);
//                                L reads global memory (FromGlobal) or a staged copy of the
//                                row's bytes in shared memory (FromShared, see gemv.cu)
//   dot(raw, unit, xv, shared)   decodes and returns sum_k w[k] * xv[k]
//   dot2(...)                    (optional) the same sum with the kernel-2 decode: quantized
//                                fields become floats exactly through the float mantissa
//                                (bits 0x4B000000 | f = 2^23 + f for f < 2^23, then one FADD)
//                                or as subnormal floats (kXShift: x comes scaled, x_for_dot;
//                                see kSubXShift) instead of the quarter-rate int->float
//                                conversion, fields taken in place (so a field at bit 8 is worth
//                                256x: separate partial sums per bit position, scaled by exact
//                                powers of two)
//   decode(raw, unit, w, shared) the unit's 32 weights as floats (dequant_bf16.cu: the
//                                tensor-core path dequantizes a tile, then multiplies;
//                                grouped_mma_bf16.cu), the fields made floats through the
//                                mantissa as in dot2 (the same values as int->float
//                                conversions, without the quarter-rate instruction: the
//                                grouped expert MMA is bound by this decode)
//   E, expand(raw, unit, shared), dot_e(e, xv), kExpandGen
//                                (optional) dot_v of generation kExpandGen (0: every generation)
//                                split in two: expand is everything that does not touch x (the
//                                unit's weights as the exact floats the sum multiplies, and its
//                                scales), dot_e the FMAs in the same order and the epilogue. The
//                                format's dot / dot2 is their composition, so gemv_rows can
//                                expand a unit once and dot it with each input row (instead of
//                                decoding it per row) and still equal gemv bit for bit.
//   kSpanBlocks                  blocks a warp stages at once (0: the format is read directly:
//                                its units are already 16-byte loads); kSpanBlocks * kBlockBytes
//                                is a multiple of 16
// Layouts follow ggml (Q8_0, Q4_K, Q2_K, IQ2_XXS) and MLX affine quantization.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace ds4::cuda::gemv_detail {

constexpr int kUnit = 32;

struct Args {
  const uint8_t* data;     // row-major rows of `row_stride` bytes
  int64_t row_stride;
  const void* scales;      // MLX: {rows, groups} F16/BF16
  const void* biases;      // MLX: {rows, groups}
  int64_t groups_per_row;  // MLX
  int group_shift;         // MLX: log2(group size)
  int64_t rows;
  int64_t cols;
  // Batched launch (gridDim.y entries, see GemvBatch in gemv.h): entry b reads expert
  // ids[b] (b when ids is null) at data + e * id_stride, x + b * x_stride, y + b * y_stride.
  const int32_t* ids;
  int64_t id_stride, id_scale_stride, x_stride, y_stride;
};

__device__ __forceinline__ float f16_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }
__device__ __forceinline__ uint32_t byte_of(uint32_t w, int k) { return (w >> (8 * k)) & 0xffu; }

// Weights are read once and never written during a launch: the read-only data path.
struct FromGlobal {
  __device__ static uint8_t u8(const uint8_t* p) { return __ldg(p); }
  __device__ static uint16_t u16(const uint8_t* p) { return __ldg(reinterpret_cast<const unsigned short*>(p)); }
  __device__ static uint32_t u32(const uint8_t* p) { return __ldg(reinterpret_cast<const unsigned int*>(p)); }
  __device__ static uint4 u4(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
};
// A warp's staged copy in shared memory (plain loads; __ldg is for global memory only).
struct FromShared {
  __device__ static uint8_t u8(const uint8_t* p) { return *p; }
  __device__ static uint16_t u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
  __device__ static uint32_t u32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
  __device__ static uint4 u4(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }
};
// 2^23 + f as a float for a field f < 2^23 already in place (no shift); minus 2^23 (+ bias) is exact.
__device__ __forceinline__ float mant(uint32_t f) { return __uint_as_float(0x4B000000u | f); }
constexpr float kMant = 8388608.f;  // 2^23
// mant() of byte k of w moved to bit 0: one byte permute (PRMT) that also brings in the exponent
// (bytes 1-3 from 0x4B000000), instead of a shift, an AND and an OR.
__device__ __forceinline__ float mant_byte(uint32_t w, int k) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540u | uint32_t(k)));
}
// 2^-s for 0 <= s < 127, exactly.
__device__ __forceinline__ float pow2_neg(int s) { return __uint_as_float(uint32_t(127 - s) << 23); }
// 2^s for 0 <= s < 128, exactly, as a compile-time constant.
template <int s>
__host__ __device__ constexpr float pow2_pos() {
  static_assert(s >= 0 && s < 128);
  float v = 1.f;
  for (int i = 0; i < s; ++i) v *= 2.f;
  return v;
}
// Subnormal fields (MlxAffine, Q2_KC, Q4_K; session 34): a field f masked in place is read as the
// float f * 2^-149, one AND a weight (the mantissa form needs the AND, an OR of the exponent and a
// FADD of -2^23: twice the instructions, and the 4-bit GEMVs were bound by them), and multiplied
// by x * 2^kSubXShift (x_for_dot). Every product and partial sum is the mantissa form's times
// 2^(kSubXShift - 149), so rounds alike; kSubUnscale (on sums of fields times x) and kXUnscale (on
// sums of x) undo the scales exactly: the mantissa form's bits while |x| lies in
// [2^(23 - kSubXShift), 2^(128 - kSubXShift)) and the sums above 2^(kSubXShift - 149 - 126)
// (test_gemv_decode checks them over x in 2^-40 .. 2^40). Needs FTZ off (nvcc's default).
constexpr int kSubXShift = 80;
constexpr float kSubUnscale = pow2_pos<149 - kSubXShift>();
constexpr float kXUnscale = 1.f / pow2_pos<kSubXShift>();

// Sum of xv[8*w + 4*k ...]: used by the affine formats (w = scale*q + bias) for the bias term.
__device__ __forceinline__ float sum32(const float (&xv)[kUnit]) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kUnit; ++k) s += xv[k];
  return s;
}

// The plain-float formats' dot (BF16, F16, F32): their decode is exact, so expand is decode
// and dot_e one chain over the unit's weights in order.
template <class Derived>
struct OneChain {
  static constexpr int kExpandGen = 0;
  struct E { float w[kUnit]; };
  template <class Raw>
  __device__ static E expand(const Raw& r, int64_t u, const void* sh) {
    E e;
    Derived::decode(r, u, e.w, sh);
    return e;
  }
  __device__ static float dot_e(const E& e, const float (&xv)[kUnit]) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kUnit; ++k) s = fmaf(e.w[k], xv[k], s);
    return s;
  }
  template <class Raw>
  __device__ static float dot(const Raw& r, int64_t u, const float (&xv)[kUnit], const void* sh) {
    return dot_e(expand(r, u, sh), xv);
  }
};

// ---- BF16 / F16: 64 bytes per unit, four 16-byte loads. ----
template <bool kBf16>
struct Half16 : OneChain<Half16<kBf16>> {
  // H200 sweeps: R=4 reads 16384x8192 at 3312 GB/s vs 2482 at R=2 (cuda-h200-2026-12-01);
  // R=8 reads 4096x4096 at 3044 GB/s vs 2041 at R=4, six 4096x4096 at 3532 vs 3147
  // (cuda-all-h200-2026-12-01d). Rows per block change no result (each row is one block's
  // threads over the same units in the same order), so gemv_rows still equals gemv.
  static constexpr int kRows = 8;
  static constexpr int kSpanBlocks = 0;
  struct Raw { uint4 v[4]; };
  __device__ static void decode(const Raw& r, int64_t, float (&out)[kUnit], const void*) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w[4] = {r.v[i].x, r.v[i].y, r.v[i].z, r.v[i].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint16_t lo = w[j] & 0xffff, hi = w[j] >> 16;
        out[8 * i + 2 * j] = kBf16 ? bf16_bits(lo) : f16_bits(lo);
        out[8 * i + 2 * j + 1] = kBf16 ? bf16_bits(hi) : f16_bits(hi);
      }
    }
  }
  template <class L>
  __device__ static Raw load(const Args& a, const uint8_t* row_bytes, int64_t row, int64_t unit) {
    const uint8_t* p = row_bytes + unit * 64;
    Raw r;
#pragma unroll
    for (int i = 0; i < 4; ++i) r.v[i] = L::u4(p + 16 * i);
    return r;
  }
};

// ---- F32: 128 bytes per unit, eight 16-byte loads (tiny reference checkpoints). ----
struct F32 : OneChain<F32> {
  static constexpr int kRows = 2;
  static constexpr int kSpanBlocks = 0;
  struct Raw { uint4 v[8]; };
  __device__ static void decode(const Raw& r, int64_t, float (&out)[kUnit], const void*) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      out[4 * i] = __uint_as_float(r.v[i].x), out[4 * i + 1] = __uint_as_float(r.v[i].y);
      out[4 * i + 2] = __uint_as_float(r.v[i].z), out[4 * i + 3] = __uint_as_float(r.v[i].w);
    }
  }
  template <class L>
  __device__ static Raw load(const Args&, const uint8_t* row_bytes, int64_t, int64_t unit) {
    const uint8_t* p = row_bytes + unit * 128;
    Raw r;
#pragma unroll
    for (int i = 0; i < 8; ++i) r.v[i] = L::u4(p + 16 * i);
    return r;
  }
};

// ---- Q8_0: block of 32 = f16 d + 32 int8; 34-byte blocks are only 2-byte aligned. ----
struct Q8_0 {
  // H200 sweeps, direct path: 2042 GB/s at R=4 vs 1483 at R=2 (16384x8192); 1848 at R=8 vs
  // 1484 at R=4 (4096x4096), six 4096x4096 2603 vs 2232 (cuda-all-h200-2026-12-01d).
  static constexpr int kRows = 8;
  static constexpr int kSpanBlocks = 32, kBlockBytes = 34, kUnitsPerBlock = 1;  // 1088 B
  struct Raw { uint16_t d; uint32_t q[8]; };
  __device__ static void decode(const Raw& r, int64_t, float (&out)[kUnit], const void*) {
    const float d = f16_bits(r.d);
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int k = 0; k < 4; ++k) out[4 * i + k] = d * (mant_byte(r.q[i] ^ 0x80808080u, k) - (kMant + 128.f));
  }
  template <class L>
  __device__ static Raw load(const Args& a, const uint8_t* row_bytes, int64_t row, int64_t unit) {
    const uint8_t* p = row_bytes + unit * 34;
    Raw r;
    r.d = L::u16(p);
#pragma unroll
    for (int i = 0; i < 8; ++i) r.q[i] = uint32_t(L::u16(p + 2 + 4 * i)) | (uint32_t(L::u16(p + 4 + 4 * i)) << 16);
    return r;
  }
  // Kernel 2's global read: the unit's 34 bytes as 4-byte loads from the 4-byte boundary at or
  // before it (off = 0 or 2 bytes), reassembled with funnel shifts: 9 loads instead of 17
  // 2-byte ones. When off = 0 the last load is 2 bytes (never reads past the unit).
  __device__ static Raw load_global2(const uint8_t* row_bytes, int64_t unit) {
    const uint8_t* p = row_bytes + unit * 34;
    const int off = int(reinterpret_cast<uintptr_t>(p) & 2);
    const uint8_t* a = p - off;
    uint32_t w[9];
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = FromGlobal::u32(a + 4 * j);
    w[8] = off ? FromGlobal::u32(a + 32) : uint32_t(FromGlobal::u16(a + 32));
    Raw r;
    r.d = uint16_t(__funnelshift_r(w[0], w[1], 8 * off));
#pragma unroll
    for (int i = 0; i < 8; ++i) r.q[i] = __funnelshift_rc(w[i], w[i + 1], 16 + 8 * off);
    return r;
  }
  __device__ static float dot(const Raw& r, int64_t, const float (&xv)[kUnit], const void*) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int k = 0; k < 4; ++k) s = fmaf(float(int8_t(byte_of(r.q[i], k))), xv[4 * i + k], s);
    return f16_bits(r.d) * s;
  }
  // dot2: t = q ^ 0x80 per byte is q + 128 unsigned, each byte moved under the exponent by one
  // byte permute (mant_byte; until session 34 bytes 1/3 stayed in place at bit 8, worth 256 q:
  // an AND and an OR a weight); a chain per parity, in order. The odd chain holds exactly 1/256
  // of what it held then, so s0 + s1 rounds as fmaf(s1 * 256, 1 / 256, s0) did: the same bits.
  static constexpr int kExpandGen = 2;
  struct E { float w[kUnit]; uint16_t d; };
  __device__ static E expand(const Raw& r, int64_t, const void*) {
    E e;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t t = r.q[i] ^ 0x80808080u;
#pragma unroll
      for (int k = 0; k < 4; ++k) e.w[4 * i + k] = mant_byte(t, k) - (kMant + 128.f);
    }
    e.d = r.d;
    return e;
  }
  __device__ static float dot_e(const E& e, const float (&xv)[kUnit]) {
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int k = 0; k < kUnit; k += 2) {
      s0 = fmaf(e.w[k], xv[k], s0);
      s1 = fmaf(e.w[k + 1], xv[k + 1], s1);
    }
    return f16_bits(e.d) * (s0 + s1);
  }
  __device__ static float dot2(const Raw& r, int64_t u, const float (&xv)[kUnit], const void* sh) {
    return dot_e(expand(r, u, sh), xv);
  }
};

// ---- Q4_K: 256-weight block = f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes
// of nibbles. Unit j (0..7) = sub-block j: nibbles (j%2) of bytes 32*(j/2) ... +31.
// 144-byte blocks keep 16-byte alignment, so the header is one load and the nibbles two;
// units 2g and 2g+1 (adjacent lanes) read the same 32 bytes in one coalesced request.
struct Q4_K {
  static constexpr int kRows = 8;  // H200 sweep: 1203 GB/s at R=8 vs 1178 at R=4 (decode-bound)
  static constexpr int kSpanBlocks = 0;
  struct Raw { uint4 hdr; uint4 q[2]; };
  // Sub-block j's 6-bit scale and min from the 12 packed bytes after d/dmin (one place for
  // decode, dot and dot2).
  __device__ static void scale_min(const uint4& hdr, int j, uint32_t& sc, uint32_t& mn) {
    const uint32_t sw[3] = {hdr.y, hdr.z, hdr.w};
    auto sb = [&](int i) { return byte_of(sw[i >> 2], i & 3); };
    if (j < 4) {
      sc = sb(j) & 63;
      mn = sb(j + 4) & 63;
    } else {
      sc = (sb(j + 4) & 0xf) | ((sb(j - 4) >> 6) << 4);
      mn = (sb(j + 4) >> 4) | ((sb(j) >> 6) << 4);
    }
  }
  __device__ static void decode(const Raw& r, int64_t unit, float (&out)[kUnit], const void*) {
    const int j = int(unit & 7);
    uint32_t sc, mn;
    scale_min(r.hdr, j, sc, mn);
    const int shift = 4 * (j & 1);
    const float dsc = f16_bits(r.hdr.x & 0xffff) * float(sc), m = f16_bits(r.hdr.x >> 16) * float(mn);
    const uint32_t w[8] = {r.q[0].x, r.q[0].y, r.q[0].z, r.q[0].w, r.q[1].x, r.q[1].y, r.q[1].z, r.q[1].w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int k = 0; k < 4; ++k) out[4 * i + k] = dsc * (mant((w[i] >> (8 * k + shift)) & 0xfu) - kMant) - m;
  }
  template <class L>
  __device__ static Raw load(const Args& a, const uint8_t* row_bytes, int64_t row, int64_t unit) {
    const uint8_t* p = row_bytes + (unit >> 3) * 144;
    const int j = int(unit & 7);
    Raw r;
    r.hdr = L::u4(p);
    r.q[0] = L::u4(p + 16 + 32 * (j >> 1));
    r.q[1] = L::u4(p + 32 + 32 * (j >> 1));
    return r;
  }
  __device__ static float dot(const Raw& r, int64_t unit, const float (&xv)[kUnit], const void*) {
    const int j = int(unit & 7);
    const uint32_t sw[3] = {r.hdr.y, r.hdr.z, r.hdr.w};  // the 12 scale bytes
    auto sb = [&](int i) { return byte_of(sw[i >> 2], i & 3); };
    uint32_t sc, mn;
    if (j < 4) {
      sc = sb(j) & 63;
      mn = sb(j + 4) & 63;
    } else {
      sc = (sb(j + 4) & 0xf) | ((sb(j - 4) >> 6) << 4);
      mn = (sb(j + 4) >> 4) | ((sb(j) >> 6) << 4);
    }
    const int shift = 4 * (j & 1);
    const uint32_t w[8] = {r.q[0].x, r.q[0].y, r.q[0].z, r.q[0].w, r.q[1].x, r.q[1].y, r.q[1].z, r.q[1].w};
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int k = 0; k < 4; ++k) sq = fmaf(float((byte_of(w[i], k) >> shift) & 0xf), xv[4 * i + k], sq);
    const float d = f16_bits(r.hdr.x & 0xffff), dmin = f16_bits(r.hdr.x >> 16);
    return d * float(sc) * sq - dmin * float(mn) * sum32(xv);
  }
  // dot2: nibbles in place (bytes 0/2 at bit `shift`, 1/3 at bit 8 + shift) as subnormal fields
  // (kSubXShift's comment); the sum's scale and the unit's 2^-shift undone in one exact factor.
  static constexpr int kXShift = kSubXShift;
  __device__ static float dot2(const Raw& r, int64_t unit, const float (&xs)[kUnit], const void*) {
    const int j = int(unit & 7);
    uint32_t sc, mn;
    scale_min(r.hdr, j, sc, mn);
    const int shift = 4 * (j & 1);
    const uint32_t m0 = 0xfu << shift, m1 = 0xf00u << shift;  // nibbles of bytes 0/2 and 1/3, in place
    const uint32_t w[8] = {r.q[0].x, r.q[0].y, r.q[0].z, r.q[0].w, r.q[1].x, r.q[1].y, r.q[1].z, r.q[1].w};
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t h = w[i] >> 16;
      s0 = fmaf(__uint_as_float(w[i] & m0), xs[4 * i], s0);
      s1 = fmaf(__uint_as_float(w[i] & m1), xs[4 * i + 1], s1);
      s0 = fmaf(__uint_as_float(h & m0), xs[4 * i + 2], s0);
      s1 = fmaf(__uint_as_float(h & m1), xs[4 * i + 3], s1);
    }
    const float sq = fmaf(s1, 1.f / 256.f, s0) * (shift ? kSubUnscale / 16.f : kSubUnscale);  // shift: 0 or 4
    const float d = f16_bits(r.hdr.x & 0xffff), dmin = f16_bits(r.hdr.x >> 16);
    return d * float(sc) * sq - dmin * float(mn) * (sum32(xs) * kXUnscale);
  }
};

// ---- Q2_K: 256-weight block = 16 bytes of 4-bit scale|min pairs, 64 bytes of 2-bit
// weights, f16 d, f16 dmin (84 bytes, 4-byte aligned). Weight e: half h = e/128, plane
// s = (e%128)/32, byte h*32 + e%32, bits 2s; group e/16. Unit u = 4h + s covers groups 2u, 2u+1.
struct Q2_K {
  static constexpr int kRows = 8;
  static constexpr int kSpanBlocks = 4, kBlockBytes = 84, kUnitsPerBlock = 8;  // 336 B
  struct Raw { uint32_t q[8]; uint16_t sc; uint32_t dm; };
  __device__ static void decode(const Raw& r, int64_t unit, float (&out)[kUnit], const void*) {
    const int shift = 2 * int(unit & 3);
    const float d = f16_bits(r.dm & 0xffff), dmin = f16_bits(r.dm >> 16);
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const uint32_t scm = (r.sc >> (8 * g)) & 0xff;
      const float dl = d * float(scm & 0xf), ml = dmin * float(scm >> 4);
#pragma unroll
      for (int i = 4 * g; i < 4 * g + 4; ++i)
#pragma unroll
        for (int k = 0; k < 4; ++k) out[4 * i + k] = dl * (mant((r.q[i] >> (8 * k + shift)) & 3u) - kMant) - ml;
    }
  }
  template <class L>
  __device__ static Raw load(const Args& a, const uint8_t* row_bytes, int64_t row, int64_t unit) {
    const uint8_t* p = row_bytes + (unit >> 3) * 84;
    const int u = int(unit & 7);
    Raw r;
#pragma unroll
    for (int i = 0; i < 8; ++i) r.q[i] = L::u32(p + 16 + 32 * (u >> 2) + 4 * i);
    r.sc = L::u16(p + 2 * u);
    r.dm = L::u32(p + 80);
    return r;
  }
  __device__ static float dot(const Raw& r, int64_t unit, const float (&xv)[kUnit], const void*) {
    const int shift = 2 * int(unit & 3);
    float sq[2] = {0.f, 0.f}, sx[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float x = xv[4 * i + k];
        sq[i >> 2] = fmaf(float((byte_of(r.q[i], k) >> shift) & 3), x, sq[i >> 2]);
        sx[i >> 2] += x;
      }
    const float d = f16_bits(r.dm & 0xffff), dmin = f16_bits(r.dm >> 16);
    float s = 0.f;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const uint32_t scm = (r.sc >> (8 * g)) & 0xff;
      s += d * float(scm & 0xf) * sq[g] - dmin * float(scm >> 4) * sx[g];
    }
    return s;
  }
  __device__ static float dot2(const Raw& r, int64_t unit, const float (&xv)[kUnit], const void*) {
    const int shift = 2 * int(unit & 3);
    const uint32_t m0 = 3u << shift, m1 = 0x300u << shift;  // bytes 0/2 and 1/3, in place
    float s0[2] = {0.f, 0.f}, s1[2] = {0.f, 0.f}, sx[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int g = i >> 2;
      const uint32_t h = r.q[i] >> 16;
      s0[g] = fmaf(mant(r.q[i] & m0) - kMant, xv[4 * i], s0[g]);
      s1[g] = fmaf(mant(r.q[i] & m1) - kMant, xv[4 * i + 1], s1[g]);
      s0[g] = fmaf(mant(h & m0) - kMant, xv[4 * i + 2], s0[g]);
      s1[g] = fmaf(mant(h & m1) - kMant, xv[4 * i + 3], s1[g]);
#pragma unroll
      for (int k = 0; k < 4; ++k) sx[g] += xv[4 * i + k];
    }
    const float d = f16_bits(r.dm & 0xffff), dmin = f16_bits(r.dm >> 16), p = pow2_neg(shift);
    float s = 0.f;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const uint32_t scm = (r.sc >> (8 * g)) & 0xff;
      const float sq = fmaf(s1[g], 1.f / 256.f, s0[g]) * p;
      s += d * float(scm & 0xf) * sq - dmin * float(scm >> 4) * sx[g];
    }
    return s;
  }
};

// ---- Q2_K read coalesced (kernel 3): the same blocks, another split into units. Q2_K's unit
// (one 2-bit plane of 32 bytes) makes four lanes load the same 32 bytes with eight 4-byte
// loads each, 10 loads per unit; here unit u = 8b + 4h + k of block b takes bytes 8k..8k+7 of
// half h in all four planes: weights 128h + 32s + 8k + j (plane s, j < 8), so a lane loads its
// 8 quant bytes (2 loads), the 8 scale bytes of its half (2) and d/dmin (1), every byte it
// loads is used, and the 8 lanes of a block read its 64 quant bytes contiguously. x follows
// the permutation (x_float4). Groups of 16 weights: each plane's 8 weights lie in one group
// (8h + 2s + k/2). Used by gemv and gemv_rows alike (same units, same order).
struct Q2_KC {
  static constexpr int kRows = 8;
  static constexpr int kSpanBlocks = 0;
  struct Raw { uint32_t q[2]; uint32_t sc[2]; uint32_t dm; };
  // The float4 of x holding xv[4i .. 4i+3] of unit `unit` (xv[8s + j] = x[256b + 128h + 32s + 8k + j]).
  __device__ static int64_t x_float4(int64_t unit, int i) {
    return (unit >> 3) * 64 + ((unit >> 2) & 1) * 32 + (unit & 3) * 2 + (i >> 1) * 8 + (i & 1);
  }
  template <class L>
  __device__ static Raw load(const Args&, const uint8_t* row_bytes, int64_t, int64_t unit) {
    const uint8_t* p = row_bytes + (unit >> 3) * 84;
    const int h = int(unit >> 2) & 1, k = int(unit & 3);
    Raw r;
    r.q[0] = L::u32(p + 16 + 32 * h + 8 * k);
    r.q[1] = L::u32(p + 20 + 32 * h + 8 * k);
    r.sc[0] = L::u32(p + 8 * h);
    r.sc[1] = L::u32(p + 8 * h + 4);
    r.dm = L::u32(p + 80);
    return r;
  }
  // Plane s's scale|min byte: group 8h + 2s + k/2 = byte 2s + k/2 of the half's 8 scale bytes.
  __device__ static uint32_t scale_byte(const Raw& r, int64_t unit, int s) {
    return byte_of(r.sc[s >> 1], 2 * (s & 1) + int(unit & 3) / 2);
  }
  // Kernel-1 style (int->float per weight): the reference decode the host test reads weights through.
  __device__ static float dot(const Raw& r, int64_t unit, const float (&xv)[kUnit], const void*) {
    const float d = f16_bits(r.dm & 0xffff), dmin = f16_bits(r.dm >> 16);
    float s = 0.f;
#pragma unroll
    for (int pl = 0; pl < 4; ++pl) {
      const uint32_t scm = scale_byte(r, unit, pl);
      float sq = 0.f, sx = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float x = xv[8 * pl + j];
        sq = fmaf(float((byte_of(r.q[j >> 2], j & 3) >> (2 * pl)) & 3), x, sq);
        sx += x;
      }
      s += d * float(scm & 0xf) * sq - dmin * float(scm >> 4) * sx;
    }
    return s;
  }
  // Fields in place as in Q2_K::dot2 (bytes 0/2 at bit 2s, 1/3 at bit 8 + 2s); the shift by
  // 16 is shared by the four planes; subnormal fields (kSubXShift's comment). The planes' scale
  // and min products are summed before d and dmin multiply them once (d * sum sc sq - dmin * sum
  // mn sx): four fewer multiplies a plane than a per-plane d * sc * sq - dmin * mn * sx, another
  // rounding order.
  static constexpr int kXShift = kSubXShift;
  __device__ static float dot2(const Raw& r, int64_t unit, const float (&xs)[kUnit], const void*) {
    const uint32_t w[4] = {r.q[0], r.q[0] >> 16, r.q[1], r.q[1] >> 16};
    float sd = 0.f, sm = 0.f;
#pragma unroll
    for (int pl = 0; pl < 4; ++pl) {
      const uint32_t m0 = 3u << (2 * pl), m1 = 0x300u << (2 * pl);
      float s0 = 0.f, s1 = 0.f, sx = 0.f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s0 = fmaf(__uint_as_float(w[i] & m0), xs[8 * pl + 2 * i], s0);
        s1 = fmaf(__uint_as_float(w[i] & m1), xs[8 * pl + 2 * i + 1], s1);
        sx += xs[8 * pl + 2 * i];
        sx += xs[8 * pl + 2 * i + 1];
      }
      const uint32_t scm = scale_byte(r, unit, pl);
      // sc / 4^pl exactly, through a mantissa of exponent 150 - 2 pl (the plane's power of two
      // folded into the scale: no multiply of sq), and mn exactly
      const float sc = __uint_as_float(((150u - 2 * pl) << 23) | (scm & 0xf)) - float(1u << (23 - 2 * pl));
      const float mn = mant(scm >> 4) - kMant;
      sd = fmaf(sc, fmaf(s1, 1.f / 256.f, s0), sd);
      sm = fmaf(mn, sx, sm);
    }
    const float d = f16_bits(r.dm & 0xffff), dmin = f16_bits(r.dm >> 16);
    return fmaf(d, sd * kSubUnscale, -(dmin * (sm * kXUnscale)));
  }
};

// ---- IQ2_XXS: 256-weight block = f16 d + 8 sub-blocks of 8 bytes (66 bytes, 2-byte
// aligned). Sub-block: 4 grid indices (u32 #0) and, in u32 #1, four 7-bit sign fields plus
// a 4-bit scale on top. Weight = d * (0.5 + scale) / 4 * grid[idx][k] * sign.
// The 2 KiB codebook is staged in shared memory by the kernel (see kSharedGrid).
struct IQ2_XXS {
  static constexpr int kRows = 8;
  static constexpr int kSpanBlocks = 8, kBlockBytes = 66, kUnitsPerBlock = 8;  // 528 B
  struct Raw { uint16_t d; uint32_t aux0, aux1; };
  __device__ static void decode(const Raw& r, int64_t, float (&out)[kUnit], const void* shared) {
    const uint64_t* grid = static_cast<const uint64_t*>(shared);
    const float db = f16_bits(r.d) * (0.5f + float(r.aux1 >> 28)) * 0.25f;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = grid[byte_of(r.aux0, l)];
      const uint32_t s7 = (r.aux1 >> (7 * l)) & 127;
      const uint32_t signs = s7 | ((__popc(s7) & 1u) << 7);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float v = db * (mant(uint32_t(g >> (8 * k)) & 0xffu) - kMant);
        out[8 * l + k] = (signs >> k) & 1 ? -v : v;
      }
    }
  }
  template <class L>
  __device__ static Raw load(const Args& a, const uint8_t* row_bytes, int64_t row, int64_t unit) {
    const uint8_t* p = row_bytes + (unit >> 3) * 66;
    const uint8_t* q = p + 2 + 8 * (unit & 7);
    Raw r;
    r.d = L::u16(p);
    r.aux0 = uint32_t(L::u16(q)) | (uint32_t(L::u16(q + 2)) << 16);
    r.aux1 = uint32_t(L::u16(q + 4)) | (uint32_t(L::u16(q + 6)) << 16);
    return r;
  }
  __device__ static float dot(const Raw& r, int64_t, const float (&xv)[kUnit], const void* shared) {
    const uint64_t* grid = static_cast<const uint64_t*>(shared);
    float s = 0.f;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = grid[byte_of(r.aux0, l)];
      uint32_t s7 = (r.aux1 >> (7 * l)) & 127;
      const uint32_t signs = s7 | ((__popc(s7) & 1u) << 7);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float v = float(uint32_t(g >> (8 * k)) & 0xffu);
        s = fmaf((signs >> k) & 1 ? -v : v, xv[8 * l + k], s);
      }
    }
    const float db = f16_bits(r.d) * (0.5f + float(r.aux1 >> 28)) * 0.25f;
    return db * s;
  }
  // Grid bytes (8, 25 or 43) in place: bytes 0/2 of each half at bit 0, 1/3 at bit 8; the
  // sign flips the decoded weight's sign bit.
  __device__ static float dot2(const Raw& r, int64_t, const float (&xv)[kUnit], const void* shared) {
    const uint64_t* grid = static_cast<const uint64_t*>(shared);
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = grid[byte_of(r.aux0, l)];
      const uint32_t s7 = (r.aux1 >> (7 * l)) & 127;
      const uint32_t signs = s7 | ((__popc(s7) & 1u) << 7);
      const uint32_t w[4] = {uint32_t(g), uint32_t(g) >> 16, uint32_t(g >> 32), uint32_t(g >> 48)};
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        // The sign onto the weight, not x: gemv_rows reuses the signed weight for every input row.
        const float v = mant(w[k >> 1] & ((k & 1) ? 0xff00u : 0xffu)) - kMant;
        const float sv = __uint_as_float(__float_as_uint(v) ^ ((signs << (31 - k)) & 0x80000000u));
        if (k & 1) s1 = fmaf(sv, xv[8 * l + k], s1);
        else s0 = fmaf(sv, xv[8 * l + k], s0);
      }
    }
    const float db = f16_bits(r.d) * (0.5f + float(r.aux1 >> 28)) * 0.25f;
    return db * fmaf(s1, 1.f / 256.f, s0);
  }
};

// ---- MLX affine: packed u32 along the row (element i at bits kBits*(i%per_word), low
// first), w = scale[group] * q + bias[group]; a unit lies inside one group (group % 32 == 0).
template <int kBits, bool kBf16Scales>
struct MlxAffine {
  // H200 sweep, 16384x8192 g64: q4 1645 GB/s at R=8 vs 1439 at R=4; q8 2556 at R=8 vs 1760 at R=2.
  static constexpr int kRows = 8;
  static constexpr int kSpanBlocks = 0;
  static constexpr int kVecs = kBits == 4 ? 1 : 2;  // 16-byte loads per unit
  struct Raw { uint4 v[kVecs]; uint16_t scale, bias; };
  __device__ static void decode(const Raw& r, int64_t, float (&out)[kUnit], const void*) {
    constexpr int kPerWord = 32 / kBits;
    constexpr uint32_t kMask = (1u << kBits) - 1;
    const float scale = kBf16Scales ? bf16_bits(r.scale) : f16_bits(r.scale);
    const float bias = kBf16Scales ? bf16_bits(r.bias) : f16_bits(r.bias);
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const uint32_t w[4] = {r.v[i].x, r.v[i].y, r.v[i].z, r.v[i].w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int k = 0; k < kPerWord; ++k)
          out[(4 * i + j) * kPerWord + k] = fmaf(scale, mant((w[j] >> (kBits * k)) & kMask) - kMant, bias);
    }
  }
  template <class L>
  __device__ static Raw load(const Args& a, const uint8_t* row_bytes, int64_t row, int64_t unit) {
    const uint8_t* p = row_bytes + unit * (kUnit * kBits / 8);
    Raw r;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) r.v[i] = L::u4(p + 16 * i);
    const int64_t g = row * a.groups_per_row + ((unit * kUnit) >> a.group_shift);
    r.scale = FromGlobal::u16(static_cast<const uint8_t*>(a.scales) + 2 * g);
    r.bias = FromGlobal::u16(static_cast<const uint8_t*>(a.biases) + 2 * g);
    return r;
  }
  __device__ static float dot(const Raw& r, int64_t, const float (&xv)[kUnit], const void*) {
    constexpr int kPerWord = 32 / kBits;
    constexpr uint32_t kMask = (1u << kBits) - 1;
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const uint32_t w[4] = {r.v[i].x, r.v[i].y, r.v[i].z, r.v[i].w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int k = 0; k < kPerWord; ++k)
          sq = fmaf(float((w[j] >> (kBits * k)) & kMask), xv[(4 * i + j) * kPerWord + k], sq);
    }
    const float scale = kBf16Scales ? bf16_bits(r.scale) : f16_bits(r.scale);
    const float bias = kBf16Scales ? bf16_bits(r.bias) : f16_bits(r.bias);
    return scale * sq + bias * sum32(xv);
  }
  // dot2: fields in place in w (low half) and w >> 16: kBits 4 at bits 0/4/8/12, kBits 8 at
  // 0/8; a chain per field position (element index % kPerHalf), in order, then the positions
  // combined by exact powers of two from the top one down.
  static constexpr int kExpandGen = 2;
  static constexpr int kPerHalf = 16 / kBits;
  struct E { float w[kUnit]; uint16_t scale, bias; };
  // The unit's fields in place as floats: (q << s) exactly (kSubnormal false: the exponent OR'd in,
  // 2^23 subtracted), or (q << s) * 2^-149 (true: the masked bits read as a subnormal float).
  template <bool kSubnormal>
  __device__ static void fields(const Raw& r, float (&out)[kUnit]) {
    constexpr int kPerWord = 32 / kBits;
    constexpr uint32_t kMask = (1u << kBits) - 1;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const uint32_t w[4] = {r.v[i].x, r.v[i].y, r.v[i].z, r.v[i].w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int k = 0; k < kPerWord; ++k) {
          const uint32_t half = k < kPerHalf ? w[j] : w[j] >> 16;
          const uint32_t f = half & (kMask << (kBits * (k % kPerHalf)));
          out[(4 * i + j) * kPerWord + k] = kSubnormal ? __uint_as_float(f) : mant(f) - kMant;
        }
    }
  }
  // sum w[idx] x[idx] in the chains per field position, combined from the top one down
  __device__ static float chains(const float (&w)[kUnit], const float (&xv)[kUnit]) {
    float s[kPerHalf];
#pragma unroll
    for (int k = 0; k < kPerHalf; ++k) s[k] = 0.f;
#pragma unroll
    for (int idx = 0; idx < kUnit; ++idx) s[idx % kPerHalf] = fmaf(w[idx], xv[idx], s[idx % kPerHalf]);
    float sq = s[kPerHalf - 1];
#pragma unroll
    for (int k = kPerHalf - 2; k >= 0; --k) sq = fmaf(sq, 1.f / float(1u << kBits), s[k]);
    return sq;
  }
  // expand reads the fields as subnormals (kSubXShift's comment; the mantissa form is
  // fields<false>) and dot_e takes x_for_dot's scaled x. H100: 1.13x on Qwen's x10 expert gate|up,
  // 1.15x on 16384x8192 (session 34).
  static constexpr int kXShift = kSubXShift;
  __device__ static E expand(const Raw& r, int64_t, const void*) {
    E e;
    fields<true>(r, e.w);
    e.scale = r.scale, e.bias = r.bias;
    return e;
  }
  __device__ static float dot_e(const E& e, const float (&xs)[kUnit]) {
    const float scale = kBf16Scales ? bf16_bits(e.scale) : f16_bits(e.scale);
    const float bias = kBf16Scales ? bf16_bits(e.bias) : f16_bits(e.bias);
    // Written out, no contraction left to the compiler: the bias product rounded, one FMA.
    return fmaf(scale, chains(e.w, xs) * kSubUnscale, __fmul_rn(bias, sum32(xs) * kXUnscale));
  }
  __device__ static float dot2(const Raw& r, int64_t u, const float (&xs)[kUnit], const void* sh) {
    return dot_e(expand(r, u, sh), xs);
  }
};

// The dot of kernel generation V (gemv_dot_generation): 2 takes the format's dot2 where it has
// one, else (and under 1) its dot. gemv.cu and the fused kernels that must equal it bit for bit
// (qwen_next/cuda/hyper_fused.cu) decode through this one definition.
template <class F, class = void>
struct HasDot2 : std::false_type {};
template <class F>
struct HasDot2<F, std::void_t<decltype(&F::dot2)>> : std::true_type {};

// Whether dot_v<V, F> is expand + dot_e (the decode-once form gemv_rows takes).
template <class F, int V, class = void>
struct Expands : std::false_type {};
template <class F, int V>
struct Expands<F, V, std::enable_if_t<(F::kExpandGen == 0 || F::kExpandGen == V)>> : std::true_type {};

// The scale dot_v<V, F> and F::dot_e want on x: 2^F::kXShift where the format reads its fields
// as subnormal floats (MlxAffine, Q2_KC), else none. Every caller of dot_v and dot_e passes x
// through x_for_dot first.
template <class F, class = void>
struct XShift : std::integral_constant<int, 0> {};
template <class F>
struct XShift<F, std::void_t<decltype(F::kXShift)>> : std::integral_constant<int, F::kXShift> {};
template <int V, class F>
__device__ __forceinline__ void x_for_dot(float (&xv)[kUnit]) {
  constexpr int s = V == 2 && HasDot2<F>::value ? XShift<F>::value : 0;
  if constexpr (s != 0) {
#pragma unroll
    for (int k = 0; k < kUnit; ++k) xv[k] *= pow2_pos<s>();
  }
}

template <int V, class F>
__device__ __forceinline__ float dot_v(const typename F::Raw& r, int64_t u, const float (&xv)[kUnit], const void* sh) {
  if constexpr (V == 2 && HasDot2<F>::value) return F::dot2(r, u, xv, sh);
  else return F::dot(r, u, xv, sh);
}

}  // namespace ds4::cuda::gemv_detail
