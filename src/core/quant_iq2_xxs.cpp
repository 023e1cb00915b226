// IQ2_XXS: super-blocks of 256, 66 bytes: f16 d, then 8 groups of 32 elements, each two
// u32: the first holds 4 grid indices (one byte per 8 elements), the second 4 x 7-bit sign
// indices (bits 0-27) and a 4-bit scale (bits 28-31). w = d*(0.5 + scale)*0.25 * grid * sign.
#include <cstring>

#include <immintrin.h>

#include "core/half.h"
#include "core/quant_variants.h"

namespace ds4 {
namespace {

#include "core/iq2_xxs_tables.inc"

constexpr int64_t kBlock = 256, kBytes = 66;

DS4_ALWAYS_INLINE void decode(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* b = row_ptr(w, r) + c0 / kBlock * kBytes;
  for (int64_t k = 0; k < len / kBlock; ++k, b += kBytes, out += kBlock) {
    uint16_t dh;
    std::memcpy(&dh, b, 2);
    const float d = f16_to_f32(dh);
    for (int g = 0; g < 8; ++g) {
      uint32_t aux[2];
      std::memcpy(aux, b + 2 + 8 * g, 8);
      const float db = d * (0.5f + float(aux[1] >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = kIq2xxsGrid[(aux[0] >> (8 * l)) & 0xFF];
        const uint8_t signs = kIq2xxsSigns[(aux[1] >> (7 * l)) & 127];
        float* o = out + 32 * g + 8 * l;
        for (int j = 0; j < 8; ++j) {
          const float v = db * float(uint8_t(grid >> (8 * j)));
          o[j] = (signs >> j) & 1 ? -v : v;
        }
      }
    }
  }
}

DS4_DECODER_VARIANTS(iq2_xxs, decode)

// AVX2: 8 elements per step. Grid bytes widen to f32 and scale by db (same product as the
// scalar path); the sign byte becomes a lane mask that flips the f32 sign bit, which is
// exactly negation. Used for the AVX-512 level too (the work is table-bound, not width-bound).
DS4_TARGET_AVX2 void decode_avx2(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* b = row_ptr(w, r) + c0 / kBlock * kBytes;
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t k = 0; k < len / kBlock; ++k, b += kBytes, out += kBlock) {
    uint16_t dh;
    std::memcpy(&dh, b, 2);
    const float d = f16_to_f32(dh);
    for (int g = 0; g < 8; ++g) {
      uint32_t aux[2];
      std::memcpy(aux, b + 2 + 8 * g, 8);
      const __m256 db = _mm256_set1_ps(d * (0.5f + float(aux[1] >> 28)) * 0.25f);
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = kIq2xxsGrid[(aux[0] >> (8 * l)) & 0xFF];
        const int signs = kIq2xxsSigns[(aux[1] >> (7 * l)) & 127];
        __m256 v = _mm256_mul_ps(db, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(grid)))));
        __m256i m = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(signs), bit), bit);
        v = _mm256_xor_ps(v, _mm256_and_ps(_mm256_castsi256_ps(m), sign_bit));
        _mm256_storeu_ps(out + 32 * g + 8 * l, v);
      }
    }
  }
}

}  // namespace

RowDecodeFn iq2_xxs_decoder(SimdLevel level) { return level == SimdLevel::Scalar ? iq2_xxs_scalar : decode_avx2; }

}  // namespace ds4
