#pragma once
// Internal to gemv_act.cu: one integer decoder per weight format for the GEMV on quantized
// activations (gemv_act.h). A "unit" is what one lane does per step: kLanes consecutive lanes
// share one weight block (the block an activation scale covers: 32 values for Q8_0, 256 for
// the Q8_K formats) and add their exact integer partial sums with shuffles, so the block's
// f32 term is computed once, from whole-block integers, in the order ds4's scalar code uses
// (core/act_quant.cpp). Every product there rounds where the source says it does: __fmul_rn /
// __fsub_rn keep nvcc from contracting them into FMAs.
//
// A decoder has:
//   Raw, load(args, row_bytes, unit)   the unit's weight bytes (gemv_formats.cuh's loads)
//   W, prep(raw, unit, tables)         the unit's weights as int8x4 words ready for dp4a, plus
//                                      what term() needs (gemv_act_rows decodes a unit once
//                                      and dots it with every input row)
//   X, load_x(xrow, unit)              the unit's activation bytes and scale (plain loads, not
//                                      __ldg: see the PDL note in gemv_act.cu; every line that
//                                      loads them says "PDL: input load" for pdl_sass_check.py)
//   Sum, dot(w, x)                     the unit's integer sums
//   add(a, b), shfl_xor(sum, o)        integer sums added / read from lane ^ o: the kernel adds
//                                      a block's kLanes lanes in xor rounds (every lane gets
//                                      the total; exact, so any order gives the same integers)
//   term(w, sum, x)                    the block's f32 contribution (used by the block's first lane)
// Unit order inside a block = the lanes' order; any split gives the same integers.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/gemv_formats.cuh"

namespace ds4::cuda::gemv_act_detail {

using gemv_detail::Args;
using gemv_detail::f16_bits;
using gemv_detail::FromGlobal;

// gemv_act's threads per block, from the row's units alone (narrow rows get fewer threads rather
// than idle ones). They are its f32 slots: gemv_act_rows (either kernel) walks a row with exactly
// these, which is what keeps its rows equal to gemv_act bit for bit.
constexpr int kActThreads = 128;
inline int act_threads_for(int64_t units) {
  return int(units < kActThreads ? (units + 31) / 32 * 32 : kActThreads);
}

// One quantized activation row on the device (gemv_act.h's ActQ8View without n / block).
struct XRow {
  const int8_t* q;
  const float* d;
  const int16_t* bs;
};

// IQ2_XXS's lookup tables, staged in shared memory per thread block (null for other formats
// and for the tables a decoder does not use): the signs only for the sign-table variant
// (ActIQ2_XXS4T), codes / sign_codes only for the byte-permute decoder (ActIQ2_XXSP).
struct Tables {
  const uint64_t* grid;   // 256 codebook entries: 8 unsigned grid bytes each
  const uint64_t* signs;  // 128 sign fields -> iq2_sign_mask(field)
  const uint32_t* codes = nullptr;       // 256 codebook entries -> iq2_grid_codes(entry)
  const uint32_t* sign_codes = nullptr;  // 128 sign fields -> iq2_sign_codes(field)
  // ActIQ2_XXS4L's lane tables: 32 copies of codes / sign_codes, word 32 e + lane holding entry
  // e for that lane, so a warp's 32 random lookups hit 32 banks (one wavefront). These point at
  // the calling lane's copy: entry e is lane_codes[32 e].
  const uint32_t* lane_codes = nullptr;
  const uint32_t* lane_signs = nullptr;
};

__device__ __forceinline__ int4 ld16(const int8_t* p) { return *reinterpret_cast<const int4*>(p); }  // PDL: input load
__device__ __forceinline__ int2 ld8(const int8_t* p) { return *reinterpret_cast<const int2*>(p); }  // PDL: input load

__device__ __forceinline__ int32_t shfl_xor32(int32_t v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }

// K 4-byte words of weight bytes from address `at` (4-byte aligned, or 2-byte aligned where the
// caller funnel-shifts the words by 16 bits): two aligned 16-byte loads at the 16-byte boundary at
// or below `at`, the words from word (at & 15) / 4 picked by selects (no indexed registers). A
// warp's lanes at a ~16-byte stride touch ~2.5x fewer sectors than with 4-byte loads. The second
// load may read up to 16 bytes past `at + 4 K`: DeviceBuffer's readable slack (memory.h) covers a
// tensor's end. ActIQ2_XXS4L (K = 5) and ActQ2_K4A (K = 4).
template <int K>
__device__ __forceinline__ void aligned_words(uintptr_t at, uint32_t (&out)[K]) {
  static_assert(K >= 1 && K <= 5, "at most 5 words past a 16-byte boundary fit the 32 loaded bytes");
  const uint8_t* base = reinterpret_cast<const uint8_t*>(at & ~uintptr_t(15));
  const uint4 lo = FromGlobal::u4(base), hi = FromGlobal::u4(base + 16);
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const bool odd = at & 4, far = at & 8;
  uint32_t a[K + 2];  // a[j] = w[j + (at / 4) % 2]
#pragma unroll
  for (int j = 0; j < K + 2; ++j) a[j] = odd ? w[j + 1] : w[j];
#pragma unroll
  for (int j = 0; j < K; ++j) out[j] = far ? a[j + 2] : a[j];
}

// 0xff in each byte of t whose top bit is set, 0 elsewhere: one prmt with the sign-replicate
// selector (PTX ISA: a selector nibble's msb replicates the selected byte's sign).
__host__ __device__ __forceinline__ uint32_t sign_bytes(uint32_t t) {
#ifdef __CUDA_ARCH__
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(t), "r"(0u), "n"(0xba98));
  return r;
#else
  uint32_t r = 0;
  for (int j = 0; j < 4; ++j)
    if ((t >> (8 * j + 7)) & 1u) r |= 0xffu << (8 * j);
  return r;
#endif
}

