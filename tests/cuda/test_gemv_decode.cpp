// Host-only check of the GEMV decoders (backend/cuda/gemv_formats.cuh): for every format with
// a kernel-2 decoder (dot2), random unit bytes and random x, both dot and dot2 against a double
// sum of the unit's weights (each weight read back through dot with a one-hot x). Needs the
// CUDA headers but no GPU: the device intrinsics the decoders use get host stand-ins here.
// MLX, Q4_K and Q8_0's dot2 must equal the mantissa forms they replaced bit for bit
// (mantissa_dot). Prints the worst |dot2 - ref| / sum |w x| per format; fails above 4e-6 (float
// rounding of a 32-term sum is ~1e-7 of that sum). Also decode (the tensor-core dequantization)
// against the weights dot reads: within 1e-6 of the unit's largest |w|.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "host_intrinsics.h"  // before the decoders
#include "random_unit_bytes.h"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/iq2xxs_grid.h"

namespace {

using namespace ds4::cuda::gemv_detail;

const uint64_t kGrid[256] = {DS4_IQ2XXS_GRID_VALUES};
std::mt19937 g_rng(5);
int g_fail = 0;

// The forms dot2 had until session 34, kept here as the reference its bits are checked against:
// MLX and Q4_K fields in place with the exponent OR'd in and 2^23 subtracted (MLX: fields<false>),
// on x as it is; Q8_0 bytes 1 / 3 in place at bit 8 (256 q) in the odd chain, combined by
// fmaf(s1, 1/256, s0).
template <class F>
struct HasMantissaForm : std::false_type {};
template <int B, bool S>
struct HasMantissaForm<MlxAffine<B, S>> : std::true_type {};
template <>
struct HasMantissaForm<Q8_0> : std::true_type {};
template <>
struct HasMantissaForm<Q4_K> : std::true_type {};

template <class F>
float mantissa_dot(const typename F::Raw& r, int64_t unit, const float (&xv)[kUnit]) {
  if constexpr (std::is_same_v<F, Q4_K>) {
    const int j = int(unit & 7), shift = 4 * (j & 1);
    uint32_t sc, mn;
    Q4_K::scale_min(r.hdr, j, sc, mn);
    const uint32_t m0 = 0xfu << shift, m1 = 0xf00u << shift;
    const uint32_t w[8] = {r.q[0].x, r.q[0].y, r.q[0].z, r.q[0].w, r.q[1].x, r.q[1].y, r.q[1].z, r.q[1].w};
    float s0 = 0.f, s1 = 0.f;
    for (int i = 0; i < 8; ++i) {
      const uint32_t h = w[i] >> 16;
      s0 = std::fma(mant(w[i] & m0) - kMant, xv[4 * i], s0);
      s1 = std::fma(mant(w[i] & m1) - kMant, xv[4 * i + 1], s1);
      s0 = std::fma(mant(h & m0) - kMant, xv[4 * i + 2], s0);
      s1 = std::fma(mant(h & m1) - kMant, xv[4 * i + 3], s1);
    }
    const float sq = std::fma(s1, 1.f / 256.f, s0) * pow2_neg(shift);
    const float d = f16_bits(r.hdr.x & 0xffff), dmin = f16_bits(r.hdr.x >> 16);
    return d * float(sc) * sq - dmin * float(mn) * sum32(xv);
  } else if constexpr (std::is_same_v<F, Q8_0>) {
    float s0 = 0.f, s1 = 0.f;
    for (int i = 0; i < 8; ++i) {
      const uint32_t t = r.q[i] ^ 0x80808080u, h = t >> 16;
      s0 = std::fma(mant(t & 0xffu) - (kMant + 128.f), xv[4 * i], s0);
      s1 = std::fma(mant(t & 0xff00u) - (kMant + 32768.f), xv[4 * i + 1], s1);
      s0 = std::fma(mant(h & 0xffu) - (kMant + 128.f), xv[4 * i + 2], s0);
      s1 = std::fma(mant(h & 0xff00u) - (kMant + 32768.f), xv[4 * i + 3], s1);
    }
    return f16_bits(r.d) * std::fma(s1, 1.f / 256.f, s0);
  } else {
    constexpr bool bf16 = std::is_same_v<F, MlxAffine<4, true>> || std::is_same_v<F, MlxAffine<8, true>>;
    float w[kUnit];
    F::template fields<false>(r, w);
    const float scale = bf16 ? bf16_bits(r.scale) : f16_bits(r.scale);
    const float bias = bf16 ? bf16_bits(r.bias) : f16_bits(r.bias);
    return std::fma(scale, F::chains(w, xv), __fmul_rn(bias, sum32(xv)));
  }
}

template <class F>
void check(const char* name, int units, Args a = {}) {
  double worst = 0, worst1 = 0, worst_dec = 0;
  std::normal_distribution<float> nd;
  for (int trial = 0; trial < 20000; ++trial) {
    alignas(16) uint8_t buf[4096];
    const int64_t unit = random_unit_bytes(g_rng, buf, units);
    float xv[kUnit];
    // Every other trial spreads x over 2^-40 .. 2^40 (the subnormal dot2's stated range) and checks
    // only dot2 against the mantissa form bit for bit: the affine formats' scale * sum(q x) - min * sum(x)
    // cancels there far below sum |w x|, so the tolerance against ref is for Gaussian x.
    const bool spread_x = trial % 2 == 1;
    std::uniform_int_distribution<int> spread(-40, 40);
    for (auto& v : xv) v = spread_x ? std::ldexp(nd(g_rng), spread(g_rng)) : nd(g_rng);
    const auto r = F::template load<FromShared>(a, buf, 0, unit);
    float xs[kUnit];  // dot2's x (x_for_dot: scaled by 2^kXShift where its fields are subnormals)
    std::copy(xv, xv + kUnit, xs);
    x_for_dot<2, F>(xs);
    const float s1 = F::dot(r, unit, xv, kGrid), s2 = F::dot2(r, unit, xs, kGrid);
    // The fields as subnormals (MLX) or moved by byte permutes (Q8_0) must give the bits of the
    // mantissa form they replaced (mantissa_dot), on unscaled x.
    if constexpr (HasMantissaForm<F>::value) {
      const float sm = mantissa_dot<F>(r, unit, xv);
      if (std::memcmp(&sm, &s2, 4) != 0) {
        std::printf("%-8s FAIL trial %d unit %lld: dot2 %.9g != the mantissa form's %.9g\n", name, trial,
                    (long long)unit, s2, sm);
        ++g_fail;
        return;
      }
    }
    if (spread_x) continue;
    double ref = 0, bound = 0, wmax = 0;
    float wd[kUnit], w1[kUnit];
    // Formats the tensor-core paths dequantize have `decode`; Q2_KC (a GEMV-only read order of
    // Q2_K) has none: its weights are checked through the Q2_K map test below.
    constexpr bool has_decode = requires { F::decode(r, unit, wd, kGrid); };
    if constexpr (has_decode) F::decode(r, unit, wd, kGrid);
    for (int k = 0; k < kUnit; ++k) {
      float e[kUnit] = {};
      e[k] = 1.f;
      const double wk = F::dot(r, unit, e, kGrid);
      w1[k] = float(wk);
      ref += wk * xv[k];
      bound += std::fabs(wk * xv[k]);
      wmax = std::max(wmax, std::fabs(wk));
    }
    if (!std::isfinite(bound) || bound == 0) continue;
    // decode (the tensor-core paths' dequantization) gives the weights dot uses, to float
    // rounding of the unit's largest weight (its fields go through the mantissa, dot's through
    // int->float conversions; scale products may round in another order)
    for (int k = 0; k < kUnit && has_decode; ++k)
      if (!(std::fabs(double(wd[k]) - w1[k]) <= 1e-6 * wmax)) {
        std::printf("%-8s FAIL trial %d unit %lld weight %d: decode %.9g, dot with a one-hot x %.9g\n", name, trial,
                    (long long)unit, k, wd[k], w1[k]);
        ++g_fail;
        return;
      }
    worst_dec = std::max(worst_dec, [&] {
      double m = 0;
      for (int k = 0; k < kUnit && has_decode; ++k) m = std::max(m, std::fabs(double(wd[k]) - w1[k]) / wmax);
      return m;
    }());
    const double e1 = std::fabs(s1 - ref) / bound, e2 = std::fabs(s2 - ref) / bound;
    worst = std::max(worst, e2);
    worst1 = std::max(worst1, e1);
    if (!(e2 <= 4e-6)) {
      std::printf("%-8s FAIL trial %d unit %lld: dot %.9g dot2 %.9g ref %.9g sum|wx| %.3g\n", name, trial,
                  (long long)unit, s1, s2, ref, bound);
      ++g_fail;
      return;
    }
  }
  std::printf("%-8s PASS worst |dot2-ref|/sum|wx| %.3g (dot: %.3g), |decode - w| / max|w| %.3g\n", name, worst, worst1,
              worst_dec);
}

// Q8_0's kernel-2 global read (4-byte loads + funnel shifts) returns the same Raw as the
// 2-byte loads, at both alignments of a unit (34-byte blocks alternate 0 and 2 mod 4).
void check_q8_load() {
  alignas(16) uint8_t buf[34 * 65];
  for (auto& b : buf) b = uint8_t(g_rng());
  for (int u = 0; u < 64; ++u) {
    const Q8_0::Raw a = Q8_0::load<FromGlobal>(Args{}, buf, 0, u), b = Q8_0::load_global2(buf, u);
    bool same = a.d == b.d;
    for (int i = 0; i < 8; ++i) same = same && a.q[i] == b.q[i];
    if (!same) {
      std::printf("Q8_0 load_global2 FAIL unit %d: d %04x vs %04x, q[0] %08x vs %08x, q[7] %08x vs %08x\n", u, a.d, b.d,
                  a.q[0], b.q[0], a.q[7], b.q[7]);
      ++g_fail;
      return;
    }
  }
  std::printf("Q8_0 load_global2 PASS (64 units, both alignments)\n");
}

// Q2_KC (kernel 3's coalesced Q2_K read) is a permutation of Q2_K's units: weight j of plane
// s in unit 8b + 4h + k must be Q2_K's weight 8k + j of unit 8b + 4h + s, and x_float4 must
// point at that weight's column (read back through dot with one-hot x).
void check_q2kc_map() {
  alignas(16) uint8_t buf[84 * 3];
  int bad = 0;
  for (int trial = 0; trial < 200 && !bad; ++trial) {
    for (auto& b : buf) b = uint8_t(g_rng());
    for (int b = 0; b < 3; ++b) buf[84 * b + 81] &= 0x3b, buf[84 * b + 83] &= 0x3b;  // finite d, dmin
    for (int u = 0; u < 24 && !bad; ++u) {
      const int blk = u >> 3, h = (u >> 2) & 1, k = u & 3;
      const auto rc = Q2_KC::load<FromShared>(Args{}, buf, 0, u);
      for (int s = 0; s < 4; ++s) {
        const int old_unit = 8 * blk + 4 * h + s;
        const auto rq = Q2_K::load<FromShared>(Args{}, buf, 0, old_unit);
        for (int j = 0; j < 8; ++j) {
          float e1[kUnit] = {}, e2[kUnit] = {};
          e1[8 * s + j] = 1.f;
          e2[8 * k + j] = 1.f;
          const float wc = Q2_KC::dot(rc, u, e1, nullptr), wq = Q2_K::dot(rq, old_unit, e2, nullptr);
          const int64_t col = 4 * Q2_KC::x_float4(u, (8 * s + j) / 4) + j % 4, want_col = 256 * blk + 128 * h + 32 * s + 8 * k + j;
          if (!(wc == wq) || col != want_col) {
            std::printf("Q2_KC map FAIL unit %d plane %d j %d: %.9g vs Q2_K %.9g, column %lld vs %lld\n", u, s, j, wc, wq,
                        (long long)col, (long long)want_col);
            ++bad;
            break;
          }
        }
      }
    }
  }
  g_fail += bad;
  if (!bad) std::printf("Q2_KC map PASS (200 x 3 blocks: every weight = Q2_K's, x columns match)\n");
}

}  // namespace

int main() {
  check_q2kc_map();
  check<Q2_KC>("Q2_KC", 16);
  check_q8_load();
  check<Q8_0>("Q8_0", 64);
  check<Q4_K>("Q4_K", 16);
  check<Q2_K>("Q2_K", 16);
  check<IQ2_XXS>("IQ2_XXS", 16);
  static uint16_t sc[64], bi[64];
  for (int i = 0; i < 64; ++i) sc[i] = uint16_t(0x1800 + i), bi[i] = uint16_t(0xa400 + i);
  Args a{};
  a.scales = sc, a.biases = bi, a.groups_per_row = 8, a.group_shift = 6;
  check<MlxAffine<4, false>>("MLX_Q4", 16, a);
  check<MlxAffine<4, true>>("MLX_Q4b", 16, a);
  check<MlxAffine<8, true>>("MLX_Q8", 16, a);
  std::printf(g_fail ? "FAILED\n" : "ALL PASSED\n");
  return g_fail ? 1 : 0;
}
