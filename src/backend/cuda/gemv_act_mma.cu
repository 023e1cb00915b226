// gemv_act_mma (gemv_act_mma.h): y = W x for up to 16 quantized activation rows on int8 tensor
// cores. Roles in the MMA (m16n8k32 s8): the activation rows are A (M = 16 rows; rows >= n are
// zeros), the weight rows B (N = 8 weight rows per MMA), so one MMA serves all 16 inputs and a
// thread block can own as few as 8 weight rows (more blocks for the 1024-row projections).
//
// K order inside an MMA: the dot over k is a sum, so the k slots may hold any values as long as A
// and B agree. Lane (g, t) (g = lane / 4, t = lane % 4) feeds slots 4t..4t+3 and 16+4t..16+4t+3,
// here values 8t..8t+7 of the 32-value step, so each lane reads 8 consecutive bytes of its
// weight row (one IQ2_XXS grid entry) and of its activation rows.
//
// Data flow: a thread block owns kTiles * 8 weight rows and W warps; warp w stages its weight
// stages (S blocks of every row of the tile, one 16-row x S-block slab) into its own shared
// memory ring with cp.async (8 bytes for Q8_0, 4 for the others; coalesced: consecutive lanes,
// consecutive pieces of a row), up to 4 stages in flight, and decodes them from there (the int8
// B fragments). Activations are read straight from global memory (small, L2 resident), a stage's
// before the wait for its weights. Rows whose bytes are not 4-byte aligned (Q8_0 / IQ2_XXS rows of
// an odd number of blocks) take a synchronous 2-byte copy instead (kVec = 2): the same layout,
// the same math.
//
// Integers per block are exact; each block's f32 term is gemv_act's expression
// (gemv_act_formats.cuh: ActQ8_0 / ActQ2_KS / ActIQ2_XXSS ::term); the f32 order is in the header.
//   Q8_0:    one MMA per block per 8 weight rows; term (d_w * d_x) * isum.
//   Q2_K:    weights q * scale (0..45, fits int8: the packed multiply of four 2-bit values by a
//            4-bit scale never carries) so the 8 MMAs of a block accumulate isum = sum sc * dot;
//            summs = sum_j min_j * bsum_j by two m16n8k16 MMAs (bsums split into signed low
//            bytes and high bytes: bsum = 256 hi + lo); term dall * isum - dmin * summs.
//   IQ2_XXS: signed grid values (-43..43) by byte permutes (gemv_act_formats.cuh kIq2Pos), one MMA
//            per 32-value sub-block, times its 2 * scale + 1 in int32; term ((d_w d_x) isum) / 8.
#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_act_formats.cuh"
#include "backend/cuda/gemv_act_mma.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/iq2xxs_grid.h"
#include "backend/cuda/mma_sync.cuh"
#include "core/error.h"