// IQ2_XXS sign field f (< 128: the 7 stored bits; the 8th is their even parity, as ds4
// decodes it) as a mask with 0xff in each byte whose weight is negative, without a table:
// multiplying by 0x10204080 puts bit j of a value of at most 7 bits at bit 8j + 7 (the copies
// at 7, 14, 21, 28 do not overlap, so nothing carries), and sign_bytes widens it. The high
// half takes bits 4..6 of f and the parity as bit 3 (popc << 3: its higher bits land on no
// byte's top bit). ~7 integer ops per 8 weights instead of a shared-memory lookup that bank
// conflicts make cost ~6 cycles of the SM's shared-memory pipe per warp (bench/cuda_gemv/NOTES.md).
// test_gemv_act_host checks all 128 fields against the bit-by-bit definition.
__host__ __device__ __forceinline__ uint64_t iq2_sign_mask(uint32_t f) {
#ifdef __CUDA_ARCH__
  const uint32_t pop = uint32_t(__popc(f));
#else
  const uint32_t pop = uint32_t(__builtin_popcount(f));
#endif
  const uint32_t hi = (f >> 4) + (pop << 3);
  return uint64_t(sign_bytes(f * 0x10204080u)) | (uint64_t(sign_bytes(hi * 0x10204080u)) << 32);
}

// Bytes of the pair (a, b) picked by the selector nibbles of s (prmt.b32's default mode; every
// selector here is < 8, so its sign-replicate bit is never set).
__host__ __device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(a, b, s);
#else
  const uint64_t v = uint64_t(a) | (uint64_t(b) << 32);
  uint32_t r = 0;
  for (int j = 0; j < 4; ++j) r |= uint32_t((v >> (8 * ((s >> (4 * j)) & 7u))) & 0xffu) << (8 * j);
  return r;
#endif
}

