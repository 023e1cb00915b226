// SIMD level selection and the f32 dot kernels every weight type ends in.
#include "core/simd.h"

#include <immintrin.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace ds4 {
namespace {

SimdLevel detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return SimdLevel::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdLevel::Avx2;
  return SimdLevel::Scalar;
}

SimdLevel from_env(SimdLevel best) {
  const char* e = std::getenv("DS4_SIMD");
  if (!e) return best;
  SimdLevel want = best;
  if (!std::strcmp(e, "scalar")) want = SimdLevel::Scalar;
  else if (!std::strcmp(e, "avx2")) want = SimdLevel::Avx2;
  else if (!std::strcmp(e, "avx512")) want = SimdLevel::Avx512;
  return int(want) < int(best) ? want : best;
}

std::atomic<int> g_level{-1};

float dot_scalar(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

DS4_TARGET_AVX2 float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Via memory: _mm512_reduce_add_ps / extract trip GCC 12 -Wuninitialized false positives.
DS4_TARGET_AVX512 float hsum512(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  return hsum256(_mm256_add_ps(_mm256_load_ps(t), _mm256_load_ps(t + 8)));
}

// dot and dot4 accumulate each row in exactly the same order (one vector accumulator,
// then a scalar tail), so a row's result does not depend on whether it was computed alone
// or in a group of four: matvec and batched matmul agree bit for bit (batch invariance).
DS4_TARGET_AVX2 float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float s = hsum256(s0);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

DS4_TARGET_AVX512 float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  float s = hsum512(s0);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

DS4_TARGET_AVX2 void dot4_avx2(const float* w0, const float* w1, const float* w2, const float* w3, const float* x,
                               int64_t n, float out[4]) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 xv = _mm256_loadu_ps(x + i);
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), xv, s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i), xv, s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + i), xv, s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + i), xv, s3);
  }
  out[0] = hsum256(s0), out[1] = hsum256(s1), out[2] = hsum256(s2), out[3] = hsum256(s3);
  for (; i < n; ++i) out[0] += w0[i] * x[i], out[1] += w1[i] * x[i], out[2] += w2[i] * x[i], out[3] += w3[i] * x[i];
}

DS4_TARGET_AVX512 void dot4_avx512(const float* w0, const float* w1, const float* w2, const float* w3, const float* x,
                                   int64_t n, float out[4]) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 xv = _mm512_loadu_ps(x + i);
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + i), xv, s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + i), xv, s1);
    s2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + i), xv, s2);
    s3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + i), xv, s3);
  }
  out[0] = hsum512(s0), out[1] = hsum512(s1);
  out[2] = hsum512(s2), out[3] = hsum512(s3);
  for (; i < n; ++i) out[0] += w0[i] * x[i], out[1] += w1[i] * x[i], out[2] += w2[i] * x[i], out[3] += w3[i] * x[i];
}

// Four rows against two inputs: each (row, input) pair accumulates exactly as dot4 does
// (one vector accumulator, the same reduction, the same scalar tail), so results do not
// depend on how tokens are paired; it only halves the weight loads per FMA.
#define DS4_DOT4X2(V, W, LOAD, FMA, SUM)                                       \
  V a[8];                                                                      \
  for (int k = 0; k < 8; ++k) a[k] = V{};                                      \
  int64_t i = 0;                                                               \
  for (; i + (W) <= n; i += (W)) {                                             \
    V xa = LOAD(x0 + i), xb = LOAD(x1 + i);                                    \
    for (int r = 0; r < 4; ++r) {                                              \
      V wv = LOAD(w[r] + i);                                                   \
      a[r] = FMA(wv, xa, a[r]);                                                \
      a[4 + r] = FMA(wv, xb, a[4 + r]);                                        \
    }                                                                          \
  }                                                                            \
  for (int k = 0; k < 8; ++k) out[k] = SUM(a[k]);                              \
  for (; i < n; ++i)                                                           \
    for (int r = 0; r < 4; ++r) out[r] += w[r][i] * x0[i], out[4 + r] += w[r][i] * x1[i];

DS4_TARGET_AVX2 void dot4x2_avx2(const float* const* w, const float* x0, const float* x1, int64_t n, float out[8]) {
  DS4_DOT4X2(__m256, 8, _mm256_loadu_ps, _mm256_fmadd_ps, hsum256)
}

DS4_TARGET_AVX512 void dot4x2_avx512(const float* const* w, const float* x0, const float* x1, int64_t n, float out[8]) {
  DS4_DOT4X2(__m512, 16, _mm512_loadu_ps, _mm512_fmadd_ps, hsum512)
}

}  // namespace

SimdLevel simd_supported() {
  static const SimdLevel best = detect();
  return best;
}

SimdLevel simd_level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = int(from_env(simd_supported()));
    g_level.store(l, std::memory_order_relaxed);
  }
  return SimdLevel(l);
}

void set_simd_level(SimdLevel level) {
  if (int(level) > int(simd_supported())) level = simd_supported();
  g_level.store(int(level), std::memory_order_relaxed);
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Scalar: return "scalar";
    case SimdLevel::Avx2: return "avx2";
    case SimdLevel::Avx512: return "avx512";
  }
  return "?";
}

float dot_f32(const float* a, const float* b, int64_t n) {
  switch (simd_level()) {
    case SimdLevel::Avx512: return dot_avx512(a, b, n);
    case SimdLevel::Avx2: return dot_avx2(a, b, n);
    default: return dot_scalar(a, b, n);
  }
}

void dot4_f32(const float* w0, const float* w1, const float* w2, const float* w3, const float* x, int64_t n,
              float out[4]) {
  switch (simd_level()) {
    case SimdLevel::Avx512: return dot4_avx512(w0, w1, w2, w3, x, n, out);
    case SimdLevel::Avx2: return dot4_avx2(w0, w1, w2, w3, x, n, out);
    default:
      out[0] = dot_scalar(w0, x, n), out[1] = dot_scalar(w1, x, n);
      out[2] = dot_scalar(w2, x, n), out[3] = dot_scalar(w3, x, n);
  }
}

}  // namespace ds4

namespace ds4 {

void dot4x2_f32(const float* const w[4], const float* x0, const float* x1, int64_t n, float out[8]) {
  switch (simd_level()) {
    case SimdLevel::Avx512: return dot4x2_avx512(w, x0, x1, n, out);
    case SimdLevel::Avx2: return dot4x2_avx2(w, x0, x1, n, out);
    default:
      for (int r = 0; r < 4; ++r) out[r] = dot_scalar(w[r], x0, n), out[4 + r] = dot_scalar(w[r], x1, n);
  }
}

}  // namespace ds4
