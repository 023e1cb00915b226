// Latency of the fused mHC decode kernel (hc_fused.cu: hc_pre_fused / hc_head_fused, one row),
// issue #23: DeepSeek's decode step makes 2 calls per layer (~18 us each on an H100, 15 % of a
// token; ncu: 16 blocks of 1024 threads, the last block's split + collapse alone on one SM).
// Each figure is a CUDA graph of `calls` back-to-back launches (the decode chain, PDL as the
// model launches them) divided by `calls`, beside a chain of empty PDL kernels (the launch
// floor of a graph node) measured in the same process. Rows: the column-block count (the
// layout upload.cu picks, kMaxHcSplits), the forms the model calls (hc_post of an attention or
// MoE output folded in, the collapsed row quantized for the next product, the head), and the
// Sinkhorn iterations (20 = DeepSeek / GLM; 1 isolates its serial chain).
//   bench_cuda_hc_fused [reps=30] [calls=60] [hidden=4096] [n_hc=4] [f16|bf16|f32] [splits=all] [form=all]
//   (splits / form, 0 = MoE hc_post, 1 = block hc_post, 2 = plain, 3 = head: only those rows, e.g. for ncu)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/memory.h"
#include "../cuda_timing.cuh"
#include "core/half.h"

namespace {

namespace dc = ds4::cuda;
using ds4::DType;

__global__ void empty_pdl_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

void launch_empty(cudaStream_t s) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(16), cfg.blockDim = dim3(1024), cfg.stream = s;
  cudaLaunchAttribute at{};
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at.val.programmaticStreamSerializationAllowed = dc::gemv_pdl() ? 1 : 0;
  cfg.attrs = &at, cfg.numAttrs = 1;
  DS4_CUDA_CHECK(cudaLaunchKernelEx(&cfg, empty_pdl_kernel));
}

float* alloc_random(std::vector<dc::DeviceBuffer>& keep, std::mt19937& g, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  keep.emplace_back(n * 4 + 64, "bench_cuda_hc_fused");
  DS4_CUDA_CHECK(cudaMemcpy(keep.back().get(), v.data(), n * 4, cudaMemcpyHostToDevice));
  return keep.back().as<float>();
}

