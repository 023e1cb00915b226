#pragma once
// bench_qwen_next_cuda synthetic-full[:EXPERTS[:LAYERS]] --prefill=L1,L2,.. [--old-max=N]
// [--prefill-rows=N] [--exact-max=N] [--gemm-rows=N] (issue #22): chunked prefill of the full-size synthetic
// Qwen3.8 Flash Next (models/qwen_next/synthetic_full.h, MLX q4 g64) from a fresh state per
// length, in one process and one run of the copy-bandwidth probe:
//   1. the old path: 16-row chunks, row-looped gemv_rows, CUDA graphs (lengths <= --old-max,
//      default 2048: it runs ~16 s per 2K);
//   2. (--exact-max N > 0) prefill_rows chunks on the exact path (gemm_rows 0: the default
//      options, bit-identical to decode steps) at lengths <= N;
//   3. the tensor-core path: prefill_rows chunks (default 512), gemm_rows as the server (--gemm-rows=N) (dense tensor-core GEMMs: kF16 or TF32, model_matmul_precision,
//      routed experts grouped BF16 MMAs) at the first length; the GPU canary (a probe every
//      5 ms on its own highest-priority stream) during another prefill of it and a profiled
//      prefill of it (GPU ms per phase, backend/cuda/op_timer.h); then the longer lengths.
//   4. (--mtp: the synthetic model with its MTP draft head) the same prefills on states with the
//      head enabled (the server's case whenever speculation may be used): the old 16-row path
//      (what such a state ran before issue #22's draft-head prefill) at lengths <= --old-max,
//      then the tensor-core path at every length; before the tensor-core path's longer lengths
//      without the head. With --mtp the old path without the head (1.) is skipped.
// Weights-only roofline of a chunk of R rows: everything but the routed experts and the lm_head
// once, routed experts as the expected union of R rows' top-k under uniform routing
// (chunk_bytes_ratio), over R, at the copy bandwidth measured here.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../cuda_synthetic.h"
#include "../cuda_profiler_range.h"
#include "backend/cuda/canary.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "models/qwen_next/synthetic_full.h"

