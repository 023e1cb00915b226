// Host-only check of gemv_act's integer decoders (backend/cuda/gemv_act_formats.cuh): the
// kernel's per-lane work (load, prep, load_x, dot) summed over a block's lanes and its term()
// reproduce ds4::dot_act (core/act_quant.h) bit for bit when the blocks are added in the CPU's
// serial order: this checks the unit layouts (which weights, activation bytes, scales and
// bsums a lane takes) and the f32 term of every block without a GPU. Needs the CUDA headers
// only: the device intrinsics get host stand-ins (host_intrinsics.h; the test adds the lanes'
// integer sums itself where the device shuffles).
// Random weights (random_weight's scales) and activations quantized by ds4's CPU quantizers;
// rows of 256..7168 values. Exit 1 on a mismatch.
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "host_intrinsics.h"  // before the decoders
#include "backend/cuda/gemv_act_formats.cuh"
#include "backend/cuda/iq2xxs_grid.h"
#include "core/act_quant.h"
#include "host_ref.h"

namespace {

using namespace ds4;
using namespace ds4::cuda::gemv_act_detail;
using namespace ds4::cuda_test;

const uint64_t kGrid[256] = {DS4_IQ2XXS_GRID_VALUES};
uint64_t g_signs[128];
int g_fail = 0;

// One row as the kernel computes it, blocks added in order: each block's lanes' integer sums
// (F::add, what the kernel's xor rounds add on the device), then the block's term from its
// first lane.
// bytes: the weight's rows (a copy with 16 bytes of readable slack past the end, as every device
// buffer has: ActIQ2_XXS4L's aligned loads may read that far past a unit).
template <class F>
float emulate_row(const HostWeight& hw, const uint8_t* bytes, int64_t r, const ActQ8View& x, const Tables& t) {
  const int64_t nb = hw.cols / F::kValues;
  const uint8_t* row = bytes + r * (int64_t(hw.data.size()) / hw.rows);
  const XRow xr{x.q, x.d, x.bsums};
  float acc = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    typename F::Sum total{};
    typename F::W w0{};
    typename F::X x0{};
    for (int p = 0; p < F::kLanes; ++p) {
      const int64_t u = b * F::kLanes + p;
      const typename F::W w = F::prep(F::load(Args{}, row, u), u, t);
      const typename F::X xv = F::load_x(xr, u);
      total = F::add(total, F::dot(w, xv));
      if (p == 0) w0 = w, x0 = xv;
    }
    acc += F::term(w0, total, x0);
  }
  return acc;
}

template <class F>
void check(DType type, int64_t cols, std::mt19937_64& rng, const Tables& t) {
  constexpr int64_t kRows = 64;
  const HostWeight hw = random_weight(type, kRows, cols, rng);
  const WeightMatrix hv = host_view(hw);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng) * (i % 97 == 5 ? 30.f : 1.f);
  if (cols >= 512)
    for (int64_t i = 256; i < 512; ++i) x[size_t(i)] = 0.f;  // a zero block
  const ActQ8Rows xq = quantize_act_rows(act_block_for(type), x.data(), cols, 1);
  std::vector<uint8_t> bytes(hw.data.size() + 16);  // malloc's 16-byte alignment, as the device's
  std::memcpy(bytes.data(), hw.data.data(), hw.data.size());
  int same = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    const float want = dot_act(hv, r, xq.row(0)), got = emulate_row<F>(hw, bytes.data(), r, xq.row(0), t);
    same += std::memcmp(&want, &got, 4) == 0;
    if (r == 0 && std::memcmp(&want, &got, 4) != 0) std::printf("  row 0: dot_act %.9g, lanes %.9g\n", want, got);
  }
  const bool ok = same == kRows;
  if (!ok) ++g_fail;
  const char* how = "";
  if constexpr (requires { F::kSignTable; })
    how = F::kCodes ? ", byte permutes" : F::kSignTable ? ", sign table" : ", computed signs";
  if constexpr (requires { F::kLaneTables; }) how = ", lane tables, aligned loads";
  if constexpr (std::is_same_v<F, ActQ2_K4A>) how = ", aligned loads";
  std::printf("%s %s (%d lanes per block%s) cols %lld: lanes + term == dot_act bit for bit on %d of %lld rows\n",
              ok ? "PASS" : "FAIL", dtype_name(type).data(), F::kLanes, how, (long long)cols, same, (long long)kRows);
}

}  // namespace

