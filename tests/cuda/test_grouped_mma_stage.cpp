// Host-only check of grouped_mma_int8's staged weight windows (IQ2_XXS, Q2_K; Q8_0's unshifted
// 272-byte rows too) (backend/cuda/
// grouped_mma_int8_raw.cuh), without a GPU:
// - the copy rule (16-byte chunks from the 16-byte boundary at or below a row's super-block,
//   live while they hold any of its bytes): for matrices whose rows sit at every even offset
//   (IQ2_XXS) / every multiple of 4 (Q2_K) mod 16 after a 16-byte aligned matrix start, the
//   copies never read before that start nor more than 14 bytes past the matrix end
//   (kDeviceReadSlack is 16), and every byte of the super-block is copied;
// - the staged reads: Raw<F>::load_half through FromShared at window_shift() in the copied window
//   equals Raw<F>::load_half through FromGlobal at the row's super-block, every half and lane, and
//   the shift keeps the shared loads aligned (Q2_K 4 bytes, IQ2_XXS 2);
// - the bank claim of kWPitch: a warp's loads (8 rows x 4 quad lanes) meet at most 2 distinct
//   words per bank for every row-offset pattern (IQ2_XXS: sampled; Q2_K's lane-independent loads:
//   all patterns), 3 for Q2_K's per-lane quant words.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "host_intrinsics.h"  // before the decoders
#include "backend/cuda/grouped_mma_int8_raw.cuh"