namespace ds4::cuda {

namespace {

using gemv_act_detail::byte_perm;
using gemv_act_detail::iq2_grid_codes;
using gemv_act_detail::iq2_sign_codes;
using gemv_act_detail::kIq2Neg;
using gemv_act_detail::kIq2Pos;
using gemv_detail::f16_bits;
using gemv_detail::pdl_launch_dependents;
using gemv_detail::pdl_wait;

constexpr int kMaxWarps = 8;  // K split (also the threads per block / 32)
constexpr int kRing = 4;      // stages per warp in flight
constexpr size_t kSmemLimit = 46 * 1024;  // + IQ2_XXS's 1.5 KiB of static tables <= 48 KiB

__device__ const uint64_t d_mma_iq2xxs_grid[256] = {DS4_IQ2XXS_GRID_VALUES};

struct MmaArgs {
  const uint8_t* w;
  int64_t row_bytes, rows, nb;  // weight rows, blocks per row
  const int8_t* xq;
  const float* xd;
  const int16_t* xbs;
  int64_t x_row;  // values
  float* y;
  int64_t y_row;
  int n, warps, ring, pitch;
  int64_t stages;
};

using mma::cp_async_ca;
using mma::lds_u16;
using mma::lds_u32;
using mma::lds_u64_2;
using mma::cp_commit;
using mma::mma_s8_k16;
using mma::mma_s8_k32;
// Waits until at most `pending` (0..3) of this thread's groups are in flight.
__device__ __forceinline__ void cp_async_wait(int pending) {
  switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
  }
}

// The activation A fragment of one 32-value step at value v of the rows: lane (g, t) holds
// values v + 8t .. v + 8t + 7 of rows g and g + 8 (zeros for rows >= n). Plain loads (after
// the PDL wait; see gemv_act.cu's note on __ldg).
__device__ __forceinline__ void x_frag(const MmaArgs& a, int g, int t, int64_t v, uint32_t (&f)[4]) {
  uint2 lo = make_uint2(0, 0), hi = make_uint2(0, 0);
  if (g < a.n) lo = *reinterpret_cast<const uint2*>(a.xq + g * a.x_row + v + 8 * t);  // PDL: input load
  if (g + 8 < a.n) hi = *reinterpret_cast<const uint2*>(a.xq + (g + 8) * a.x_row + v + 8 * t);  // PDL: input load
  f[0] = lo.x, f[1] = hi.x, f[2] = lo.y, f[3] = hi.y;
}
// The activation scales of block b for rows g and g + 8 (0 past n).
template <int kValues>
__device__ __forceinline__ float2 x_scales(const MmaArgs& a, int g, int64_t b) {
  const int64_t per_row = a.x_row / kValues;
  return make_float2(g < a.n ? a.xd[g * per_row + b] : 0.f, g + 8 < a.n ? a.xd[(g + 8) * per_row + b] : 0.f);  // PDL: input load
}

// acc[c] += term for the fragment's (x row, weight row) pairs: c0 (g, 2t), c1 (g, 2t + 1),
// c2 (g + 8, 2t), c3 (g + 8, 2t + 1). term_of(c) gives the f32 term; rows g + 8 only when n > 8.
template <class Term>
__device__ __forceinline__ void add_terms(float (&acc)[4], int n, Term&& term_of) {
  acc[0] = __fadd_rn(acc[0], term_of(0));
  acc[1] = __fadd_rn(acc[1], term_of(1));
  if (n > 8) {
    acc[2] = __fadd_rn(acc[2], term_of(2));
    acc[3] = __fadd_rn(acc[3], term_of(3));
  }
}

// ---- formats: kBlockBytes, kValues (per activation scale block), kStageBlocks, and
// block<kTiles>(): one weight block of a staged slab into the accumulators. `row(r)` is the
// shared-memory start of the block in tile row r (0 .. 8 kTiles - 1). ----
struct MmaQ8_0 {
  static constexpr int kBlockBytes = 34, kValues = 32, kStageBlocks = 4, kMinBlocks = 3;
  struct X {
    uint32_t f[4];
    float2 d;
  };
  __device__ static void load_x(const MmaArgs& a, int g, int t, int64_t b, X& x) {
    x_frag(a, g, t, b * 32, x.f);
    x.d = x_scales<kValues>(a, g, b);
  }
  template <int kTiles, class Row>
  __device__ static void block(const uint32_t*, Row&& row, const X& x, int n, int g, int t, float (&acc)[kTiles][4]) {
#pragma unroll
    for (int T = 0; T < kTiles; ++T) {
      const uint2 wq = lds_u64_2(row(8 * T + g) + 2 + 8 * t);
      int c[4] = {0, 0, 0, 0};
      mma_s8_k32(c, x.f, wq.x, wq.y);
      const float dw[2] = {f16_bits(uint16_t(lds_u16(row(8 * T + 2 * t)))),
                           f16_bits(uint16_t(lds_u16(row(8 * T + 2 * t + 1))))};
      add_terms(acc[T], n, [&](int i) {
        return gemv_act_detail::ActQ8_0::block_term(dw[i & 1], i < 2 ? x.d.x : x.d.y, c[i]);
      });
    }
  }
};

struct MmaQ2_K {
  static constexpr int kBlockBytes = 84, kValues = 256, kStageBlocks = 1, kMinBlocks = 2;
  // Row g's bsums of groups 4t..4t+3 as the k16 A fragment halves: signed low bytes, high bytes.
  __device__ static void bsum_bytes(const MmaArgs& a, int r, int t, int64_t b, uint32_t& lo, uint32_t& hi) {
    lo = hi = 0;
    if (r >= a.n) return;
    const uint2 v = *reinterpret_cast<const uint2*>(a.xbs + r * (a.x_row / 16) + 16 * b + 4 * t);  // PDL: input load
    const uint32_t w[2] = {v.x, v.y};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int32_t s = int32_t(int16_t(uint16_t(w[e >> 1] >> (16 * (e & 1)))));
      const int32_t l = int32_t(int8_t(uint8_t(s & 0xff)));
      const int32_t h = (s - l) >> 8;  // exact: s - l is a multiple of 256
      lo |= uint32_t(l & 0xff) << (8 * e);
      hi |= uint32_t(h & 0xff) << (8 * e);
    }
  }
  struct X {
    uint32_t f[8][4];              // the 8 steps' A fragments
    uint32_t lo0, hi0, lo1, hi1;   // bsum bytes of rows g, g + 8
    float2 d;
  };
  __device__ static void load_x(const MmaArgs& a, int g, int t, int64_t b, X& x) {
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) x_frag(a, g, t, b * 256 + 32 * kk, x.f[kk]);
    bsum_bytes(a, g, t, b, x.lo0, x.hi0);
    bsum_bytes(a, g + 8, t, b, x.lo1, x.hi1);
    x.d = x_scales<kValues>(a, g, b);
  }
  template <int kTiles, class Row>
  __device__ static void block(const uint32_t*, Row&& row, const X& x, int n, int g, int t, float (&acc)[kTiles][4]) {
    // Tile row g's scale|min words and quant words 32h + 8t .. + 7 (h = 0, 1).
    uint32_t sw[kTiles][4], swt[kTiles][4], q[kTiles][2][2];
#pragma unroll
    for (int T = 0; T < kTiles; ++T) {
      const uint8_t* p = row(8 * T + g);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        sw[T][i] = lds_u32(p + 4 * i);
        swt[T][i] = sw[T][i] >> (8 * (t >> 1));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        q[T][h][0] = lds_u32(p + 16 + 32 * h + 8 * t);
        q[T][h][1] = lds_u32(p + 20 + 32 * h + 8 * t);
      }
    }
    int isum[kTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {  // value 32kk + l: half h = kk / 4, plane s = kk % 4, quant byte 32h + l
      const int h = kk >> 2, s = kk & 3;
#pragma unroll
      for (int T = 0; T < kTiles; ++T) {
        // group 8h + 2s + t / 2: byte 2 (s & 1) + t / 2 of scale word 2h + s / 2
        const uint32_t sc = (swt[T][2 * h + (s >> 1)] >> (16 * (s & 1))) & 0xfu;
        mma_s8_k32(isum[T], x.f[kk], ((q[T][h][0] >> (2 * s)) & 0x03030303u) * sc, ((q[T][h][1] >> (2 * s)) & 0x03030303u) * sc);
      }
    }
#pragma unroll
    for (int T = 0; T < kTiles; ++T) {
      // groups 4t .. 4t + 3 (selected, not indexed by t: a register array stays in registers)
      const uint32_t swg = t & 2 ? (t & 1 ? sw[T][3] : sw[T][2]) : (t & 1 ? sw[T][1] : sw[T][0]);
      const uint32_t mins = (swg >> 4) & 0x0f0f0f0fu;
      int sl[4] = {0, 0, 0, 0}, sh[4] = {0, 0, 0, 0};
      mma_s8_k16(sl, x.lo0, x.lo1, mins);
      mma_s8_k16(sh, x.hi0, x.hi1, mins);
      const uint32_t dm[2] = {lds_u32(row(8 * T + 2 * t) + 80), lds_u32(row(8 * T + 2 * t + 1) + 80)};
      // ActQ2_KS::term: dall = d_x * d, dmin = d_x * dmin; dall * isum - dmin * summs
      add_terms(acc[T], n, [&](int i) {
        const float xd = i < 2 ? x.d.x : x.d.y;
        const float dall = __fmul_rn(xd, f16_bits(uint16_t(dm[i & 1] & 0xffffu)));
        const float dmin = __fmul_rn(xd, f16_bits(uint16_t(dm[i & 1] >> 16)));
        const int summs = 256 * sh[i] + sl[i];
        return __fsub_rn(__fmul_rn(dall, __int2float_rn(isum[T][i])), __fmul_rn(dmin, __int2float_rn(summs)));
      });
    }
  }
};