// The byte-permute IQ2_XXS decode: the grid's bytes are 8, 25 or 43 (codes 0, 1, 2); code c
// with bit 2 set for a negative weight selects byte c of the pair (kIq2Pos, kIq2Neg), so one
// prmt gives 4 signed weights and one dp4a dots them (instead of the sign mask's ~9 ops, 2 ANDs
// and 2 dp4a per 4 weights). iq2_grid_codes: entry g's 8 codes as nibbles; iq2_sign_codes:
// field f's signs as bit 2 of nibble j; a unit's selector word is their OR.
constexpr uint32_t kIq2Pos = 0x002b1908u;  // bytes 8, 25, 43, 0
constexpr uint32_t kIq2Neg = 0x00d5e7f8u;  // bytes -8, -25, -43, 0
__host__ __device__ constexpr uint32_t iq2_grid_codes(uint64_t g) {
  uint32_t c = 0;
  for (int j = 0; j < 8; ++j) {
    const uint32_t b = uint32_t(g >> (8 * j)) & 0xffu;
    c |= (uint32_t(b > 8) + uint32_t(b > 25)) << (4 * j);
  }
  return c;
}
// (From the definition -- bit j of f, the 8th the parity of f's 7 -- so the compile-time lane
// tables can use it; the same codes as derived from iq2_sign_mask.)
__host__ __device__ constexpr uint32_t iq2_sign_codes(uint32_t f) {
  uint32_t parity = 0;
  for (int j = 0; j < 7; ++j) parity ^= (f >> j) & 1u;
  const uint32_t s = (f & 127u) | (parity << 7);
  uint32_t c = 0;
  for (int j = 0; j < 8; ++j) c |= ((s >> j) & 1u) << (4 * j + 2);  // 4 in nibble j where weight j is negative
  return c;
}

// ---- Q8_0 weights (34-byte blocks) x Q8_0 activations: one lane per block. ----
struct ActQ8_0 {
  static constexpr int kLanes = 1, kValues = 32;
  using Raw = gemv_detail::Q8_0::Raw;
  using W = Raw;
  struct X {
    int4 q[2];
    float d;
  };
  struct Sum {
    int32_t v;
  };
  __device__ static Raw load(const Args&, const uint8_t* row, int64_t u) {
    return gemv_detail::Q8_0::load_global2(row, u);
  }
  __device__ static W prep(const Raw& r, int64_t, const Tables&) { return r; }
  __device__ static X load_x(const XRow& x, int64_t u) {
    return X{{ld16(x.q + 32 * u), ld16(x.q + 32 * u + 16)}, x.d[u]};  // PDL: input load
  }
  __device__ static Sum dot(const W& w, const X& x) {
    const int32_t xs[8] = {x.q[0].x, x.q[0].y, x.q[0].z, x.q[0].w, x.q[1].x, x.q[1].y, x.q[1].z, x.q[1].w};
    int32_t s = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) s = __dp4a(int32_t(w.q[i]), xs[i], s);
    return Sum{s};
  }
  __host__ __device__ static Sum add(Sum a, Sum b) { return Sum{a.v + b.v}; }
  __device__ static Sum shfl_xor(Sum s, int o) { return Sum{shfl_xor32(s.v, o)}; }  // kLanes 1: unused
  // ds4: (d_w * d_x) * isum (block_term: the tensor-core kernels form the same f32 value)
  __device__ static float block_term(float d_w, float d_x, int32_t isum) {
    return __fmul_rn(__fmul_rn(d_w, d_x), __int2float_rn(isum));
  }
  __device__ static float term(const W& w, const Sum& s, const X& x) { return block_term(f16_bits(w.d), x.d, s.v); }
};

