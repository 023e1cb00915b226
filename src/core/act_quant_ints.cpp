// Exact integer block sums for core/act_quant.cpp (act_quant_ints.h): the plain loops of
// ds4's portable scalar path, and AVX2 versions of the same sums (the AVX-512 level uses the
// AVX2 ones). Products are widened to int16 / int32 before any add, so nothing saturates
// whatever the int8 inputs (-128 included).
#include "core/act_quant_ints.h"

#include <immintrin.h>

#include <cstring>

namespace ds4 {
namespace {

#include "core/iq2_xxs_tables.inc"

constexpr int64_t kQ8_0Bytes = 34, kQ2KBytes = 84, kIq2Bytes = 66;

void q8_0_scalar(const uint8_t* w, const int8_t* x, int64_t nb, int32_t* out) {
  for (int64_t b = 0; b < nb; ++b, w += kQ8_0Bytes, x += 32) {
    const int8_t* q = reinterpret_cast<const int8_t*>(w + 2);
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += int32_t(q[i]) * int32_t(x[i]);
    out[b] = s;
  }
}

// Element h*128 + s*32 + l of a Q2_K super-block is bits 2s..2s+1 of q[32h + l] (q at byte
// 16); sub-block h*8 + 2s + (l >= 16) has scale byte sc[h*8 + 2s + (l >= 16)].
void q2_k_scalar(const uint8_t* blk, const int8_t* x, int64_t nb, int32_t* out) {
  for (int64_t i = 0; i < nb; ++i, blk += kQ2KBytes, x += 256) {
    const uint8_t* q2 = blk + 16;
    int32_t isum = 0;
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 4; ++s)
        for (int part = 0; part < 2; ++part) {
          const uint8_t* qq = q2 + 32 * h + 16 * part;
          const int8_t* xx = x + 128 * h + 32 * s + 16 * part;
          int32_t sub = 0;
          for (int l = 0; l < 16; ++l) sub += int32_t((qq[l] >> (2 * s)) & 3) * int32_t(xx[l]);
          isum += int32_t(blk[h * 8 + 2 * s + part] & 0x0F) * sub;
        }
    out[i] = isum;
  }
}

// IQ2_XXS group g (32 values) at byte 2 + 8g: u32 of 4 grid indices, u32 of 4 x 7-bit sign
// indices and the 4-bit scale s on top.
void iq2_xxs_scalar(const uint8_t* blk, const int8_t* x, int64_t nb, int32_t* out) {
  for (int64_t i = 0; i < nb; ++i, blk += kIq2Bytes) {
    int32_t bsum = 0;
    for (int g = 0; g < 8; ++g, x += 32) {
      uint32_t aux[2];
      std::memcpy(aux, blk + 2 + 8 * g, 8);
      int32_t sumi = 0;
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = kIq2xxsGrid[(aux[0] >> (8 * l)) & 0xFF];
        const uint8_t signs = kIq2xxsSigns[(aux[1] >> (7 * l)) & 127];
        for (int j = 0; j < 8; ++j) {
          const int32_t v = int32_t(uint8_t(grid >> (8 * j)));
          sumi += ((signs >> j) & 1 ? -v : v) * int32_t(x[8 * l + j]);
        }
      }
      bsum += sumi * int32_t(2 * (aux[1] >> 28) + 1);
    }
    out[i] = bsum;
  }
}

DS4_TARGET_AVX2 inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 32 int8 x 32 int8 -> 8 int32 partial sums (widened to int16 first: no saturation).
DS4_TARGET_AVX2 inline __m256i dot32_i8(__m256i a, __m256i b) {
  const __m256i lo = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(a)),
                                       _mm256_cvtepi8_epi16(_mm256_castsi256_si128(b)));
  const __m256i hi = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(a, 1)),
                                       _mm256_cvtepi8_epi16(_mm256_extracti128_si256(b, 1)));
  return _mm256_add_epi32(lo, hi);
}

DS4_TARGET_AVX2 void q8_0_avx2(const uint8_t* w, const int8_t* x, int64_t nb, int32_t* out) {
  for (int64_t b = 0; b < nb; ++b, w += kQ8_0Bytes, x += 32) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    out[b] = hsum_i32(dot32_i8(q, xv));
  }
}

DS4_TARGET_AVX2 void q2_k_avx2(const uint8_t* blk, const int8_t* x, int64_t nb, int32_t* out) {
  const __m256i three = _mm256_set1_epi8(3);
  for (int64_t i = 0; i < nb; ++i, blk += kQ2KBytes, x += 256) {
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * h));
      for (int s = 0; s < 4; ++s) {
        // 16-bit shift, then the mask drops the bits that crossed from the next byte
        const __m256i v = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * s)), three);
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 128 * h + 32 * s));
        // pairs of (0..3) * int8: |sum| <= 768, exact in int16; lanes 0-7 = sub-block part 0
        const __m256i p = _mm256_maddubs_epi16(v, xv);
        const int sub = h * 8 + 2 * s;
        const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(int16_t(blk[sub + 1] & 0x0F)),
                                             _mm_set1_epi16(int16_t(blk[sub] & 0x0F)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
      }
    }
    out[i] = hsum_i32(acc);
  }
}

DS4_TARGET_AVX2 void iq2_xxs_avx2(const uint8_t* blk, const int8_t* x, int64_t nb, int32_t* out) {
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));  // byte j = 1 << j
  for (int64_t i = 0; i < nb; ++i, blk += kIq2Bytes) {
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g, x += 32) {
      uint32_t aux[2];
      std::memcpy(aux, blk + 2 + 8 * g, 8);
      const __m256i grid = _mm256_set_epi64x(int64_t(kIq2xxsGrid[aux[0] >> 24]), int64_t(kIq2xxsGrid[(aux[0] >> 16) & 0xFF]),
                                             int64_t(kIq2xxsGrid[(aux[0] >> 8) & 0xFF]), int64_t(kIq2xxsGrid[aux[0] & 0xFF]));
      constexpr uint64_t kEveryByte = 0x0101010101010101ull;
      const __m256i signs = _mm256_set_epi64x(int64_t(kIq2xxsSigns[(aux[1] >> 21) & 127] * kEveryByte),
                                              int64_t(kIq2xxsSigns[(aux[1] >> 14) & 127] * kEveryByte),
                                              int64_t(kIq2xxsSigns[(aux[1] >> 7) & 127] * kEveryByte),
                                              int64_t(kIq2xxsSigns[aux[1] & 127] * kEveryByte));
      const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(signs, bit), bit);  // 0xFF where negative
      const __m256i signed_grid = _mm256_sub_epi8(_mm256_xor_si256(grid, neg), neg);  // |grid| <= 43
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
      const __m256i ls = _mm256_set1_epi32(int32_t(2 * (aux[1] >> 28) + 1));
      acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(dot32_i8(signed_grid, xv), ls));
    }
    out[i] = hsum_i32(acc);
  }
}

constexpr ActIntKernels kScalar{q8_0_scalar, q2_k_scalar, iq2_xxs_scalar};
constexpr ActIntKernels kAvx2{q8_0_avx2, q2_k_avx2, iq2_xxs_avx2};

}  // namespace

const ActIntKernels& act_int_kernels(SimdLevel level) { return level == SimdLevel::Scalar ? kScalar : kAvx2; }

}  // namespace ds4
