// Decode speed of DeepSeek V4 (Flash) on CUDA at batch 1, as a fraction of the roofline:
// weight bytes one decode token reads (dense parts + experts_used routed experts per layer +
// HC head + lm_head) over the device copy bandwidth measured in the same run.
// Prefill (issues #10, #11): tok/s of the chunked forward (chunks of 16 rows, each weight read
// once per chunk) for each --prefill length from a fresh state, against its weights-only
// roofline (copy bandwidth over the bytes a chunk reads per token: every matrix once, routed
// experts as the expected union of 16 rows' top-k); the GPU canary (backend/cuda/canary.h,
// probing every 5 ms) during a second prefill of the first length; and the verify cost:
// median forward(k+1 rows, kAll) / median decode step at the prompt's context, k = 1..4,
// multi-row and as k+1 decode steps (chunk_rows 1), beside the bytes floor. With ds4's MTP
// head on the GPU (a checkpoint with mtp.0.*, e.g. the tiny model's directory with
// tests/data/deepseek_v4/mtp/mtp.safetensors copied in): the draft chain of depth 1..3 against
// one decode step, and greedy speculative decoding (engine::generate_greedy, captured-prefix
// commit) at depth 1..3 against AR, tok/s with its acceptance (issue #11). With MTPLX's DSpark
// drafter instead (mtp.0.main_proj.weight, e.g. the tiny model with tests/data/deepseek_v4/
// dspark/dspark.safetensors and dspark_config.json merged into config.json): one K5 pass (all
// five drafts) against one decode step, and greedy speculative decoding at depth 1, 3, 5 (gate
// 0, as generate_greedy sets it).
// Usage: bench_deepseek_v4_cuda MODEL [prompt_tokens] [decode_tokens] [--profile] [--prefill N,N,...]
//        [--prefill-rows N,N] [--old-max N] [--batch N,N,... [--batch-steps S] [--batch-profile] [--seq-ab]
//        [--rows-ab R,R] [--split-ab] [--mma-ab]] [--jump N,N]
//        [--act-quant]
//        [--act-variants] [--ncu-decode]
//   --ncu-decode: after the timed decode, one more decode step (its CUDA graph, default options; of a clone,
//   ../cuda_profiler_range.h ncu_decode_step) inside cudaProfilerStart / Stop, then exit: `ncu --profile-from-start off
//   --graph-profiling node` times each kernel of a decode step alone (the graph's kernels one by one), for the
//   per-kernel table of issue #23.
//   --act-variants: decode tok/s under each IQ2_XXS decoder of gemv_act (act_variants below).
//   --act-quant: after the decode lines, decode tok/s with ds4's activation quantization
//   (Config::act_quant: Q8_0 / Q8_K activations, integer GEMVs) and without it, from clones of
//   the prompt state in the same run (CudaModelOptions::act_quant switched by set_options), and
//   how many of the greedy tokens agree; with --profile also the per-op table of 8 tokens with
//   it on. Everything else runs with the model's setting at load (on for ds4-layout files;
//   DS4_ACT_QUANT=f32 switches it off).
//   --batch: continuous batching (../cuda_batch_table.h) at each stream count after the decode lines,
//   S timed steps each (default 16), one table per --batch-rows value (CudaModelOptions::
//   batch_rows, default: the option's default); the verify / draft tables are skipped, --prefill's
//   tables, --profile's per-op table and --jump's rows still run after it (before 2026-12-07 they
//   were skipped too, silently).
//   --batch-profile adds a per-op table of one step per stream count; --seq-ab the same tables
//   again with CudaModelOptions::seq_launches off (a launch per sequence for the stateful kernels);
//   --rows-ab R,R the same tables again at each gemv_act_rows weight-rows-per-block value R (2, 4, 8:
//   gemv_act_set_rows_kernel_rows, the dense products of a batch of more than 4 rows); --split-ab the
//   same tables again with Q8_0's 9..16-row products as one 16-input launch (gemv_act_set_q8_split);
//   --mma-ab the same tables again with Q8_0's multi-row products on the dp4a rows kernel instead of
//   the tensor-core one (gemv_act_set_rows_mma(-1)).
//   --jump: decode tok/s (and with --profile the per-op table) at each context N from a state
//   filled with random caches as if N tokens were consumed (fill_context_for_bench: no prefill).
//   --prefill: the old path (16-row chunks; only lengths <= --old-max) and then the tensor-core
//   path (default options) at each --prefill-rows chunk size (default the server's; the first at every
//   length with the canary, the others at the old path's lengths), then the first size with the
//   exact parts on gemv_rows (fp32_gemms off), same run, speedups side by side.
//   defaults: 64 prompt tokens (ids generated), 64 greedy decode tokens, no prefill lengths.
//   --profile: afterwards 8 more decode tokens from a clone of the state with direct launches
//   and CUDA events around each op; prints milliseconds per op (summed over layers) per token;
//   and the same per op for one chunk of 16 rows and one tensor-core chunk of the first --prefill-rows
//   rows, and (with --prefill) one such chunk after the longest prefill.
// Peer: antirez/ds4 on the same synthetic file, H200: 33.65 tok/s decode at 2048 context, 8.2%
// of the 410 tok/s roofline (bench/results/ds4-peer-h200-2026-12-01).
// The synthetic full-size Flash: ds4-convert --synthetic deepseek_v4_flash OUT.gguf.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../cuda_batch_table.h"
#include "../cuda_common.h"
#include "../cuda_op_table.h"
#include "../cuda_profiler_range.h"
#include "backend/cuda/bandwidth.h"
#include "backend/cuda/canary.h"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_tuning.h"
#include "engine/speculative.h"
#include "models/deepseek_v4/cuda/model_cuda.h"

