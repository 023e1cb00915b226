#pragma once
// A model's config (config.json, or the JSON a GGUF carries) checked once, where it is read,
// before any family parses it: the families read some keys loosely (json::value, get<int32_t>),
// so a wrong type surfaced as a raw JSON exception with neither file nor key, and
// out-of-range values (rope_theta = -1, eos_token_id = 2^63) were taken as they came.
// Errors are ds4::InputError naming `origin` and the key.
#include <nlohmann/json.hpp>
#include <string>

namespace ds4 {

void check_config_values(const nlohmann::json& config, const std::string& origin);

}  // namespace ds4
