#pragma once
// DeepSeek V4's StateCost (models/model.h): the bounded windows and the compressed entries
// its State (state.h) grows by per token.
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/weights.h"
#include "models/model.h"

namespace ds4::deepseek_v4 {

// fresh: the measured cost of a fresh state (Model::state_cost's default). `c` is the
// model's config with the MTP / DSpark layers appended (their ratio() is 0).
StateCost state_cost(const Config& c, const Weights& w, StateCost fresh, bool draft);

}  // namespace ds4::deepseek_v4
