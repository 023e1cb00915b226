#pragma once
// bench_qwen_next_cuda synthetic-full[:EXPERTS[:LAYERS]] [decode_tokens] [contexts]
// [--verify=CTX]: the full-size Qwen3.8 Flash Next (models/qwen_next/synthetic_full.h: SPEC
// shapes, MLX q4 g64, BF16 scales/biases) generated on the GPU, then prefill to each context
// frontier (default 2048,8192; 16-row chunks) and greedy decode at batch 1 there, as
// fractions of the roofline (cuda_synthetic.h); --verify: chunk_tables.h verify_table.
// Bytes per decode token: the
// uploaded weights except the routed experts (hyper-connections, GDN, QSA, PLE projections,
// shared experts, routers, lm_head; embedding and PLE rows are made on the host) + top_k of
// E routed experts per layer + GDN recurrent state read and written (f32 {v_heads, k_dim,
// v_dim} per GDN layer) + QSA K/V rows read (min(pos, idx_budget + ratio) rows x kv_heads x
// head_dim x 2 (K and V), f32, per QSA layer) + the indexer's compressed keys (pos / ratio x
// idx_dim f32 per QSA layer). A prefill token of a 16-row chunk: the chunk's weight bytes
// (chunk_bytes_ratio(16): routed experts as the expected union of 16 rows' top-k) and the
// GDN state once per chunk, over 16, without the lm_head, plus its own attention reads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "../cuda_batch_table.h"
#include "../cuda_synthetic.h"
#include "chunk_tables.h"
#include "../cuda_op_table.h"
#include "../cuda_profiler_range.h"
#include "backend/cuda/memory.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "models/qwen_next/synthetic_full.h"

