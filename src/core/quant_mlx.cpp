// MLX affine quantization: each u32 packs 32/bits values, lowest bits first; every group of
// `group_size` columns has its own scale and bias (F16/BF16/F32): w = scale*q + bias.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <immintrin.h>

#include "core/error.h"
#include "core/half.h"
#include "core/quant_variants.h"

namespace ds4 {

float load_scale(const void* p, int64_t i, DType t) {
  if (t == DType::F32) return static_cast<const float*>(p)[i];
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t*>(p) + 2 * i, 2);
  return t == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

namespace {

template <int kBits>
DS4_ALWAYS_INLINE void decode_bits(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  constexpr int kPer = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  const uint32_t* q = reinterpret_cast<const uint32_t*>(row_ptr(w, r)) + c0 / kPer;
  const int64_t groups_per_row = w.cols / w.group_size;
  const int64_t g0 = r * groups_per_row + c0 / w.group_size;
  for (int64_t g = 0; g < len / w.group_size; ++g) {
    const float s = load_scale(w.scales, g0 + g, w.scale_type), bias = load_scale(w.biases, g0 + g, w.scale_type);
    const uint32_t* qg = q + g * (w.group_size / kPer);
    float* o = out + g * w.group_size;
    for (int64_t i = 0; i < w.group_size; ++i) o[i] = s * float((qg[i / kPer] >> (kBits * (i % kPer))) & kMask) + bias;
  }
}

DS4_ALWAYS_INLINE void decode(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  if (w.type == DType::MLX_Q4) decode_bits<4>(w, r, c0, len, out);
  else decode_bits<8>(w, r, c0, len, out);
}

DS4_DECODER_VARIANTS(mlx, decode)

// AVX2: 8 values per step. 4-bit: one u32 shifted by (0, 4, ..., 28); 8-bit: 8 bytes
// widened (value i of a word is byte i, little-endian). Same s*q + b as scalar.
DS4_TARGET_AVX2 void decode_avx2(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const bool four = w.type == DType::MLX_Q4;
  const int per = four ? 8 : 4;
  const uint32_t* q = reinterpret_cast<const uint32_t*>(row_ptr(w, r)) + c0 / per;
  const int64_t g0 = r * (w.cols / w.group_size) + c0 / w.group_size;
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), nib = _mm256_set1_epi32(15);
  for (int64_t g = 0; g < len / w.group_size; ++g) {
    const __m256 s = _mm256_set1_ps(load_scale(w.scales, g0 + g, w.scale_type));
    const __m256 bias = _mm256_set1_ps(load_scale(w.biases, g0 + g, w.scale_type));
    const uint32_t* qg = q + g * (w.group_size / per);
    float* o = out + g * w.group_size;
    for (int64_t i = 0; i < w.group_size; i += 8) {
      __m256i v = four ? _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(qg[i / 8])), shifts), nib)
                       : _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qg + i / 4)));
      _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_mul_ps(s, _mm256_cvtepi32_ps(v)), bias));
    }
  }
}

void store_scale(void* p, int64_t i, DType t, float v) {
  if (t == DType::F32) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  uint16_t h = t == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
  std::memcpy(static_cast<uint8_t*>(p) + 2 * i, &h, 2);
}

}  // namespace

RowDecodeFn mlx_decoder(SimdLevel level) { return level == SimdLevel::Scalar ? mlx_scalar : decode_avx2; }

void quantize_mlx(const float* src, int64_t n, int bits, int64_t group, DType scale_type, uint32_t* q,
                  void* scales, void* biases) {
  if ((bits != 4 && bits != 8) || (group != 32 && group != 64) || n % group != 0)
    throw Error("quantize_mlx: bits " + std::to_string(bits) + " group " + std::to_string(group) + " n " + std::to_string(n));
  const int per = 32 / bits;
  const float levels = float((1 << bits) - 1);
  std::memset(q, 0, size_t(n / per) * 4);
  for (int64_t g = 0; g < n / group; ++g) {
    const float* x = src + g * group;
    float lo = *std::min_element(x, x + group), hi = *std::max_element(x, x + group);
    store_scale(scales, g, scale_type, (hi - lo) / levels);
    store_scale(biases, g, scale_type, lo);
    const float s = load_scale(scales, g, scale_type), b = load_scale(biases, g, scale_type);
    for (int64_t i = 0; i < group; ++i) {
      float v = s > 0 ? std::nearbyint((x[i] - b) / s) : 0.0f;
      uint32_t qi = uint32_t(std::clamp(v, 0.0f, levels));
      int64_t e = g * group + i;
      q[e / per] |= qi << (bits * (e % per));
    }
  }
}

}  // namespace ds4
