// Decode speed of GLM 5.x Flash at batch 1: the CUDA model (graph replay and direct
// launches) vs the CPU model, same file, same prompt, same greedy tokens, same process;
// plus the bytes of weights one decode token reads and the roofline fraction against the
// device copy bandwidth measured in the same run (backend/cuda/bandwidth.h).
// Prefill tok/s in chunks of 16 rows (each weight read once per chunk) vs token by token.
// Verify cost (issue #11): median time of forward(k+1 rows, Logits::kAll) (what a speculative
// verify of k drafts runs) over the median time of one decode step at the same context, for
// k = 1..4, with the multi-row forward and with k+1 decode steps (chunk_rows = 1), beside two
// bytes floors: this model's (its expert count) and the real GLM 5.x Flash's (HF defaults: 45
// layers, 288 experts, top-8; computed from the config's matrix shapes, nothing loaded).
// --profile: GPU ms per section of the multi-row forward (cudaEvents between sections, direct
// launches, summed over layers) for 1..5 rows: where a verify's time goes.
// --verify-only: skip the CPU model and the greedy runs (big synthetic expert counts).
// --mtp: the checkpoint dir with tests/data/glm5/mtp/mtp.safetensors beside it (the tiny
// model's MTP head, issue #11): draft cost (median ms of one depth-1..3 chain after a decode
// step, over one decode step) and greedy speculative decoding (engine::generate_greedy,
// captured-prefix commit) tok/s vs AR tok/s with the acceptance, depths 1..3.
// Usage: bench_glm5_cuda [model] [decode_tokens] [prompt_tokens] [cpu_threads] [--profile] [--verify-only] [--mtp]
//   model: a checkpoint dir/GGUF, or synthetic:LAYERS:EXPERTS (GLM 5.x Flash shapes, hidden
//   4096, vocab 32768, BF16 generated weights in memory: models/glm5/synthetic.h);
//   defaults: tests/data/glm5/model 128 64 0 (0 = all cores)
// Or: bench_glm5_cuda synthetic-full[:TYPE[:EXPERTS[:LAYERS]]] [decode_tokens] [contexts]
//   [--prefill N,N,... [--old N,N,...] [--prefill-rows N] [--gemm-rows N] [--no-fp32-gemms]]  (fp32_gemms on by default, as the model)
//   the full-size model generated on the GPU, prefill + decode per context frontier as
//   fractions of the roofline (synthetic_full.h); defaults q2_k 288 45, 32, 2048,8192,32768.
//   --prefill (issue #22): old path (16-row chunks at the --old lengths, default those <= 2048) vs the
//   tensor-core path (--prefill-rows, default 512; --gemm-rows, default the server's: 17) per length from a
//   fresh state, the canary, one chunk's profile; decode_tokens 0 skips the context table.
//   --batch N,N [--batch-rows N,N] [--batch-steps S] [--seq-ab] [--batch-profile] (issue #24): continuous batching at
//   those stream counts from the first context's state (../cuda_batch_table.h); --seq-ab: the
//   tables again with the stateful kernels launched per sequence (CudaModelOptions::seq_launches).
//   --ncu-decode: synthetic-full, one decode step's graph at the first context inside cudaProfilerStart
//   / Stop (ncu --profile-from-start off --graph-profiling node: the per-kernel table of issue #23).
//   --profile (issue #23): at each context, decode tok/s and the per-op GPU table with the decode
//   step's tuning (CudaModelOptions::decode_tuning) off and on; --context-tc: the context table
//   prefills on tensor cores (a 32K context in seconds; decode unaffected).
// On the tiny test model (hidden 64) the GPU number measures per-token launch/graph
// overhead, not bandwidth; the synthetic model reads real-size matrices per token.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cuda/bandwidth.h"
#include "engine/speculative.h"
#include "models/glm5/config.h"
#include "models/glm5/cuda/model_cuda.h"
#include "models/glm5/model.h"
#include "models/glm5/synthetic.h"

#include "../cuda_common.h"
#include "synthetic_full.h"

