// Decode speed of Qwen3.8 Flash Next at batch 1: the CUDA model (graph replay and direct
// launches) vs the CPU model, same model, same prompt, same greedy tokens, same process.
// Usage: bench_qwen_next_cuda [model_dir] [decode_tokens] [prompt_tokens] [cpu_threads]
//   defaults: models/default 256 64 0 (0 = all cores)
// Or: bench_qwen_next_cuda synthetic-full[:EXPERTS[:LAYERS]] [decode_tokens] [contexts]: the
//   full-size model generated on the GPU, prefill + decode per context frontier as fractions
//   of the roofline (synthetic_full.h); defaults 512 48, 32, 2048,8192
// Prints tok/s per backend and the ratio; the model is tiny (5.9M params, 11 MiB bf16), so
// the GPU number measures per-token launch/graph overhead, not bandwidth.
// With an MTP head (issue #11): one greedy draft chain of depth 3 vs one trunk decode step,
// and greedy speculative decoding (engine::generate_greedy, depth 3) vs AR on the CUDA model
// over the chat prompts of tests/data/default_model/greedy.json: tok/s, acceptance, equality.
// Flags (either mode; chunk_tables.h):
//   --prefill=C1,C2,..  prefill tok/s through the 16-row chunk at each context (tiny model:
//                       also token by token; contexts past max_context are skipped)
//   --verify=CTX        verify cost of k+1 = 2..5 rows (chunk, and verify_capture + commit)
//                       over one decode step at context CTX, with the bytes floor
//   --no-greedy         skip the CPU-vs-CUDA greedy table (tiny model)
// synthetic-full with --prefill=L1,L2,..: the issue #22 prefill tables instead (old 16-row path
//   vs tensor-core chunks, canary, phase profile; synthetic_prefill.h), with
//   --old-max=N (old path lengths, default 2048), --prefill-rows=N (default 512),
//   --exact-max=N (also the exact large-chunk path up to N; default 0: not run),
//   --gemm-rows=N (the tensor-core path's CudaModelOptions::gemm_rows; default the server's)
//   --fp32-ab           the first length's tensor-core table again with fp32_gemms off (same process)
//   --profile           synthetic-full: per-op GPU ms of a decode token at each context
//   --ncu-decode        synthetic-full: one decode step's graph at the first context inside
//                       cudaProfilerStart / Stop (ncu --profile-from-start off --graph-profiling node)
//   --ncu-verify=K      synthetic-full: at the first context, per-op GPU ms of one forward of K + 1
//                       rows (a verify window), then that forward inside cudaProfilerStart / Stop
//   --batch N,N [--batch-rows N,N] [--batch-steps S] [--batch-profile]  synthetic-full (issue #24): continuous batching
//                       at those stream counts from the first context's state (../cuda_batch_table.h)
//   --mtp               synthetic-full --prefill: the model with an MTP head, prefill tables with it
//                       enabled too (synthetic_prefill.h item 4)
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/speculative.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "models/qwen_next/model.h"

#include "../cuda_common.h"
#include "chunk_tables.h"
#include "synthetic_prefill.h"
#include "synthetic_full.h"

using namespace ds4;

namespace {

using Result = bench::GreedyRun;

Result run(Model& m, const std::vector<int32_t>& prompt, int n) {
  auto s = m.new_state();
  {  // warm-up (graph capture, caches), then a fresh state
    auto w = m.new_state();
    auto l = m.prefill(*w, prompt);
    for (int i = 0; i < 4; ++i) m.decode(*w, 1);
  }
  return bench::timed_greedy(m, *s, prompt, n);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The MTP rows; returns false when speculative tokens differ from AR.
bool mtp_rows(Model& gpu, const std::vector<int32_t>& bench_prompt, int n) {
  DraftHead* head = gpu.draft_head();
  if (!head) {
    std::printf("MTP: no draft head on the GPU for this checkpoint\n");
    return true;
  }
  constexpr int kDepth = 3, kReps = 200;
  const auto& eos = gpu.info().eos_token_ids;
  auto s = gpu.new_state();
  head->enable_draft(*s);
  gpu.prefill(*s, bench_prompt);
  std::vector<int32_t> d;
  head->draft(*s, 1, kDepth, d);  // catch-up of the prompt's rows, graph capture
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kReps; ++i) head->draft(*s, 1, kDepth, d);  // the state is unchanged: same chain each time
  const double draft_ms = 1e3 * seconds_since(t0) / kReps;
  auto w = gpu.new_state();
  gpu.prefill(*w, bench_prompt);
  gpu.decode(*w, 1);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kReps; ++i) gpu.decode(*w, 1);
  const double step_ms = 1e3 * seconds_since(t0) / kReps;
  std::printf("| MTP cost (CUDA graph) | ms | vs one trunk decode step |\n|---|---|---|\n");
  std::printf("| one trunk decode step (logits row) | %.3f | 1.00 |\n", step_ms);
  std::printf("| one greedy draft chain, depth %d | %.3f | %.2f |\n", kDepth, draft_ms, draft_ms / step_ms);

