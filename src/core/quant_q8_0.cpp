// Q8_0: blocks of 32 int8 with one f16 scale (34 bytes): w = q * d.
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_variants.h"

namespace ds4 {
namespace {

constexpr int64_t kBlock = 32, kBytes = 34;

DS4_ALWAYS_INLINE void decode(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) {
  const uint8_t* b = row_ptr(w, r) + c0 / kBlock * kBytes;
  for (int64_t k = 0; k < len / kBlock; ++k, b += kBytes, out += kBlock) {
    uint16_t dh;
    std::memcpy(&dh, b, 2);
    const float d = f16_to_f32(dh);
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
    for (int i = 0; i < kBlock; ++i) out[i] = float(q[i]) * d;
  }
}

DS4_DECODER_VARIANTS(q8_0, decode)

// numpy's np_roundf in gguf: round half away from zero.
inline float roundf_away(float x) { return std::copysign(std::floor(std::fabs(x) + 0.5f), x); }

}  // namespace

RowDecodeFn q8_0_decoder(SimdLevel level) { return q8_0_pick(level); }

// Same f32 steps as gguf's Q8_0.quantize_blocks: d = amax / 127, id = 1/d, q = round(x*id).
void quantize_q8_0(const float* src, void* dst, int64_t n) {
  uint8_t* o = static_cast<uint8_t*>(dst);
  for (int64_t k = 0; k < n / kBlock; ++k, src += kBlock, o += kBytes) {
    float amax = 0;
    for (int i = 0; i < kBlock; ++i) amax = std::fmax(amax, std::fabs(src[i]));
    const float d = amax / 127.0f;
    const float id = d == 0 ? 0.0f : 1.0f / d;
    uint16_t dh = f32_to_f16(d);
    std::memcpy(o, &dh, 2);
    for (int i = 0; i < kBlock; ++i) o[2 + i] = uint8_t(int8_t(roundf_away(src[i] * id)));
  }
}

}  // namespace ds4
