// Anthropic Messages API: /v1/messages (streaming events message_start, content_block_*,
// message_delta, message_stop, ping) and /v1/messages/count_tokens. Thinking, text and
// tool_use blocks; tool_result blocks become tool messages.
#include "server/api_common.h"
#include "server/tool_choice.h"

#include "core/error.h"
#include "core/json_depth.h"

namespace ds4::server {
namespace {
using engine::Finish;
using K = engine::GenEvent::Kind;

std::string block_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail("'" + where + "' must be a string or an array of blocks", where);
  std::string out;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& b = content[k];
    const std::string bw = where + "[" + std::to_string(k) + "]";
    if (!b.is_object() || get_string(b, "type", bw).value_or("") != "text")
      fail("'" + where + "' supports text blocks only", where);
    out += get_string(b, "text", bw).value_or("");
  }
  return out;
}

void convert(const json& m, size_t i, tok::Conversation& conv) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) fail("'" + where + "' must be an object", where);
  auto role = get_string(m, "role", where).value_or("");
  if (role != "user" && role != "assistant") fail("role must be 'user' or 'assistant'", where + ".role");
  auto c = m.find("content");
  if (c == m.end() || c->is_null()) fail("'" + where + ".content' is required", where + ".content");
  tok::Message msg = make_message(role, "");
  const size_t before = conv.messages.size();
  if (c->is_string()) {
    msg.content = c->get<std::string>();
    conv.messages.push_back(std::move(msg));
    return;
  }
  if (!c->is_array()) fail("'" + where + ".content' must be a string or an array", where + ".content");
  for (size_t k = 0; k < c->size(); ++k) {
    const json& b = (*c)[k];
    const std::string bw = where + ".content[" + std::to_string(k) + "]";
    if (!b.is_object()) fail("'" + bw + "' must be an object", bw);
    auto type = get_string(b, "type", bw).value_or("");
    if (type == "text") {
      msg.content += get_string(b, "text", bw).value_or("");
    } else if (type == "thinking" && role == "assistant") {
      msg.reasoning += get_string(b, "thinking", bw).value_or("");
    } else if (type == "redacted_thinking") {
    } else if (type == "tool_use" && role == "assistant") {
      json input = b.contains("input") ? b["input"] : json::object();
      if (!input.is_object()) fail("'" + bw + ".input' must be an object", bw + ".input");
      msg.tool_calls.push_back(
          {get_string(b, "id", bw).value_or(""), get_string(b, "name", bw).value_or(""), dump(input)});
    } else if (type == "tool_result" && role == "user") {
      // Tool results are their own turns in every family template; keep the order.
      if (!msg.content.empty()) conv.messages.push_back(std::exchange(msg, make_message(role, "")));
      tok::Message t = make_message("tool", b.contains("content") && !b["content"].is_null() ? block_text(b["content"], bw + ".content") : "");
      t.tool_call_id = get_string(b, "tool_use_id", bw).value_or("");
      conv.messages.push_back(std::move(t));
    } else {
      fail("content block type '" + type + "' is not supported here", bw + ".type");
    }
  }
  // An entry that gave no turn at all (content []) is an empty turn, as content "" is: dropped,
  // it left no message (the template's "no messages" error) or joined its neighbours' roles.
  const bool gave_turn = conv.messages.size() > before;
  if (!msg.content.empty() || !msg.reasoning.empty() || !msg.tool_calls.empty() || !gave_turn)
    conv.messages.push_back(std::move(msg));
}