namespace ds4::bench {

// profile: after each frontier's row, 4 decode tokens on a clone with direct launches and an
// event per op (QwenNextCudaModel::set_profiling), GPU ms per op per token.
// batch (--batch ...): the continuous-batching tables (../cuda_batch_table.h) from the state at the
// first frontier, after that frontier's row.
// ncu_decode: at the first context, one decode step's CUDA graph (after one step that captures it)
// inside cudaProfilerStart / Stop, for `ncu --profile-from-start off --graph-profiling node`.
// verify_rows (--ncu-verify=K: K + 1 rows): at the first context, the per-op GPU ms of one verify
// forward (direct launches + events, set_profiling), then one forward of those rows inside the
// profiler range (ncu_forward_rows).
inline int qwen_synthetic_full(const qwen_next::SyntheticFullOptions& so, int n_decode, const std::vector<int64_t>& ctx,
                               int64_t verify_ctx = -1, bool profile = false, const BatchArgs& batch = {},
                               bool ncu_decode = false, int verify_rows = 0) {
  using Clock = std::chrono::steady_clock;
  const qwen_next::Config c = qwen_next::parse_config(qwen_next::synthetic_full_config(so), "synthetic-full");
  LoadOptions lo;
  // + room for the verify table's prompt and its 15 reps of up to 9 tokens each
  // (context_table: 2 n_decode + 2 tokens a frontier)
  lo.max_context = std::max(ctx.back() + (2 * n_decode + 2) * int64_t(ctx.size()), verify_ctx + 256) + 64;
  if (!batch.streams.empty()) lo.max_context += 2 + batch.steps + 34;  // warm-up, timed and unbatched steps
  qwen_next::CudaModelOptions co;
  co.synthetic_seed = so.seed;
  // Contexts are filled as the server fills them (tensor-core prefill chunks, so a 32K
  // frontier takes seconds); decode steps and verify windows never take that path.
  co.gemm_rows = qwen_next::cuda_options_from_env().gemm_rows;
  const auto free0 = cuda::device_memory_info();
  auto t0 = Clock::now();
  qwen_next::QwenNextCudaModel g(qwen_next::synthetic_full_source(so), lo, co);
  const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto free1 = cuda::device_memory_info();
  std::printf("synthetic-full Qwen3.8 Flash Next: %lld layers, %lld experts (top-%lld) MLX q4 g64 bf16 scales, hidden "
              "%lld, vocab %lld, max context %lld\n", (long long)c.layers, (long long)c.experts, (long long)c.top_k,
              (long long)c.hidden, (long long)c.vocab, (long long)lo.max_context);
  std::printf("weights %.2f GiB generated on the GPU, load %.1f s; device memory used by the model %.2f GiB (of %.2f "
              "GiB total)\n", double(g.weight_bytes()) / (1ull << 30), load_s,
              double(free0.free_bytes - free1.free_bytes) / (1ull << 30), double(free0.total_bytes) / (1ull << 30));
  const auto bw = measure_printed_bandwidth();
  int64_t gdn = 0, qsa = 0;
  for (int64_t l = 0; l < c.layers; ++l) (c.is_linear[size_t(l)] ? gdn : qsa) += 1;
  const double per_tok = double(g.weight_bytes_per_token());
  const double state = double(gdn) * 2.0 * double(c.v_heads * c.k_dim * c.v_dim) * 4.0;
  auto attn = [&](int64_t p) {
    const int64_t rows = std::min<int64_t>(p + 1, c.idx_budget + c.idx_ratio);
    return double(qsa) * (double(rows * c.kv_heads * c.head_dim) * 2.0 * 4.0 + double(p / c.idx_ratio * c.idx_dim) * 4.0);
  };
  std::printf("bytes per token: weights %.1f MB, GDN state %.1f MB, attention at %lld: %.1f MB\n", per_tok / 1e6,
              state / 1e6, (long long)ctx.back(), attn(ctx.back()) / 1e6);
  TokenBytes tb;
  tb.decode = [&](int64_t p) { return per_tok + state + attn(p); };
  // A prefill token without logits skips the lm_head (MLX q4: V x (H/2 + 4 H/64) bytes).
  const double lm = double(c.vocab) * double(c.hidden / 2 + 4 * c.hidden / 64);
  const double chunk = (per_tok * g.chunk_bytes_ratio(16) - lm + state) / 16.0;
  std::printf("prefill bytes per token (16-row chunks, weights + GDN state over 16): %.1f MB\n", chunk / 1e6);
  tb.prefill = [&, chunk](int64_t p) { return chunk + attn(p); };
  FrontierHook hook;
  const auto argmax = argmax_row;
  if (profile || !batch.streams.empty() || ncu_decode || verify_rows > 0)
    hook = [&](int64_t at, const ModelState& s, const std::vector<float>& l0) {
      if (ncu_decode && at == ctx.front()) ncu_decode_step(g, s, l0);
      if (verify_rows > 0 && at == ctx.front()) {
        const std::vector<int32_t> rows = verify_window_tokens(verify_rows, c.vocab);
        std::vector<float> l;
        g.forward(*s.clone(), rows, Logits::kAll, l);  // graphs and scratch as the timed forward finds them
        g.set_profiling(true);
        g.reset_op_times();
        g.forward(*s.clone(), rows, Logits::kAll, l);
        g.set_profiling(false);
        std::printf("\nper-op GPU time of one forward of %d rows (verify window) at context %lld (direct launches + "
                    "events):\n", verify_rows, (long long)at);
        print_op_table(g.op_times(), 1, "forward");
        ncu_forward_rows(g, s, rows);
      }
      if (!batch.streams.empty() && at == ctx.front()) batch_tables(g, s, batch, 0.0, bw.copy_gbps, per_tok, [&](bool on) { g.set_profiling(on); });
      if (!profile) return;
      auto st = s.clone();
      std::vector<float> l = l0;
      constexpr int kTokens = 4;
      g.set_profiling(true);
      g.reset_op_times();
      const auto p0 = Clock::now();
      for (int i = 0; i < kTokens; ++i) l = g.decode(*st, argmax(l));
      const double wall = std::chrono::duration<double>(Clock::now() - p0).count();
      g.set_profiling(false);
      std::printf("\nper-op GPU time per decode token at context %lld (direct launches + events, %d tokens; %.3f ms/token "
                  "wall):\n", (long long)at, kTokens, 1e3 * wall / kTokens);
      print_op_table(g.op_times(), kTokens, "token");
      std::printf("\n");
    };
  context_table(g, ctx, n_decode, tb, bw, hook);
  if (verify_ctx >= 0) verify_table(g, verify_ctx);
  return 0;
}

}  // namespace ds4::bench
