// Q2_K: super-blocks of 256 = 16 sub-blocks of 16, 84 bytes: 16 scale bytes (low nibble
// scale, high nibble min), 64 bytes of 2-bit values, f16 d, f16 dmin. Element
// h*128 + s*32 + l (half h, shift s, l < 32) is bits 2s..2s+1 of q[32h + l].
#include <cstring>

#include <immintrin.h>

#include "core/half.h"
#include "core/quant_variants.h"

namespace ds4 {
namespace {

constexpr int64_t kBlock = 256, kBytes = 84;

DS4_ALWAYS_INLINE void decode(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* b = row_ptr(w, r) + c0 / kBlock * kBytes;
  for (int64_t k = 0; k < len / kBlock; ++k, b += kBytes, out += kBlock) {
    uint16_t dh, mh;
    std::memcpy(&dh, b + 80, 2);
    std::memcpy(&mh, b + 82, 2);
    const float d = f16_to_f32(dh), dmin = f16_to_f32(mh);
    const uint8_t* sc = b;
    const uint8_t* q = b + 16;
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 4; ++s)
        for (int half16 = 0; half16 < 2; ++half16) {
          const int sub = h * 8 + s * 2 + half16;  // 16-wide sub-block index
          const float dl = d * float(sc[sub] & 0x0F), ml = dmin * float(sc[sub] >> 4);
          const uint8_t* qq = q + 32 * h + 16 * half16;
          float* o = out + 16 * sub;
          for (int l = 0; l < 16; ++l) o[l] = dl * float((qq[l] >> (2 * s)) & 3) - ml;
        }
  }
}

DS4_DECODER_VARIANTS(q2_k, decode)

// AVX2: one 16-wide sub-block per step (two 8-lane halves), same f32 products as scalar.
DS4_TARGET_AVX2 void decode_avx2(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* b = row_ptr(w, r) + c0 / kBlock * kBytes;
  const __m128i three = _mm_set1_epi8(3);
  for (int64_t k = 0; k < len / kBlock; ++k, b += kBytes, out += kBlock) {
    uint16_t dh, mh;
    std::memcpy(&dh, b + 80, 2);
    std::memcpy(&mh, b + 82, 2);
    const float d = f16_to_f32(dh), dmin = f16_to_f32(mh);
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 4; ++s)
        for (int half16 = 0; half16 < 2; ++half16) {
          const int sub = h * 8 + s * 2 + half16;
          const __m256 dl = _mm256_set1_ps(d * float(b[sub] & 0x0F)), ml = _mm256_set1_ps(dmin * float(b[sub] >> 4));
          __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 + 32 * h + 16 * half16));
          q = _mm_and_si128(_mm_srl_epi16(q, _mm_cvtsi32_si128(2 * s)), three);  // 16-bit shift; the mask drops crossed bits
          __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
          __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8)));
          _mm256_storeu_ps(out + 16 * sub, _mm256_sub_ps(_mm256_mul_ps(dl, lo), ml));
          _mm256_storeu_ps(out + 16 * sub + 8, _mm256_sub_ps(_mm256_mul_ps(dl, hi), ml));
        }
  }
}

}  // namespace

RowDecodeFn q2_k_decoder(SimdLevel level) { return level == SimdLevel::Scalar ? q2_k_scalar : decode_avx2; }

}  // namespace ds4
