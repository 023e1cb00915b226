// Synthetic weight bytes (see synthetic_weights.h). Block layouts are the ggml ones that
// core/quant_*.cpp decode: only the f16 scale fields need fixing, any quant bits are valid.
#include "core/synthetic_weights.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/half.h"

namespace ds4 {
namespace {

struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
};

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Offsets of the f16 scale fields in one block: {d, dmin} (-1 = none).
struct ScaleFields {
  int d, dmin;
};
ScaleFields scale_fields(DType t) {
  switch (t) {
    case DType::Q8_0: return {0, -1};     // d, qs[32]
    case DType::Q4_K: return {0, 2};      // d, dmin, scales[12], qs[128]
    case DType::Q2_K: return {80, 82};    // scales[16], qs[64], d, dmin
    case DType::IQ2_XXS: return {0, -1};  // d, qs[32] (u16)
    default: throw Error("fill_synthetic: no block layout for " + std::string(dtype_name(t)));
  }
}

}  // namespace

uint64_t seed_from_name(const char* name, uint64_t base) {
  uint64_t h = 1469598103934665603ull ^ base;
  for (; *name; ++name) h = (h ^ uint8_t(*name)) * 1099511628211ull;
  return h;
}

void fill_synthetic(DType t, int64_t rows, int64_t cols, uint64_t seed, const SyntheticFill& how, uint8_t* out) {
  SplitMix rng{seed};
  const int64_t n = rows * cols;
  auto value = [&] { return how.center + how.spread * (2.0f * rng.uniform() - 1.0f); };
  switch (t) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) {
        const float v = value();
        std::memcpy(out + 4 * i, &v, 4);
      }
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) put_f16(out + 2 * i, value());
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(value());
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::I32:
      if (how.int_bound < 1) throw Error("fill_synthetic: I32 needs int_bound >= 1");
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = int32_t(rng.next() % uint64_t(how.int_bound));
        std::memcpy(out + 4 * i, &v, 4);
      }
      return;
    default: break;
  }
  const ScaleFields f = scale_fields(t);
  const BlockGeometry g = block_geometry(t);
  const int64_t blocks = rows * (row_bytes(t, cols) / g.bytes);
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = out + b * g.bytes;
    for (int64_t i = 0; i < g.bytes; i += 8) {
      const uint64_t r = rng.next();
      std::memcpy(blk + i, &r, size_t(std::min<int64_t>(8, g.bytes - i)));
    }
    // Scales near the magnitude a real 2-8 bit matrix of N(0, 0.02) weights would carry.
    put_f16(blk + f.d, 0.002f * (0.5f + rng.uniform()));
    if (f.dmin >= 0) put_f16(blk + f.dmin, 0.001f * rng.uniform());
  }
}

}  // namespace ds4
