#pragma once
// bench_qwen_next_cuda: the multi-row forward (src/models/qwen_next/cuda/chunk.cu).
//   prefill_table: prefill tok/s through the chunk (16-row chunks) at each context, against
//     the same model fed token by token (decode steps), both from a fresh state.
//   verify_table: a speculative verify of k+1 = 2..5 rows as one forward(kAll) chunk and as
//     verify_capture + commit_prefix, over the median time of one decode step at the same
//     context; the bytes floor is the weight bytes the k+1 rows read over one token's
//     (chunk_bytes_ratio: routed experts as the expected union of the rows' top-k).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

#include "../cuda_common.h"
#include "models/qwen_next/cuda/model_cuda.h"

namespace ds4::bench {

inline double qwen_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline std::vector<int32_t> qwen_tokens(int64_t n, int64_t V, int64_t salt = 0) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t(((i + salt) * 7919 + 13) % V));
  return t;
}

// steps: also time the token-by-token prefill (skip it where it would take too long).
inline void prefill_table(Model& m, const std::vector<int64_t>& contexts, bool steps) {
  using Clock = std::chrono::steady_clock;
  const int64_t V = m.info().vocab_size, max_ctx = m.info().max_context;
  {  // warm-up: the 16-row and remainder graphs, the decode step's
    auto w = m.new_state();
    m.prefill(*w, qwen_tokens(40, V));
    m.decode(*w, 1);
  }
  std::printf("\nprefill through the chunk (16 rows per chunk, graphs) vs token by token (decode steps), fresh state\n");
  std::printf("| context | chunked tok/s | chunked s | token-by-token tok/s | speedup |\n|---|---|---|---|---|\n");
  for (const int64_t ctx : contexts) {
    if (ctx + 1 > max_ctx) {
      std::printf("| %lld | (skipped: max_context %lld) | | | |\n", (long long)ctx, (long long)max_ctx);
      continue;
    }
    const auto toks = qwen_tokens(ctx, V);
    auto s = m.new_state();
    auto t0 = Clock::now();
    m.prefill(*s, toks);
    const double dc = std::chrono::duration<double>(Clock::now() - t0).count();
    double ds = 0;
    if (steps) {
      auto s2 = m.new_state();
      t0 = Clock::now();
      for (int32_t t : toks) m.decode(*s2, t);
      ds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (steps)
      std::printf("| %lld | %.0f | %.2f | %.0f | %.2fx |\n", (long long)ctx, double(ctx) / dc, dc, double(ctx) / ds,
                  ds / dc);
    else
      std::printf("| %lld | %.0f | %.2f | (not run) | |\n", (long long)ctx, double(ctx) / dc, dc);
    std::fflush(stdout);
  }
}

// Median ms of one decode step, of forward(rows, kAll) and of verify_capture + commit_prefix
// (keeping half the rows, then re-running the dropped ones is not timed), interleaved from
// one state holding `prompt`; graphs captured before timing. The state stays consistent:
// each forward advances it, each commit keeps `keep` rows.
struct VerifyCost {
  double decode_ms, verify_ms, capture_ms;
};
inline VerifyCost qwen_verify_cost(qwen_next::QwenNextCudaModel& m, const std::vector<int32_t>& prompt,
                                   const std::vector<int32_t>& rows, int reps) {
  using Clock = std::chrono::steady_clock;
  auto s = m.new_state();
  m.prefill(*s, prompt);
  std::vector<float> l;
  const int64_t keep = int64_t(rows.size() + 1) / 2;
  m.forward(*s, rows, Logits::kAll, l);  // warm-up: capture every graph
  m.verify_capture(*s, rows, l);
  m.commit_prefix(*s, keep);
  m.decode(*s, rows[0]);
  std::vector<double> dec, ver, cap;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    m.decode(*s, rows[size_t(i) % rows.size()]);
    auto t1 = Clock::now();
    m.forward(*s, rows, Logits::kAll, l);
    auto t2 = Clock::now();
    m.verify_capture(*s, rows, l);
    m.commit_prefix(*s, keep);
    auto t3 = Clock::now();
    dec.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    ver.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    cap.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
  }
  return {qwen_median(dec), qwen_median(ver), qwen_median(cap)};
}

inline void verify_table(qwen_next::QwenNextCudaModel& m, int64_t context) {
  const int reps = 15;
  const int64_t V = m.info().vocab_size;
  const auto prompt = qwen_tokens(context, V, 3);
  std::printf("\nverify cost at context %lld (median of %d): forward(k+1 rows, kAll) / one decode step\n",
              (long long)context, reps);
  std::printf("(bytes floor: weight bytes the k+1 rows read over one token's, routed experts as the expected union of\n"
              " the rows' top-k under uniform routing; k+1 steps: the same rows as decode steps cost k+1 ratio 1)\n");
  std::printf("| k | rows | decode ms | verify ms (chunk) | ratio | bytes floor | capture+commit ms | ratio |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int k = 1; k <= 4; ++k) {
    const std::vector<int32_t> rows = verify_window_tokens(k + 1, V);
    const VerifyCost v = qwen_verify_cost(m, prompt, rows, reps);
    std::printf("| %d | %d | %.3f | %.3f | %.2fx | %.2fx | %.3f | %.2fx |\n", k, k + 1, v.decode_ms, v.verify_ms,
                v.verify_ms / v.decode_ms, m.chunk_bytes_ratio(k + 1), v.capture_ms, v.capture_ms / v.decode_ms);
    std::fflush(stdout);
  }
}

}  // namespace ds4::bench
