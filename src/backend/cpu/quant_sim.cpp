#include "backend/cpu/quant_sim.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ds4::cpu {
namespace {

// E4M3FN code i (0..126) -> value: exponent field 0 is subnormal (mant * 2^-9).
float e4m3_value(int i) {
  const int e = (i >> 3) & 15, m = i & 7;
  return e == 0 ? float(m) * 0.001953125f : (1.0f + float(m) * 0.125f) * std::ldexp(1.0f, e - 7);
}

template <typename Round>
void roundtrip_blocks(float* x, int64_t n, int64_t block, float floor_amax, float fmax, Round round) {
  if (block <= 0 || n % block) throw Error("quant_sim: n must be a multiple of the block size");
  for (int64_t off = 0; off < n; off += block) {
    float amax = 0;
    for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::abs(x[off + i]));
    amax = std::max(amax, floor_amax);
    const float scale = std::ldexp(1.0f, int(std::ceil(std::log2(amax / fmax))));
    for (int64_t i = 0; i < block; ++i) x[off + i] = round(std::clamp(x[off + i] / scale, -fmax, fmax)) * scale;
  }
}

}  // namespace

float e4m3fn_round(float x) {
  const float sign = x < 0 ? -1.0f : 1.0f, ax = std::min(std::abs(x), 448.0f);
  int lo = 0, hi = 126;  // largest code with value <= ax (values increase with the code)
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (e4m3_value(mid) <= ax) lo = mid;
    else hi = mid - 1;
  }
  int best = lo;
  if (best < 126) {
    const float d0 = std::abs(ax - e4m3_value(best)), d1 = std::abs(ax - e4m3_value(best + 1));
    if (d1 < d0 || (d1 == d0 && (best & 1))) ++best;  // tie: the even code
  }
  return sign * e4m3_value(best);
}

float e2m1_round(float x) {
  static const float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float sign = x < 0 ? -1.0f : 1.0f, ax = std::min(std::abs(x), 6.0f);
  int best = 0;
  float bd = ax;
  for (int i = 1; i < 8; ++i) {
    const float d = std::abs(ax - kValues[i]);
    if (d < bd || (d == bd && !(i & 1) && (best & 1))) best = i, bd = d;
  }
  return sign * kValues[best];
}

void fp8_e4m3_roundtrip_f32(float* x, int64_t n, int64_t block) {
  roundtrip_blocks(x, n, block, 1e-4f, 448.0f, e4m3fn_round);
}

void fp4_e2m1_roundtrip_f32(float* x, int64_t n, int64_t block) {
  roundtrip_blocks(x, n, block, 7.052966104933725e-38f, 6.0f, e2m1_round);
}

void hadamard_f32(float* x, int64_t n) {
  if (n <= 0 || (n & (n - 1))) throw Error("hadamard_f32: n must be a power of two");
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t b = 0; b < n; b += 2 * h)
      for (int64_t i = b; i < b + h; ++i) {
        const float a = x[i], c = x[i + h];
        x[i] = a + c;
        x[i + h] = a - c;
      }
  const float s = 1.0f / std::sqrt(float(n));
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace ds4::cpu
