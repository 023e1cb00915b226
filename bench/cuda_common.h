#pragma once
// Shared by the CUDA benches: the timed part of a greedy run (Qwen3.8 Flash Next and GLM 5.x Flash;
// each bench keeps its own warm-up, which differs per model) and the verify-window tokens (all three).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <vector>

#include "models/model.h"
#include "models/sample_candidates.h"

namespace ds4::bench {

// The greedy token of a logits row: the first of equal maxima (every bench's host turn).
inline int32_t argmax_row(const std::vector<float>& l) {
  return int32_t(std::max_element(l.begin(), l.end()) - l.begin());
}

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
  for (int i = 0; i < n; ++i) {
    const int32_t best = argmax_row(l);
    r.tokens.push_back(best);
    l = m.decode(s, best);
  }
  auto t2 = Clock::now();
  r.prefill_tps = double(prompt.size()) / std::chrono::duration<double>(t1 - t0).count();
  r.decode_tps = double(n) / std::chrono::duration<double>(t2 - t1).count();
  return r;
}

// Greedy decode through the engine's path (engine_decode.cpp: forward_candidates, the top
// candidate picked on the device and only it copied back), from token `first` on `s`: one untimed
// step (it captures a graph of its own), then n timed ones. `next` is the token to feed after them.
// A model error is printed and leaves ok false (the callers' other figures still come out; this
// path was first written without a device, session 37).
struct EnginePathRun {
  bool ok = false;
  double tps = 0;
  int32_t next = 0;
};
inline EnginePathRun engine_path_decode(Model& m, ModelState& s, int32_t first, int n) {
  using Clock = std::chrono::steady_clock;
  EnginePathRun r;
  r.next = first;
  try {
    SampleCandidates cand;
    std::vector<float> unused;
    const CandidateRequest req{1, 0.0};
    auto step = [&] {
      m.forward_candidates(s, std::span<const int32_t>(&r.next, 1), req, cand, unused,
                           [](const SampleCandidates&) { return false; });
      r.next = cand.argmax;
    };
    step();
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) step();
    r.tps = double(n) / std::chrono::duration<double>(Clock::now() - t0).count();
    r.ok = true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "the engine's decode path failed: %s\n", e.what());
  }
  return r;
}

}  // namespace ds4::bench
