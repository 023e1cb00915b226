#pragma once
// Family-neutral draft head for speculative decoding (Qwen MTP today; GLM MTP and DSpark
// plug in the same way). The speculative loop (engine/speculative.h) only sees this.
#include <cstdint>
#include <vector>

#include "models/model.h"

namespace ds4 {

class DraftHead {
 public:
  virtual ~DraftHead() = default;
  // Makes `state` keep whatever history the head needs; call before the first forward.
  virtual void enable_draft(ModelState& state) const = 0;
  // Greedy chain of `depth` draft tokens that follow `next_token` (the token the target
  // chose after the state's last consumed token). Must leave `state` unchanged.
  virtual void draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) = 0;
};

}  // namespace ds4