engine::GenRequest messages_request(const Context& c, const json& body, bool need_max_tokens) {
  engine::GenRequest r;
  if (auto sys = body.find("system"); sys != body.end() && !sys->is_null())
    r.conv.messages.push_back(make_message("system", block_text(*sys, "system")));
  auto msgs = get_array(body, "messages");
  if (!msgs || msgs->empty()) fail("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) convert((*msgs)[i], i, r.conv);
  check_tool_types(body, Protocol::kMessages);
  if (auto tools = get_array(body, "tools"))
    for (size_t i = 0; i < tools->size(); ++i) r.conv.tools.push_back(function_tool((*tools)[i], i, "input_schema"));
  r.conv.thinking = thinking_from_settings(c.settings);
  if (auto th = get_object(body, "thinking")) {
    // Anthropic's types; another one was taken as "enabled" (a typo of "disabled" turned it on).
    auto type = get_string(*th, "type", "thinking").value_or("enabled");
    if (type != "enabled" && type != "disabled" && type != "adaptive")
      fail("thinking.type '" + type + "' is not one of enabled, disabled, adaptive", "thinking.type");
    r.conv.thinking = type == "disabled" ? tok::Thinking::kOff : tok::Thinking::kOn;
  }
  r.sampler = resolve_sampler(c, body, 1.0);  // Anthropic's temperature range is 0..1
  auto mt = get_int(body, "max_tokens");
  if (!mt && need_max_tokens) fail("'max_tokens' is required", "max_tokens");
  r.max_tokens = resolve_max_tokens(c, mt);
  r.stop = stop_list(body, "stop_sequences");
  read_tool_choice(body, Protocol::kMessages, r);
  read_speculative(body, r);
  return r;
}

// A tool call the model got wrong: "max_tokens" when the output was cut inside it, else
// "tool_call_error" (the message's tool_call_error says what).
const char* stop_reason(const engine::GenEvent& done, bool tool_use, bool tool_error = false) {
  const bool cut = done.finish == Finish::kLength || done.finish == Finish::kContext;
  if (tool_error) return cut ? "max_tokens" : "tool_call_error";
  if (tool_use) return "tool_use";
  switch (done.finish) {
    case Finish::kStopString: return "stop_sequence";
    case Finish::kLength:
    case Finish::kContext: return "max_tokens";
    default: return "end_turn";
  }
}

json usage_json(const engine::Usage& u) {
  // Anthropic counts cache reads apart from input_tokens.
  json j = {{"input_tokens", u.prompt_tokens - u.cached_tokens}, {"output_tokens", u.completion_tokens},
            {"cache_read_input_tokens", u.cached_tokens}, {"cache_creation_input_tokens", 0}};
  j.update(usage_extras(u));
  return j;
}

json tool_use_block(const tok::ToolCall& tc) {
  json input = json_nests_deeper(tc.arguments) ? json() : json::parse(tc.arguments, nullptr, false);
  if (!input.is_object()) input = json::object();
  return {{"type", "tool_use"}, {"id", tc.id.empty() ? new_id("toolu_") : tc.id}, {"name", tc.name}, {"input", input}};
}

void stream_messages(std::shared_ptr<engine::RequestHandle> h, json msg, const httplib::Request& req, httplib::Response& res) {
  start_sse(req, res, [h, msg](size_t, httplib::DataSink& sink) {
    auto send = [&](const std::string& type, json ev) {
      ev["type"] = type;
      return sse_write(sink, type, dump(ev));
    };
    int index = -1;
    std::vector<engine::GenEvent> tool_errors;
    std::string open;  // "text" | "thinking" | ""
    bool started = false, tool_use = false;
    auto close = [&]() {
      if (open.empty()) return true;
      bool ok = open != "thinking" || send("content_block_delta", {{"index", index}, {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
      open.clear();
      return ok && send("content_block_stop", {{"index", index}});
    };
    auto ensure = [&](const std::string& kind) {
      if (open == kind) return true;
      if (!close()) return false;
      open = kind;
      json block = kind == "text" ? json{{"type", "text"}, {"text", ""}} : json{{"type", "thinking"}, {"thinking", ""}};
      return send("content_block_start", {{"index", ++index}, {"content_block", block}});
    };
    bool ok = pump(*h, sink, "event: ping\ndata: {\"type\": \"ping\"}\n\n", [&](const engine::GenEvent& ev) {
      // The error event ends the stream; true when written, so the chunked body is finished.
      if (ev.kind == K::kError) return send("error", {{"error", {{"type", "api_error"}, {"message", ev.text}}}});
      if (!started) {
        started = true;
        json m = msg;
        m["usage"] = usage_json(ev.usage);
        m["usage"]["output_tokens"] = 0;
        if (!send("message_start", {{"message", m}})) return false;
      }
      switch (ev.kind) {
        case K::kContent:
          return ensure("text") && send("content_block_delta", {{"index", index}, {"delta", {{"type", "text_delta"}, {"text", ev.text}}}});
        case K::kReasoning:
          return ensure("thinking") && send("content_block_delta", {{"index", index}, {"delta", {{"type", "thinking_delta"}, {"thinking", ev.text}}}});
        case K::kToolCall: {
          if (!close()) return false;
          tool_use = true;
          json block = tool_use_block(ev.call);
          json input = block["input"];
          block["input"] = json::object();
          return send("content_block_start", {{"index", ++index}, {"content_block", block}}) &&
                 send("content_block_delta", {{"index", index}, {"delta", {{"type", "input_json_delta"}, {"partial_json", dump(input)}}}}) &&
                 send("content_block_stop", {{"index", index}});
        }
        case K::kToolCallError: tool_errors.push_back(ev); return true;  // reported with the stop
        case K::kDone: {
          if (!close()) return false;
          json delta = {{"stop_reason", stop_reason(ev, tool_use, !tool_errors.empty())}, {"stop_sequence", nullptr}};
          if (!tool_errors.empty()) delta["tool_call_error"] = tool_call_error_json(tool_errors);
          if (ev.finish == Finish::kStopString) delta["stop_sequence"] = ev.stop_string;
          return send("message_delta", {{"delta", delta}, {"usage", usage_json(ev.usage)}}) && send("message_stop", json::object());
        }
        default: return true;
      }
    });
    if (ok) sink.done();
    return ok;
  });
}

void messages(Context& c, const httplib::Request& req, httplib::Response& res) {
  json body = parse_body(req);
  auto gen = messages_request(c, body, true);
  const bool stream = get_bool(body, "stream").value_or(false);
  auto h = submit(c, std::move(gen));
  json msg = {{"id", new_id("msg_")}, {"type", "message"}, {"role", "assistant"}, {"model", c.model_name},
              {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr}};
  if (stream) return stream_messages(h, msg, req, res);
  auto r = collect(*h, req);
  if (r.done.kind == K::kError) throw ApiError{500, "api_error", r.done.text, ""};
  if (!r.reasoning.empty()) msg["content"].push_back({{"type", "thinking"}, {"thinking", r.reasoning}, {"signature", ""}});
  if (!r.content.empty()) msg["content"].push_back({{"type", "text"}, {"text", r.content}});
  for (const auto& tc : r.calls) msg["content"].push_back(tool_use_block(tc));
  msg["stop_reason"] = stop_reason(r.done, !r.calls.empty(), !r.tool_errors.empty());
  if (!r.tool_errors.empty()) msg["tool_call_error"] = tool_call_error_json(r.tool_errors);
  if (r.done.finish == Finish::kStopString) msg["stop_sequence"] = r.done.stop_string;
  msg["usage"] = usage_json(r.done.usage);
  res.set_content(dump(msg), "application/json");
}

}  // namespace

void register_anthropic(Routes& svr, Context& c) {
  svr.post("/v1/messages", [&c](const httplib::Request& q, httplib::Response& r) { messages(c, q, r); });
  svr.post("/v1/messages/count_tokens", [&c](const httplib::Request& q, httplib::Response& r) {
    json body = parse_body(q);
    auto gen = messages_request(c, body, false);
    try {
      r.set_content(dump({{"input_tokens", c.engine.count_tokens(gen)}}), "application/json");
    } catch (const InputError& e) {
      fail(e.what());
    }
  });
}

}  // namespace ds4::server
