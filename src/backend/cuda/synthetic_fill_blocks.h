#pragma once
// Random weight blocks for the synthetic full-size models (issue #10), one function per
// element / block / word, identical on the host (g++: the CPU checks) and on the device
// (synthetic_fill.cu: the fill kernels). Every value is a pure function of (seed, index), so
// a fill is deterministic by seed and independent of the launch shape.
//
// Magnitudes: a matrix gets values in [-amp, amp] (amp = 1/sqrt(cols) by default, the range
// the host synthetic models use: y = W x then keeps |y| ~ |x| / sqrt(3), so activations stay
// finite through any number of layers). Block formats get small finite scales: Q8_0 d =
// amp / 127; Q4_K / Q2_K every sub-block scale and min fixed at 1 with d, dmin chosen so
// the quants span [-amp, amp] (d scaled per block by 0.5..1 from the hash); MLX affine scale =
// 2 amp / 15 (q4) or 2 amp / 255 (q8), bias = -amp (per group, scaled the same way).
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define DS4_HD __host__ __device__ __forceinline__
#else
#define DS4_HD inline
#endif

namespace ds4::synth {

DS4_HD uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
DS4_HD uint64_t hash2(uint64_t seed, uint64_t i) { return mix64(seed ^ mix64(i)); }
// Uniform in [-1, 1) from 24 bits of h.
DS4_HD float unit(uint64_t h) { return float(int32_t(h >> 40) - (1 << 23)) * (1.0f / float(1 << 23)); }
// Per-block scale factor in [0.5, 1].
DS4_HD float block_factor(uint64_t h) { return 0.5f + 0.5f * float(h & 0xffff) * (1.0f / 65535.0f); }

DS4_HD uint32_t f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
// bf16 round-to-nearest-even (finite inputs only: the generators never make NaN/inf).
DS4_HD uint16_t to_bf16(float f) {
  uint32_t u = f32_bits(f);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}
// IEEE half, round half up, for finite |f| < 65504 (subnormals kept; under 2^-25 -> 0).
DS4_HD uint16_t to_f16(float f) {
  const uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000;
  const int32_t e = int32_t((u >> 23) & 0xff) - 127 + 15;
  const uint32_t m = (u & 0x7fffff) | 0x800000;  // 24-bit significand
  if (e <= 0) {
    const int32_t shift = 14 - e;  // value = m * 2^(e - 25) in units of 2^-24
    if (shift > 24) return uint16_t(sign);
    return uint16_t(sign | ((m + (1u << (shift - 1))) >> shift));
  }
  // Normal: a carry out of the mantissa bumps the exponent, which is the right result.
  return uint16_t(sign | ((uint32_t(e) << 10) + (((m & 0x7fffff) + 0x1000) >> 13)));
}

DS4_HD void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v), p[1] = uint8_t(v >> 8); }

// Block layouts (core/quant.h): sizes in bytes and elements.
inline constexpr int kQ8Bytes = 34, kQ8Elems = 32;
inline constexpr int kQ4KBytes = 144, kQ2KBytes = 84, kKElems = 256;

// Q8_0 block b: {f16 d; i8 q[32]}.
DS4_HD void q8_0_block(uint8_t* out, uint64_t seed, uint64_t b, float amp) {
  const uint64_t h = hash2(seed, b);
  put16(out, to_f16(amp * block_factor(h) / 127.0f));
  for (int i = 0; i < 32; i += 8) {
    const uint64_t r = hash2(seed ^ 0x51ull, b * 4 + uint64_t(i / 8));
    for (int k = 0; k < 8; ++k) {
      int q = int((r >> (8 * k)) & 0xff) - 128;
      out[2 + i + k] = uint8_t(int8_t(q < -127 ? -127 : q));
    }
  }
}

// Q4_K block b: {f16 d, dmin; u8 scales[12]; u8 q[128]}; every 6-bit sc and m = 1 (keeps d
// far above f16's subnormals), so w = d*q - dmin with q in 0..15: d*15 = 2 amp, dmin = amp.
DS4_HD void q4_k_block(uint8_t* out, uint64_t seed, uint64_t b, float amp) {
  const float a = amp * block_factor(hash2(seed, b));
  put16(out, to_f16(2.0f * a / 15.0f));
  put16(out + 2, to_f16(a));
  // scales[0..3] = sc_j | (sc_{j+4} >> 4) << 6, [4..7] = m_j | (m_{j+4} >> 4) << 6,
  // [8..11] = (sc_{j+4} & 15) | (m_{j+4} & 15) << 4: with 1 everywhere 1, 1, 0x11.
  for (int j = 0; j < 8; ++j) out[4 + j] = 1;
  for (int j = 8; j < 12; ++j) out[4 + j] = 0x11;
  for (int i = 0; i < 128; i += 8) {
    const uint64_t r = hash2(seed ^ 0x4bull, b * 16 + uint64_t(i / 8));
    for (int k = 0; k < 8; ++k) out[16 + i + k] = uint8_t(r >> (8 * k));
  }
}

// Q2_K block b: {u8 scales[16]; u8 q[64]; f16 d, dmin}; every scale byte 0x11 (sc = m = 1):
// w = d*q - dmin with q in 0..3: d*3 = 2 amp, dmin = amp.
DS4_HD void q2_k_block(uint8_t* out, uint64_t seed, uint64_t b, float amp) {
  const float a = amp * block_factor(hash2(seed, b));
  for (int j = 0; j < 16; ++j) out[j] = 0x11;
  for (int i = 0; i < 64; i += 8) {
    const uint64_t r = hash2(seed ^ 0x2bull, b * 8 + uint64_t(i / 8));
    for (int k = 0; k < 8; ++k) out[16 + i + k] = uint8_t(r >> (8 * k));
  }
  put16(out + 80, to_f16(2.0f * a / 3.0f));
  put16(out + 82, to_f16(a));
}

// MLX affine: packed word i (32/bits quants, low bits first) and group g's scale and bias
// (scale_bf16: BF16 else F16), w = scale * q + bias spanning [-amp, amp].
DS4_HD uint32_t mlx_word(uint64_t seed, uint64_t i) { return uint32_t(hash2(seed ^ 0x3cull, i)); }
DS4_HD uint16_t mlx_scale(uint64_t seed, uint64_t g, float amp, int bits, bool scale_bf16) {
  const float s = 2.0f * amp * block_factor(hash2(seed, g)) / float((1 << bits) - 1);
  return scale_bf16 ? to_bf16(s) : to_f16(s);
}
DS4_HD uint16_t mlx_bias(uint64_t seed, uint64_t g, float amp, bool scale_bf16) {
  const float b = -amp * block_factor(hash2(seed, g));
  return scale_bf16 ? to_bf16(b) : to_f16(b);
}

// Plain float element i in [center - amp, center + amp].
DS4_HD float plain(uint64_t seed, uint64_t i, float center, float amp) { return center + amp * unit(hash2(seed, i)); }

}  // namespace ds4::synth
