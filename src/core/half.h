#pragma once
// IEEE half and bfloat16 conversions (round-to-nearest-even, as numpy and torch do).
#include <cstdint>
#include <cstring>

namespace ds4 {

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

// Exact bit conversion: _Float16 -> float goes through a slow libgcc call on CPUs
// without F16C, and this runs once per quant block (or per element for F16 weights).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000 | (man << 13);  // inf / NaN (payload kept)
  } else if (exp == 0) {
    float v = float(man) * 5.9604644775390625e-8f;  // subnormal: man * 2^-24, exact
    std::memcpy(&u, &v, 4);
    u |= sign;
  } else {
    u = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  _Float16 v = _Float16(f);
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}

}  // namespace ds4
