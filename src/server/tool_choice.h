#pragma once
// Tools, tool_choice and the `speculative` extension of the three protocols, checked (a 400
// naming the field) and turned into the engine's request; and how a tool call the model got
// wrong is reported (finish reason + "tool_call_error", never silently as text).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"

namespace ds4::server {

enum class Protocol { kChat, kMessages, kResponses };

// tools[i].type: chat / responses "function" (chat: absent too), messages a custom tool
// (absent or "custom"); anything else is a 400 naming tools[i].type. Call before the
// protocol reads the tools.
void check_tool_types(const nlohmann::json& body, Protocol p);
// tool_choice (+ parallel_tool_calls / disable_parallel_tool_use) -> r.tool_choice, after
// r.conv.tools is filled: a named function must be among them, a call needs tools.
void read_tool_choice(const nlohmann::json& body, Protocol p, engine::GenRequest& r);
// `speculative: {enabled: bool, depth: int}` -> r.spec_enabled / r.spec_depth.
void read_speculative(const nlohmann::json& body, engine::GenRequest& r);

// The first tool-call error of a turn as {"type", "message", "text"}; null when none.
nlohmann::json tool_call_error_json(const std::vector<engine::GenEvent>& errors);
// The protocol's tool_choice echo (Responses objects carry it).
nlohmann::json tool_choice_echo(const tok::ToolChoice& c);

}  // namespace ds4::server
