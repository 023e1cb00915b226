// The fused hyper-connection read of the Qwen decode step (models/qwen_next/cuda/hyper_fused.cu)
// against the five launches it replaces (hc_norm -> gemv(down_inject, 2 rows a block) ->
// hc_low_act -> gemv(up) -> hc_combine), bit for bit: normed {hc*d}, [low | inject] and mixed
// {d} compared with memcmp. Shapes: the full-size model's (hc 4, d 2560, rank 320; MLX q4 g64
// with BF16 scales, as synthetic-full; MLX q8 with F16 scales; BF16), the models/default
// shape (d 192, rank 16: the up matrix on the plain-float small kernel), a wide rank (2560: up
// rows of 80 units, thread teams that do not divide the block) and the tiny test
// model's (F32, d 32, rank 16); with and without the inject rows (the final mixer has none);
// under gemv kernels 1, 2 and 3 (the default) and with PDL launches on and off. The model tests cover the
// F32/BF16 paths end to end (decode steps = chunks, fused = unfused projections); this one is
// the only check of the MLX paths that synthetic-full benches.
// Usage: test_qwen_hyper_fused_cuda   (exit 1 when a check fails)
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/memory.h"
#include "device_weight.h"
#include "host_ref.h"
#include "models/qwen_next/cuda/hyper_fused.h"
#include "models/qwen_next/cuda/kernels.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace qc = ds4::qwen_next::cuda;

namespace {

struct Case {
  const char* name;
  DType type, up_type, scale_type;
  int64_t hc, d, rank;
  bool inject;
};

std::vector<float> download(const float* p, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), p, size_t(n) * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

void run_case(const Case& cs, std::mt19937_64& rng) {
  const int64_t hc = cs.hc, d = cs.d, rank = cs.rank, W = hc * d, down_rows = rank + (cs.inject ? hc : 0);
  const float eps = 1e-6f;
  const HostWeight hdown = random_weight(cs.type, down_rows, W, rng, 64, cs.scale_type);
  const HostWeight hup = random_weight(cs.up_type, W, rank, rng, 64, cs.scale_type);
  const DeviceWeight down = upload(hdown), up = upload(hup);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> h(static_cast<size_t>(W)), norm(static_cast<size_t>(W));
  for (auto& v : h) v = nd(rng);
  for (auto& v : norm) v = 1.f + 0.1f * nd(rng);
  // One buffer per side: [h | norm | normed | low (+inject) | mix | mixed], 16-byte aligned parts.
  auto al = [](int64_t n) { return (n + 3) / 4 * 4; };
  const int64_t o_h = 0, o_norm = al(W), o_normed = o_norm + al(W), o_low = o_normed + al(W),
                o_mix = o_low + al(rank + hc), o_mixed = o_mix + al(W), total = o_mixed + al(d);
  cuda::DeviceBuffer ref(size_t(total) * 4, "ref"), fused(size_t(total) * 4, "fused");
  for (auto* b : {&ref, &fused}) {
    DS4_CUDA_CHECK(cudaMemset(b->get(), 0, size_t(total) * 4));
    DS4_CUDA_CHECK(cudaMemcpy(b->as<float>() + o_h, h.data(), size_t(W) * 4, cudaMemcpyHostToDevice));
    DS4_CUDA_CHECK(cudaMemcpy(b->as<float>() + o_norm, norm.data(), size_t(W) * 4, cudaMemcpyHostToDevice));
  }
  if (!qc::hyper_read_fusable(down.view, up.view, hc, d, rank)) {
    check(false, std::string(cs.name) + ": hyper_read_fusable refused the shape");
    return;
  }
  for (int kernel : {1, 2, 3})  // 3 (the default) once read MLX through dot while gemv took dot2
    for (bool pdl : {false, true}) {
      // Outputs poisoned (NaN) on both sides first: a kernel reading an input before it is
      // written this round (the reverted PDL hc_up_combine read `low` before its wait) must not
      // find the previous round's equal values there.
      for (auto* b : {&ref, &fused})
        DS4_CUDA_CHECK(cudaMemset(b->as<float>() + o_normed, 0xff, size_t(total - o_normed) * 4));
      cuda::gemv_set_kernel(kernel);
      cuda::gemv_set_pdl(pdl);
      float* r = ref.as<float>();
      float* f = fused.as<float>();
      cuda::GemvOptions few;
      few.path = cuda::GemvPath::kDirect;
      few.rows_per_block = 2;
      cuda::GemvOptions direct;
      direct.path = cuda::GemvPath::kDirect;
      // The reference: model_cuda.cu's hyper_read before the fusion (down_inject one matrix).
      qc::hc_norm(r + o_h, r + o_norm, hc, d, eps, r + o_normed, nullptr);
      cuda::gemv(down.view, r + o_normed, r + o_low, nullptr, few);
      qc::hc_low_act(r + o_low, rank, hc, nullptr);
      cuda::gemv(up.view, r + o_low, r + o_mix, nullptr, direct);
      qc::hc_combine(r + o_mix, r + o_normed, hc, d, r + o_mixed, cs.inject ? r + o_low + rank : nullptr, nullptr);
      qc::hyper_read_fused(down.view, up.view, f + o_h, f + o_norm, hc, d, rank, eps, f + o_normed, f + o_low,
                           f + o_mixed, cs.inject, nullptr);
      DS4_CUDA_CHECK(cudaDeviceSynchronize());
      const auto rn = download(r + o_normed, W), fn = download(f + o_normed, W);
      const auto rl = download(r + o_low, down_rows), fl = download(f + o_low, down_rows);
      const auto rm = download(r + o_mixed, d), fm = download(f + o_mixed, d);
      const bool same = std::memcmp(rn.data(), fn.data(), rn.size() * 4) == 0 &&
                        std::memcmp(rl.data(), fl.data(), rl.size() * 4) == 0 &&
                        std::memcmp(rm.data(), fm.data(), rm.size() * 4) == 0;
      const bool finite = max_diff(fm.data(), rm.data(), fm.size()) < INFINITY;
      check(same && finite, std::string(cs.name) + ", gemv kernel " + std::to_string(kernel) + (pdl ? ", PDL" : "") +
                                ": normed, low/inject, mixed bit-identical (max |diff| mixed " +
                                std::to_string(max_diff(fm.data(), rm.data(), fm.size())) + ")");
    }
}

}  // namespace