using namespace ds4;
using Clock = std::chrono::steady_clock;

namespace {

// "N,N,...": the integers of a comma-separated option value, appended to `out`.
void append_int_list(std::string l, std::vector<int>& out) {
  while (!l.empty()) {
    const size_t c = l.find(',');
    out.push_back(std::stoi(l.substr(0, c)));
    l = c == std::string::npos ? "" : l.substr(c + 1);
  }
}

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

using bench::argmax_row;
const auto argmax = argmax_row;

void print_op_times(const deepseek_v4::DeepseekV4CudaModel& m, int n, const char* unit) {
  bench::print_op_table(m.op_times(), n, unit);
}

// One prefill chunk of `n` rows (default options: tensor cores) on a clone of `at`, per op
// (direct launches + events; the options are left at profiling).
void profile_chunk(deepseek_v4::DeepseekV4CudaModel& m, const ModelState& at, int n, const char* where) {
  deepseek_v4::CudaModelOptions po;
  po.graphs = false, po.profile = true;
  po.prefill_rows = n;  // one chunk of n rows (the options' default, 512, would split it)
  m.set_options(po);
  const std::vector<int32_t> rows = bench::verify_window_tokens(n, m.info().vocab_size);
  auto c = at.clone();
  std::vector<float> l;
  m.reset_op_times();
  const auto t0 = Clock::now();
  {
    const bench::ProfilerRange range;  // ncu --profile-from-start off: this chunk only
    m.forward(*c, rows, Logits::kLast, l);
  }
  const double w = secs(t0, Clock::now());
  std::printf("\nper-op GPU time of one prefill chunk of %d rows %s (position %lld; tensor-core path, direct launches "
              "+ events; %.3f ms wall, %.3f ms per row):\n", n, where, (long long)at.position(), 1e3 * w, 1e3 * w / n);
  print_op_times(m, 1, "chunk");
}

// Continues a clone of the bench's state (same context length) with direct launches.
// chunk_rows: the prefill chunk profiled after the decode tokens (the bench's first --prefill-rows).
void profile(deepseek_v4::DeepseekV4CudaModel& m, const ModelState& at, std::vector<float> l, int n, int chunk_rows) {
  auto s = at.clone();
  m.set_options(deepseek_v4::CudaModelOptions{false, true});
  m.reset_op_times();
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) l = m.decode(*s, argmax(l));
  const double dt = secs(t0, Clock::now());
  std::printf("\nper-op GPU time per decode token (direct launches + events, %d tokens; %.3f ms/token wall):\n", n,
              1e3 * dt / n);
  print_op_times(m, n, "token");
  const auto& t = m.op_times();
  auto ms = [&](const char* k) { return t.count(k) ? t.at(k) / n : 0.0; };
  const double ex_ms = ms("experts_gate_up") + ms("experts_down");
  if (ex_ms > 0)
    std::printf("routed experts: %.3f GB per token in %.3f ms -> %.0f GB/s (gate|up %.3f ms, down %.3f ms)\n",
                double(m.decode_bytes_per_token().experts) / 1e9, ex_ms,
                double(m.decode_bytes_per_token().experts) / 1e6 / ex_ms, ms("experts_gate_up"), ms("experts_down"));
  // One chunk of 16 rows (the prefill unit) at the same context, per op.
  const std::vector<int32_t> rows = bench::verify_window_tokens(16, m.info().vocab_size);
  auto c = at.clone();
  m.reset_op_times();
  const auto t1 = Clock::now();
  m.forward(*c, rows, Logits::kLast, l);
  std::printf("\nper-op GPU time of one chunk of 16 rows (direct launches + events; %.3f ms wall, %.3f ms per row):\n",
              1e3 * secs(t1, Clock::now()), 1e3 * secs(t1, Clock::now()) / 16);
  print_op_times(m, 1, "chunk");
  // One prefill chunk on the tensor-core path (issue #22), per op.
  profile_chunk(m, at, chunk_rows, "at the decode context");
  m.set_options(deepseek_v4::CudaModelOptions{});
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ms of one decode step and of one forward(rows, kAll), interleaved (both at about the
// same context) on a clone of `at`; the clone's graphs are captured before timing.
std::pair<double, double> verify_cost(Model& m, const ModelState& at, const std::vector<int32_t>& rows, int reps) {
  auto s = at.clone();
  std::vector<float> l;
  m.forward(*s, rows, Logits::kAll, l);
  m.decode(*s, rows[0]);
  std::vector<double> dec, ver;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    m.decode(*s, rows[size_t(i) % rows.size()]);
    const auto t1 = Clock::now();
    m.forward(*s, rows, Logits::kAll, l);
    dec.push_back(1e3 * secs(t0, t1));
    ver.push_back(1e3 * secs(t1, Clock::now()));
  }
  return {median(dec), median(ver)};
}

// Issue #11's table: what a speculative verify of k drafts costs in decode steps.
void verify_table(deepseek_v4::DeepseekV4CudaModel& m, const ModelState& at, int reps) {
  const int64_t V = m.info().vocab_size;
  std::printf("\nverify cost at context %lld (median of %d): forward(k+1 rows, kAll) / one decode step\n",
              (long long)at.position(), reps);
  std::printf("(bytes floor: weight bytes the k+1 rows read over one token's, routed experts as the expected union of\n"
              " the rows' top-k under uniform routing)\n");
  std::printf("| k | rows | decode ms | verify ms (multi-row) | ratio | bytes floor | verify ms (k+1 steps) | ratio |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  deepseek_v4::CudaModelOptions one;
  one.chunk_rows = 1;
  for (int k = 1; k <= 4; ++k) {
    const std::vector<int32_t> rows = bench::verify_window_tokens(k + 1, V);
    const auto [dm, vm] = verify_cost(m, at, rows, reps);
    m.set_options(one);
    const auto [ds, vs] = verify_cost(m, at, rows, reps);
    m.set_options(deepseek_v4::CudaModelOptions{});
    std::printf("| %d | %d | %.3f | %.3f | %.2fx | %.2fx | %.3f | %.2fx |\n", k, k + 1, dm, vm, vm / dm,
                m.chunk_bytes_ratio(k + 1), vs, vs / ds);
  }
}

// Issue #11: what a draft chain costs in decode steps, and what speculation buys. Every timed
// run continues a state whose graphs (decode, verify chunk, draft chain) were captured by an
// untimed run of the same kind, so capture time is left out on both sides.
void draft_table(deepseek_v4::DeepseekV4CudaModel& m, const std::vector<int32_t>& prompt, int n, int reps) {
  auto s = m.new_state();
  m.enable_draft(*s);
  auto l = m.prefill(*s, prompt);
  std::vector<int32_t> d;
  const bool dspark = m.has_dspark();
  // DSpark: one K5 pass gives all five drafts whatever the depth (draft() only cuts them)
  const std::vector<int> cost_depths = dspark ? std::vector<int>{5} : std::vector<int>{1, 2, 3};
  const std::vector<int> spec_depths = dspark ? std::vector<int>{1, 3, 5} : std::vector<int>{1, 2, 3};
  std::printf("\n%s draft cost at context %lld (median of %d): draft(depth) / one decode step\n",
              dspark ? "DSpark (one K5 pass)" : "MTP", (long long)s->position(), reps);
  std::printf("| depth | decode ms | draft ms | ratio |\n|---|---|---|---|\n");
  for (int depth : cost_depths) {
    m.draft(*s, argmax(l), depth, d);  // the draft's graph for this depth
    std::vector<double> dec, dr;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      l = m.decode(*s, argmax(l));
      const auto t1 = Clock::now();
      m.draft(*s, argmax(l), depth, d);
      dec.push_back(1e3 * secs(t0, t1));
      dr.push_back(1e3 * secs(t1, Clock::now()));
    }
    std::printf("| %d | %.3f | %.3f | %.2fx |\n", depth, median(dec), median(dr), median(dr) / median(dec));
  }
  // greedy generation of n tokens, twice on one state: the second run is timed
  auto run = [&](int depth, engine::SpecStats& stats) {
    auto st = m.new_state();
    if (depth > 0) m.enable_draft(*st);
    auto lg = m.prefill(*st, prompt);
    auto out = engine::generate_greedy(m, st, lg, n, {}, depth);
    lg = m.decode(*st, out.back());  // the last token is returned unfed
    const auto t0 = Clock::now();
    out = engine::generate_greedy(m, st, lg, n, {}, depth, &stats);
    return double(out.size()) / secs(t0, Clock::now());
  };
  engine::SpecStats ar_stats;
  const double ar = run(0, ar_stats);
  std::printf("\ngreedy speculative decoding (%s), %d tokens after %zu (engine::generate_greedy; AR %.1f tok/s)\n",
              dspark ? "DSpark" : "MTP", n, prompt.size() + size_t(n), ar);
  std::printf("| depth | tok/s | vs AR | acceptance | tokens/cycle | prefix commits | repairs + full replays |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int depth : spec_depths) {
    engine::SpecStats st;
    const double tps = run(depth, st);
    std::printf("| %d | %.1f | %.2fx | %.2f | %.2f | %lld | %lld |\n", depth, tps, tps / ar, st.acceptance(),
                st.cycles ? double(n) / double(st.cycles) : 0.0, (long long)st.prefix_commits,
                (long long)(st.repairs + st.full_replays));
  }
}

// Chunked prefill of each length from a fresh state (graph capture included: one chunk shape
// per logits mode), as a fraction of the weights-only roofline of its chunk size; the canary
// during a second prefill of the first length. `title` names the path (CudaModelOptions set
// by the caller); `base_tps` (> 0) adds the speedup over the old path measured in this run.
std::vector<double> prefill_table(deepseek_v4::DeepseekV4CudaModel& m, const std::vector<int>& lengths,
                                  double copy_gbps, const std::string& title, int chunk,
                                  const std::vector<double>& base_tps = {}, bool with_canary = true,
                                  std::unique_ptr<ModelState>* last = nullptr) {
  std::vector<double> out;
  if (lengths.empty()) return out;
  const int64_t V = m.info().vocab_size;
  const double per_tok = double(m.decode_bytes_per_token().total()) * m.chunk_bytes_ratio(chunk) / chunk;
  const double roof = copy_gbps * 1e9 / per_tok;
  std::printf("\nchunked prefill, %s, fresh state per length\n", title.c_str());
  std::printf("weights-only roofline: %.3f GB per token (a chunk's bytes / %d; experts: expected union of %d rows' top-k)"
              " -> %.0f tok/s at %.0f GB/s\n", per_tok / 1e9, chunk, chunk, roof, copy_gbps);
  std::printf("| prompt tokens | prefill s | tok/s | of roofline | vs ds4 ~1370 tok/s (2k) | vs the 16-row path |\n"
              "|---|---|---|---|---|---|\n");
  auto prompt_of = [&](int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(int32_t((int64_t(i) * 7919 + 13) % V));
    return p;
  };
  for (int n : lengths) {
    const auto p = prompt_of(n);
    auto s = m.new_state();
    const auto t0 = Clock::now();
    m.prefill(*s, p);
    const double dt = secs(t0, Clock::now()), tps = n / dt;
    out.push_back(tps);
    char vs[32] = "-";
    if (out.size() <= base_tps.size()) std::snprintf(vs, sizeof vs, "%.2fx", tps / base_tps[out.size() - 1]);
    std::printf("| %d | %.2f | %.1f | %.1f%% | %.3fx | %s |\n", n, dt, tps, 100 * tps / roof, tps / 1370.0, vs);
    std::fflush(stdout);
    if (last) *last = std::move(s);
  }
  if (!with_canary) return out;
  const auto p = prompt_of(lengths[0]);
  cuda::GpuCanary::Options co;
  co.period_s = 0.005;
  cuda::GpuCanary canary(co);
  auto s = m.new_state();
  canary.start();
  const auto t0 = Clock::now();
  m.prefill(*s, p);
  const double dt = secs(t0, Clock::now());
  canary.stop();
  const CanaryStats cs = canary.snapshot();
  std::printf("GPU canary (probe every 5 ms) during a %d-token prefill (%.1f tok/s with it): %lld samples, p50 %.3f ms, "
              "p99 %.3f ms, max %.3f ms, stalls %lld (SPEC wants max < 10 ms; each chunk of %d rows is one graph "
              "launch + sync)\n",
              lengths[0], lengths[0] / dt, (long long)cs.samples, cs.p50_ms, cs.p99_ms, cs.max_ms, (long long)cs.stalls,
              chunk);
  return out;
}

// Decode at context `ctx` without its prefill (issue #23's 32K goal; a 32K prefill would cost
// minutes): a state filled as if ctx tokens were consumed (random caches, fill_context_for_bench),
// then n greedy tokens with the default options (graphs, side stream), and with `prof` the
// per-op table of 8 more tokens (direct launches + events).
void jump_decode(deepseek_v4::DeepseekV4CudaModel& m, int ctx, int n, double roof, bool prof) {
  m.set_options(deepseek_v4::CudaModelOptions{});
  auto s = m.new_state();
  m.fill_context_for_bench(*s, ctx);
  std::vector<float> l = m.decode(*s, 13);  // graph capture
  l = m.decode(*s, argmax(l));
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) l = m.decode(*s, argmax(l));
  const double tps = n / secs(t0, Clock::now());
  std::printf("\ndecode at context %d (state filled, no prefill): %.2f tok/s, %.3f ms/token, %.1f%% of the roofline\n",
              ctx, tps, 1e3 / tps, 100 * tps / roof);
  if (!prof) return;
  auto c = s->clone();
  m.set_options(deepseek_v4::CudaModelOptions{false, true});
  m.reset_op_times();
  const auto t1 = Clock::now();
  for (int i = 0; i < 8; ++i) l = m.decode(*c, argmax(l));
  std::printf("per-op GPU time per decode token at context %d (direct launches + events, 8 tokens; %.3f ms/token "
              "wall):\n", ctx, 1e3 * secs(t1, Clock::now()) / 8);
  print_op_times(m, 8, "token");
  m.set_options(deepseek_v4::CudaModelOptions{});
}