int main() {
  // The sign table by its definition (ds4: the 7 stored bits plus their even parity; bit j
  // negates weight j): 0xff in each byte whose weight is negative. The kernel stages
  // iq2_sign_mask(i) (gemv_act.cu Smem<ActIQ2_XXS>), which must equal it for all 128 fields.
  int masks_same = 0;
  for (int i = 0; i < 128; ++i) {
    const uint32_t s = uint32_t(i) | ((__popc(uint32_t(i)) & 1u) << 7);
    g_signs[i] = 0;
    for (int j = 0; j < 8; ++j)
      if ((s >> j) & 1) g_signs[i] |= uint64_t(0xff) << (8 * j);
    masks_same += iq2_sign_mask(uint32_t(i)) == g_signs[i];
  }
  if (masks_same != 128) ++g_fail;
  std::printf("%s IQ2_XXS iq2_sign_mask == the bit-by-bit sign mask on %d of 128 fields\n",
              masks_same == 128 ? "PASS" : "FAIL", masks_same);
  // The byte-permute decoder's tables (gemv_act.cu stages the same from the grid and the fields).
  static uint32_t codes[256], sign_codes[128];
  for (int i = 0; i < 256; ++i) codes[i] = iq2_grid_codes(kGrid[i]);
  for (int i = 0; i < 128; ++i) sign_codes[i] = iq2_sign_codes(uint32_t(i));
  // ActIQ2_XXS4L's lane tables as gemv_act.cu stages them (entry e of lane l at word 32 e + l);
  // the host is lane 5.
  static uint32_t lane_tables[384 * 32];
  for (int e = 0; e < 384; ++e)
    for (int l = 0; l < 32; ++l) lane_tables[32 * e + l] = e < 256 ? codes[e] : sign_codes[e - 256];
  Tables t{kGrid, g_signs, codes, sign_codes};
  t.lane_codes = lane_tables + 5;
  t.lane_signs = lane_tables + 256 * 32 + 5;
  std::mt19937_64 rng(77);
  for (int64_t cols : {256, 2048, 4096, 7168}) {
    check<ActQ2_K>(DType::Q2_K, cols, rng, t);
    check<ActQ2_K4>(DType::Q2_K, cols, rng, t);
    check<ActQ2_K4A>(DType::Q2_K, cols, rng, t);  // aligned 16-byte loads
    check<ActIQ2_XXS>(DType::IQ2_XXS, cols, rng, t);
    check<ActIQ2_XXS4>(DType::IQ2_XXS, cols, rng, t);
    check<ActIQ2_XXS4T>(DType::IQ2_XXS, cols, rng, t);  // the staged sign table (t.signs)
    check<ActIQ2_XXSP>(DType::IQ2_XXS, cols, rng, t);   // byte permutes (t.codes, t.sign_codes)
    check<ActIQ2_XXS4P>(DType::IQ2_XXS, cols, rng, t);
    check<ActIQ2_XXS4L>(DType::IQ2_XXS, cols, rng, t);  // lane tables (t.lane_codes, t.lane_signs)
  }
  // Rows at every 2-byte offset from a 16-byte boundary (66-byte blocks: 11 blocks = 726 bytes
  // per row, 726 = 6 mod 16, so the 64 rows start at 8 distinct offsets)
  check<ActIQ2_XXS4L>(DType::IQ2_XXS, 2816, rng, t);
  // Q2_K rows of 11 blocks (924 bytes = 12 mod 16: rows at 4 distinct offsets)
  check<ActQ2_K4A>(DType::Q2_K, 2816, rng, t);
  for (int64_t cols : {32, 96, 4096, 7168}) check<ActQ8_0>(DType::Q8_0, cols, rng, t);
  return g_fail ? 1 : 0;
}