using namespace ds4;
using Clock = std::chrono::steady_clock;

namespace {

using Result = bench::GreedyRun;

Result run(Model& m, const std::vector<int32_t>& prompt, int n) {
  {  // warm-up (graph capture, caches), then a fresh state
    auto w = m.new_state();
    m.prefill(*w, std::span<const int32_t>(prompt.data(), std::min<size_t>(prompt.size(), 8)));
    for (int i = 0; i < 4; ++i) m.decode(*w, 1);
  }
  auto s = m.new_state();
  return bench::timed_greedy(m, *s, prompt, n);
}

// Prefill tok/s once the state's graphs exist: `prompt` twice on one state, the second timed
// (run() times a fresh state, so its prefill includes capturing each chunk shape's graph).
double prefill_steady(Model& m, const std::vector<int32_t>& prompt) {
  auto s = m.new_state();
  m.prefill(*s, prompt);
  const auto t0 = Clock::now();
  m.prefill(*s, prompt);
  return double(prompt.size()) / std::chrono::duration<double>(Clock::now() - t0).count();
}

// Weight bytes a chunk of `rows` tokens reads over one token's, from the matrix shapes of a
// config alone (every matrix in one format, so bytes scale with elements; routed experts as
// the expected union of the rows' top-k sets, E (1 - (1 - k/E)^rows), uniform routing).
double config_bytes_ratio(const glm5::Config& c, int64_t rows) {
  const double H = double(c.hidden_size), hc = double(c.hc_mult);
  const double hd = double(c.linear_head_dim), nh = double(c.linear_num_heads), qkv = hd * nh;
  const double nah = double(c.num_attention_heads), kvr = double(c.kv_lora_rank), qr = double(c.q_lora_rank);
  const double nope = double(c.qk_nope_head_dim), vd = double(c.v_head_dim);
  const double id = double(c.index_head_dim), ih = double(c.index_n_heads);
  const double I = double(c.moe_intermediate_size), E = double(c.n_routed_experts), K = double(c.num_experts_per_tok);
  double fixed = double(c.vocab_size) * H, experts = 0;  // lm_head; routed experts per layer summed
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    fixed += 2 * (2 + hc) * hc * hc * H;  // the two hyper-connection fn matrices
    if (c.layer_types[size_t(l)] == glm5::LayerKind::kLinear) {
      fixed += (3 * qkv + 2 * hd + nh) * H + 2 * qkv * hd + H * qkv;
    } else {
      const bool full = !c.indexer_shared[size_t(l)];
      fixed += (qr + kvr + (full ? 2 * id + ih : 0)) * H + nah * nope * qr + (full ? ih * id * qr : 0);
      fixed += nah * nope * kvr + nah * vd * kvr + H * nah * vd;
    }
    if (!c.mlp_sparse[size_t(l)]) {
      fixed += 3 * double(c.intermediate_size) * H;
    } else {
      fixed += 3 * I * double(c.n_shared_experts) * H + E * H;
      experts += 3 * I * H;  // one expert
    }
  }
  const double used = E * (1.0 - std::pow(1.0 - K / E, double(rows)));
  return (fixed + experts * used) / (fixed + experts * K);
}

