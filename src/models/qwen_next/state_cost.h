#pragma once
// Qwen Next's StateCost (models/model.h): what its State (state.h) grows by per token.
#include "models/model.h"
#include "models/qwen_next/config.h"

namespace ds4::qwen_next {

// fresh: the measured cost of a fresh state (Model::state_cost's default: GDN windows and
// matrices, PLE context and conv history).
StateCost state_cost(const Config& c, StateCost fresh, bool draft);

}  // namespace ds4::qwen_next
