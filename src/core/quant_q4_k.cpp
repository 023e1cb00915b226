// Q4_K: super-blocks of 256 = 8 sub-blocks of 32, 144 bytes: f16 d, f16 dmin, 12 bytes of
// packed 6-bit (scale, min) pairs, 128 bytes of nibbles. Sub-block j of each 64-wide chunk
// c: low nibbles (j = 2c) then high nibbles (j = 2c+1) of q[32c .. 32c+32).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_variants.h"

namespace ds4 {
namespace {

constexpr int64_t kBlock = 256, kBytes = 144;

// The 12 scale bytes as three rows of 4 (d, m, md): scales 0-3 and mins 0-3 are the low 6
// bits of d and m; scales/mins 4-7 take 4 bits from md and their top 2 bits from d/m.
DS4_ALWAYS_INLINE void unpack_scales(const uint8_t* s, uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 0x3F;
    mn[j] = s[4 + j] & 0x3F;
    sc[4 + j] = uint8_t((s[8 + j] & 0x0F) | ((s[j] >> 2) & 0x30));
    mn[4 + j] = uint8_t((s[8 + j] >> 4) | ((s[4 + j] >> 2) & 0x30));
  }
}

DS4_ALWAYS_INLINE void decode(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* b = row_ptr(w, r) + c0 / kBlock * kBytes;
  for (int64_t k = 0; k < len / kBlock; ++k, b += kBytes, out += kBlock) {
    uint16_t dh, mh;
    std::memcpy(&dh, b, 2);
    std::memcpy(&mh, b + 2, 2);
    const float d = f16_to_f32(dh), dmin = f16_to_f32(mh);
    uint8_t sc[8], mn[8];
    unpack_scales(b + 4, sc, mn);
    const uint8_t* q = b + 16;
    for (int c = 0; c < 4; ++c) {
      const float d0 = d * float(sc[2 * c]), m0 = dmin * float(mn[2 * c]);
      const float d1 = d * float(sc[2 * c + 1]), m1 = dmin * float(mn[2 * c + 1]);
      float* o = out + 64 * c;
      for (int i = 0; i < 32; ++i) o[i] = d0 * float(q[32 * c + i] & 0x0F) - m0;
      for (int i = 0; i < 32; ++i) o[32 + i] = d1 * float(q[32 * c + i] >> 4) - m1;
    }
  }
}

DS4_DECODER_VARIANTS(q4_k, decode)

// Least-squares fit of x ≈ s*q - m with q in 0..15 for one 32-wide sub-block, trying a few
// scales around (max-min)/15 and keeping the best; m >= 0 (the min is subtracted).
void fit_subblock(const float* x, float* scale, float* min) {
  float lo = std::min(0.0f, *std::min_element(x, x + 32)), hi = *std::max_element(x, x + 32);
  if (hi <= lo) {
    *scale = 0, *min = -lo;
    return;
  }
  float best_err = INFINITY;
  for (int step = -4; step <= 4; ++step) {
    float s = (hi - lo) / (15.0f + 0.25f * float(step));
    float err = 0;
    for (int i = 0; i < 32; ++i) {
      float q = std::clamp(std::nearbyint((x[i] - lo) / s), 0.0f, 15.0f);
      float e = s * q + lo - x[i];
      err += e * e;
    }
    if (err < best_err) best_err = err, *scale = s, *min = -lo;
  }
}

void pack_scales(const uint8_t sc[8], const uint8_t mn[8], uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = uint8_t((sc[j] & 0x3F) | ((sc[4 + j] >> 4) << 6));
    s[4 + j] = uint8_t((mn[j] & 0x3F) | ((mn[4 + j] >> 4) << 6));
    s[8 + j] = uint8_t((sc[4 + j] & 0x0F) | ((mn[4 + j] & 0x0F) << 4));
  }
}

}  // namespace

RowDecodeFn q4_k_decoder(SimdLevel level) { return q4_k_pick(level); }

// Per sub-block fit, then the 8 scales and mins are quantized to 6 bits against the
// super-block's d = max_scale/63 and dmin = max_min/63 (stored f16), and the nibbles are
// recomputed against those stored values so decode reproduces what was fitted.
void quantize_q4_k(const float* src, void* dst, int64_t n) {
  uint8_t* o = static_cast<uint8_t*>(dst);
  for (int64_t k = 0; k < n / kBlock; ++k, src += kBlock, o += kBytes) {
    float s[8], m[8];
    for (int j = 0; j < 8; ++j) fit_subblock(src + 32 * j, &s[j], &m[j]);
    float smax = *std::max_element(s, s + 8), mmax = *std::max_element(m, m + 8);
    uint16_t dh = f32_to_f16(smax / 63.0f), mh = f32_to_f16(mmax / 63.0f);
    const float d = f16_to_f32(dh), dmin = f16_to_f32(mh);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = d > 0 ? uint8_t(std::clamp(std::nearbyint(s[j] / d), 0.0f, 63.0f)) : 0;
      mn[j] = dmin > 0 ? uint8_t(std::clamp(std::nearbyint(m[j] / dmin), 0.0f, 63.0f)) : 0;
    }
    std::memcpy(o, &dh, 2);
    std::memcpy(o + 2, &mh, 2);
    pack_scales(sc, mn, o + 4);
    uint8_t* q = o + 16;
    std::memset(q, 0, 128);
    for (int j = 0; j < 8; ++j) {
      const float dj = d * float(sc[j]), mj = dmin * float(mn[j]);
      for (int i = 0; i < 32; ++i) {
        float v = dj > 0 ? std::nearbyint((src[32 * j + i] + mj) / dj) : 0.0f;
        uint8_t qi = uint8_t(std::clamp(v, 0.0f, 15.0f));
        q[32 * (j / 2) + i] |= uint8_t(j % 2 ? qi << 4 : qi);
      }
    }
  }
}

}  // namespace ds4