const glm5::Config& flash_config() {
  static const glm5::Config c = glm5::parse_config({{"model_type", "glm5_next"}}, "GLM 5.x Flash HF defaults");
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ms of one decode step and of one forward(rows, kAll), interleaved (so both run at
// the same context) from a fresh state holding `prompt`; graphs captured before timing.
std::pair<double, double> verify_cost(Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& rows,
                                      int reps) {
  auto s = m.new_state();
  m.prefill(*s, prompt);
  std::vector<float> l;
  m.forward(*s, rows, Logits::kAll, l);  // warm-up: capture both graphs
  m.decode(*s, rows[0]);
  std::vector<double> dec, ver;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    m.decode(*s, rows[size_t(i) % rows.size()]);
    auto t1 = Clock::now();
    m.forward(*s, rows, Logits::kAll, l);
    auto t2 = Clock::now();
    dec.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    ver.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  return {median(dec), median(ver)};
}

void verify_table(Model& chunked, Model& steps, const std::vector<int32_t>& prompt) {
  const auto& g = static_cast<const glm5::Glm5CudaModel&>(chunked);
  const int reps = 15;
  const int64_t V = chunked.info().vocab_size;
  std::printf("\nverify cost at context %zu (median of %d): forward(k+1 rows, kAll) / one decode step\n", prompt.size(),
              reps);
  const glm5::Config& f = flash_config();
  std::printf("(bytes floor: weight bytes the k+1 rows read over one token's, routed experts as the expected union of\n"
              " the rows' top-k under uniform routing; with few experts the union, not the kernels, bounds the ratio.\n"
              " this model: %lld experts, top-%lld; Flash floor: the real GLM 5.x Flash shapes, %lld layers, %lld experts,\n"
              " top-%lld, from the config's matrix shapes)\n",
              (long long)g.config().n_routed_experts, (long long)g.config().num_experts_per_tok,
              (long long)f.num_hidden_layers, (long long)f.n_routed_experts, (long long)f.num_experts_per_tok);
  std::printf("| k | rows | decode ms | verify ms (multi-row) | ratio | bytes floor | Flash floor | verify ms (k+1 steps) | "
              "ratio |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (int k = 1; k <= 4; ++k) {
    const std::vector<int32_t> rows = bench::verify_window_tokens(k + 1, V);
    const auto [dm, vm] = verify_cost(chunked, prompt, rows, reps);
    const auto [ds, vs] = verify_cost(steps, prompt, rows, reps);
    std::printf("| %d | %d | %.3f | %.3f | %.2fx | %.2fx | %.2fx | %.3f | %.2fx |\n", k, k + 1, dm, vm, vm / dm,
                g.chunk_bytes_ratio(k + 1), config_bytes_ratio(f, k + 1), vs, vs / ds);
  }
}

// --mtp: the draft head's cost and the speculative loop's speed on this model.
void mtp_table(Model& m, const std::vector<int32_t>& prompt, int n) {
  DraftHead* h = m.draft_head();
  if (!h) return void(std::printf("\n--mtp: this checkpoint has no MTP head\n"));
  const int reps = 21;
  std::printf("\nMTP draft cost at context %zu (median of %d): one greedy chain of depth d (after one decode step: "
              "catch-up of 1 row + d steps, one graph) / one decode step\n", prompt.size(), reps);
  std::printf("| depth | decode ms | draft ms | ratio |\n|---|---|---|---|\n");
  for (int d = 1; d <= 3; ++d) {
    auto s = m.new_state();
    h->enable_draft(*s);
    m.prefill(*s, prompt);
    std::vector<int32_t> drafts;
    h->draft(*s, 1, d, drafts);  // warm-up: capture the graphs
    m.decode(*s, 1);
    h->draft(*s, 1, d, drafts);
    std::vector<double> dec, dr;
    for (int i = 0; i < reps; ++i) {
      auto t0 = Clock::now();
      m.decode(*s, int32_t(1 + i % 7));
      auto t1 = Clock::now();
      h->draft(*s, 1, d, drafts);
      auto t2 = Clock::now();
      dec.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      dr.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    std::printf("| %d | %.3f | %.3f | %.2fx |\n", d, median(dec), median(dr), median(dr) / median(dec));
  }
  std::printf("\ngreedy speculative decoding, %d tokens after a %zu-token prompt (engine::generate_greedy, captured-"
              "prefix commit; the tiny model's head is random, so acceptance is low)\n", n, prompt.size());
  std::printf("| depth | tok/s | vs AR | acceptance | drafted | accepted | prefix commits | repairs | same tokens |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  std::vector<int32_t> ar;
  double ar_tps = 0;
  for (int depth = 0; depth <= 3; ++depth) {
    for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms the graphs up
      std::unique_ptr<ModelState> s = m.new_state();
      if (depth > 0) h->enable_draft(*s);
      auto logits = m.prefill(*s, prompt);
      engine::SpecStats st;
      const auto t0 = Clock::now();
      const auto toks = engine::generate_greedy(m, s, logits, n, std::span<const int32_t>(), depth, &st);
      const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
      if (pass == 0) continue;
      const double tps = double(toks.size()) / sec;
      if (depth == 0) ar = toks, ar_tps = tps;
      std::printf("| %d | %.1f | %.2fx | %.3f | %lld | %lld | %lld | %lld | %s |\n", depth, tps, tps / ar_tps,
                  st.acceptance(), (long long)st.drafted, (long long)st.accepted, (long long)st.prefix_commits,
                  (long long)st.repairs, toks == ar ? "yes" : "NO");
    }
  }
}

// --profile: per-section GPU ms of the multi-row forward for 1..5 rows (median of 5 chunks,
// each from the state the previous one left, after one warm-up chunk), at the prompt's context.
void profile_table(Model& chunked, const std::vector<int32_t>& prompt) {
  auto& g = static_cast<glm5::Glm5CudaModel&>(chunked);
  const int64_t V = chunked.info().vocab_size;
  constexpr int kMaxRows = 5, kReps = 5;
  std::vector<std::string> names;
  std::vector<std::vector<double>> ms(kMaxRows);  // [rows - 1][section]
  std::vector<double> total(kMaxRows);
  for (int n = 1; n <= kMaxRows; ++n) {
    const std::vector<int32_t> rows = bench::verify_window_tokens(n, V);
    auto s = chunked.new_state();
    chunked.prefill(*s, prompt);
    g.profile_chunk(*s, rows);  // warm-up
    std::vector<glm5::ChunkProfile> reps;
    for (int r = 0; r < kReps; ++r) reps.push_back(g.profile_chunk(*s, rows));
    std::vector<double> tot;
    for (const auto& p : reps) tot.push_back(p.total_ms);
    total[size_t(n - 1)] = median(tot);
    for (const auto& [name, v] : reps[0].sections) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    ms[size_t(n - 1)].assign(names.size(), 0.0);
    for (size_t k = 0; k < names.size(); ++k) {
      std::vector<double> v;
      for (const auto& p : reps)
        for (const auto& [name, t] : p.sections)
          if (name == names[k]) v.push_back(t);
      ms[size_t(n - 1)][k] = v.empty() ? 0.0 : median(v);
    }
  }
  std::printf("\nchunk profile at context %zu: GPU ms per section of forward(rows, kAll), direct launches, cudaEvent at\n"
              "each section start, summed over layers (median of %d); last column: 4 rows over 1 row\n",
              prompt.size(), kReps);
  std::printf("| section | 1 row | 2 rows | 3 rows | 4 rows | 5 rows | 4 rows / 1 row |\n|---|---|---|---|---|---|---|\n");
  for (size_t k = 0; k < names.size(); ++k) {
    std::printf("| %s |", names[k].c_str());
    for (int n = 0; n < kMaxRows; ++n) std::printf(" %.3f |", k < ms[size_t(n)].size() ? ms[size_t(n)][k] : 0.0);
    const double one = ms[0].size() > k ? ms[0][k] : 0.0, four = ms[3].size() > k ? ms[3][k] : 0.0;
    std::printf(" %.2fx |\n", one > 0 ? four / one : 0.0);
  }
  std::printf("| total |");
  for (int n = 0; n < kMaxRows; ++n) std::printf(" %.3f |", total[size_t(n)]);
  std::printf(" %.2fx |\n", total[0] > 0 ? total[3] / total[0] : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  ds4::bench::kernel_trace_init();  // DS4_KERNEL_TRACE: CUPTI recording on before any graph
#ifdef DS4_ROOT
  const std::string def = std::string(DS4_ROOT) + "/tests/data/glm5/model";
#else
  const std::string def = "tests/data/glm5/model";
#endif
  std::vector<std::string> args;
  bool profile = false, verify_only = false, mtp = false, ncu_decode = false;
  bench::Glm5PrefillArgs pa;
  bench::BatchArgs batch;
  for (int i = 1; i < argc; ++i) {
    if (bench::parse_batch_flag(argc, argv, i, batch)) continue;
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--prefill" && has_value) pa.lengths = bench::parse_contexts(argv[++i]);
    else if (a == "--old" && has_value) pa.old_lengths = bench::parse_contexts(argv[++i]), pa.old_set = true;
    else if (a == "--prefill-rows" && has_value) pa.prefill_rows = std::stoi(argv[++i]);
    else if (a == "--gemm-rows" && has_value) pa.gemm_rows = std::stoi(argv[++i]);
    else if (a == "--fp32-gemms") pa.fp32_gemms = true;
    else if (a == "--no-fp32-gemms") pa.fp32_gemms = false;
    else if (a == "--profile") profile = true;
    else if (a == "--ncu-decode") ncu_decode = true;
    else if (a == "--context-tc") pa.context_tc = true;
    else if (a == "--verify-only") verify_only = true;
    else if (a == "--mtp") mtp = true;
    else args.push_back(a);
  }
  std::string dir = args.size() > 0 ? args[0] : def;
  std::string head_dir;  // --mtp: the checkpoint's files and the head file side by side
  if (mtp) {
    namespace fs = std::filesystem;
    const fs::path d = fs::temp_directory_path() / ("bench_glm5_mtp_" + std::to_string(::getpid()));
    fs::create_directories(d);
    for (const char* f : {"config.json", "model.safetensors"})
      fs::copy_file(fs::path(dir) / f, d / f, fs::copy_options::overwrite_existing);
    fs::copy_file(fs::path(def).parent_path() / "mtp" / "mtp.safetensors", d / "mtp.safetensors",
                  fs::copy_options::overwrite_existing);
    head_dir = dir = d.string();
  }
  try {
    glm5::SyntheticFullOptions so;
    const bool synthetic = glm5::parse_synthetic_full(dir, so);
    if (ncu_decode && (!synthetic || !pa.lengths.empty())) {
      std::fprintf(stderr, "--ncu-decode needs a synthetic-full model and no --prefill (one profiler range per run)\n");
      return 2;
    }
    if (synthetic)
      return bench::glm5_synthetic_full(so, args.size() > 1 ? std::stoi(args[1]) : 32,
                                        bench::parse_contexts(args.size() > 2 ? args[2] : "2048,8192,32768"), pa, batch,
                                        profile, ncu_decode);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 2;
  }
  const int n = args.size() > 1 ? std::stoi(args[1]) : 128;
  const int np = args.size() > 2 ? std::stoi(args[2]) : 64;
  LoadOptions o;
  o.threads = args.size() > 3 ? std::stoi(args[3]) : 0;
  if (o.threads <= 0) o.threads = int(std::thread::hardware_concurrency());
  o.max_context = 2 * np + n + 16 + 512;  // device caches sized for this run (+ steady prefill, verify table)
  try {
    std::unique_ptr<Model> cpu, gpu, gpu_direct, gpu_tok;
    const glm5::CudaModelOptions tok_opt{true, true, 1};
    if (dir.rfind("synthetic:", 0) == 0) {
      const size_t c2 = dir.find(':', 10);
      const int64_t layers = std::stoll(dir.substr(10, c2 - 10)), experts = std::stoll(dir.substr(c2 + 1));
      const auto t0 = Clock::now();
      const auto w = glm5::make_synthetic(glm5::synthetic_config(layers, experts, 32768), DType::BF16);
      std::printf("synthetic weights generated in %.1f s\n", std::chrono::duration<double>(Clock::now() - t0).count());
      gpu = std::make_unique<glm5::Glm5CudaModel>(glm5::synthetic_source(w), o);
      gpu_tok = std::make_unique<glm5::Glm5CudaModel>(glm5::synthetic_source(w), o, tok_opt);
      if (!verify_only) {
        cpu = glm5::load_source(glm5::synthetic_source(w), o);
        gpu_direct =
            std::make_unique<glm5::Glm5CudaModel>(glm5::synthetic_source(w), o, glm5::CudaModelOptions{false, true});
      }
    } else {
      gpu = glm5::load_cuda(dir, o);
      gpu_tok = glm5::load_cuda(dir, o, tok_opt);
      if (!verify_only) {
        cpu = glm5::load(dir, o);
        gpu_direct = glm5::load_cuda(dir, o, glm5::CudaModelOptions{false, true});
      }
    }
    const auto& g = static_cast<glm5::Glm5CudaModel&>(*gpu);
    const int64_t V = gpu->info().vocab_size;
    std::vector<int32_t> prompt;
    for (int i = 0; i < np; ++i) prompt.push_back(int32_t((i * 7919 + 13) % V));
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    const auto bw = cuda::measure_bandwidth(size_t(512) << 20, 20, stream);
    cudaStreamDestroy(stream);
    const double per_tok = double(g.weight_bytes_per_token());
    std::printf("model %s, prompt %d tokens, greedy decode %d tokens, batch 1%s\n", dir.c_str(), np, n,
                verify_only ? " (--verify-only: no CPU model, no greedy runs)" : "");
    std::printf("CUDA weights %.2f MiB, weights read per decode token %.2f MiB (all but routed experts + k/E of them)\n",
                double(g.weight_bytes()) / (1 << 20), per_tok / (1 << 20));
    std::printf("device bandwidth (same run): copy %.0f GB/s, memcpy %.0f GB/s, read %.0f GB/s\n", bw.copy_gbps,
                bw.memcpy_gbps, bw.read_gbps);
    int rc = 0;
    if (!verify_only) {
      const Result rc_ = run(*cpu, prompt, n), rg = run(*gpu, prompt, n), rd = run(*gpu_direct, prompt, n);
      const Result rt = run(*gpu_tok, prompt, n);
      std::printf("| backend | prefill tok/s | decode tok/s | ms/token | weight GB/s | of copy bw |\n");
      std::printf("|---|---|---|---|---|---|\n");
      auto row = [&](const char* name, const Result& r) {
        const double gbps = per_tok * r.decode_tps / 1e9;
        std::printf("| %s | %.0f | %.1f | %.3f | %.2f | %.4f |\n", name, r.prefill_tps, r.decode_tps,
                    1e3 / r.decode_tps, gbps, gbps / bw.copy_gbps);
      };
      char cname[64];
      std::snprintf(cname, sizeof cname, "CPU (%d threads)", o.threads);
      row(cname, rc_);
      row("CUDA graph, prefill in chunks of 16", rg);
      row("CUDA direct launches, chunks of 16", rd);
      row("CUDA graph, prefill token by token", rt);
      std::printf("decode speedup CUDA graph / CPU: %.2fx; chunked prefill / token by token: %.2fx; greedy tokens CPU == "
                  "CUDA graph == direct == token-by-token prefill: %s\n",
                  rg.decode_tps / rc_.decode_tps, rg.prefill_tps / rt.prefill_tps,
                  rc_.tokens == rg.tokens && rg.tokens == rd.tokens && rg.tokens == rt.tokens ? "yes" : "NO");
      const double ps_chunk = prefill_steady(*gpu, prompt), ps_tok = prefill_steady(*gpu_tok, prompt);
      std::printf("prefill tok/s with graphs already captured (prompt again at context %d): chunks of 16 %.0f, token by "
                  "token %.0f (%.2fx)\n", np, ps_chunk, ps_tok, ps_chunk / ps_tok);
      rc = rc_.tokens == rg.tokens ? 0 : 1;
    }
    verify_table(*gpu, *gpu_tok, prompt);
    if (profile) profile_table(*gpu, prompt);
    if (mtp) mtp_table(*gpu, prompt, n);
    if (!head_dir.empty()) std::filesystem::remove_all(head_dir);
    return rc;
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 2;
  }
}
