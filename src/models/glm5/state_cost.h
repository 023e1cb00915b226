#pragma once
// GLM 5.x's StateCost (models/model.h): what its State (state.h) grows by per token.
#include "models/glm5/config.h"
#include "models/glm5/weights.h"
#include "models/model.h"

namespace ds4::glm5 {

// fresh: the measured cost of a fresh state (Model::state_cost's default: the KDA windows
// and matrices, the draft head's when enabled).
StateCost state_cost(const Config& c, const Weights& w, StateCost fresh, bool draft);

}  // namespace ds4::glm5