struct MmaIQ2_XXS {
  static constexpr int kBlockBytes = 66, kValues = 256, kStageBlocks = 2, kMinBlocks = 2;
  // tables: 256 grid codes, then 128 sign codes (gemv_act_formats.cuh iq2_grid_codes / _sign_codes)
  struct X {
    uint32_t f[8][4];  // the 8 sub-blocks' A fragments
    float2 d;
  };
  __device__ static void load_x(const MmaArgs& a, int g, int t, int64_t b, X& x) {
#pragma unroll
    for (int p = 0; p < 8; ++p) x_frag(a, g, t, b * 256 + 32 * p, x.f[p]);
    x.d = x_scales<kValues>(a, g, b);
  }
  template <int kTiles, class Row>
  __device__ static void block(const uint32_t* tables, Row&& row, const X& x, int n, int g, int t,
                               float (&acc)[kTiles][4]) {
    int isum[kTiles][4] = {};
#pragma unroll
    for (int p = 0; p < 8; ++p) {  // sub-block p: values 32p .., bytes 2 + 8p (grid indices), 6 + 8p (signs, scale)
#pragma unroll
      for (int T = 0; T < kTiles; ++T) {
        const uint2 aux = lds_u64_2(row(8 * T + g) + 2 + 8 * p);
        const uint32_t aux0 = aux.x, aux1 = aux.y;
        const uint32_t code = tables[(aux0 >> (8 * t)) & 0xffu] | tables[256 + ((aux1 >> (7 * t)) & 127u)];
        int c[4] = {0, 0, 0, 0};
        mma_s8_k32(c, x.f[p], byte_perm(kIq2Pos, kIq2Neg, code), byte_perm(kIq2Pos, kIq2Neg, code >> 16));
        const int ls[2] = {int(2 * (row(8 * T + 2 * t)[9 + 8 * p] >> 4) + 1),
                           int(2 * (row(8 * T + 2 * t + 1)[9 + 8 * p] >> 4) + 1)};
#pragma unroll
        for (int i = 0; i < 4; ++i) isum[T][i] += ls[i & 1] * c[i];
      }
    }
#pragma unroll
    for (int T = 0; T < kTiles; ++T) {
      const float dw[2] = {f16_bits(uint16_t(lds_u16(row(8 * T + 2 * t)))),
                           f16_bits(uint16_t(lds_u16(row(8 * T + 2 * t + 1))))};
      // ActIQ2_XXSS::term: ((d_w * d_x) * isum) * 0.125
      add_terms(acc[T], n, [&](int i) {
        return __fmul_rn(__fmul_rn(__fmul_rn(dw[i & 1], i < 2 ? x.d.x : x.d.y), __int2float_rn(isum[T][i])), 0.125f);
      });
    }
  }
};