// Decode tok/s with ds4's activation quantization off and on (set_options switches it; each
// from a clone of the prompt state, one untimed token first for the graph capture), the
// greedy tokens' agreement, and with `prof` the per-op table with it on. The model's own
// setting is restored after.
void act_quant_decode(deepseek_v4::DeepseekV4CudaModel& m, const ModelState& at, const std::vector<float>& l0, int n,
                      double roof, bool prof) {
  const bool was = m.config().act_quant;
  auto with = [&](bool on) {
    deepseek_v4::CudaModelOptions o;
    o.act_quant = on;
    return o;
  };
  std::vector<int32_t> toks[2];
  double tps[2] = {0, 0};
  for (int on = 0; on < 2; ++on) {
    m.set_options(with(on));
    auto c = at.clone();
    auto l = m.decode(*c, argmax(l0));
    toks[on].push_back(argmax(l0));
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      toks[on].push_back(argmax(l));
      l = m.decode(*c, argmax(l));
    }
    tps[on] = n / secs(t0, Clock::now());
  }
  int agree = 0;
  while (agree < int(toks[0].size()) && toks[0][size_t(agree)] == toks[1][size_t(agree)]) ++agree;
  const auto launches = m.act_launches();
  std::printf("\nact_quant (ds4's Q8_0 / Q8_K activations, integer GEMVs; CUDA graph, side stream), %d tokens from the "
              "prompt state:\n| act_quant | tok/s | ms/token | of roofline |\n|---|---|---|---|\n", n);
  for (int on = 0; on < 2; ++on)
    std::printf("| %s | %.2f | %.3f | %.1f%% |\n", on ? "on" : "off", tps[on], 1e3 / tps[on], 100 * tps[on] / roof);
  std::printf("speedup %.2fx; greedy tokens equal for the first %d of %zu; act products enqueued so far: %lld Q8_0, "
              "%lld Q8_K\n", tps[1] / tps[0], agree, toks[0].size(), (long long)launches.q8_0, (long long)launches.q8_k);
  if (prof) {
    deepseek_v4::CudaModelOptions po = with(true);
    po.graphs = false, po.profile = true;
    m.set_options(po);
    auto c = at.clone();
    auto l = l0;
    m.reset_op_times();
    for (int i = 0; i < 8; ++i) l = m.decode(*c, argmax(l));
    std::printf("per-op GPU time per decode token with act_quant on (direct launches + events, 8 tokens):\n");
    print_op_times(m, 8, "token");
  }
  m.set_options(with(was));
}

