#pragma once
// bench_glm5_cuda synthetic-full[:TYPE[:EXPERTS[:LAYERS]]] [decode_tokens] [contexts]: the
// full-size GLM 5.x Flash (models/glm5/synthetic_full.h: HF glm5_next config, routed experts
// in TYPE (default q2_k; q4_k needs ~171 GB), the rest Q8_0) generated on the GPU, then
// prefill to each context frontier (default 2048,8192,32768; chunks of 16 rows) and greedy
// decode at batch 1 there, as fractions of the roofline (bench/cuda_synthetic.h).
// Bytes per token: the uploaded weights except the routed experts (hc mixes, attention,
// shared experts, dense MLPs, router, lm_head; the embedding row is made on the host) + the
// routed experts a token reads (decode: k of E per MoE layer; prefill: the expected union of
// 16 rows' top-k under uniform routing, over 16, without the lm_head) + KDA recurrent state read and written
// (f32 {heads, hd, hd} per KDA layer) + the MLA latent rows attention reads (the selection:
// min(pos, index_topk + tail) x kv_lora f32 per DSA layer) + the indexer's pool keys (pos /
// kpool x index_head_dim f32 per full-indexer layer).
// With --prefill N,N (issue #22) the prefill table instead: each length from a fresh state on
// the old path (16-row chunks, row-looped gemv_rows; the --old lengths) and on the
// tensor-core path (--prefill-rows chunks, TF32 dense GEMMs + grouped BF16 expert MMAs from
// --gemm-rows rows), the GPU canary (probe every 5 ms) during a second tensor-core prefill of
// the first length, and the per-section profile of one tensor-core chunk at context 1536.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "../cuda_batch_table.h"
#include "../cuda_canary_probe.h"
#include "../cuda_op_table.h"
#include "../cuda_profiler_range.h"
#include "../cuda_synthetic.h"
#include "backend/cuda/memory.h"
#include "models/glm5/config.h"
#include "models/glm5/cuda/model_cuda.h"
#include "models/glm5/synthetic_full.h"