  std::vector<std::pair<std::string, std::vector<int32_t>>> prompts;
  std::ifstream f(std::string(DS4_ROOT) + "/tests/data/default_model/greedy.json");
  if (f && gpu.info().vocab_size == 8192) {  // the default model's chat prompts
    const auto j = nlohmann::json::parse(f);
    for (const auto& cs : j["cases"])
      prompts.push_back({cs["name"].get<std::string>(), cs["prompt"].get<std::vector<int32_t>>()});
  }
  if (prompts.empty()) prompts.push_back({"bench prompt", bench_prompt});
  auto timed = [&](const std::vector<int32_t>& prompt, int depth, engine::SpecStats* st, double& tps) {
    auto x = gpu.new_state();
    if (depth > 0) head->enable_draft(*x);
    auto l = gpu.prefill(*x, prompt);
    const auto t = std::chrono::steady_clock::now();
    auto out = engine::generate_greedy(gpu, x, l, n, eos, depth, st);
    tps = double(out.size()) / seconds_since(t);
    return out;
  };
  bool same_all = true;
  // The loop verifies through verify_capture + commit_prefix (chunk.cu): prefix commits, no repairs.
  std::printf("| prompt | AR tok/s | speculative depth %d tok/s | speedup | acceptance | drafted | prefix commits | repairs "
              "| tokens equal |\n|---|---|---|---|---|---|---|---|---|\n", kDepth);
  for (const auto& [name, prompt] : prompts) {
    double ar_tps = 0, sp_tps = 0, warm = 0;
    engine::SpecStats ws, st;
    timed(prompt, kDepth, &ws, warm);  // warm-up: graphs of fresh states, caches
    const auto ar = timed(prompt, 0, nullptr, ar_tps);
    const auto sp = timed(prompt, kDepth, &st, sp_tps);
    const bool same = ar == sp;
    same_all = same_all && same;
    std::printf("| %s (%zu tokens) | %.1f | %.1f | %.2fx | %.3f | %lld | %lld | %lld | %s |\n", name.c_str(), ar.size(),
                ar_tps, sp_tps, sp_tps / ar_tps, st.acceptance(), (long long)st.drafted, (long long)st.prefix_commits,
                (long long)st.repairs, same ? "yes" : "NO");
  }
  return same_all;
}

}  // namespace