// ---- Q2_K weights (84-byte blocks) x Q8_K activations, kL = 4 or 8 lanes per block (the
// default 4, gemv_act_set_lanes). A half (128 weights: 32 quant bytes, each byte holding one
// weight of each of the four 2-bit planes s) is split over kL / 2 lanes: unit u = kL b +
// (kL / 2) h + k takes quant bytes 32h + kB k .. + kB - 1 (kB = 64 / kL: 16 or 8) in all four
// planes, i.e. weights 128h + 32s + kB k + j (j < kB) of group 8h + 2s + kB k / 16, and the mins
// of the kM = 16 / kL groups 8h + kM k .. + kM - 1 (so a block's lanes cover its 16 groups' mins
// once). 4 lanes pay the shuffles, the block term and the scale / d loads once per 64 weights
// instead of 32.
// kAligned (4 lanes; gemv_act_set_q2k_aligned): the unit's 16 quant bytes (4-byte aligned: 84 b
// + 16 + 16 (2 h + k)) from two aligned 16-byte loads at the 16-byte boundary at or before them,
// the 4 words picked by selects (aligned_words), instead of four 4-byte loads: a warp's 4-byte
// loads at a 16-byte lane stride touch ~5x the sectors they use (the L1's cost; the same finding
// as IQ2_XXS's, ActIQ2_XXS4L). The same bytes: the same results bit for bit. ----
template <int kL, bool kAligned = false>
struct ActQ2_KS {
  static_assert(kL == 4 || kL == 8, "Q2_K: 4 or 8 lanes per block");
  static_assert(!kAligned || kL == 4, "Q2_K: the aligned loads take 4 lanes per block");
  static constexpr int kLanes = kL, kValues = 256;
  static constexpr int kB = 64 / kL, kWords = kB / 4, kM = 16 / kL;
  struct Raw {
    uint32_t q[kWords];  // quant bytes 32h + kB k ..
    uint32_t sc[2];      // the half's scale|min bytes 8h .. 8h + 7
    uint32_t dm;         // f16 d | f16 dmin << 16
  };
  struct W {
    uint32_t v[4 * kWords];  // plane s: v[kWords s + i] = quant word i's plane-s values (0..3)
    int32_t sc[4];           // plane s's group scale (low nibble)
    int32_t mn[kM];          // the mins (high nibbles) of groups 8h + kM k + j
    uint32_t dm;
  };
  struct X {
    int32_t q[4][kWords];   // plane s: values 256b + 128h + 32s + kB k ..
    int16_t bs[kM];         // bsums of groups 8h + kM k + j
    float d;
  };
  struct Sum {
    int32_t isum, summs;
  };
  __device__ static Raw load(const Args&, const uint8_t* row, int64_t u) {
    const uint8_t* p = row + (u / kL) * 84;
    const int h = int(u / (kL / 2)) & 1, k = int(u % (kL / 2));
    Raw r;
    if constexpr (kAligned) {
      aligned_words<kWords>(reinterpret_cast<uintptr_t>(p + 16 + 32 * h + kB * k), r.q);
    } else {
#pragma unroll
      for (int i = 0; i < kWords; ++i) r.q[i] = FromGlobal::u32(p + 16 + 32 * h + kB * k + 4 * i);
    }
    r.sc[0] = FromGlobal::u32(p + 8 * h);
    r.sc[1] = FromGlobal::u32(p + 8 * h + 4);
    r.dm = FromGlobal::u32(p + 80);
    return r;
  }
  __device__ static W prep(const Raw& r, int64_t u, const Tables&) {
    const int k = int(u % (kL / 2));
    const int g = kB * k / 16;  // the lane's group within a plane's 2: 0 or 1
    W w;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
      for (int i = 0; i < kWords; ++i) w.v[kWords * s + i] = (r.q[i] >> (2 * s)) & 0x03030303u;
      // group 8h + 2s + g: byte 2s + g of the half's 8 scale bytes
      w.sc[s] = int32_t((r.sc[s >> 1] >> (16 * (s & 1) + 8 * g)) & 0xfu);
    }
    // bytes kM k .. kM k + kM - 1 of the half's 8 scale bytes
    const uint32_t m = (kM * k >= 4 ? r.sc[1] : r.sc[0]) >> (8 * ((kM * k) & 3));
#pragma unroll
    for (int j = 0; j < kM; ++j) w.mn[j] = int32_t((m >> (8 * j + 4)) & 0xfu);
    w.dm = r.dm;
    return w;
  }
  __device__ static X load_x(const XRow& x, int64_t u) {
    const int64_t b = u / kL, h = (u / (kL / 2)) & 1, k = u % (kL / 2);
    const int8_t* q = x.q + 256 * b + 128 * h + kB * k;
    const int16_t* bs = x.bs + 16 * b + 8 * h + kM * k;
    X v;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      if constexpr (kWords == 4) {
        const int4 t = ld16(q + 32 * s);
        v.q[s][0] = t.x, v.q[s][1] = t.y, v.q[s][2] = t.z, v.q[s][3] = t.w;
      } else {
        const int2 t = ld8(q + 32 * s);
        v.q[s][0] = t.x, v.q[s][1] = t.y;
      }
    }
    if constexpr (kM == 4) {
      const uint2 t = *reinterpret_cast<const uint2*>(bs);  // PDL: input load
      v.bs[0] = int16_t(t.x & 0xffffu), v.bs[1] = int16_t(t.x >> 16), v.bs[2] = int16_t(t.y & 0xffffu),
      v.bs[3] = int16_t(t.y >> 16);
    } else {
      const uint32_t t = *reinterpret_cast<const uint32_t*>(bs);  // PDL: input load
      v.bs[0] = int16_t(t & 0xffffu), v.bs[1] = int16_t(t >> 16);
    }
    v.d = x.d[b];  // PDL: input load
    return v;
  }
  __device__ static Sum dot(const W& w, const X& x) {
    int32_t isum = 0;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      int32_t d = 0;
#pragma unroll
      for (int i = 0; i < kWords; ++i) d = __dp4a(int32_t(w.v[kWords * s + i]), x.q[s][i], d);
      isum += w.sc[s] * d;
    }
    int32_t summs = 0;