// --act-variants: decode tok/s (CUDA graph, act_quant as loaded) under each IQ2_XXS decoder of
// gemv_act (backend/cuda/gemv_tuning.h: 4 / 8 lanes per block, computed sign masks / the shared
// sign table / byte permutes), each from a clone of the prompt state (one untimed token: its
// graph capture), and whether its greedy tokens equal the default's (every variant gives the
// same bits). The defaults are restored after.
void act_variants(deepseek_v4::DeepseekV4CudaModel& m, const ModelState& at, const std::vector<float>& l0, int n,
                  double roof) {
  struct Variant {
    const char* name;
    int lanes;
    bool table, permute, lane_tables;
  };
  const Variant vs[] = {{"default (4 lanes, computed signs)", 0, false, false, false},
                        {"4 lanes, sign table", 0, true, false, false},
                        {"4 lanes, byte permutes", 0, false, true, false},
                        {"4 lanes, lane tables (ActIQ2_XXS4L), Q2_K aligned loads", 0, false, false, true},
                        {"8 lanes, computed signs", 8, false, false, false},
                        {"8 lanes, byte permutes", 8, false, true, false}};
  std::printf("\nIQ2_XXS gemv_act decoders in the decode step (CUDA graph, act_quant %s), %d tokens from the prompt "
              "state:\n| decoder | tok/s | ms/token | of roofline | tokens = default's |\n|---|---|---|---|---|\n",
              m.config().act_quant ? "on" : "off", n);
  std::vector<int32_t> base;
  for (const Variant& v : vs) {
    cuda::gemv_act_set_lanes(v.lanes);
    cuda::gemv_act_set_iq2_sign_table(v.table);
    cuda::gemv_act_set_iq2_permute(v.permute);
    cuda::gemv_act_set_iq2_lane_tables(v.lane_tables);
    cuda::gemv_act_set_q2k_aligned(v.lane_tables);
    auto c = at.clone();
    std::vector<int32_t> toks{argmax(l0)};
    auto l = m.decode(*c, toks.back());
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      toks.push_back(argmax(l));
      l = m.decode(*c, toks.back());
    }
    const double tps = n / secs(t0, Clock::now());
    if (base.empty()) base = toks;
    std::printf("| %s | %.2f | %.3f | %.1f%% | %s |\n", v.name, tps, 1e3 / tps, 100 * tps / roof,
                toks == base ? "yes" : "NO");
  }
  cuda::gemv_act_set_lanes(0);
  cuda::gemv_act_set_iq2_sign_table(false);
  cuda::gemv_act_set_iq2_permute(false);
  cuda::gemv_act_set_iq2_lane_tables(false);
  cuda::gemv_act_set_q2k_aligned(false);
}

}  // namespace

