#pragma once
// Admission control's arithmetic (issue #24): how many bytes the sessions' model states may
// hold together (live states + the prefix cache), what a turn is projected to need, and what
// an iteration adds. Pure bookkeeping on the model's StateCost (models/model.h); the engine
// applies it (engine_admission.cpp): a queued turn starts only when its projected need fits
// beside the live states and the cache (cache entries are evicted LRU first), and live
// turns that would outgrow the budget preempt the youngest (recompute).
#include <cstddef>
#include <cstdint>

#include "models/model.h"

namespace ds4::engine {

class StateBudget {
 public:
  // requested: the budget in bytes, 0 = auto: 90% of `available` (what the model's memory
  // can still hold once the weights are in: Model::state_memory_available), or when that is unknown the bound of 64 sessions
  // at the full context. cost: one state's cost (draft head included when the engine runs it).
  StateBudget(size_t requested, size_t available, StateCost cost, int64_t context);

  size_t bytes() const { return bytes_; }
  // A state holding `positions` tokens, bounded by the context.
  size_t at(int64_t positions) const;
  // What a turn needs by its end: its prompt and every token it may still generate.
  size_t need(int64_t prompt_tokens, int64_t max_tokens) const;
  // What feeding `tokens` more adds to a state at `position`.
  size_t growth(int64_t position, int64_t tokens) const;
  const StateCost& cost() const { return cost_; }

 private:
  StateCost cost_;
  int64_t context_;
  size_t bytes_;
};

}  // namespace ds4::engine