#pragma unroll
    for (int j = 0; j < kM; ++j) summs += w.mn[j] * int32_t(x.bs[j]);
    return Sum{isum, summs};
  }
  __host__ __device__ static Sum add(Sum a, Sum b) { return Sum{a.isum + b.isum, a.summs + b.summs}; }
  __device__ static Sum shfl_xor(Sum s, int o) { return Sum{shfl_xor32(s.isum, o), shfl_xor32(s.summs, o)}; }
  // ds4: dall = d_x * d, dmin = d_x * dmin; dall * isum - dmin * summs
  __device__ static float term(const W& w, const Sum& s, const X& x) {
    const float dall = __fmul_rn(x.d, f16_bits(uint16_t(w.dm & 0xffffu)));
    const float dmin = __fmul_rn(x.d, f16_bits(uint16_t(w.dm >> 16)));
    return __fsub_rn(__fmul_rn(dall, __int2float_rn(s.isum)), __fmul_rn(dmin, __int2float_rn(s.summs)));
  }
};
using ActQ2_K = ActQ2_KS<8>;
using ActQ2_K4 = ActQ2_KS<4>;
using ActQ2_K4A = ActQ2_KS<4, true>;

// ---- IQ2_XXS weights (66-byte blocks) x Q8_K activations: 8 lanes per block, lane p takes
// sub-block p (32 weights: 4 grid entries of 8, 4 sign fields, one 4-bit scale). The signed dot
// is dp4a(grid, x) - 2 dp4a(grid & negative-mask, x): grid bytes are 8..43, so both stay exact. ----
template <bool kTable>
struct ActIQ2_XXSS {
  static constexpr int kLanes = 8, kValues = 256;
  static constexpr bool kSignTable = kTable;  // signs from Tables::signs, else iq2_sign_mask
  static constexpr bool kCodes = false;       // Tables::codes unused
  using Raw = gemv_detail::IQ2_XXS::Raw;
  struct W {
    uint32_t g[8];   // grid bytes of weights 4i .. 4i + 3
    uint32_t gm[8];  // the same, only where the weight is negative
    int32_t ls;      // 2 * scale + 1
    uint16_t d;
  };
  struct X {
    int4 q[2];
    float d;
  };
  struct Sum {
    int32_t v;
  };
  __device__ static Raw load(const Args& a, const uint8_t* row, int64_t u) {
    return gemv_detail::IQ2_XXS::load<FromGlobal>(a, row, 0, u);
  }
  __device__ static W prep(const Raw& r, int64_t, const Tables& t) {
    W w;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = t.grid[(r.aux0 >> (8 * l)) & 0xffu];
      const uint32_t f = (r.aux1 >> (7 * l)) & 127u;
      const uint64_t m = kTable ? t.signs[f] : iq2_sign_mask(f);
      w.g[2 * l] = uint32_t(g), w.g[2 * l + 1] = uint32_t(g >> 32);
      w.gm[2 * l] = uint32_t(g & m), w.gm[2 * l + 1] = uint32_t((g & m) >> 32);
    }
    w.ls = int32_t(2 * (r.aux1 >> 28) + 1);
    w.d = r.d;
    return w;
  }
  __device__ static X load_x(const XRow& x, int64_t u) {
    const int8_t* q = x.q + 32 * u;  // unit u = 8b + p covers values 256b + 32p ..
    return X{{ld16(q), ld16(q + 16)}, x.d[u >> 3]};  // PDL: input load
  }
  __device__ static Sum dot(const W& w, const X& x) {
    const int32_t xs[8] = {x.q[0].x, x.q[0].y, x.q[0].z, x.q[0].w, x.q[1].x, x.q[1].y, x.q[1].z, x.q[1].w};
    int32_t all = 0, neg = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      all = __dp4a(int32_t(w.g[i]), xs[i], all);
      neg = __dp4a(int32_t(w.gm[i]), xs[i], neg);
    }
    return Sum{(all - 2 * neg) * w.ls};
  }
  __host__ __device__ static Sum add(Sum a, Sum b) { return Sum{a.v + b.v}; }
  __device__ static Sum shfl_xor(Sum s, int o) { return Sum{shfl_xor32(s.v, o)}; }
  // ds4: ((d_w * d_x) * bsum), and 0.125 * the row's sum; the power of two is exact per term.
  __device__ static float term(const W& w, const Sum& s, const X& x) {
    return __fmul_rn(__fmul_rn(__fmul_rn(f16_bits(w.d), x.d), __int2float_rn(s.v)), 0.125f);
  }
};
using ActIQ2_XXS = ActIQ2_XXSS<false>;