// Copies stage `s` (blocks s S .. of every tile row; rows past the weight's end repeat its last
// row, their outputs are dropped) into dst (row r at r * pitch): cp.async of kVec bytes
// (consecutive lanes, consecutive pieces of a row), or for kVec = 2 synchronous 2-byte copies
// (rows not 4-byte aligned).
template <class F, int kRows, int kVec>
__device__ __forceinline__ void copy_stage(const MmaArgs& a, uint8_t* dst, int64_t row0, int64_t s, int lane) {
  const int64_t b0 = s * F::kStageBlocks;
  const int blocks = a.nb - b0 < F::kStageBlocks ? int(a.nb - b0) : F::kStageBlocks;
  const uint8_t* src = a.w + b0 * F::kBlockBytes;
  auto rowp = [&](int r) { return src + (row0 + r < a.rows ? row0 + r : a.rows - 1) * a.row_bytes; };
  auto copy = [&](int pieces) {
    for (int i = lane; i < kRows * pieces; i += 32) {
      const int r = i / pieces, pc = i - r * pieces;
      if constexpr (kVec == 2)
        *reinterpret_cast<uint16_t*>(dst + r * a.pitch + 2 * pc) = __ldg(reinterpret_cast<const uint16_t*>(rowp(r) + 2 * pc));
      else
        cp_async_ca<kVec>(dst + r * a.pitch + kVec * pc, rowp(r) + kVec * pc);
    }
  };
  if (blocks == F::kStageBlocks) copy(F::kStageBlocks * F::kBlockBytes / kVec);  // a constant divisor
  else copy(blocks * F::kBlockBytes / kVec);  // the host checked: a multiple of kVec bytes
}

