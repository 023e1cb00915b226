#pragma once
// How the engine decides whether a turn speculates when the request does not say
// (Engine::speculation_default, engine/spec_cost.h), for /health and the start-up receipt.
#include <nlohmann/json.hpp>
#include <string>

#include "engine/engine.h"

namespace ds4::server {

// /health "speculation": the default, who decided it, and the cost model's inputs.
nlohmann::json speculation_json(const engine::Engine& e);
// One receipt comment line ("# speculative default: ...\n"); empty without a draft head.
std::string speculation_receipt_line(const engine::Engine& e);

}  // namespace ds4::server
