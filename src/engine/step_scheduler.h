#pragma once
// Continuous batching, the per-iteration token budget: which prefilling sequences get how
// many prompt tokens this engine iteration. Every decoding sequence steps every iteration
// (its tokens are counted first); prefill chunks share what the budget leaves, round-robin,
// so a long prompt is fed in slices between decode steps instead of stalling them, and
// several new prompts advance together. Pure bookkeeping (no model, no clock): unit-tested
// on its own (tests/unit/engine/test_step_scheduler.cpp).
#include <cstdint>
#include <span>
#include <vector>

namespace ds4::engine {

class StepScheduler {
 public:
  // step_tokens: the per-iteration budget (decode tokens + prefill tokens); <= 0 = no budget:
  // every prefilling sequence gets a whole chunk each iteration (the round-robin engine of
  // before continuous batching). chunk: the largest slice one sequence gets (prefill_chunk).
  StepScheduler(int64_t step_tokens, int64_t chunk);

  // decode_tokens: what this iteration's decode steps feed (1 per plain step, depth + 1 per
  // speculative cycle). pending[i]: prompt tokens prefilling sequence i still has (> 0).
  // Returns the grant per sequence (0 = waits this iteration). Prefill always gets at least
  // a quarter of the budget, so new requests are admitted even under a full decode load.
  std::vector<int64_t> grant(int64_t decode_tokens, std::span<const int64_t> pending);

  int64_t step_tokens() const { return step_tokens_; }

 private:
  int64_t step_tokens_, chunk_;
  size_t cursor_ = 0;  // where the next iteration's round-robin starts (the first left out)
};

}  // namespace ds4::engine