// ---- IQ2_XXS, 8 lanes per block as ActIQ2_XXS, decoded by byte permutes (kIq2Pos above):
// per 8 weights two 32-bit table reads (codes, sign codes), an OR, two prmt and two dp4a. The
// same signed integers, so the same results bit for bit. ----
struct ActIQ2_XXSP {
  static constexpr int kLanes = 8, kValues = 256;
  static constexpr bool kSignTable = false, kCodes = true;
  using Raw = ActIQ2_XXS::Raw;
  using X = ActIQ2_XXS::X;
  using Sum = ActIQ2_XXS::Sum;
  struct W {
    uint32_t v[8];  // signed weights 4i .. 4i + 3
    int32_t ls;     // 2 * scale + 1
    uint16_t d;
  };
  __device__ static Raw load(const Args& a, const uint8_t* row, int64_t u) { return ActIQ2_XXS::load(a, row, u); }
  __device__ static W prep(const Raw& r, int64_t, const Tables& t) {
    W w;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t c = t.codes[(r.aux0 >> (8 * l)) & 0xffu] | t.sign_codes[(r.aux1 >> (7 * l)) & 127u];
      w.v[2 * l] = byte_perm(kIq2Pos, kIq2Neg, c);
      w.v[2 * l + 1] = byte_perm(kIq2Pos, kIq2Neg, c >> 16);
    }
    w.ls = int32_t(2 * (r.aux1 >> 28) + 1);
    w.d = r.d;
    return w;
  }
  __device__ static X load_x(const XRow& x, int64_t u) { return ActIQ2_XXS::load_x(x, u); }
  __device__ static Sum dot(const W& w, const X& x) {
    const int32_t xs[8] = {x.q[0].x, x.q[0].y, x.q[0].z, x.q[0].w, x.q[1].x, x.q[1].y, x.q[1].z, x.q[1].w};
    int32_t s = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) s = __dp4a(int32_t(w.v[i]), xs[i], s);
    return Sum{s * w.ls};
  }
  __host__ __device__ static Sum add(Sum a, Sum b) { return ActIQ2_XXS::add(a, b); }
  __device__ static Sum shfl_xor(Sum s, int o) { return ActIQ2_XXS::shfl_xor(s, o); }
  __device__ static float term(const W& w, const Sum& s, const X& x) {
    return ActIQ2_XXS::term(ActIQ2_XXS::W{{}, {}, 0, w.d}, s, x);
  }
};

