// mla_attend_tc (models/glm5/cuda/mla_tc.cu: a tensor-core chunk's MLA attention, TF32 products,
// flash style) against mla_attend (the decode step's FP32 kernel) on random latent rows: a chunk's
// rows, each with its own selection (ascending positions; counts 1 .. width, among them a
// partial last tile and exactly one tile), GLM 5.x Flash's shape (64 heads x kv_lora 512) and a
// small one whose heads are not a multiple of 16. Every o_lat within 3e-3 of mla_attend's (TF32
// operands: ~1e-3 here; a wrong, missing or extra row moves an output by ~1e-1), no NaN. The
// FP16 form (mla_attend_set_tc_f16: 64-head blocks, the same 10-bit mantissa) under the same bound
// at the Flash's shape and at 40 heads x 128.
// Usage: test_glm5_mla_tc_cuda   (exit 1 when a check fails)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "glm5_mla_inputs.h"
#include "models/glm5/cuda/kernels.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace gc = ds4::glm5::cuda;

namespace {

void mla_case(const char* name, int64_t heads, int64_t kv_lora, int64_t width, int64_t ctx, int64_t rows,
              std::mt19937_64& rng, bool f16 = false) {
  std::vector<cuda::DeviceBuffer> bufs;
  // counts: one row, one tile, a tile and one, the most
  const MlaInputs in = mla_inputs(heads, kv_lora, width, ctx, rows, {1, 32, 33, width}, rng, bufs);
  const gc::MlaShape& sh = in.sh;
  const int64_t rs = in.stride;
  const float *dl = in.d_latent, *dq = in.d_q;
  const int32_t *ds = in.d_sel, *dc = in.d_count;
  float* scores = to_device(std::vector<float>(size_t(rows * rs)), bufs);
  float* o_ref = to_device(std::vector<float>(size_t(rows * rs)), bufs);
  float* o_tc = to_device(std::vector<float>(size_t(rows * rs), NAN), bufs);
  const gc::Rows all{rows, rs};
  gc::mla_attend(dq, dl, ds, dc, sh, scores, o_ref, nullptr, all);
  check(gc::mla_attend_tc_supports(sh), std::string(name) + ": mla_attend_tc takes the shape");
  const bool keep_f16 = gc::mla_attend_tc_f16();
  gc::mla_attend_set_tc_f16(f16);
  if (f16) check(gc::mla_attend_tc_takes_f16(dq, sh, all), std::string(name) + ": the FP16 form runs (not the TF32 fallback)");
  gc::mla_attend_tc(dq, dl, ds, dc, sh, o_tc, nullptr, all);
  gc::mla_attend_set_tc_f16(keep_f16);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> a(size_t(rows * rs)), b(a.size());
  DS4_CUDA_CHECK(cudaMemcpy(a.data(), o_ref, a.size() * 4, cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(b.data(), o_tc, b.size() * 4, cudaMemcpyDeviceToHost));
  float worst = 0.f;
  bool finite = true;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < heads * kv_lora; ++i) {
      const float x = a[size_t(r * rs + i)], y = b[size_t(r * rs + i)];
      finite = finite && std::isfinite(y);
      worst = std::max(worst, std::fabs(x - y));
    }
  check(finite && worst < 3e-3f, std::string(name) + (f16 ? ", FP16 form" : "") + " (" + std::to_string(rows) + " rows, width " +
                                     std::to_string(width) + "): tensor cores vs mla_attend, max |diff| " +
                                     std::to_string(worst) + (finite ? "" : ", NOT finite"));
}

}  // namespace

int main() {
  std::mt19937_64 rng(29);
  mla_case("GLM 5.x Flash (64 heads x 512)", 64, 512, 2048 + 3, 6000, 12, rng);
  mla_case("small (20 heads x 64)", 20, 64, 100, 300, 40, rng);
  // the FP16 form (64-head blocks; q rows 16-byte aligned here: rs % 4 == 0)
  mla_case("GLM 5.x Flash (64 heads x 512)", 64, 512, 2048 + 3, 6000, 12, rng, true);
  mla_case("40 heads x 128 (a block's last 24 heads masked)", 40, 128, 100, 300, 40, rng, true);
  std::printf("%s\n", g_fail ? "FAILED" : "ALL PASSED");
  return g_fail ? 1 : 0;
}
