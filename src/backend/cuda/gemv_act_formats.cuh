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

// One quantized activation row on the device (gemv_act.h's ActQ8View without n / block).
struct XRow {
  const int8_t* q;
  const float* d;
  const int16_t* bs;
};

// IQ2_XXS's lookup tables, staged in shared memory per thread block (null for other formats).
struct Tables {
  const uint64_t* grid;   // 256 codebook entries: 8 unsigned grid bytes each
  const uint64_t* signs;  // 128 sign fields -> 0xff in each byte whose weight is negative
};

__device__ __forceinline__ int4 ld16(const int8_t* p) { return *reinterpret_cast<const int4*>(p); }  // PDL: input load
__device__ __forceinline__ int2 ld8(const int8_t* p) { return *reinterpret_cast<const int2*>(p); }  // PDL: input load

__device__ __forceinline__ int32_t shfl_xor32(int32_t v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }

// IQ2_XXS sign field i (7 stored bits; the 8th is their even parity, as ds4 decodes it) as a
// mask with 0xff in each byte whose weight is negative. Each nibble's bit j is moved to bit
// 8j by one multiply (the four shifted copies do not overlap), then widened to 0xff by
// another: a few integer ops instead of a loop per bit (gemv_act.cu stages the 128 masks per
// thread block; test_gemv_act_host checks them against the bit-by-bit definition).
__host__ __device__ __forceinline__ uint64_t iq2_sign_mask(uint32_t i) {
  uint32_t p = i & 127u;  // parity by xor folding (host and device alike)
  p ^= p >> 4, p ^= p >> 2, p ^= p >> 1;
  const uint32_t s = (i & 127u) | ((p & 1u) << 7);
  const uint32_t lo = (((s & 15u) * 0x00204081u) & 0x01010101u) * 0xffu;
  const uint32_t hi = (((s >> 4) * 0x00204081u) & 0x01010101u) * 0xffu;
  return uint64_t(lo) | (uint64_t(hi) << 32);
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
  // ds4: (d_w * d_x) * isum
  __device__ static float term(const W& w, const Sum& s, const X& x) {
    return __fmul_rn(__fmul_rn(f16_bits(w.d), x.d), __int2float_rn(s.v));
  }
};