// ---- IQ2_XXS, 4 lanes per block (the default split): unit u = 4b + p takes sub-blocks 2p and
// 2p + 1 (64 weights), so the shuffles and the block term are paid once per 64 weights.
// Sub: the 8-lane decoder of one sub-block (ActIQ2_XXSS<false>: computed sign masks;
// ActIQ2_XXSS<true>: masks from the staged table, ActIQ2_XXS4T; ActIQ2_XXSP: byte permutes,
// ActIQ2_XXS4P). The same signed integers, so the same results bit for bit. ----
template <class Sub>
struct ActIQ2_XXS4S {
  using ActIQ2_XXS = Sub;
  static constexpr int kLanes = 4, kValues = 256;
  static constexpr bool kSignTable = Sub::kSignTable, kCodes = Sub::kCodes;
  struct Raw {
    typename ActIQ2_XXS::Raw sub[2];
  };
  struct W {
    typename ActIQ2_XXS::W sub[2];
  };
  struct X {
    typename ActIQ2_XXS::X sub[2];
  };
  using Sum = typename ActIQ2_XXS::Sum;
  // The unit's 16 bytes (66 b + 2 + 16 p .., only 2-byte aligned) as 4-byte loads from the
  // 4-byte boundary at or before them (off = 0 or 2), reassembled with funnel shifts as Q8_0's
  // load_global2 does: 5 loads instead of 8 two-byte ones (issue #23: the 2-byte loads made
  // IQ2_XXS issue ~2.4x Q8_0's load instructions per byte). When off = 2 the last load is 2
  // bytes, so nothing past the unit is read. The scale d only where term() reads it (the
  // block's first lane: w.sub[0].d); the other lanes' d is 0 and never used.
  __device__ static Raw load(const Args&, const uint8_t* row, int64_t u) {
    const uint8_t* p = row + (u >> 2) * 66;
    const uint8_t* q = p + 2 + 16 * (u & 3);
    const int off = int(reinterpret_cast<uintptr_t>(q) & 2);
    const uint8_t* b = q - off;
    uint32_t w[5];
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] = FromGlobal::u32(b + 4 * j);
    w[4] = off ? uint32_t(FromGlobal::u16(b + 16)) : 0u;
    const uint16_t d = (u & 3) == 0 ? FromGlobal::u16(p) : uint16_t(0);
    Raw r;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      r.sub[s].d = d;
      r.sub[s].aux0 = __funnelshift_r(w[2 * s], w[2 * s + 1], 8 * off);
      r.sub[s].aux1 = __funnelshift_r(w[2 * s + 1], w[2 * s + 2], 8 * off);
    }
    return r;
  }
  __device__ static W prep(const Raw& r, int64_t u, const Tables& t) {
    return W{{ActIQ2_XXS::prep(r.sub[0], 2 * u, t), ActIQ2_XXS::prep(r.sub[1], 2 * u + 1, t)}};
  }
  __device__ static X load_x(const XRow& x, int64_t u) {
    return X{{ActIQ2_XXS::load_x(x, 2 * u), ActIQ2_XXS::load_x(x, 2 * u + 1)}};
  }
  __device__ static Sum dot(const W& w, const X& x) {
    return Sum{ActIQ2_XXS::dot(w.sub[0], x.sub[0]).v + ActIQ2_XXS::dot(w.sub[1], x.sub[1]).v};
  }
  __host__ __device__ static Sum add(Sum a, Sum b) { return ActIQ2_XXS::add(a, b); }
  __device__ static Sum shfl_xor(Sum s, int o) { return ActIQ2_XXS::shfl_xor(s, o); }
  __device__ static float term(const W& w, const Sum& s, const X& x) { return ActIQ2_XXS::term(w.sub[0], s, x.sub[0]); }
};
using ActIQ2_XXS4 = ActIQ2_XXS4S<ActIQ2_XXSS<false>>;
using ActIQ2_XXS4T = ActIQ2_XXS4S<ActIQ2_XXSS<true>>;
using ActIQ2_XXS4P = ActIQ2_XXS4S<ActIQ2_XXSP>;

