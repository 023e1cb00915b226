#pragma once
// Internal to grouped_mma_int8.cu: one lane's weight bytes per K tile (Raw<F>) and the staged
// kernel's shared-memory windows. In a header of its own so the host-only test
// (tests/cuda/test_grouped_mma_stage.cpp) can check the window arithmetic and the staged reads
// against the global ones without a GPU.
#include <cstdint>
#include <type_traits>

#include "backend/cuda/gemv_formats.cuh"

namespace ds4::cuda::grouped_mma_int8_detail {

using gemv_detail::FromGlobal;

enum class Fmt { kQ8_0, kQ2_K, kIQ2_XXS };

// Bytes per 256 columns of a row: one super-block of the K-quants, 8 blocks of Q8_0.
template <Fmt F>
constexpr int kSuperBytes = F == Fmt::kQ2_K ? 84 : F == Fmt::kIQ2_XXS ? 66 : 8 * 34;

// One lane's weight bytes of one weight row for one K tile (columns 128 kt ..).
template <Fmt F>
struct Raw;
template <>
struct Raw<Fmt::kQ8_0> {  // 4 blocks of 34 bytes: {f16 d, i8 q[32]}
  uint32_t d[4], lo[4], hi[4];
  // Blocks 4 h .. 4 h + 3 of the 256 columns at p. A staged row (16-byte aligned in shared
  // memory) has the odd blocks' quants 4-byte aligned (34 b + 2 = 0 mod 4 for odd b): one 4-byte
  // load per word there; global rows keep 2-byte loads (any 2-byte aligned start).
  template <class Src>
  __device__ void load_half(const uint8_t* p, int h, int t) {
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint8_t* b = p + (4 * h + s) * 34;
      d[s] = Src::u16(b);
      if (std::is_same_v<Src, gemv_detail::FromShared> && (s & 1)) {
        lo[s] = Src::u32(b + 2 + 8 * t);
        hi[s] = Src::u32(b + 6 + 8 * t);
      } else {
        lo[s] = Src::u16(b + 2 + 8 * t) | uint32_t(Src::u16(b + 4 + 8 * t)) << 16;
        hi[s] = Src::u16(b + 6 + 8 * t) | uint32_t(Src::u16(b + 8 + 8 * t)) << 16;
      }
    }
  }
  __device__ void load(const uint8_t* row, int kt, int t) {
    load_half<FromGlobal>(row + int64_t(kt >> 1) * kSuperBytes<Fmt::kQ8_0>, kt & 1, t);
  }
};
template <>
struct Raw<Fmt::kQ2_K> {  // half h of a super-block (84 bytes: sc[16], q[64], d, dmin)
  uint32_t q0, q1, sc0, sc1, dm;
  template <class Src>
  __device__ void load_half(const uint8_t* p, int h, int t) {
    q0 = Src::u32(p + 16 + 32 * h + 8 * t);
    q1 = Src::u32(p + 20 + 32 * h + 8 * t);
    sc0 = Src::u32(p + 8 * h);
    sc1 = Src::u32(p + 8 * h + 4);
    dm = Src::u32(p + 80);
  }
  __device__ void load(const uint8_t* row, int kt, int t) {
    load_half<FromGlobal>(row + int64_t(kt >> 1) * kSuperBytes<Fmt::kQ2_K>, kt & 1, t);
  }
};
template <>
struct Raw<Fmt::kIQ2_XXS> {  // sub-blocks 4 h .. 4 h + 3 of a super-block (66 bytes)
  uint32_t d, g[4], a1[4];   // g: grid index t of each sub-block; a1: its signs | scale word
  template <class Src>
  __device__ void load_half(const uint8_t* p, int h, int t) {
    d = Src::u16(p);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint8_t* q = p + 2 + 8 * (4 * h + s);
      g[s] = Src::u8(q + t);
      a1[s] = Src::u16(q + 4) | uint32_t(Src::u16(q + 6)) << 16;
    }
  }
  __device__ void load(const uint8_t* row, int kt, int t) {
    load_half<FromGlobal>(row + int64_t(kt >> 1) * kSuperBytes<Fmt::kIQ2_XXS>, kt & 1, t);
  }
};

// The staged kernel's weight windows: super-block ks of a row (at address p = row + ks SB, any
// 2-byte offset) is copied as the 16-byte chunks from p - (p mod 16) that hold its bytes, into a
// shared row of kWPitch bytes, where it then starts at p mod 16. From a 16-byte aligned matrix
// start the copies never begin before it and end at most 14 bytes past the matrix
// (kDeviceReadSlack covers 16).
// The largest shift: IQ2_XXS rows (66 bytes per super-block) sit at any 2-byte offset, Q2_K rows
// (84) at multiples of 4 (its words are read as 4-byte loads); Q8_0 stages only rows at 16-byte
// multiples (272 bytes per 256 columns: a 16-byte aligned start keeps every row and stage there).
template <Fmt F>
constexpr int kMaxShift = F == Fmt::kQ2_K ? 12 : F == Fmt::kIQ2_XXS ? 14 : 0;
template <Fmt F>
constexpr int kWChunks = (kMaxShift<F> + kSuperBytes<F> + 15) / 16;  // 5 (IQ2_XXS), 6 (Q2_K), 17 (Q8_0)
// Row pitch 80 / 112 bytes (20 / 28 words): the 8 rows of a warp's loads start in 8 different
// 4-bank bands; a row's shift (p mod 16) moves its word by up to 3 (4 where the offset in the word
// carries it over), so those loads meet at most 2 rows per bank (test_grouped_mma_stage).
// Q8_0: 272 bytes (68 words: the 8 rows start 4 banks apart; a quad's 4 lanes read words 2 apart,
// so two rows meet in every bank they use: 2 wavefronts per load).
template <Fmt F>
constexpr int kWPitch = F == Fmt::kQ2_K ? 112 : F == Fmt::kIQ2_XXS ? 80 : 272;
static_assert(16 * kWChunks<Fmt::kIQ2_XXS> <= kWPitch<Fmt::kIQ2_XXS> && 16 * kWChunks<Fmt::kQ2_K> <= kWPitch<Fmt::kQ2_K> &&
                  16 * kWChunks<Fmt::kQ8_0> <= kWPitch<Fmt::kQ8_0>,
              "a window fits its row");

__host__ __device__ inline int window_offset(const uint8_t* p) { return int(reinterpret_cast<uintptr_t>(p) & 15); }
// Whether chunk c of the window of a super-block at offset `off` holds any of its bytes.
template <Fmt F>
__host__ __device__ inline bool window_chunk_live(int c, int off) {
  return 16 * c < off + kSuperBytes<F>;
}
// Where super-block ks of a row whose start is at offset row_off (mod 16) sits in its window.
template <Fmt F>
__host__ __device__ inline int window_shift(int row_off, int ks) {
  return (row_off + ks * kSuperBytes<F>) & 15;
}

}  // namespace ds4::cuda::grouped_mma_int8_detail