int main(int argc, char** argv) {
  ds4::bench::kernel_trace_init();    // DS4_KERNEL_TRACE: CUPTI recording on before any graph
  std::vector<std::string> pos_args;  // positional arguments (flags taken out)
  std::vector<int64_t> prefill_ctx;
  int64_t verify_ctx = -1;
  bool greedy = true, profile = false, ncu_decode = false;
  int ncu_verify_k = 0;
  bench::QwenPrefillArgs pa;
  bench::BatchArgs batch;
  for (int i = 1; i < argc; ++i) {
    if (bench::parse_batch_flag(argc, argv, i, batch)) continue;
    const std::string a = argv[i];
    if (a.rfind("--prefill=", 0) == 0) prefill_ctx = bench::parse_contexts(a.substr(10));
    else if (a.rfind("--old-max=", 0) == 0) pa.old_max = std::stoll(a.substr(10));
    else if (a.rfind("--exact-max=", 0) == 0) pa.exact_max = std::stoll(a.substr(12));
    else if (a.rfind("--prefill-rows=", 0) == 0) pa.prefill_rows = std::stoi(a.substr(15));
    else if (a.rfind("--gemm-rows=", 0) == 0) pa.gemm_rows = std::stoi(a.substr(12));
    else if (a == "--fp32-ab") pa.fp32_ab = true;
    else if (a.rfind("--verify=", 0) == 0) verify_ctx = std::stoll(a.substr(9));
    else if (a == "--no-greedy") greedy = false;
    else if (a == "--profile") profile = true;
    else if (a == "--ncu-decode") ncu_decode = true;
    else if (a.rfind("--ncu-verify=", 0) == 0) ncu_verify_k = std::stoi(a.substr(13));
    else if (a == "--mtp") pa.head = true;
    else pos_args.push_back(a);
  }
  auto arg = [&](size_t i, const char* def) { return i < pos_args.size() ? pos_args[i] : std::string(def); };
  const std::string dir = arg(0, "models/default");
  try {
    qwen_next::SyntheticFullOptions so;
    if ((ncu_decode || ncu_verify_k != 0) &&
        (!qwen_next::parse_synthetic_full(dir, so) || !prefill_ctx.empty() || (ncu_decode && ncu_verify_k != 0) ||
         ncu_verify_k < 0 || ncu_verify_k > 8)) {
      std::fprintf(stderr, "--ncu-decode / --ncu-verify=K (1..8) need synthetic-full, no --prefill= and each other "
                   "absent (one profiler range per run)\n");
      return 2;
    }
    if (qwen_next::parse_synthetic_full(dir, so) && !prefill_ctx.empty()) {
      pa.lengths = prefill_ctx;
      so.mtp = pa.head;
      return bench::qwen_synthetic_prefill(so, pa);
    }
    if (qwen_next::parse_synthetic_full(dir, so))
      return bench::qwen_synthetic_full(so, std::stoi(arg(1, "32")), bench::parse_contexts(arg(2, "2048,8192")),
                                        verify_ctx, profile, batch, ncu_decode,
                                        ncu_verify_k > 0 ? ncu_verify_k + 1 : 0);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 2;
  }
  const int n = std::stoi(arg(1, "256"));
  const int np = std::stoi(arg(2, "64"));
  LoadOptions o;
  o.threads = std::stoi(arg(3, "0"));
  if (o.threads <= 0) o.threads = int(std::thread::hardware_concurrency());
  LoadOptions o1 = o;
  o1.threads = 1;  // the tiny model's matrices are too small to split: one thread is a fair peer too
  if (!greedy) {
    try {
      auto gpu = qwen_next::load_cuda(dir, o);
      auto& g = static_cast<qwen_next::QwenNextCudaModel&>(*gpu);
      std::printf("model %s (CUDA only: --no-greedy)\n", dir.c_str());
      if (!prefill_ctx.empty()) bench::prefill_table(g, prefill_ctx, true);
      if (verify_ctx >= 0) bench::verify_table(g, verify_ctx);
    } catch (const std::exception& e) {
      std::printf("FATAL %s\n", e.what());
      return 2;
    }
    return 0;
  }
  std::vector<int32_t> prompt;
  for (int i = 0; i < np; ++i) prompt.push_back(int32_t((i * 7919 + 13) % 8000));
  auto cpu = qwen_next::load(dir, o);
  auto cpu1 = qwen_next::load(dir, o1);
  auto gpu = qwen_next::load_cuda(dir, o);
  auto gpu_direct = qwen_next::load_cuda(dir, o, qwen_next::CudaModelOptions{false, true});
  auto gpu_unfused = qwen_next::load_cuda(dir, o, qwen_next::CudaModelOptions{true, false});
  std::printf("model %s, prompt %d tokens, greedy decode %d tokens, batch 1; CUDA weights %.1f MiB\n", dir.c_str(),
              np, n, double(static_cast<qwen_next::QwenNextCudaModel&>(*gpu).weight_bytes()) / (1 << 20));
  const Result rc = run(*cpu, prompt, n), r1 = run(*cpu1, prompt, n), rg = run(*gpu, prompt, n),
               rd = run(*gpu_direct, prompt, n), ru = run(*gpu_unfused, prompt, n);
  const Result& best_cpu = r1.decode_tps > rc.decode_tps ? r1 : rc;
  std::printf("| backend | prefill tok/s (16-row chunks on CUDA) | decode tok/s | ms/token |\n|---|---|---|---|\n");
  std::printf("| CPU (%d threads) | %.0f | %.1f | %.3f |\n", o.threads, rc.prefill_tps, rc.decode_tps, 1e3 / rc.decode_tps);
  std::printf("| CPU (1 thread) | %.0f | %.1f | %.3f |\n", r1.prefill_tps, r1.decode_tps, 1e3 / r1.decode_tps);
  std::printf("| CUDA graph | %.0f | %.1f | %.3f |\n", rg.prefill_tps, rg.decode_tps, 1e3 / rg.decode_tps);
  std::printf("| CUDA direct launches | %.0f | %.1f | %.3f |\n", rd.prefill_tps, rd.decode_tps, 1e3 / rd.decode_tps);
  std::printf("| CUDA graph, one gemv per matrix (no stacked projections) | %.0f | %.1f | %.3f |\n", ru.prefill_tps,
              ru.decode_tps, 1e3 / ru.decode_tps);
  std::printf("decode speedup CUDA graph / best CPU: %.2fx; greedy tokens CPU == CUDA: %s\n",
              rg.decode_tps / best_cpu.decode_tps,
              rc.tokens == rg.tokens && rg.tokens == rd.tokens && r1.tokens == rc.tokens && ru.tokens == rg.tokens ? "yes" : "NO");
  auto& g = static_cast<qwen_next::QwenNextCudaModel&>(*gpu);
  if (!prefill_ctx.empty()) bench::prefill_table(g, prefill_ctx, true);
  if (verify_ctx >= 0) bench::verify_table(g, verify_ctx);
  const bool mtp_ok = mtp_rows(*gpu, prompt, n);
  return rc.tokens == rg.tokens && mtp_ok ? 0 : 1;
}