template <class F, int kTiles, int kVec>
// (F::kMinBlocks per SM bound the registers: Q8_0 3 -> 85, the 2-bit formats 2 -> 128; their
// staged activations took up to 172 at 2 tiles otherwise.)
__global__ void __launch_bounds__(32 * kMaxWarps, F::kMinBlocks) act_mma_kernel(MmaArgs a) {
  constexpr bool kAsync = kVec > 2;
  constexpr int kRows = 8 * kTiles;
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ uint32_t tables[std::is_same_v<F, MmaIQ2_XXS> ? 384 : 1];
  pdl_launch_dependents();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int W = a.warps;
  const int64_t row0 = int64_t(blockIdx.x) * kRows;
  const int slab = kRows * a.pitch;
  uint8_t* ring = smem + warp * a.ring * slab;
  const int64_t mine = warp < a.stages ? (a.stages - 1 - warp) / W + 1 : 0;  // this warp's stages
  auto issue = [&](int64_t i) {
    if (i < mine) copy_stage<F, kRows, kVec>(a, ring + (i % a.ring) * slab, row0, warp + i * W, lane);
    if constexpr (kAsync) cp_commit();  // empty groups too: the wait counts groups
  };
  for (int i = 0; i + 1 < a.ring; ++i) issue(i);  // weights before the PDL wait
  if constexpr (std::is_same_v<F, MmaIQ2_XXS>) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) tables[i] = iq2_grid_codes(d_mma_iq2xxs_grid[i]);
    for (int i = threadIdx.x; i < 128; i += blockDim.x) tables[256 + i] = iq2_sign_codes(uint32_t(i));
  }
  __syncthreads();
  pdl_wait();
  float acc[kTiles][4] = {};
  for (int64_t i = 0; i < mine; ++i) {
    issue(i + a.ring - 1);
    const int64_t b0 = (warp + i * W) * F::kStageBlocks;
    const int blocks = a.nb - b0 < F::kStageBlocks ? int(a.nb - b0) : F::kStageBlocks;
    // The stage's activations first: their latency overlaps the wait for its weights (the wait's
    // memory clobber keeps the compiler from hoisting them itself).
    typename F::X xs[F::kStageBlocks];
#pragma unroll
    for (int j = 0; j < F::kStageBlocks; ++j)
      if (j < blocks) F::load_x(a, g, t, b0 + j, xs[j]);
    if constexpr (kAsync) cp_async_wait(a.ring - 1);
    __syncwarp();
    const uint8_t* buf = ring + (i % a.ring) * slab;
    auto block = [&](int j) {
      auto row = [&](int r) { return buf + r * a.pitch + j * F::kBlockBytes; };
      F::template block<kTiles>(tables, row, xs[j], a.n, g, t, acc);
    };
    if (blocks == F::kStageBlocks) {  // every stage but maybe the last: no exits in the unrolled loop
#pragma unroll
      for (int j = 0; j < F::kStageBlocks; ++j) block(j);
    } else {
#pragma unroll
      for (int j = 0; j < F::kStageBlocks; ++j)
        if (j < blocks) block(j);
    }
    __syncwarp();  // the ring slot is refilled next iteration
  }
  // The warps' sums, added in warp order (the f32 order of gemv_act_mma.h).
  float4* red = reinterpret_cast<float4*>(smem + W * a.ring * slab);
#pragma unroll
  for (int T = 0; T < kTiles; ++T) red[(warp * kTiles + T) * 32 + lane] = make_float4(acc[T][0], acc[T][1], acc[T][2], acc[T][3]);
  __syncthreads();
  for (int T = warp; T < kTiles; T += W) {  // warp T adds tile T (W may be 1)
    float4 s = red[T * 32 + lane];
    for (int w = 1; w < W; ++w) {
      const float4 v = red[(w * kTiles + T) * 32 + lane];
      s.x = __fadd_rn(s.x, v.x), s.y = __fadd_rn(s.y, v.y), s.z = __fadd_rn(s.z, v.z), s.w = __fadd_rn(s.w, v.w);
    }
    const float out[4] = {s.x, s.y, s.z, s.w};
    mma::store_c_rows(out, g, t, row0 + 8 * T, a.n, a.rows, a.y, a.y_row);
  }
}

