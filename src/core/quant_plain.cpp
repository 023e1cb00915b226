// Decoders for the plain float types, so every weight type goes through one matmul path.
#include <cmath>
#include <cstring>

#include <immintrin.h>

#include "core/half.h"
#include "core/quant_variants.h"

namespace ds4 {
namespace {

DS4_ALWAYS_INLINE void decode_f32(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  std::memcpy(out, row_ptr(w, r) + c0 * 4, size_t(len) * 4);
}

DS4_ALWAYS_INLINE void decode_f16(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* p = row_ptr(w, r) + c0 * 2;
  for (int64_t i = 0; i < len; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    out[i] = f16_to_f32(h);
  }
}

// F16C converts 8 halves per instruction (exact, like the scalar path).
DS4_TARGET_AVX2 void decode_f16_f16c(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* p = row_ptr(w, r) + c0 * 2;
  int64_t i = 0;
  for (; i + 8 <= len; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i))));
  for (; i < len; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    out[i] = f16_to_f32(h);
  }
}

DS4_ALWAYS_INLINE void decode_bf16(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* p = row_ptr(w, r) + c0 * 2;
  for (int64_t i = 0; i < len; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    uint32_t u = uint32_t(h) << 16;
    std::memcpy(out + i, &u, 4);
  }
}

// float8 e4m3fn (torch.float8_e4m3fn): bias 7, no infinities, S.1111.111 is NaN.
float f8_e4m3_to_f32(uint8_t v) {
  const int e = (v >> 3) & 0xF, m = v & 7;
  float mag;
  if (e == 0xF && m == 7) mag = NAN;
  else if (e == 0) mag = std::ldexp(float(m), -9);  // subnormal: m/8 * 2^-6
  else mag = std::ldexp(float(8 + m), e - 10);     // (1 + m/8) * 2^(e-7)
  return v & 0x80 ? -mag : mag;
}

struct F8Table {
  float v[256];
  F8Table() {
    for (int i = 0; i < 256; ++i) v[i] = f8_e4m3_to_f32(uint8_t(i));
  }
};
const F8Table kF8;

DS4_ALWAYS_INLINE void decode_f8(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* p = row_ptr(w, r) + c0;
  for (int64_t i = 0; i < len; ++i) out[i] = kF8.v[p[i]];
}

DS4_DECODER_VARIANTS(f32, decode_f32)
DS4_DECODER_VARIANTS(f16, decode_f16)
RowDecodeFn f16_pick_fast(SimdLevel l) { return l == SimdLevel::Scalar ? f16_scalar : decode_f16_f16c; }
DS4_DECODER_VARIANTS(bf16, decode_bf16)
DS4_DECODER_VARIANTS(f8, decode_f8)

}  // namespace

RowDecodeFn plain_decoder(DType t, SimdLevel level) {
  switch (t) {
    case DType::F32: return f32_pick(level);
    case DType::F16: return f16_pick_fast(level);
    case DType::BF16: return bf16_pick(level);
    case DType::F8_E4M3: return f8_pick(level);
    default: return nullptr;
  }
}

}  // namespace ds4
