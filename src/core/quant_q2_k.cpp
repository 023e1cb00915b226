// Q2_K: super-blocks of 256 = 16 sub-blocks of 16, 84 bytes: 16 scale bytes (low nibble
// scale, high nibble min), 64 bytes of 2-bit values, f16 d, f16 dmin. Element
// h*128 + s*32 + l (half h, shift s, l < 32) is bits 2s..2s+1 of q[32h + l].
#include <cstring>

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

}  // namespace

RowDecodeFn q2_k_decoder(SimdLevel level) { return q2_k_pick(level); }

}  // namespace ds4