int g_tiles = 0;  // gemv_act_mma_set_tiles

template <class F>
int pitch_for() {
  int p = (F::kStageBlocks * F::kBlockBytes + 15) / 16 * 16;
  if (p % 128 == 0) p += 16;  // rows on different banks
  return p;
}

template <class F>
size_t smem_bytes(int warps, int ring, int tiles) {  // the rings, then the warps' sums
  return size_t(warps) * ring * 8 * tiles * pitch_for<F>() + size_t(warps) * tiles * 32 * sizeof(float4);
}

template <class F, int kTiles, int kVec>
void launch(const MmaArgs& a, unsigned blocks, cudaStream_t stream) {
  gemv_detail::launch_maybe_pdl_smem(gemv_pdl(), act_mma_kernel<F, kTiles, kVec>, dim3(blocks), 32 * a.warps,
                                     smem_bytes<F>(a.warps, a.ring, kTiles), stream, a);
}

// The widest copy the weight's alignment allows: every row start, stage start and the last
// (partial) stage's length a multiple of it; 8 bytes only for Q8_0 (its 136-byte stages).
template <class F>
int copy_width(const MmaArgs& a) {
  const int64_t tail = (a.nb % F::kStageBlocks) * F::kBlockBytes;
  auto fits = [&](int v) {
    return reinterpret_cast<uintptr_t>(a.w) % v == 0 && a.row_bytes % v == 0 &&
           (F::kStageBlocks * F::kBlockBytes) % v == 0 && tail % v == 0;
  };
  return fits(8) ? 8 : fits(4) ? 4 : 2;
}

template <class F, int kTiles>
void launch_tiles(const MmaArgs& a, unsigned blocks, cudaStream_t stream) {
  switch (copy_width<F>(a)) {
    case 8: return launch<F, kTiles, 8>(a, blocks, stream);
    case 4: return launch<F, kTiles, 4>(a, blocks, stream);
    default: return launch<F, kTiles, 2>(a, blocks, stream);
  }
}

// 8-row tiles per thread block (never changes a result, so it may follow n), from request 2's
// T1 / T2 columns (bench/cuda_gemv/NOTES.md): 2 when the weight has >= 4 x SMs tiles of 8 rows
// (Q8_0 1024->32768: 24.0 vs 32.4 us at n = 1), for Q2_K from 4096 rows (4096x2048: 4.2 vs
// 6.2 us at n = 1, 5.8 vs 9.5 at n = 16), for Q8_0 from 4096 rows when n > 8 (4096x4096: 19.1
// vs 22.9 us, 8192 wide: 36.6 vs 43.7); else 1 (IQ2_XXS: 4.9 vs 8.7 us at n = 1).
template <class F>
int tiles_for(int64_t rows, int n, int sm_count) {
  if ((rows + 7) / 8 >= 4 * int64_t(sm_count)) return 2;
  if (std::is_same_v<F, MmaQ2_K> && rows >= 4096) return 2;
  if (std::is_same_v<F, MmaQ8_0> && rows >= 4096 && n > 8) return 2;
  return 1;
}

template <class F>
void run(MmaArgs a, int sm_count, cudaStream_t stream) {
  const int tiles = g_tiles ? g_tiles : tiles_for<F>(a.rows, a.n, sm_count);
  a.pitch = pitch_for<F>();
  // Stages in flight per warp: up to kRing, no more than the warp has, and within the 48 KiB of
  // dynamic shared memory a launch gets without an opt-in attribute (cudaFuncSetAttribute is
  // host state the engine would have to set outside graph capture).
  const int64_t per_warp = (a.stages + a.warps - 1) / a.warps;
  int ring = int(std::min<int64_t>(kRing, per_warp));
  while (ring > 1 && smem_bytes<F>(a.warps, ring, tiles) > kSmemLimit) --ring;
  a.ring = ring;
  const unsigned blocks = unsigned((a.rows + 8 * tiles - 1) / (8 * tiles));
  if (tiles == 2) return launch_tiles<F, 2>(a, blocks, stream);
  launch_tiles<F, 1>(a, blocks, stream);
}

