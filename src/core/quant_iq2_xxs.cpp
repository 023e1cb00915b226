// IQ2_XXS: super-blocks of 256, 66 bytes: f16 d, then 8 groups of 32 elements, each two
// u32: the first holds 4 grid indices (one byte per 8 elements), the second 4 x 7-bit sign
// indices (bits 0-27) and a 4-bit scale (bits 28-31). w = d*(0.5 + scale)*0.25 * grid * sign.
#include <cstring>

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

}  // namespace

RowDecodeFn iq2_xxs_decoder(SimdLevel level) { return iq2_xxs_pick(level); }

}  // namespace ds4