namespace {

using namespace ds4::cuda::grouped_mma_int8_detail;
using ds4::cuda::gemv_detail::FromGlobal;
using ds4::cuda::gemv_detail::FromShared;

int g_fail = 0;
void check(bool ok, const std::string& what) {
  if (!ok && g_fail++ < 20) std::printf("FAIL: %s\n", what.c_str());
}

const char* name(Fmt f) { return f == Fmt::kQ2_K ? "Q2_K" : f == Fmt::kIQ2_XXS ? "IQ2_XXS" : "Q8_0"; }

// One matrix: `rows` rows of `sbs` super-blocks, starting `lead` bytes after a 16-byte aligned
// matrix start (an expert's rows inside the matrix of all experts), random bytes.
template <Fmt F>
void check_windows(int64_t rows, int sbs, int lead, std::mt19937_64& rng) {
  constexpr int SB = kSuperBytes<F>, NC = kWChunks<F>, P = kWPitch<F>;
  static_assert(16 * NC <= P, "a window fits its shared row");
  const int64_t row_bytes = int64_t(sbs) * SB, bytes = lead + rows * row_bytes;
  std::vector<uint8_t> buf(size_t(bytes + 64));
  for (auto& b : buf) b = uint8_t(rng());
  uint8_t* start = buf.data() + ((16 - reinterpret_cast<uintptr_t>(buf.data()) % 16) % 16);  // 16-aligned
  const uint8_t* end = start + bytes;
  const std::string what = std::string(name(F)) + " rows " + std::to_string(rows) + " x " + std::to_string(sbs) +
                           " super-blocks, lead " + std::to_string(lead);
  int64_t bad_range = 0, bad_cover = 0, bad_shift = 0, bad_read = 0, bad_align = 0;
  std::vector<uint8_t> window(P);
  for (int64_t i = 0; i < rows; ++i) {
    const uint8_t* row = start + lead + i * row_bytes;
    const int row_off = window_offset(row);
    for (int ks = 0; ks < sbs; ++ks) {
      const uint8_t* p = row + int64_t(ks) * SB;
      const int off = window_offset(p);
      bad_shift += window_shift<F>(row_off, ks) != off;
      std::memset(window.data(), 0xA5, window.size());
      int covered = 0;
      // the shared loads' alignment on the device: Q2_K's 4-byte words, IQ2_XXS's 2-byte ones,
      // Q8_0's 4-byte quant words of the odd blocks (34 b + 2 from a 16-byte aligned window)
      bad_align += off % (F == Fmt::kQ2_K ? 4 : 2) != 0 || off > kMaxShift<F>;
      if constexpr (F == Fmt::kQ8_0)
        for (int b = 1; b < 8; b += 2) bad_align += (off + 34 * b + 2) % 4 != 0;
      for (int c = 0; c < NC; ++c) {
        if (!window_chunk_live<F>(c, off)) continue;
        const uint8_t* src = p - off + 16 * c;
        if (src < start || src + 16 > end + 14) {  // counted, not copied (it may lie outside buf)
          ++bad_range;
          continue;
        }
        std::memcpy(window.data() + 16 * c, src, 16);
        covered = 16 * (c + 1);
      }
      bad_cover += covered < off + SB || covered - (off + SB) >= 16;
      const uint8_t* sb = window.data() + window_shift<F>(row_off, ks);
      bad_cover += std::memcmp(sb, p, SB) != 0;
      for (int h = 0; h < 2; ++h)
        for (int t = 0; t < 4; ++t) {
          Raw<F> staged, global;
          staged.template load_half<FromShared>(sb, h, t);
          global.template load_half<FromGlobal>(p, h, t);
          bad_read += std::memcmp(&staged, &global, sizeof staged) != 0;
        }
    }
  }
  check(bad_range == 0, what + ": copies inside [matrix start, matrix end + 14): " + std::to_string(bad_range) + " outside");
  check(bad_cover == 0, what + ": every super-block copied whole, no chunk past it: " + std::to_string(bad_cover) + " not");
  check(bad_shift == 0, what + ": window_shift == the super-block's offset: " + std::to_string(bad_shift) + " not");
  check(bad_align == 0, what + ": shifts aligned for the shared loads, <= kMaxShift: " + std::to_string(bad_align) + " not");
  check(bad_read == 0, what + ": staged Raw == global Raw: " + std::to_string(bad_read) + " differ");
}

// A load of the warp: lane (g, t) reads bytes [o, o + w) of its row's super-block (per t).
using Load = std::function<std::pair<int, int>(int t)>;

// Most distinct words in one bank over the warp's loads, for the 8 rows' offsets `offs` at
// shared rows base .. base + 7 of pitch P.
int max_words_per_bank(int P, const int (&offs)[8], int base, const std::vector<Load>& loads) {
  int worst = 0;
  for (const Load& ld : loads) {
    std::set<int> words[32];
    for (int g = 0; g < 8; ++g)
      for (int t = 0; t < 4; ++t) {
        const auto [o, w] = ld(t);
        const int a = (base + g) * P + offs[g] + o;
        for (int word = a / 4; word <= (a + w - 1) / 4; ++word) words[word % 32].insert(word);
      }
    for (const auto& s : words) worst = std::max(worst, int(s.size()));
  }
  return worst;
}

void check_banks(std::mt19937_64& rng) {
  std::vector<Load> iq2{[](int) { return std::pair{0, 2}; }};
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s) {
      const int q = 2 + 8 * (4 * h + s);
      iq2.push_back([q](int t) { return std::pair{q + t, 1}; });
      iq2.push_back([q](int) { return std::pair{q + 4, 2}; });
      iq2.push_back([q](int) { return std::pair{q + 6, 2}; });
    }
  std::vector<Load> q2_fixed{[](int) { return std::pair{80, 4}; }}, q2_quants;
  for (int h = 0; h < 2; ++h) {
    q2_fixed.push_back([h](int) { return std::pair{8 * h, 4}; });
    q2_fixed.push_back([h](int) { return std::pair{8 * h + 4, 4}; });
    q2_quants.push_back([h](int t) { return std::pair{16 + 32 * h + 8 * t, 4}; });
    q2_quants.push_back([h](int t) { return std::pair{20 + 32 * h + 8 * t, 4}; });
  }
  int worst_iq2 = 0, worst_q2 = 0, worst_q2q = 0;
  int offs[8];
  for (int base : {0, 8}) {  // rows 16 w + g and 16 w + 8 + g (16 rows of either pitch: a multiple of 32 words)
    for (int n = 0; n < 20000; ++n) {
      for (int& o : offs) o = 2 * int(rng() % 8);
      worst_iq2 = std::max(worst_iq2, max_words_per_bank(kWPitch<Fmt::kIQ2_XXS>, offs, base, iq2));
    }
    for (int code = 0; code < (1 << 16); ++code) {  // every pattern of offsets 0, 4, 8, 12
      for (int g = 0; g < 8; ++g) offs[g] = 4 * ((code >> (2 * g)) & 3);
      worst_q2 = std::max(worst_q2, max_words_per_bank(kWPitch<Fmt::kQ2_K>, offs, base, q2_fixed));
      worst_q2q = std::max(worst_q2q, max_words_per_bank(kWPitch<Fmt::kQ2_K>, offs, base, q2_quants));
    }
  }
  check(worst_iq2 <= 2, "IQ2_XXS loads: at most 2 words per bank, got " + std::to_string(worst_iq2));
  check(worst_q2 <= 2, "Q2_K scale / d loads: at most 2 words per bank, got " + std::to_string(worst_q2));
  check(worst_q2q <= 3, "Q2_K quant loads: at most 3 words per bank, got " + std::to_string(worst_q2q));
  // Q8_0 (rows unshifted): each block's d, then its quants (2-byte loads for even blocks, 4-byte
  // loads for odd ones: Raw<Q8_0>::load_half through FromShared)
  std::vector<Load> q8;
  for (int b = 0; b < 8; ++b) {
    const int o = 34 * b;
    q8.push_back([o](int) { return std::pair{o, 2}; });
    if (b & 1) {
      for (int k : {2, 6}) q8.push_back([o, k](int t) { return std::pair{o + k + 8 * t, 4}; });
    } else {
      for (int k : {2, 4, 6, 8}) q8.push_back([o, k](int t) { return std::pair{o + k + 8 * t, 2}; });
    }
  }
  const int zero[8] = {};
  int worst_q8 = 0;
  for (int base : {0, 8}) worst_q8 = std::max(worst_q8, max_words_per_bank(kWPitch<Fmt::kQ8_0>, zero, base, q8));
  check(worst_q8 <= 2, "Q8_0 loads: at most 2 words per bank, got " + std::to_string(worst_q8));
  std::printf("words per bank, worst: IQ2_XXS %d, Q2_K scales %d, Q2_K quants %d, Q8_0 %d\n", worst_iq2, worst_q2,
              worst_q2q, worst_q8);
}

}  // namespace

int main() {
  std::mt19937_64 rng(2206);
  for (int lead : {0, 2, 6, 14, 66 * 3, 1000})
    for (int64_t rows : {1, 7, 128, 200})
      for (int sbs : {1, 3, 16}) check_windows<Fmt::kIQ2_XXS>(rows, sbs, lead, rng);
  for (int lead : {0, 4, 12, 84 * 5, 1000})
    for (int64_t rows : {1, 7, 128, 136})
      for (int sbs : {1, 3, 8}) check_windows<Fmt::kQ2_K>(rows, sbs, lead, rng);
  for (int lead : {0, 272, 272 * 5, 4352})  // Q8_0 stages 16-byte aligned rows only (stages())
    for (int64_t rows : {1, 7, 128, 136})
      for (int sbs : {1, 3, 5}) check_windows<Fmt::kQ8_0>(rows, sbs, lead, rng);
  check_banks(rng);
  std::printf(g_fail ? "%d FAILED\n" : "ALL PASSED\n", g_fail);
  return g_fail ? 1 : 0;
}