int stage_blocks(DType t) {
  switch (t) {
    case DType::Q8_0: return MmaQ8_0::kStageBlocks;
    case DType::Q2_K: return MmaQ2_K::kStageBlocks;
    case DType::IQ2_XXS: return MmaIQ2_XXS::kStageBlocks;
    default: throw InputError("cuda gemv_act_mma: weight type " + std::string(dtype_name(t)) + " is not supported");
  }
}

using gemv_detail::sm_count;

}  // namespace

// Warps: 8, never more than the row has stages (rows does not matter yet).
GemvActMmaSplit gemv_act_mma_split(DType type, int64_t rows, int64_t cols) {
  (void)rows;
  const int s = stage_blocks(type);
  const int64_t nb = cols / act_values_per_scale(act_block_for(type));
  const int64_t stages = (nb + s - 1) / s;
  return GemvActMmaSplit{int(std::max<int64_t>(1, std::min<int64_t>(kMaxWarps, stages))), s};
}

void gemv_act_mma_set_tiles(int tiles) {
  if (tiles < 0 || tiles > 2) throw InputError("cuda gemv_act_mma: tiles " + std::to_string(tiles) + " is not 0, 1 or 2");
  g_tiles = tiles;
}

void gemv_act_mma(const WeightMatrix& w, const ActQ8View& x, float* y, int n, int64_t x_row, int64_t y_row,
                  cudaStream_t stream) {
  const std::string who = "cuda gemv_act_mma";
  const int sb = stage_blocks(w.type);
  const ActBlock want = act_block_for(w.type);
  if (x.block != want)
    throw InputError(who + ": " + std::string(dtype_name(w.type)) + " weights take " +
                     (want == ActBlock::kQ8_0 ? "Q8_0" : "Q8_K") + " activation blocks");
  const int64_t bv = act_values_per_scale(want);
  if (w.rows <= 0 || w.cols <= 0 || w.cols % bv != 0 || x.n != w.cols)
    throw InputError(who + ": weight " + std::to_string(w.rows) + "x" + std::to_string(w.cols) + " and activation of " +
                     std::to_string(x.n) + " values (cols a positive multiple of " + std::to_string(bv) + ", equal)");
  if (n < 1 || n > kGemvActMmaMaxRows) throw InputError(who + ": n " + std::to_string(n) + " is not in 1..16");
  if (x_row < w.cols || x_row % std::max<int64_t>(bv, 16) != 0)
    throw InputError(who + ": x_row " + std::to_string(x_row) + " (>= cols, a multiple of the block and of 16)");
  // (one row: its stride is never used and may be anything, e.g. 0 in the MTP head's step)
  if (n > 1 && y_row < w.rows)
    throw InputError(who + ": y_row " + std::to_string(y_row) + " < rows " + std::to_string(w.rows) + " for n " +
                     std::to_string(n));
  auto aligned = [](const void* p, size_t al) { return reinterpret_cast<uintptr_t>(p) % al == 0; };
  if (!x.q || !x.d || !aligned(x.q, 8) || (want == ActBlock::kQ8_K && (!x.bsums || !aligned(x.bsums, 8))))
    throw InputError(who + ": activation pointers missing or misaligned (q 8 bytes, bsums 8)");
  MmaArgs a{};
  a.w = static_cast<const uint8_t*>(w.data);
  a.row_bytes = w.row_stride_bytes();
  a.rows = w.rows;
  a.nb = w.cols / bv;
  a.xq = x.q, a.xd = x.d, a.xbs = x.bsums, a.x_row = x_row;
  a.y = y, a.y_row = y_row, a.n = n;
  a.stages = (a.nb + sb - 1) / sb;
  a.warps = gemv_act_mma_split(w.type, w.rows, w.cols).warps;
  switch (w.type) {
    case DType::Q8_0: return run<MmaQ8_0>(a, sm_count(), stream);
    case DType::Q2_K: return run<MmaQ2_K>(a, sm_count(), stream);
    default: return run<MmaIQ2_XXS>(a, sm_count(), stream);
  }
}

}  // namespace ds4::cuda
