#pragma once
// Shared by the CUDA benches: the timed part of a greedy run (Qwen3.8 Flash Next and GLM 5.x Flash;
// each bench keeps its own warm-up, which differs per model) and the verify-window tokens (all three).
#include <chrono>
#include <cstdint>
#include <vector>

#include "models/model.h"

namespace ds4::bench {

// The benches' verify-window tokens: n spread token ids below vocab (the same for every bench,
// so the verify tables and profiles of a family read the same experts).
inline std::vector<int32_t> verify_window_tokens(int n, int64_t vocab) {
  std::vector<int32_t> rows;
  for (int i = 0; i < n; ++i) rows.push_back(int32_t((i * 4099 + 17) % vocab));
  return rows;
}

struct GreedyRun {
  double prefill_tps = 0, decode_tps = 0;
  std::vector<int32_t> tokens;
};

// Times prefill(prompt) on `s` (a fresh state) and then n greedy decode steps (argmax: the
// first of equal maxima).
inline GreedyRun timed_greedy(Model& m, ModelState& s, const std::vector<int32_t>& prompt, int n) {
  using Clock = std::chrono::steady_clock;
  GreedyRun r;
  auto t0 = Clock::now();
  auto l = m.prefill(s, prompt);
  auto t1 = Clock::now();
  const int64_t V = m.info().vocab_size;
  for (int i = 0; i < n; ++i) {
    int32_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (l[size_t(v)] > l[size_t(best)]) best = int32_t(v);
    r.tokens.push_back(best);
    l = m.decode(s, best);
  }
  auto t2 = Clock::now();
  r.prefill_tps = double(prompt.size()) / std::chrono::duration<double>(t1 - t0).count();
  r.decode_tps = double(n) / std::chrono::duration<double>(t2 - t1).count();
  return r;
}

}  // namespace ds4::bench
