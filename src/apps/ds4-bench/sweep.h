#pragma once
// The measured sweep: one model state grows frontier by frontier; at each frontier the
// newly appended tokens are timed as prefill, then `gen_tokens` greedy decode steps run on
// a clone of the state (so the next frontier continues from the prompt, not the answer).
#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace ds4::bench {

struct SweepOptions {
  std::vector<int64_t> frontiers;  // increasing context sizes
  int64_t gen_tokens = 64;
  int64_t chunk = 0;               // prefill chunk; 0 = the model's default
  std::string progress = "auto";
};

// One CSV row; the columns of antirez/ds4's ds4-bench, so either tool's CSV reads alike.
struct Row {
  int64_t ctx_tokens = 0;      // frontier after the prefill
  int64_t prefill_tokens = 0;  // tokens appended since the previous frontier (the timed work)
  double prefill_tps = 0;
  int64_t gen_tokens = 0;
  double gen_tps = 0;
  int64_t kvcache_bytes = 0;   // ModelState::bytes() at the frontier (KV + recurrent state)
  double prefill_s = 0, gen_s = 0;
};

// Frontiers start, start+step, ... (step > 0) or start, start*2, ... (step == 0), capped at
// max; max itself is always the last one.
std::vector<int64_t> frontiers(int64_t start, int64_t max, int64_t step);

// Prompt of `n` tokens: `text_tokens` repeated (when shorter than n) or, when empty,
// deterministic pseudo-random ids in [0, vocab) that avoid `avoid` (EOS ids).
std::vector<int32_t> prompt_tokens(const std::vector<int32_t>& text_tokens, int64_t n, int64_t vocab,
                                   const std::vector<int32_t>& avoid);

// Runs the sweep; on_row is called after each frontier (for incremental output).
std::vector<Row> run_sweep(Model& model, const std::vector<int32_t>& tokens, const SweepOptions& opt,
                           void (*on_row)(const Row&, void*), void* ctx);

std::string csv_header();
std::string csv_line(const Row& r);

}  // namespace ds4::bench