namespace ds4::bench {

// --prefill: lengths (empty = the context table), the old path's lengths (--old; default the
// --prefill lengths up to 2048), the tensor-core path's chunk rows and GEMM threshold.
struct Glm5PrefillArgs {
  std::vector<int64_t> lengths, old_lengths;
  bool old_set = false;
  bool fp32_gemms = true;  // --no-fp32-gemms: the tensor-core path without CudaModelOptions::fp32_gemms
  int prefill_rows = 512, gemm_rows = glm5::cuda_options_from_env().gemm_rows;  // (the server's)
  // --context-tc: the context table prefills on the tensor-core path (--prefill-rows chunks from
  // --gemm-rows rows): a 32K frontier in ~20 s instead of minutes; the decode there is unchanged.
  bool context_tc = false;
};

// --profile (issue #23): at each frontier, on clones of the state, decode tok/s (graphs) and
// the per-op GPU table (direct launches + events) with CudaModelOptions::decode_tuning off, on
// (one stream), on with the weight gemvs at 4 and 2 rows per block (decode_gemv_rows: same
// results), on with the side stream (decode_side_stream), and whether the greedy tokens agree
// with the one-stream "on" run's (all should: "off" keeps the fused hc kernel, which the
// chunk rows take too, and its other launches change no result).
inline void glm5_decode_profile(glm5::Glm5CudaModel& g, int64_t at, const ModelState& s, const std::vector<float>& l0,
                                double roof_bytes, double copy_gbps) {
  using Clock = std::chrono::steady_clock;
  const glm5::CudaModelOptions loaded = g.options();
  const auto argmax = argmax_row;
  constexpr int kTimed = 16, kProfiled = 8;
  struct Variant {
    const char* name;
    bool tuning, side;
    int rows;
  };
  // The side stream last (its tok/s only: the op table runs one stream).
  const Variant variants[] = {{"decode_tuning off", false, false, 0},
                              {"decode_tuning on, one stream", true, false, 0},
                              {"on, one stream, gemvs 4 rows per block", true, false, 4},
                              {"on, one stream, gemvs 2 rows per block", true, false, 2},
                              {"decode_tuning on (side stream)", true, true, 0}};
  std::vector<int32_t> toks[5];
  for (int tuned = 0; tuned < 5; ++tuned) {
    glm5::CudaModelOptions o = loaded;
    o.decode_tuning = variants[tuned].tuning;
    o.decode_side_stream = variants[tuned].side;
    o.decode_gemv_rows = variants[tuned].rows;
    g.set_options(o);
    auto st = s.clone();  // a clone has no graphs: it captures with these options
    std::vector<float> l = g.decode(*st, argmax(l0));
    toks[tuned].push_back(argmax(l));
    const auto t0 = Clock::now();
    for (int i = 0; i < kTimed; ++i) l = g.decode(*st, argmax(l)), toks[tuned].push_back(argmax(l));
    const double tps = kTimed / std::chrono::duration<double>(Clock::now() - t0).count();
    g.set_profiling(true);
    const auto p0 = Clock::now();
    for (int i = 0; i < kProfiled; ++i) l = g.decode(*st, argmax(l));
    const double wall = std::chrono::duration<double>(Clock::now() - p0).count();
    g.set_profiling(false);
    std::printf("\ncontext %lld, %s: %.2f tok/s (graphs, %d tokens; %.3f of copy bw at %.1f MB/token); "
                "per-op GPU time per decode token (direct launches + events, %d tokens; %.3f ms/token wall):\n",
                (long long)at, variants[tuned].name, tps, kTimed, roof_bytes * tps / 1e9 / copy_gbps, roof_bytes / 1e6,
                kProfiled, 1e3 * wall / kProfiled);
    print_op_table(g.op_times(), kProfiled, "token");
  }
  std::printf("greedy tokens == decode_tuning on's (one stream): off %s, 4 rows %s, 2 rows %s, side stream %s\n",
              toks[0] == toks[1] ? "yes" : "NO", toks[2] == toks[1] ? "yes" : "NO", toks[3] == toks[1] ? "yes" : "NO",
              toks[4] == toks[1] ? "yes" : "NO");
  std::fflush(stdout);
  g.set_options(loaded);
}

// Prefill tok/s per length from a fresh state with the model's current options; the canary
// during a second prefill of the first length when `canary`. Returns {length, tok/s} rows;
// `base` (the old path's rows): the speedup over its row of the same length, else over its
// longest (its tok/s hardly moves with the length: 56 / 54 at 2K / 8K in issue #22).
using PrefillRows = std::vector<std::pair<int64_t, double>>;
inline PrefillRows glm5_prefill_rows(glm5::Glm5CudaModel& g, const std::vector<int64_t>& lengths,
                                     const std::string& title, const PrefillRows& base, bool canary) {
  using Clock = std::chrono::steady_clock;
  const int64_t V = g.info().vocab_size;
  auto prompt_of = [&](int64_t n) {
    std::vector<int32_t> p;
    for (int64_t i = 0; i < n; ++i) p.push_back(int32_t((i * 7919 + 13) % V));
    return p;
  };
  std::printf("\nprefill, %s, fresh state per length\n| prompt tokens | prefill s | tok/s | vs the 16-row path |\n"
              "|---|---|---|---|\n", title.c_str());
  PrefillRows out;
  for (const int64_t n : lengths) {
    const auto p = prompt_of(n);
    auto s = g.new_state();
    const auto t0 = Clock::now();
    const auto l = g.prefill(*s, p);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count(), tps = double(n) / dt;
    out.push_back({n, tps});
    bool finite = true;
    for (float x : l) finite = finite && std::isfinite(x);
    char vs[48] = "-";
    if (!base.empty()) {
      auto same = std::find_if(base.begin(), base.end(), [&](const auto& b) { return b.first == n; });
      if (same != base.end()) std::snprintf(vs, sizeof vs, "%.2fx", tps / same->second);
      else std::snprintf(vs, sizeof vs, "%.2fx (vs its %lld)", tps / base.back().second, (long long)base.back().first);
    }
    std::printf("| %lld | %.2f | %.1f | %s |%s\n", (long long)n, dt, tps, vs, finite ? "" : " NON-FINITE LOGITS");
    std::fflush(stdout);
  }
  if (!canary || lengths.empty()) return out;
  const auto p = prompt_of(lengths[0]);
  auto s = g.new_state();
  const ProbedRun run = with_canary([&] { g.prefill(*s, p); });
  const double dt = run.seconds;
  const CanaryStats& cs = run.canary;
  std::printf("GPU canary (probe every 5 ms, highest-priority stream) during a %lld-token prefill (%.1f tok/s with it): "
              "%lld samples, p50 %.3f ms, p99 %.3f ms, max %.3f ms, stalls %lld (SPEC: max < 10 ms)\n",
              (long long)lengths[0], double(lengths[0]) / dt, (long long)cs.samples, cs.p50_ms, cs.p99_ms, cs.max_ms,
              (long long)cs.stalls);
  std::fflush(stdout);
  return out;
}

// The --prefill table (see the file comment) on the loaded full-size model.
inline void glm5_prefill_table(glm5::Glm5CudaModel& g, const Glm5PrefillArgs& pa) {
  const glm5::CudaModelOptions loaded = g.options();
  std::vector<int64_t> old_lengths = pa.old_lengths;
  if (!pa.old_set)
    for (int64_t n : pa.lengths)
      if (n <= 2048) old_lengths.push_back(n);
  glm5::CudaModelOptions old = loaded;
  old.prefill_rows = 0;  // every forward in chunk_rows (16) chunks: the path before issue #22
  g.set_options(old);
  const auto base = glm5_prefill_rows(g, old_lengths, "16 rows per chunk, gemv_rows (the old path)", {}, false);
  glm5::CudaModelOptions tc = loaded;
  tc.prefill_rows = int(std::min<int64_t>(pa.prefill_rows, g.prefill_rows()));  // admission may have cut it
  tc.gemm_rows = pa.gemm_rows;
  tc.fp32_gemms = pa.fp32_gemms;
  g.set_options(tc);
  {  // first use of cuBLAS (kernel loading) outside the timed rows
    const int64_t V = g.info().vocab_size;
    std::vector<int32_t> w;
    for (int64_t i = 0; i < std::min<int64_t>(pa.prefill_rows, g.prefill_rows()); ++i) w.push_back(int32_t(i % V));
    auto s = g.new_state();
    g.prefill(*s, w);
  }
  // The first length with the canary, then the profile, then the longer lengths (a run cut by
  // its timeout keeps the first two).
  const std::string title = std::to_string(tc.prefill_rows) + " rows per chunk, dense projections tensor-core GEMMs (cuBLAS, model_matmul_precision), "
                            "routed experts grouped BF16 MMAs (grouped_mma_bf16), " +
                            (pa.fp32_gemms ? "HC mixes and MLA attention FP32 GEMMs, router / indexer exact"
                                           : "HC mixes / router / indexer exact");
  if (pa.lengths.empty()) return g.set_options(loaded);
  glm5_prefill_rows(g, {pa.lengths[0]}, title, base, true);
  // Where one tensor-core chunk's time goes: the sections of a chunk at context 1536.
  const int64_t V = g.info().vocab_size, rows = std::min<int64_t>(pa.prefill_rows, g.prefill_rows());
  std::vector<int32_t> pre, chunk;
  for (int64_t i = 0; i < 1536; ++i) pre.push_back(int32_t((i * 7919 + 13) % V));
  for (int64_t i = 0; i < rows; ++i) chunk.push_back(int32_t((i * 104729 + 7) % V));
  auto s = g.new_state();
  g.prefill(*s, pre);
  glm5::ChunkProfile p;
  {
    const ProfilerRange range;  // ncu --profile-from-start off: this chunk only
    p = g.profile_chunk(*s, chunk);
  }
  std::printf("\nprofile of one tensor-core chunk of %lld rows at context 1536 (direct launches, cudaEvent per section, "
              "summed over layers): %.1f ms = %.0f tok/s\n| section | ms | share |\n|---|---|---|\n", (long long)rows,
              p.total_ms, double(rows) / p.total_ms * 1e3);
  for (const auto& [name, ms] : p.sections)
    std::printf("| %s | %.2f | %.1f%% |\n", name.c_str(), ms, 100 * ms / p.total_ms);
  std::fflush(stdout);
  if (pa.lengths.size() > 1)
    glm5_prefill_rows(g, std::vector<int64_t>(pa.lengths.begin() + 1, pa.lengths.end()), title + " (continued)", base,
                      false);
  g.set_options(loaded);
}

// batch (--batch ...): the continuous-batching tables (../cuda_batch_table.h) from the state at the
// first context frontier, right after that frontier's row.
// ncu_decode: at the first context, one decode step's graph in the profiler range (ncu_decode_step).
inline int glm5_synthetic_full(const glm5::SyntheticFullOptions& so, int n_decode, const std::vector<int64_t>& ctx,
                               const Glm5PrefillArgs& pa = {}, const BatchArgs& batch = {}, bool profile = false,
                               bool ncu_decode = false) {
  using Clock = std::chrono::steady_clock;
  const glm5::Config c = glm5::parse_config(glm5::synthetic_full_config(so), "synthetic-full");
  LoadOptions lo;
  lo.max_context = ctx.back() + (2 * n_decode + 2) * int64_t(ctx.size()) + 64;  // (context_table's tokens a frontier)
  // (+ the profiled chunk of prefill_rows after a 1536-token context)
  if (!pa.lengths.empty())
    lo.max_context = std::max({lo.max_context, pa.lengths.back() + 64, int64_t(1536) + pa.prefill_rows + 64});
  if (!batch.streams.empty()) lo.max_context += 2 + batch.steps + 34;  // warm-up, timed and unbatched steps
  glm5::CudaModelOptions co;
  co.synthetic_seed = so.seed;
  co.prefill_rows = std::max(co.prefill_rows, pa.prefill_rows);
  if (pa.context_tc) co.gemm_rows = pa.gemm_rows;
  const auto free0 = cuda::device_memory_info();
  auto t0 = Clock::now();
  std::unique_ptr<glm5::Glm5CudaModel> gp;
  try {  // admission (backend/cuda/memory.h) refuses before anything is generated
    gp = std::make_unique<glm5::Glm5CudaModel>(glm5::synthetic_full_source(so), lo, co);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n(synthetic-full: routed experts Q4_K need ~171 GB with 288 experts; use q2_k, or fewer experts "
                "such as synthetic-full:q4_k:200)\n", e.what());
    return 2;
  }
  glm5::Glm5CudaModel& g = *gp;
  const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto free1 = cuda::device_memory_info();
  std::printf("synthetic-full GLM 5.x Flash: %lld layers, %lld experts (top-%lld) in %s, rest %s, vocab %lld, max "
              "context %lld\n", (long long)c.num_hidden_layers, (long long)c.n_routed_experts,
              (long long)c.num_experts_per_tok, std::string(dtype_name(so.experts)).c_str(),
              std::string(dtype_name(so.dense)).c_str(), (long long)c.vocab_size, (long long)lo.max_context);
  std::printf("weights %.2f GiB generated on the GPU, load %.1f s; device memory used by the model %.2f GiB (of %.2f "
              "GiB total)\n", double(g.weight_bytes()) / (1ull << 30), load_s,
              double(free0.free_bytes - free1.free_bytes) / (1ull << 30), double(free0.total_bytes) / (1ull << 30));
  const auto bw = measure_printed_bandwidth();
  int64_t kda = 0, dsa = 0, full_idx = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.layer_types[size_t(l)] == glm5::LayerKind::kLinear) ++kda;
    else ++dsa, full_idx += c.indexer_shared[size_t(l)] ? 0 : 1;
  }
  // A prefill chunk reads the lm_head only for the last chunk's logits: left out (Q8_0: V x H x 34/32).
  const double lm = double(c.vocab_size) * double(c.hidden_size) * 34.0 / 32.0;
  const double per_tok = double(g.weight_bytes_per_token()), chunk = (per_tok * g.chunk_bytes_ratio(16) - lm) / 16.0;
  const double kda_state = double(kda) * 2.0 * double(c.linear_num_heads * c.linear_head_dim * c.linear_head_dim) * 4.0;
  auto attn = [&](int64_t p) {
    const int64_t sel = std::min<int64_t>(p + 1, c.index_topk + (p + 1) % c.index_kpool);
    return double(dsa) * double(sel * c.kv_lora_rank) * 4.0 +
           double(full_idx) * double((p / c.index_kpool) * c.index_head_dim) * 4.0;
  };
  std::printf("bytes per token: weights %.1f MB (decode), %.1f MB (prefill, 16-row chunks), KDA state %.1f MB, "
              "attention at %lld: %.1f MB\n", per_tok / 1e6, chunk / 1e6, kda_state / 1e6, (long long)ctx.back(),
              attn(ctx.back()) / 1e6);
  if (pa.context_tc)
    std::printf("context table: prefill on the tensor-core path (%d-row chunks, GEMMs from %d rows; --context-tc)\n",
                int(g.prefill_rows()), pa.gemm_rows);
  if (!pa.lengths.empty()) {
    std::printf("prefill chunk scratch sized for %lld rows at load (admission)\n", (long long)g.prefill_rows());
    glm5_prefill_table(g, pa);
    if (n_decode <= 0) return 0;
  }
  TokenBytes tb;
  tb.decode = [&](int64_t p) { return per_tok + kda_state + attn(p); };
  tb.prefill = [&](int64_t p) { return chunk + kda_state + attn(p); };
  FrontierHook hook;
  if (!batch.streams.empty() || profile || ncu_decode)
    hook = [&](int64_t at, const ModelState& s, const std::vector<float>& l) {
      if (ncu_decode && at == ctx.front()) ncu_decode_step(g, s, l);
      if (!batch.streams.empty() && at == ctx.front()) {
        batch_tables(g, s, batch, 0.0, bw.copy_gbps, per_tok, [&](bool on) { g.set_profiling(on); });
        if (batch.seq_ab) {  // the stateful kernels launched per sequence (before 2026-12-05), same run
          glm5::CudaModelOptions o = g.options();
          o.seq_launches = false;
          g.set_options(o);
          std::printf("\nCudaModelOptions::seq_launches off (the stateful kernels launched per sequence):\n");
          batch_tables(g, s, batch, 0.0, bw.copy_gbps, per_tok, [&](bool on) { g.set_profiling(on); });
          o.seq_launches = true;
          g.set_options(o);
        }
      }
      if (profile) glm5_decode_profile(g, at, s, l, tb.decode(at), bw.copy_gbps);
    };
  context_table(g, ctx, n_decode, tb, bw, hook);
  return 0;
}

}  // namespace ds4::bench