// ---- IQ2_XXS, 4 lanes per block as ActIQ2_XXS4, redesigned for the L1 (issue #23: the x6
// expert launches ran at ~40 % of copy on the H100, L1TEX-bound: ncu counted 63 % excess shared
// wavefronts from the codebook's random 8-byte lookups and 71 % excess global sectors from 4-byte
// loads at a 16.5-byte lane stride; session 20, bench/results/session20-2026-12-05/call2).
// - Weights: the unit's 16 bytes (2-byte aligned) by aligned_words (two aligned 16-byte loads,
//   words picked by selects) and funnel shifts.
// - Decode: byte permutes (ActIQ2_XXSP's codes) from the lane tables (Tables::lane_codes /
//   lane_signs), so each lookup is one conflict-free 4-byte shared read: per 8 weights two
//   lookups, an OR, two prmt and two dp4a.
// The same signed integers in the same 4-lane split, so the same results bit for bit. The 48 KiB
// of tables are staged per block (dynamic shared memory), so its launches take many row groups
// per block (gemv_act.cu). ----
struct ActIQ2_XXS4L {
  static constexpr int kLanes = 4, kValues = 256;
  static constexpr bool kLaneTables = true;  // gemv_act.cu stages them (Smem, table_kind 2)
  struct Raw {
    uint32_t q[4];  // sub-block s: aux0 = q[2 s] (grid indices), aux1 = q[2 s + 1] (signs, scale)
    uint16_t d;     // the block's scale, on its first lane only (term() reads it there)
  };
  struct W {
    uint32_t v[16];  // signed weights 4 i .. 4 i + 3 of the unit's 64
    int32_t ls[2];   // 2 * scale + 1 per sub-block
    uint16_t d;
  };
  using X = ActIQ2_XXS4::X;
  using Sum = ActIQ2_XXS::Sum;
  __device__ static Raw load(const Args&, const uint8_t* row, int64_t u) {
    const uint8_t* p = row + (u >> 2) * 66;
    const uintptr_t at = reinterpret_cast<uintptr_t>(p + 2 + 16 * (u & 3));  // 2-byte aligned
    uint32_t v[5];  // the 4-byte words from the one at or below `at`
    aligned_words<5>(at & ~uintptr_t(3), v);
    Raw r;
#pragma unroll
    for (int k = 0; k < 4; ++k) r.q[k] = __funnelshift_r(v[k], v[k + 1], 8 * uint32_t(at & 3));
    r.d = (u & 3) == 0 ? FromGlobal::u16(p) : uint16_t(0);
    return r;
  }
  __device__ static W prep(const Raw& r, int64_t, const Tables& t) {
    W w;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint32_t aux0 = r.q[2 * s], aux1 = r.q[2 * s + 1];
#pragma unroll
      for (int l = 0; l < 4; ++l) {
        const uint32_t c = t.lane_codes[32 * ((aux0 >> (8 * l)) & 0xffu)] | t.lane_signs[32 * ((aux1 >> (7 * l)) & 127u)];
        w.v[8 * s + 2 * l] = byte_perm(kIq2Pos, kIq2Neg, c);
        w.v[8 * s + 2 * l + 1] = byte_perm(kIq2Pos, kIq2Neg, c >> 16);
      }
      w.ls[s] = int32_t(2 * (aux1 >> 28) + 1);
    }
    w.d = r.d;
    return w;
  }
  __device__ static X load_x(const XRow& x, int64_t u) { return ActIQ2_XXS4::load_x(x, u); }
  __device__ static Sum dot(const W& w, const X& x) {
    int32_t sum = 0;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int4* q = x.sub[s].q;
      const int32_t xs[8] = {q[0].x, q[0].y, q[0].z, q[0].w, q[1].x, q[1].y, q[1].z, q[1].w};
      int32_t d = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) d = __dp4a(int32_t(w.v[8 * s + i]), xs[i], d);
      sum += d * w.ls[s];
    }
    return Sum{sum};
  }
  __host__ __device__ static Sum add(Sum a, Sum b) { return ActIQ2_XXS::add(a, b); }
  __device__ static Sum shfl_xor(Sum s, int o) { return ActIQ2_XXS::shfl_xor(s, o); }
  __device__ static float term(const W& w, const Sum& s, const X& x) {
    return ActIQ2_XXS::term(ActIQ2_XXS::W{{}, {}, 0, w.d}, s, x.sub[0]);
  }
};


}  // namespace ds4::cuda::gemv_act_detail