// fn {m, splits * cols} as `splits` column blocks {m, cols} back to back (upload.cu's layout).
dc::HcFn make_fn(std::vector<dc::DeviceBuffer>& keep, std::mt19937& g, DType t, int64_t m, int64_t splits,
                 int64_t cols) {
  const size_t count = size_t(m * splits * cols), wb = t == DType::F32 ? 4 : 2;
  std::uniform_real_distribution<float> d(-0.05f, 0.05f);
  std::vector<uint8_t> bytes(count * wb);
  for (size_t i = 0; i < count; ++i) {
    const float v = d(g);
    if (t == DType::F32) std::memcpy(&bytes[i * 4], &v, 4);
    else {
      const uint16_t h = t == DType::F16 ? ds4::f32_to_f16(v) : ds4::f32_to_bf16(v);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  keep.emplace_back(bytes.size(), "bench_cuda_hc_fused fn");
  DS4_CUDA_CHECK(cudaMemcpy(keep.back().get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return dc::HcFn{keep.back().get(), t, m, cols, splits, size_t(m * cols) * wb};
}

enum class Form { kMoePost, kAttnPost, kPlain, kHead };
const char* form_name(Form f) {
  switch (f) {
    case Form::kMoePost: return "hc_post of a MoE output (6 experts + shared) + norm + Q8_0";
    case Form::kAttnPost: return "hc_post of a block output + norm + Q8_0";
    case Form::kPlain: return "streams as they are + norm";
    default: return "head (m = n) + norm";
  }
}

struct Setup {
  int reps = 30, calls = 60;
  int64_t hidden = 4096, n = 4;
  DType type = DType::F16;
  int64_t only_splits = 0;  // 0: every count
  int only_form = -1;       // -1: every form
};

// us per call of `calls` chained launches of one form (NaN when the layout is refused).
double time_form(const Setup& st, Form form, int64_t splits, int iters) {
  const int64_t n = st.n, H = st.hidden, m = form == Form::kHead ? n : (2 + n) * n, cols = n * H / splits;
  dc::HcDims d;
  d.n_hc = n, d.hidden = H, d.mix_splits = splits, d.sinkhorn_iters = iters;
  std::mt19937 g(7 + unsigned(splits));
  std::vector<dc::DeviceBuffer> keep;
  const dc::HcFn fn = make_fn(keep, g, st.type, m, splits, cols);
  if (!dc::hc_fused_supported(fn, d, form == Form::kHead)) return -1.0;
  constexpr int64_t K = 6;
  float* x = alloc_random(keep, g, size_t(n * H), -2.f, 2.f);
  float* residual = alloc_random(keep, g, size_t(n * H), -2.f, 2.f);
  float* block_out = alloc_random(keep, g, size_t(H), -2.f, 2.f);
  float* experts = alloc_random(keep, g, size_t(K * H + K + H), -1.f, 1.f);
  float* post_in = alloc_random(keep, g, size_t(n + n * n), 0.1f, 0.9f);
  float* w = alloc_random(keep, g, size_t(3 + m + H), 0.5f, 1.5f);  // scale {3}, base {m}, norm {H}
  float* out = alloc_random(keep, g, size_t(H + n + n * n), 0.f, 0.f);
  float* partials = alloc_random(keep, g, size_t(splits * (m + 1)), 0.f, 0.f);
  keep.emplace_back(64, "bench counters");
  unsigned* counters = keep.back().as<unsigned>();
  DS4_CUDA_CHECK(cudaMemset(counters, 0, 64));
  const size_t qb = dc::act_q8_row_bytes(ds4::ActBlock::kQ8_0, H);
  keep.emplace_back(qb + 64, "bench q8");
  const dc::DeviceActQ8 q8 = dc::act_q8_carve(keep.back().get(), ds4::ActBlock::kQ8_0, H, 1);
  float *norm = w + 3 + m, *scale = w, *base = w + 3;
  // the norm 16-byte aligned as the model's (collapse_regs' float4 loads)
  keep.emplace_back(size_t(H) * 4, "bench norm");
  DS4_CUDA_CHECK(cudaMemcpy(keep.back().get(), norm, size_t(H) * 4, cudaMemcpyDeviceToDevice));
  norm = keep.back().as<float>();
  dc::HcPostIn pin{};
  if (form == Form::kMoePost)
    pin = dc::HcPostIn{nullptr, residual, post_in, post_in + n, experts, experts + K * H, experts + K * H + K, K};
  else if (form == Form::kAttnPost)
    pin = dc::HcPostIn{block_out, residual, post_in, post_in + n, nullptr, nullptr, nullptr, 0};
  dc::HcFusedScratch sc{partials, counters};
  if (form == Form::kMoePost || form == Form::kAttnPost) sc.q8_0 = q8.q, sc.q8_0_d = q8.d;
  const bool has_post = form == Form::kMoePost || form == Form::kAttnPost;
  auto one = [&](cudaStream_t s) {
    if (form == Form::kHead)
      dc::hc_head_fused(fn, scale, base, d, x, nullptr, norm, out, sc, dc::HcRows{}, s);
    else
      dc::hc_pre_fused(fn, scale, base, d, x, has_post ? &pin : nullptr, norm, out, out + H, out + H + n, sc,
                       dc::HcRows{}, s);
  };
  one(nullptr);  // first use: function attributes, errors before the capture
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const double ms = ds4::bench::graph_ms(
      [&](cudaStream_t s) {
        for (int c = 0; c < st.calls; ++c) one(s);
      },
      st.reps);
  return ms * 1000.0 / st.calls;
}

}  // namespace

int main(int argc, char** argv) {
  Setup st;
  if (argc > 1) st.reps = std::atoi(argv[1]);
  if (argc > 2) st.calls = std::atoi(argv[2]);
  if (argc > 3) st.hidden = std::atoll(argv[3]);
  if (argc > 4) st.n = std::atoll(argv[4]);
  if (argc > 5) st.type = std::strcmp(argv[5], "f32") == 0 ? DType::F32 : std::strcmp(argv[5], "bf16") == 0 ? DType::BF16 : DType::F16;
  if (argc > 6) st.only_splits = std::atoll(argv[6]);
  if (argc > 7) st.only_form = std::atoi(argv[7]);
  if (st.reps < 1 || st.calls < 1 || st.hidden < 8 || st.n < 1 || st.n > dc::kMaxHc) {
    std::fprintf(stderr, "usage: bench_cuda_hc_fused [reps] [calls] [hidden] [n_hc <= 16] [f16|bf16|f32] [splits] [form 0..3]\n");
    return 2;
  }
  cudaDeviceProp p{};
  DS4_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("device %s (%d SMs); hidden %lld, n_hc %lld, fn %s; %d chained calls per graph, median of %d\n", p.name,
              p.multiProcessorCount, static_cast<long long>(st.hidden), static_cast<long long>(st.n),
              st.type == DType::F32 ? "F32" : st.type == DType::BF16 ? "BF16" : "F16", st.calls, st.reps);
  const double floor_us =
      ds4::bench::graph_ms([&](cudaStream_t s) {
        for (int c = 0; c < st.calls; ++c) launch_empty(s);
      }, st.reps) * 1000.0 / st.calls;
  std::printf("launch floor (empty 16 x 1024 PDL kernels in the same graph form): %.2f us per node\n\n", floor_us);
  std::printf("| form | splits (blocks) | cols per block | sinkhorn iters | us per call | over the floor |\n");
  std::printf("|---|---|---|---|---|---|\n");
  const Form forms[] = {Form::kMoePost, Form::kAttnPost, Form::kPlain, Form::kHead};
  for (Form f : forms)
    for (int64_t splits : {4, 8, 16, 32, 64, 128}) {
      const int64_t cols = st.n * st.hidden / splits;
      if (cols * splits != st.n * st.hidden) continue;
      if ((st.only_splits && splits != st.only_splits) || (st.only_form >= 0 && int(f) != st.only_form)) continue;
      for (int iters : {20, 1}) {
        if (iters == 1 && (f == Form::kHead || f == Form::kPlain)) continue;
        const double us = time_form(st, f, splits, iters);
        if (us < 0) {
          std::printf("| %s | %lld | %lld | %d | refused (hc_fused_supported) | |\n", form_name(f),
                      static_cast<long long>(splits), static_cast<long long>(cols), iters);
          continue;
        }
        std::printf("| %s | %lld | %lld | %d | %.2f | %.2f |\n", form_name(f), static_cast<long long>(splits),
                    static_cast<long long>(cols), iters, us, us - floor_us);
        std::fflush(stdout);
      }
    }
  return 0;
}
