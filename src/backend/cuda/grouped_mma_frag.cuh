#pragma once
// Internal to grouped_mma_bf16.cu (and its host test, test_grouped_mma_frag): a weight unit
// decoded straight into the BF16 pairs of mma.sync A fragments.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "backend/cuda/gemv_formats.cuh"

namespace ds4::cuda::gemv_detail {

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}

// A unit's 32 weights as 16 BF16 pairs (pk[i] = weights 2i, 2i + 1, the lower in the low half):
// by default F::decode to floats, then rounded. The 2-bit formats take fewer instructions per
// weight (the MMA is bound by this decode): their weights take 3 (IQ2_XXS: d * {8, 25, 43}) or
// 4 (Q2_K: dl * q - ml, q = 0..3 per 16 weights) values per unit, so the unit rounds those to
// BF16 once (the same FP32 expressions as F::decode: the same bits) and byte-permutes them into
// place, with IQ2_XXS's signs as XOR masks. `tables` (kTableBytes in shared memory) is filled
// by init(tables, IQ2_XXS grid, first, step) from the block's threads (thread first of step).
template <class F>
struct Frag {
  static constexpr int kTableBytes = 8;
  __device__ static void init(void*, const uint64_t*, int, int) {}
  __device__ static void decode(const typename F::Raw& r, int64_t unit, uint32_t (&pk)[16], const void* tables) {
    float w[kUnit];
    F::decode(r, unit, w, tables);
#pragma unroll
    for (int i = 0; i < 16; ++i) pk[i] = pack_bf16(w[2 * i], w[2 * i + 1]);
  }
};

template <>
struct Frag<IQ2_XXS> {
  // sel[i]: grid entry i's 4 pairs as __byte_perm selectors (16 bits each) into {d*8, d*25 | d*43};
  // sign[s7]: the 4 pairs' sign masks (bits 15 and 31) of a 7-bit sign field and its parity bit.
  struct Tables {
    uint64_t sel[256];
    uint4 sign[128];
  };
  static constexpr int kTableBytes = sizeof(Tables);
  __device__ static void init(void* p, const uint64_t* grid, int first, int step) {
    Tables& tb = *static_cast<Tables*>(p);
    for (int i = first; i < 256; i += step) {
      const uint64_t g = grid[i];
      uint64_t sel = 0;
      for (int k = 0; k < 8; ++k) {
        const uint32_t v = uint32_t(g >> (8 * k)) & 0xffu, c = v == 8 ? 0 : v == 25 ? 1 : 2;
        sel |= uint64_t(2 * c | (2 * c + 1) << 4) << (8 * k);
      }
      tb.sel[i] = sel;
    }
    for (int i = first; i < 128; i += step) {
      const uint32_t s = uint32_t(i) | ((__popc(i) & 1u) << 7);
      uint32_t m[4];
      for (int q = 0; q < 4; ++q) m[q] = ((s >> (2 * q)) & 1u) << 15 | ((s >> (2 * q + 1)) & 1u) << 31;
      tb.sign[i] = make_uint4(m[0], m[1], m[2], m[3]);
    }
  }
  __device__ static void decode(const IQ2_XXS::Raw& r, int64_t, uint32_t (&pk)[16], const void* p) {
    const Tables& tb = *static_cast<const Tables*>(p);
    const float db = f16_bits(r.d) * (0.5f + float(r.aux1 >> 28)) * 0.25f;  // as IQ2_XXS::decode
    const uint32_t lo = pack_bf16(db * 8.f, db * 25.f), hi = pack_bf16(db * 43.f, db * 43.f);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t sel = tb.sel[byte_of(r.aux0, l)];
      const uint4 sg = tb.sign[(r.aux1 >> (7 * l)) & 127];
      const uint32_t m[4] = {sg.x, sg.y, sg.z, sg.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) pk[4 * l + q] = __byte_perm(lo, hi, uint32_t(sel >> (16 * q))) ^ m[q];  // nibbles 0-3
    }
  }
};

template <>
struct Frag<Q2_K> {
  static constexpr int kTableBytes = 8;
  __device__ static void init(void*, const uint64_t*, int, int) {}
  __device__ static void decode(const Q2_K::Raw& r, int64_t unit, uint32_t (&pk)[16], const void*) {
    const int shift = 2 * int(unit & 3);
    const float d = f16_bits(r.dm & 0xffff), dmin = f16_bits(r.dm >> 16);  // as Q2_K::decode
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const uint32_t scm = (r.sc >> (8 * g)) & 0xff;
      const float dl = d * float(scm & 0xf), ml = dmin * float(scm >> 4);
      float v[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) v[q] = dl * (mant(uint32_t(q)) - kMant) - ml;
      const uint32_t lo = pack_bf16(v[0], v[1]), hi = pack_bf16(v[2], v[3]);
      // weights 4i..4i+3: 2-bit codes c in bytes 0..3 of (q[i] >> shift) & 0x03030303; a pair's
      // selector nibbles 2c0, 2c0 + 1, 2c1, 2c1 + 1 = 0x1010 + (c0 | c1 << 8) * 0x22
#pragma unroll
      for (int i = 4 * g; i < 4 * g + 4; ++i) {
        const uint32_t c = (r.q[i] >> shift) & 0x03030303u;
        pk[2 * i] = __byte_perm(lo, hi, 0x1010u + (c & 0x0303u) * 0x22u);
        pk[2 * i + 1] = __byte_perm(lo, hi, 0x1010u + ((c >> 16) & 0x0303u) * 0x22u);
      }
    }
  }
};

}  // namespace ds4::cuda::gemv_detail