namespace ds4::bench {

struct QwenPrefillArgs {
  std::vector<int64_t> lengths;
  int64_t old_max = 2048, exact_max = 0;
  int prefill_rows = 512;
  int gemm_rows = qwen_next::cuda_options_from_env().gemm_rows;  // --gemm-rows=N: the tensor-core path's (the server's)
  bool head = false;  // --mtp: also the tables with the MTP head enabled (item 4)
  bool fp32_ab = false;  // --fp32-ab: the first length again with fp32_gemms off (same process)
};

inline int qwen_synthetic_prefill(const qwen_next::SyntheticFullOptions& so, const QwenPrefillArgs& a) {
  using Clock = std::chrono::steady_clock;
  auto secs = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const qwen_next::Config c = qwen_next::parse_config(qwen_next::synthetic_full_config(so), "synthetic-full");
  LoadOptions lo;
  lo.max_context = *std::max_element(a.lengths.begin(), a.lengths.end()) + 64;
  qwen_next::CudaModelOptions co;
  co.synthetic_seed = so.seed;
  co.prefill_rows = a.prefill_rows;
  auto t0 = Clock::now();
  qwen_next::QwenNextCudaModel g(qwen_next::synthetic_full_source(so), lo, co);
  std::printf("synthetic-full Qwen3.8 Flash Next: %lld layers, %lld experts (top-%lld) MLX q4 g64, hidden %lld, vocab "
              "%lld, max context %lld; weights %.2f GiB, load %.1f s\n", (long long)c.layers, (long long)c.experts,
              (long long)c.top_k, (long long)c.hidden, (long long)c.vocab, (long long)lo.max_context,
              double(g.weight_bytes()) / (1ull << 30), secs(t0));
  const auto bw = measure_printed_bandwidth();
  const int64_t V = c.vocab;
  auto prompt = [&](int64_t n) {
    std::vector<int32_t> p;
    for (int64_t i = 0; i < n; ++i) p.push_back(int32_t((i * 7919 + 13) % V));
    return p;
  };
  const double per_tok = double(g.weight_bytes_per_token());
  const double lm = double(c.vocab) * double(c.hidden / 2 + 4 * c.hidden / 64);  // MLX q4 lm_head bytes
  auto roof = [&](int64_t rows) {  // tok/s at the copy bandwidth, weights only
    return bw.copy_gbps * 1e9 / ((per_tok * g.chunk_bytes_ratio(rows) - lm) / double(rows));
  };
  // One table: each length from a fresh state with `o`; base (same lengths): the old path's tok/s.
  // title empty: more rows of the previous table (no warm-up, no header).
  bool head_on = false;  // the states of the tables below enable the MTP head (item 4)
  auto table = [&](const std::string& title, const qwen_next::CudaModelOptions& o, int64_t rows,
                   const std::vector<int64_t>& lengths, int64_t max_len, const std::vector<double>& base) {
    g.set_options(o);
    if (!title.empty()) {
      {  // warm-up: the path's first use (cuBLAS, graphs of the 16-row path) outside the timings
        auto w = g.new_state();
        if (head_on) g.enable_draft(*w);
        g.prefill(*w, prompt(std::min<int64_t>(rows + 40, 600)));
      }
      std::printf("\n%s; weights-only roofline of a %lld-row chunk: %.0f tok/s\n", title.c_str(), (long long)rows,
                  roof(rows));
      std::printf("| prompt tokens | prefill s | tok/s | of roofline | vs the old path |\n|---|---|---|---|---|\n");
    }
    std::vector<double> out;
    for (int64_t n : lengths) {
      if (n > max_len) continue;
      auto s = g.new_state();
      if (head_on) g.enable_draft(*s);
      const auto p = prompt(n);
      t0 = Clock::now();
      g.prefill(*s, p);  // with the head: forward() ends with a sync (the ring pushes)
      const double dt = secs(t0), tps = double(n) / dt;
      out.push_back(tps);
      char vs[32] = "-";
      if (out.size() <= base.size()) std::snprintf(vs, sizeof vs, "%.2fx", tps / base[out.size() - 1]);
      std::printf("| %lld | %.3f | %.1f | %.1f%% | %s |\n", (long long)n, dt, tps, 100 * tps / roof(rows), vs);
      std::fflush(stdout);
    }
    return out;
  };
  qwen_next::CudaModelOptions old = co;
  old.prefill_rows = 0;
  // (--mtp: the old path with the head only, item 4; without it the path is as before issue #22's
  // draft-head prefill, bench/results/cuda-qwen-prefill-h200-2026-12-04b)
  const auto base =
      a.head ? std::vector<double>{} : table("old path: 16-row chunks, gemv_rows, CUDA graphs", old, 16, a.lengths, a.old_max, {});
  qwen_next::CudaModelOptions exact = co;  // gemm_rows 0: the default
  if (a.exact_max > 0)
    table(std::to_string(a.prefill_rows) + "-row chunks, exact path (gemv_rows in 16-row groups; the default options)",
          exact, a.prefill_rows, a.lengths, a.exact_max, base);
  // The tensor-core path: the first length, its canary and profile, then the longer lengths
  // (a call cut by its time limit keeps the first three).
  qwen_next::CudaModelOptions tc = co;
  tc.gemm_rows = a.gemm_rows > 0 ? a.gemm_rows : 17;  // (0 would be the exact path)
  const int64_t n0 = a.lengths.front();
  auto tcs = table(std::to_string(a.prefill_rows) +
                       "-row chunks, tensor cores: dense GEMMs (cuBLAS, model_matmul_precision), routed experts grouped BF16 MMAs",
                   tc, a.prefill_rows, {n0}, INT64_MAX, base);
  if (a.fp32_ab) {  // the exact products (router, indexer q / k) on gemv_rows per 16 rows instead of FP32 GEMMs
    qwen_next::CudaModelOptions t2 = tc;
    t2.fp32_gemms = false;
    table(std::to_string(a.prefill_rows) + "-row chunks, tensor cores, exact products as gemv_rows (fp32_gemms off)", t2,
          a.prefill_rows, {n0}, INT64_MAX, base);
  }
  {  // the canary during another prefill of the first length
    cuda::GpuCanary::Options cop;
    cop.period_s = 0.005;
    cuda::GpuCanary canary(cop);
    auto s = g.new_state();
    const auto p = prompt(n0);
    canary.start();
    t0 = Clock::now();
    g.prefill(*s, p);
    const double dt = secs(t0);
    canary.stop();
    const CanaryStats cs = canary.snapshot();
    std::printf("\nGPU canary (probe every 5 ms) during a %lld-token tensor-core prefill (%.1f tok/s with it): %lld "
                "samples, p50 %.3f ms, p99 %.3f ms, max %.3f ms, stalls %lld (SPEC: max < 10 ms)\n", (long long)n0,
                double(n0) / dt, (long long)cs.samples, cs.p50_ms, cs.p99_ms, cs.max_ms, (long long)cs.stalls);
    std::fflush(stdout);
  }
  {  // where the time goes
    g.set_profiling(true);
    auto s = g.new_state();
    t0 = Clock::now();
    {
      const ProfilerRange range;  // ncu --profile-from-start off: this prefill only
      g.prefill(*s, prompt(n0));
    }
    const double dt = secs(t0);
    const auto ms = g.op_times();
    g.set_profiling(false);
    double total = 0;
    for (const auto& [k, v] : ms) total += v;
    std::vector<std::pair<double, std::string>> by;
    for (const auto& [k, v] : ms) by.emplace_back(v, k);
    std::sort(by.rbegin(), by.rend());
    std::printf("\nprofiled %lld-token tensor-core prefill: %.3f s wall, %.1f ms in marked phases (events between "
                "phases, summed over layers and chunks)\n| phase | ms | share |\n|---|---|---|\n", (long long)n0, dt,
                total);
    for (const auto& [v, k] : by) std::printf("| %s | %.1f | %.1f%% |\n", k.c_str(), v, 100 * v / total);
    std::fflush(stdout);
  }
  if (a.head) {  // item 4
    if (!g.draft_head()) {
      std::printf("\nFATAL --mtp: the model has no MTP head on the GPU\n");
      return 1;
    }
    head_on = true;
    const auto before =
        table("old path with the MTP head enabled: 16-row chunks, gemv_rows, CUDA graphs", old, 16, a.lengths, a.old_max, {});
    table(std::to_string(a.prefill_rows) + "-row chunks, tensor cores, MTP head enabled (its ring fed per 16 rows, its "
              "catch-up one decode-step head row per token)",
          tc, a.prefill_rows, a.lengths, INT64_MAX, before);
    head_on = false;
  }
  if (a.lengths.size() > 1) {
    std::printf("\ntensor-core path, longer prompts (same options, fresh state each)\n"
                "| prompt tokens | prefill s | tok/s | of roofline | vs the old path |\n|---|---|---|---|---|\n");
    const std::vector<int64_t> rest(a.lengths.begin() + 1, a.lengths.end());
    const std::vector<double> rest_base(base.size() > 1 ? base.begin() + 1 : base.end(), base.end());
    const auto more = table("", tc, a.prefill_rows, rest, INT64_MAX, rest_base);
    tcs.insert(tcs.end(), more.begin(), more.end());
    if (tcs.size() > 1)
      std::printf("longest / first length: %.1f%% (issue #22 wants >= 70%% at 32K of the 2K figure)\n",
                  100 * tcs.back() / tcs.front());
  }
  g.set_options(co);
  return 0;
}

}  // namespace ds4::bench