int main() {
  std::mt19937_64 rng(2312);
  const int default_kernel = cuda::gemv_kernel();
  const Case cases[] = {
      {"full size MLX q4 g64 bf16 scales, inject", DType::MLX_Q4, DType::MLX_Q4, DType::BF16, 4, 2560, 320, true},
      {"full size MLX q4 g64 bf16 scales, mixer", DType::MLX_Q4, DType::MLX_Q4, DType::BF16, 4, 2560, 320, false},
      {"full size MLX q8 g64 f16 scales, inject", DType::MLX_Q8, DType::MLX_Q8, DType::F16, 4, 2560, 320, true},
      {"full size BF16, inject", DType::BF16, DType::BF16, DType::F16, 4, 2560, 320, true},
      {"models/default shape BF16 (up: small kernel), inject", DType::BF16, DType::BF16, DType::F16, 4, 192, 16, true},
      // up rows of 80 units: teams of 96 threads, 2 per 256-thread block and 64 threads left over
      {"wide rank MLX q4 (up: 96-thread teams), inject", DType::MLX_Q4, DType::MLX_Q4, DType::BF16, 4, 256, 2560, true},
      {"tiny shape F32 (up: small kernel), inject", DType::F32, DType::F32, DType::F16, 4, 32, 16, true},
      {"tiny shape F32, mixer", DType::F32, DType::F32, DType::F16, 4, 32, 16, false},
  };
  for (const Case& cs : cases) run_case(cs, rng);
  const bool pdl_default = true;
  cuda::gemv_set_pdl(pdl_default);
  cuda::gemv_set_kernel(default_kernel);
  std::printf("%s: %d failed\n", g_fail ? "FAIL" : "ok", g_fail);
  return g_fail ? 1 : 0;
}
