#pragma once
// Host stand-ins for the CUDA device intrinsics the GEMV decoders use (gemv_formats.cuh,
// gemv_act_formats.cuh), so host-only tests (test_gemv_decode, test_gemv_act_host) can run the
// decoders without a GPU. Include before those headers.
#include <cstdint>
#include <cstring>

static inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static inline int __popc(uint32_t v) { return __builtin_popcount(v); }
template <class T>
static inline T __ldg(const T* p) {
  return *p;
}
static inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t s) {
  return uint32_t(((uint64_t(hi) << 32) | lo) >> (s & 31));
}
static inline uint32_t __funnelshift_rc(uint32_t lo, uint32_t hi, uint32_t s) {
  return uint32_t(((uint64_t(hi) << 32) | lo) >> (s > 32 ? 32 : s));
}
// Signed bytes of a and b multiplied pairwise, added to c (dp4a.s32.s32).
static inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k) c += int(int8_t(uint32_t(a) >> (8 * k))) * int(int8_t(uint32_t(b) >> (8 * k)));
  return c;
}
// One rounding each, as on the device (called as functions, nothing to contract).
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __int2float_rn(int v) { return float(v); }
// No lanes on the host: a test that needs a cross-lane sum adds the lanes itself.
static inline int __shfl_xor_sync(unsigned, int v, int) { return 0 * v; }
// prmt.b32 (default mode): result byte n = byte (selector nibble n & 7) of {b, a} (a = bytes 0..3).
static inline uint32_t __byte_perm(uint32_t a, uint32_t b, uint32_t s) {
  const uint64_t v = (uint64_t(b) << 32) | a;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= uint32_t((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return r;
}
