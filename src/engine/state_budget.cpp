#include "engine/state_budget.h"

#include <algorithm>

namespace ds4::engine {

StateBudget::StateBudget(size_t requested, size_t available, StateCost cost, int64_t context)
    : cost_(cost), context_(std::max<int64_t>(1, context)) {
  if (requested > 0) bytes_ = requested;
  else if (available > 0) bytes_ = available / 10 * 9;
  else bytes_ = 64 * cost_.at(context_);
}

size_t StateBudget::at(int64_t positions) const { return cost_.at(std::clamp<int64_t>(positions, 0, context_)); }

size_t StateBudget::need(int64_t prompt_tokens, int64_t max_tokens) const {
  // max_tokens clamped to the context first: prompt + a huge max_tokens must not overflow
  return at(prompt_tokens + std::clamp<int64_t>(max_tokens, 0, context_));
}

size_t StateBudget::growth(int64_t position, int64_t tokens) const {
  return at(position + tokens) - at(position);
}

}  // namespace ds4::engine