// ---- Q2_K weights (84-byte blocks) x Q8_K activations: 8 lanes per block, split as Q2_KC
// (gemv_formats.cuh): unit u = 8b + 4h + k takes quant bytes 32h + 8k .. +7 in all four 2-bit
// planes s, i.e. weights 128h + 32s + 8k + j (j < 8) of group 8h + 2s + k/2, and the min term of
// groups 8h + 2k and 8h + 2k + 1 (so the 8 lanes cover the 16 groups' mins once). ----
struct ActQ2_K {
  static constexpr int kLanes = 8, kValues = 256;
  using Raw = gemv_detail::Q2_KC::Raw;
  struct W {
    uint32_t v[8];  // plane s: v[2s] = bytes 0..3, v[2s + 1] = bytes 4..7 (values 0..3)
    int32_t sc[4];  // plane s's group scale (low nibble)
    int32_t mn[2];  // the mins (high nibbles) of groups 8h + 2k, 8h + 2k + 1
    uint32_t dm;    // f16 d | f16 dmin << 16
  };
  struct X {
    int2 q[4];    // plane s: values 256b + 128h + 32s + 8k .. +7
    uint32_t bs;  // bsums of groups 8h + 2k (low half) and 8h + 2k + 1 (high half)
    float d;
  };
  struct Sum {
    int32_t isum, summs;
  };
  __device__ static Raw load(const Args& a, const uint8_t* row, int64_t u) {
    return gemv_detail::Q2_KC::load<FromGlobal>(a, row, 0, u);
  }
  __device__ static W prep(const Raw& r, int64_t u, const Tables&) {
    const int k = int(u & 3);
    W w;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      w.v[2 * s] = (r.q[0] >> (2 * s)) & 0x03030303u;
      w.v[2 * s + 1] = (r.q[1] >> (2 * s)) & 0x03030303u;
      // group 8h + 2s + k/2: byte 2s + k/2 of the half's 8 scale bytes
      w.sc[s] = int32_t((r.sc[s >> 1] >> (16 * (s & 1) + 8 * (k >> 1))) & 0xfu);
    }
    const uint32_t m = (k >> 1 ? r.sc[1] : r.sc[0]) >> (16 * (k & 1));  // bytes 2k, 2k + 1 of the half
    w.mn[0] = int32_t((m >> 4) & 0xfu);
    w.mn[1] = int32_t((m >> 12) & 0xfu);
    w.dm = r.dm;
    return w;
  }
  __device__ static X load_x(const XRow& x, int64_t u) {
    const int64_t b = u >> 3, h = (u >> 2) & 1, k = u & 3;
    const int8_t* q = x.q + 256 * b + 128 * h + 8 * k;
    X v;
#pragma unroll
    for (int s = 0; s < 4; ++s) v.q[s] = ld8(q + 32 * s);
    v.bs = *reinterpret_cast<const uint32_t*>(x.bs + 16 * b + 8 * h + 2 * k);  // PDL: input load
    v.d = x.d[b];  // PDL: input load
    return v;
  }
  __device__ static Sum dot(const W& w, const X& x) {
    int32_t isum = 0;
#pragma unroll
    for (int s = 0; s < 4; ++s) isum += w.sc[s] * __dp4a(int32_t(w.v[2 * s + 1]), x.q[s].y, __dp4a(int32_t(w.v[2 * s]), x.q[s].x, 0));
    const int32_t summs = w.mn[0] * int32_t(int16_t(x.bs & 0xffffu)) + w.mn[1] * (int32_t(x.bs) >> 16);
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

// ---- IQ2_XXS weights (66-byte blocks) x Q8_K activations: 8 lanes per block, lane p takes
// sub-block p (32 weights: 4 grid entries of 8, 4 sign fields, one 4-bit scale). The signed dot
// is dp4a(grid, x) - 2 dp4a(grid & negative-mask, x): grid bytes are 8..43, so both stay exact. ----
struct ActIQ2_XXS {
  static constexpr int kLanes = 8, kValues = 256;
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
      const uint64_t m = t.signs[(r.aux1 >> (7 * l)) & 127u];
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

// ---- Q2_K, 4 lanes per block (the default split, gemv_act_set_lanes): unit u = 4b + 2h + k
// takes quant bytes 32h + 16k .. +15 in all four planes, i.e. weights 128h + 32s + 16k + j
// (j < 16) = exactly group 8h + 2s + k per plane, and the mins of groups 8h + 4k .. 8h + 4k + 3
// (scale word k of the half). Twice the weights per lane of ActQ2_K: the shuffles, the block
// term and the scale / d loads are paid once per 64 weights instead of 32. ----
struct ActQ2_K4 {
  static constexpr int kLanes = 4, kValues = 256;
  struct Raw {
    uint32_t q[4];   // quant bytes 32h + 16k .. +15
    uint32_t sc[2];  // scale|min bytes 8h .. 8h + 7
    uint32_t dm;
  };
  struct W {
    uint32_t v[16];  // plane s: v[4s + i] = quant bytes 4i .. 4i + 3 of the lane (values 0..3)
    int32_t sc[4];   // plane s's group scale
    int32_t mn[4];   // the mins of groups 8h + 4k + j
    uint32_t dm;
  };
  struct X {
    int4 q[4];  // plane s: values 256b + 128h + 32s + 16k .. +15
    uint2 bs;   // bsums of groups 8h + 4k .. +3
    float d;
  };
  using Sum = ActQ2_K::Sum;
  __device__ static Raw load(const Args&, const uint8_t* row, int64_t u) {
    const uint8_t* p = row + (u >> 2) * 84;
    const int h = int(u >> 1) & 1, k = int(u & 1);
    Raw r;
#pragma unroll
    for (int i = 0; i < 4; ++i) r.q[i] = FromGlobal::u32(p + 16 + 32 * h + 16 * k + 4 * i);
    r.sc[0] = FromGlobal::u32(p + 8 * h);
    r.sc[1] = FromGlobal::u32(p + 8 * h + 4);
    r.dm = FromGlobal::u32(p + 80);
    return r;
  }
  __device__ static W prep(const Raw& r, int64_t u, const Tables&) {
    const int k = int(u & 1);
    W w;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
      for (int i = 0; i < 4; ++i) w.v[4 * s + i] = (r.q[i] >> (2 * s)) & 0x03030303u;
      // group 8h + 2s + k: byte 2s + k of the half's 8 scale bytes
      w.sc[s] = int32_t((r.sc[s >> 1] >> (16 * (s & 1) + 8 * k)) & 0xfu);
    }
    const uint32_t m = k ? r.sc[1] : r.sc[0];  // bytes 4k .. 4k + 3 of the half
#pragma unroll
    for (int j = 0; j < 4; ++j) w.mn[j] = int32_t((m >> (8 * j + 4)) & 0xfu);
    w.dm = r.dm;
    return w;
  }
  __device__ static X load_x(const XRow& x, int64_t u) {
    const int64_t b = u >> 2, h = (u >> 1) & 1, k = u & 1;
    const int8_t* q = x.q + 256 * b + 128 * h + 16 * k;
    X v;
#pragma unroll
    for (int s = 0; s < 4; ++s) v.q[s] = ld16(q + 32 * s);
    v.bs = *reinterpret_cast<const uint2*>(x.bs + 16 * b + 8 * h + 4 * k);  // PDL: input load
    v.d = x.d[b];  // PDL: input load
    return v;
  }
  __device__ static Sum dot(const W& w, const X& x) {
    int32_t isum = 0;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      int32_t d = __dp4a(int32_t(w.v[4 * s]), x.q[s].x, 0);
      d = __dp4a(int32_t(w.v[4 * s + 1]), x.q[s].y, d);
      d = __dp4a(int32_t(w.v[4 * s + 2]), x.q[s].z, d);
      d = __dp4a(int32_t(w.v[4 * s + 3]), x.q[s].w, d);
      isum += w.sc[s] * d;
    }
    const int32_t summs = w.mn[0] * int32_t(int16_t(x.bs.x & 0xffffu)) + w.mn[1] * (int32_t(x.bs.x) >> 16) +
                          w.mn[2] * int32_t(int16_t(x.bs.y & 0xffffu)) + w.mn[3] * (int32_t(x.bs.y) >> 16);
    return Sum{isum, summs};
  }
  __host__ __device__ static Sum add(Sum a, Sum b) { return ActQ2_K::add(a, b); }
  __device__ static Sum shfl_xor(Sum s, int o) { return ActQ2_K::shfl_xor(s, o); }
  __device__ static float term(const W& w, const Sum& s, const X& x) {
    return ActQ2_K::term(ActQ2_K::W{{}, {}, {}, w.dm}, s, ActQ2_K::X{{}, 0, x.d});
  }
};

// ---- IQ2_XXS, 4 lanes per block (the default split): unit u = 4b + p takes sub-blocks 2p and
// 2p + 1 (64 weights), so the shuffles and the block term are paid once per 64 weights. ----
struct ActIQ2_XXS4 {
  static constexpr int kLanes = 4, kValues = 256;
  struct Raw {
    ActIQ2_XXS::Raw sub[2];
  };
  struct W {
    ActIQ2_XXS::W sub[2];
  };
  struct X {
    ActIQ2_XXS::X sub[2];
  };
  using Sum = ActIQ2_XXS::Sum;
  __device__ static Raw load(const Args& a, const uint8_t* row, int64_t u) {
    return Raw{{ActIQ2_XXS::load(a, row, 2 * u), ActIQ2_XXS::load(a, row, 2 * u + 1)}};
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

}  // namespace ds4::cuda::gemv_act_detail