int main(int argc, char** argv) {
  ds4::bench::kernel_trace_init();  // DS4_KERNEL_TRACE: CUPTI recording on before any graph
  std::vector<std::string> pos;
  std::vector<int> prefill_lengths;
  std::vector<int> jumps;  // --jump N,N: decode at these contexts from filled states (no prefill)
  bool prof = false;
  int old_max = 1 << 30;                 // --old-max N: the old path only at lengths <= N
  // --prefill-rows N,N: the tensor-core path's chunk sizes (default: the server's)
  std::vector<int> prefill_rows = {ds4::deepseek_v4::kServedPrefillRows};
  ds4::bench::BatchArgs batch;            // --batch N,N [--batch-rows N,N] [--batch-steps S]
  bool act_quant = false, variants = false;
  std::vector<int> rows_ab;  // --rows-ab R,R: the batch tables again per gemv_act_rows rows per block
  bool split_ab = false;     // --split-ab: the batch tables again with gemv_act_set_q8_split(false)
  bool mma_ab = false;       // --mma-ab: the batch tables again with gemv_act_set_rows_mma(-1)
  bool lt_ab = false;        // --lt-ab: the batch tables again with the lane tables and Q2_K aligned loads
  bool ncu_decode = false;   // --ncu-decode: one decode step in the profiler range, then exit
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profile") == 0) {
      prof = true;
    } else if (std::strcmp(argv[i], "--act-quant") == 0) {
      act_quant = true;
    } else if (std::strcmp(argv[i], "--split-ab") == 0) {
      split_ab = true;
    } else if (std::strcmp(argv[i], "--mma-ab") == 0) {
      mma_ab = true;
    } else if (std::strcmp(argv[i], "--lt-ab") == 0) {
      lt_ab = true;
    } else if (std::strcmp(argv[i], "--ncu-decode") == 0) {
      ncu_decode = true;
    } else if (std::strcmp(argv[i], "--rows-ab") == 0 && i + 1 < argc) {
      append_int_list(argv[++i], rows_ab);
    } else if (std::strcmp(argv[i], "--act-variants") == 0) {
      variants = true;
    } else if (std::strcmp(argv[i], "--old-max") == 0 && i + 1 < argc) {
      old_max = std::stoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--prefill-rows") == 0 && i + 1 < argc) {
      prefill_rows.clear();
      append_int_list(argv[++i], prefill_rows);
      if (prefill_rows.empty()) {
        std::fprintf(stderr, "--prefill-rows needs at least one chunk size\n");
        return 2;
      }
    } else if (ds4::bench::parse_batch_flag(argc, argv, i, batch)) {  // --batch, --batch-rows, --batch-steps
    } else if (std::strcmp(argv[i], "--jump") == 0 && i + 1 < argc) {
      append_int_list(argv[++i], jumps);
    } else if (std::strcmp(argv[i], "--prefill") == 0 && i + 1 < argc) {
      append_int_list(argv[++i], prefill_lengths);
    } else {
      pos.push_back(argv[i]);
    }
  }
  if (pos.empty()) {
    std::fprintf(stderr,
                 "usage: bench_deepseek_v4_cuda MODEL [prompt_tokens] [decode_tokens] [--profile] [--prefill N,N,...] "
                 "[--prefill-rows N,N] [--old-max N] [--batch N,N [--batch-rows N,N] [--batch-steps S] [--batch-profile] [--seq-ab] [--rows-ab R,R] [--split-ab] [--mma-ab] [--lt-ab]] [--jump N,N] "
                 "[--act-quant] [--act-variants] [--ncu-decode]\n");
    return 2;
  }
  const std::string path = pos[0];
  const int np = pos.size() > 1 ? std::stoi(pos[1]) : 64;
  const int n = pos.size() > 2 ? std::stoi(pos[2]) : 64;
  try {
    cudaStream_t st;
    DS4_CUDA_CHECK(cudaStreamCreate(&st));
    const cuda::Bandwidth bw = cuda::measure_bandwidth(size_t(1) << 30, 20, st);
    DS4_CUDA_CHECK(cudaStreamDestroy(st));
    std::printf("copy bandwidth %.0f GB/s (read+write), memcpy %.0f GB/s, read-only %.0f GB/s (1 GiB buffers)\n",
                bw.copy_gbps, bw.memcpy_gbps, bw.read_gbps);
    LoadOptions o;
    // Device caches sized for this run: the decode, the verify table's rows, the prefill lengths.
    // (+ room for a profiled chunk of the largest --prefill-rows after the decode and the longest prefill)
    const int chunk_room = std::max(1024, *std::max_element(prefill_rows.begin(), prefill_rows.end()));
    int longest = np + 2 * n + 3 + chunk_room;  // (the decode twice: full rows, the engine's path)
    if (!batch.streams.empty()) longest = std::max(longest, np + 2 + batch.steps + 2 * 32 + 64);  // + unbatched rounds
    for (int l : prefill_lengths) longest = std::max(longest, l + chunk_room);
    for (int j : jumps) longest = std::max(longest, j + n + 64);
    o.max_context = longest;
    const auto t0 = Clock::now();
    deepseek_v4::CudaModelOptions lo;  // the chunk scratch sized for the largest prefill chunk
    for (int r : prefill_rows) lo.prefill_rows = std::max(lo.prefill_rows, r);
    deepseek_v4::DeepseekV4CudaModel m(open_tensor_source(path), o, lo);
    const double load_s = secs(t0, Clock::now());
    const int64_t V = m.info().vocab_size;
    std::vector<int32_t> prompt;
    for (int i = 0; i < np; ++i) prompt.push_back(int32_t((int64_t(i) * 7919 + 13) % V));
    {  // warm-up: graph capture of a state, caches
      auto w = m.new_state();
      auto l = m.prefill(*w, std::vector<int32_t>(prompt.begin(), prompt.begin() + std::min(np, 4)));
      for (int i = 0; i < 4; ++i) l = m.decode(*w, argmax(l));
    }
    auto s = m.new_state();
    const auto t1 = Clock::now();
    auto l = m.prefill(*s, prompt);
    const auto t2 = Clock::now();
    const auto at_prompt = s->clone();
    const std::vector<float> l_prompt = l;
    // One untimed step first: the state captures its decode graph on its first step (session 37:
    // ~8.5 ms on the H100, ~5 % of a 32-token timing before), so the rate is the steady state's.
    l = m.decode(*s, argmax(l));
    const auto t2d = Clock::now();
    for (int i = 0; i < n; ++i) l = m.decode(*s, argmax(l));
    const auto t3 = Clock::now();
    const double prefill_tps = np / secs(t1, t2), decode_tps = n / secs(t2d, t3);
    // The engine's path (cuda_common.h), then one full-row step so `l` is the state's last row again.
    const bench::EnginePathRun eng = bench::engine_path_decode(m, *s, argmax(l), n);
    if (eng.ok) l = m.decode(*s, eng.next);
    const double engine_tps = eng.tps;
    if (ncu_decode) {
      std::printf(
          "decode: %.2f tok/s, %.3f ms/token; the engine's path (forward_candidates, top 1 on the device): "
          "%.2f tok/s\n",
          decode_tps, 1e3 / decode_tps, engine_tps);
      bench::ncu_decode_step(m, *s, l);
      if (!bench::KernelTrace::get()) return 0;  // (with DS4_KERNEL_TRACE the run goes on: batch tables)
    }
    // The same decode from a clone of the prompt state on one stream (one token first: the
    // clone captures its own graph).
    m.set_options(deepseek_v4::CudaModelOptions{true, false, true, false});
    double streams_tps = 0;
    {
      auto c = at_prompt->clone();
      auto lc = m.decode(*c, argmax(l_prompt));
      const auto t4 = Clock::now();
      for (int i = 0; i < n; ++i) lc = m.decode(*c, argmax(lc));
      streams_tps = n / secs(t4, Clock::now());
    }
    m.set_options(deepseek_v4::CudaModelOptions{});
    const auto db = m.decode_bytes_per_token();
    const double bytes = double(db.total());
    const double roof = bw.copy_gbps * 1e9 / bytes;
    std::printf("model %s: %.2f GB of weights on the device (loaded in %.1f s), max_context %lld\n", path.c_str(),
                double(m.weight_bytes()) / 1e9, load_s, (long long)m.info().max_context);
    std::printf("prompt %d tokens (chunked prefill: %.1f tok/s, graph capture included), greedy decode %d tokens at "
                "batch 1 (CUDA graph, side stream)\n", np, prefill_tps, n);
    std::printf("weights read per decode token: %.3f GB = dense layer parts %.3f + %lld routed experts x %lld layers "
                "%.3f + HC head and lm_head %.3f\n",
                bytes / 1e9, double(db.dense) / 1e9, (long long)m.config().experts_used, (long long)m.config().layers,
                double(db.experts) / 1e9, double(db.head) / 1e9);
    std::printf("decode: %.2f tok/s, %.3f ms/token -> %.0f GB/s of weights effective (act_quant %s)\n", decode_tps,
                1e3 / decode_tps, bytes * decode_tps / 1e9, m.config().act_quant ? "on" : "off");
    if (eng.ok)
      std::printf(
          "decode through the engine's path (forward_candidates, top 1 on the device, greedy): %.2f tok/s, "
          "%.3f ms/token, %.1f%% of the roofline\n",
          engine_tps, 1e3 / engine_tps, 100 * engine_tps / roof);
    std::printf("roofline (copy bandwidth / bytes per token) %.1f tok/s; fraction %.1f%%\n", roof,
                100 * decode_tps / roof);
    std::printf("on one stream (CudaModelOptions::streams off): %.2f tok/s, %.3f ms/token, %.1f%% of the roofline\n",
                streams_tps, 1e3 / streams_tps, 100 * streams_tps / roof);
    std::printf("vs antirez/ds4 on the synthetic Flash, H200, 2048 context: 33.65 tok/s (8.2%% of its roofline): "
                "ratio %.2fx\n", decode_tps / 33.65);
    if (act_quant) act_quant_decode(m, *at_prompt, l_prompt, n, roof, prof);
    if (variants) act_variants(m, *at_prompt, l_prompt, n, roof);
    if (!batch.streams.empty()) {
      // --batch-profile: direct launches + events (profile on, graphs and the side stream off)
      auto profiling = [&m](bool on) {
        deepseek_v4::CudaModelOptions o = m.options();
        o.graphs = !on, o.profile = on;
        m.set_options(o);
      };
      ds4::bench::batch_tables(m, *at_prompt, batch, decode_tps, bw.copy_gbps, bytes, profiling);
      if (batch.seq_ab) {  // the same tables with a launch per sequence for the stateful kernels (before 2026-12-05)
        deepseek_v4::CudaModelOptions o = m.options();
        o.seq_launches = false;
        m.set_options(o);
        std::printf("\nCudaModelOptions::seq_launches off (the stateful kernels launched per sequence):\n");
        ds4::bench::batch_tables(m, *at_prompt, batch, decode_tps, bw.copy_gbps, bytes, profiling);
        o.seq_launches = true;
        m.set_options(o);
      }
      // A GEMV tuning knob changed: the captured batch graphs hold the old launches (a
      // seq_launches change drops them), then the tables again.
      auto tables_again = [&](const char* what) {
        deepseek_v4::CudaModelOptions o = m.options();
        o.seq_launches = !o.seq_launches;
        m.set_options(o);
        o.seq_launches = !o.seq_launches;
        m.set_options(o);
        std::printf("\n%s:\n", what);
        ds4::bench::batch_tables(m, *at_prompt, batch, decode_tps, bw.copy_gbps, bytes, profiling);
      };
      for (int rr : rows_ab) {  // gemv_act_rows' weight rows per block above 4 inputs (dense products)
        cuda::gemv_act_set_rows_kernel_rows(rr);
        tables_again(("gemv_act_rows at " + std::to_string(rr) +
                      " weight rows per block (gemv_act_set_rows_kernel_rows)").c_str());
      }
      cuda::gemv_act_set_rows_kernel_rows(0);
      if (split_ab) {  // Q8_0's dense products of 9..16 rows as one 16-input launch (before 2026-12-05)
        cuda::gemv_act_set_q8_split(false);
        tables_again("Q8_0 gemv_act_rows over 9..16 rows as one 16-input launch (gemv_act_set_q8_split(false))");
        cuda::gemv_act_set_q8_split(true);
      }
      if (mma_ab) {  // Q8_0's dense products of a batch on the dp4a rows kernel (before 2026-12-05)
        cuda::gemv_act_set_rows_mma(-1);
        tables_again("Q8_0 gemv_act_rows on the dp4a rows kernel (gemv_act_set_rows_mma(-1))");
        cuda::gemv_act_set_rows_mma(0);
      }
      if (lt_ab) {  // IQ2_XXS (routed gate|up entries) by the lane-table decoder, Q2_K (down) by aligned loads
        cuda::gemv_act_set_iq2_lane_tables(true);
        cuda::gemv_act_set_q2k_aligned(true);
        tables_again("IQ2_XXS by the lane-table decoder, Q2_K by aligned loads (gemv_act_set_iq2_lane_tables, "
                     "gemv_act_set_q2k_aligned)");
        cuda::gemv_act_set_iq2_lane_tables(false);
        cuda::gemv_act_set_q2k_aligned(false);
      }
    } else {
      verify_table(m, *at_prompt, 9);
      if (m.draft_head()) draft_table(m, prompt, n, 9);
      else std::printf("\nno draft head (MTP or DSpark) on the GPU for this checkpoint: no draft / speculative rows\n");
    }
    if (!prefill_lengths.empty()) {
      // The old path (16-row chunks, row-looped GEMVs) at the lengths up to old_max, then the
      // tensor-core path (prefill_rows chunks), same run.
      std::vector<int> old_lengths;
      for (int len : prefill_lengths)
        if (len <= old_max) old_lengths.push_back(len);
      deepseek_v4::CudaModelOptions old;
      old.prefill_rows = 0;
      m.set_options(old);
      const auto base =
          prefill_table(m, old_lengths, bw.copy_gbps, "16 rows per chunk, gemv_rows (the old path)", 16, {}, false);
      // The tensor-core path (the default options) at each chunk size: the first at every
      // length with the canary, the others at the old path's lengths.
      std::unique_ptr<ModelState> longest_state;
      for (size_t i = 0; i < prefill_rows.size(); ++i) {
        deepseek_v4::CudaModelOptions tc;
        tc.prefill_rows = prefill_rows[i];
        m.set_options(tc);
        // (the products as the loaded options resolve: int8_experts / int8_dense from the environment)
        const bool i8e = m.options().int8_experts.value_or(false), i8d = m.options().int8_dense.value_or(false);
        prefill_table(m, i == 0 ? prefill_lengths : old_lengths, bw.copy_gbps,
                      std::to_string(tc.prefill_rows) + " rows per chunk, tensor cores (default options: dense " +
                          (i8d ? "int8 MMAs on quantized rows (int8_dense)" : "tensor-core GEMMs (model_matmul_precision)") + ", routed experts " +
                          (i8e ? "int8 MMAs (int8_experts)" : "grouped BF16 MMAs") + ", exact parts as FP32 GEMMs)",
                      tc.prefill_rows, base, i == 0, i == 0 ? &longest_state : nullptr);
      }
      {  // A/B at the first chunk size: the exact parts on gemv_rows, the experts on gemv_rows
        deepseek_v4::CudaModelOptions tc;
        tc.prefill_rows = prefill_rows[0];
        tc.fp32_gemms = false;
        m.set_options(tc);
        prefill_table(m, old_lengths, bw.copy_gbps,
                      std::to_string(tc.prefill_rows) + " rows per chunk, tensor cores, exact parts as gemv_rows "
                      "(fp32_gemms off; the 2026-12-04 path)", tc.prefill_rows, base, false);
      }
      m.set_options(deepseek_v4::CudaModelOptions{});
      if (prof && longest_state) profile_chunk(m, *longest_state, prefill_rows[0], "after the longest prefill");
      m.set_options(deepseek_v4::CudaModelOptions{});
    }
    if (prof) profile(m, *s, l, 8, prefill_rows[0]);
    for (int j : jumps) jump_decode(m, j, n, roof, prof);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return 0;
}
