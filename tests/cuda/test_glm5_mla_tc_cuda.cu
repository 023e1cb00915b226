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
#include "models/glm5/cuda/kernels.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace gc = ds4::glm5::cuda;

namespace {

template <class T>
T* dev(const std::vector<T>& h, std::vector<cuda::DeviceBuffer>& keep_alive) {
  keep_alive.emplace_back(h.size() * sizeof(T) + 16, "test_glm5_mla_tc");
  T* p = keep_alive.back().as<T>();
  DS4_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

void mla_case(const char* name, int64_t heads, int64_t kv_lora, int64_t width, int64_t ctx, int64_t rows,
              std::mt19937_64& rng, bool f16 = false) {
  std::vector<cuda::DeviceBuffer> bufs;
  const gc::MlaShape sh{heads, kv_lora, width, 1.0f / std::sqrt(float(kv_lora)), 1e-6f};
  const int64_t rs = std::max(heads * std::max(width, kv_lora), width) + 16;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> latent(size_t(ctx * kv_lora)), q(size_t(rows * rs), 0.f);
  for (float& v : latent) v = nd(rng);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < heads * kv_lora; ++i) q[size_t(r * rs + i)] = nd(rng);
  std::vector<int32_t> sel(size_t(rows * rs), 0), count(size_t(rows * rs), 0);
  const int64_t fixed[] = {1, 32, 33, width};  // one row, one tile, a tile and one, the most
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r < 4 ? std::min(fixed[r], std::min(width, ctx)) : 1 + int64_t(rng() % uint64_t(std::min(width, ctx)));
    std::vector<int32_t> pick(static_cast<size_t>(ctx));
    for (int64_t i = 0; i < ctx; ++i) pick[size_t(i)] = int32_t(i);
    std::shuffle(pick.begin(), pick.end(), rng);
    std::sort(pick.begin(), pick.begin() + n);
    for (int64_t i = 0; i < n; ++i) sel[size_t(r * rs + i)] = pick[size_t(i)];
    count[size_t(r * rs)] = int32_t(n);
  }
  const float* dl = dev(latent, bufs);
  const float* dq = dev(q, bufs);
  const int32_t *ds = dev(sel, bufs), *dc = dev(count, bufs);
  float* scores = dev(std::vector<float>(size_t(rows * rs)), bufs);
  float* o_ref = dev(std::vector<float>(size_t(rows * rs)), bufs);
  float* o_tc = dev(std::vector<float>(size_t(rows * rs), NAN), bufs);
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
