// OpenAI protocol: /v1/chat/completions, /v1/completions, /v1/models (and /v1/responses in
// openai_responses.cpp). Shapes follow the OpenAI API reference; the official Python SDK is
// the test client (tests/python/server).
#include "server/api_common.h"
#include "server/tool_choice.h"

#include "core/error.h"

namespace ds4::server {
namespace {

void check_chat_function(const json& t, size_t i);  // below
using engine::Finish;
using K = engine::GenEvent::Kind;

std::string text_of(const json& content, const std::string& where) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail("'" + where + "' must be a string or an array of parts", where);
  std::string out;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& part = content[k];
    const std::string pw = where + "[" + std::to_string(k) + "]";
    if (!part.is_object()) fail("'" + where + "' parts must be objects", where);
    auto type = get_string(part, "type", pw).value_or("text");
    if (type != "text" && type != "input_text" && type != "output_text")
      fail("content part type '" + type + "' is not supported (text only)", where);
    out += get_string(part, "text", pw).value_or("");
  }
  return out;
}

tok::Message convert_message(const json& m, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) fail("'" + where + "' must be an object", where);
  tok::Message out;
  auto role = get_string(m, "role", where);
  if (!role) fail("'" + where + ".role' is required", where + ".role");
  out.role = *role == "developer" ? "system" : *role;
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool")
    fail("unknown role '" + *role + "'", where + ".role");
  out.content = text_of(m.contains("content") ? m["content"] : json(), where + ".content");
  if (auto r = get_string(m, "reasoning_content", where)) out.reasoning = *r;
  if (auto calls = get_array(m, "tool_calls", where)) {
    for (size_t k = 0; k < calls->size(); ++k) {
      const json& c = (*calls)[k];
      const std::string cw = where + ".tool_calls[" + std::to_string(k) + "]";
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
        fail("'" + where + ".tool_calls' entries need a 'function' object", where + ".tool_calls");
      tok::ToolCall tc;
      tc.id = get_string(c, "id", cw).value_or("");
      tc.name = get_string(c["function"], "name", cw + ".function").value_or("");
      tc.arguments = get_string(c["function"], "arguments", cw + ".function").value_or("{}");
      out.tool_calls.push_back(std::move(tc));
    }
  }
  if (auto id = get_string(m, "tool_call_id", where)) out.tool_call_id = *id;
  if (auto n = get_string(m, "name", where)) out.name = *n;
  return out;
}

tok::Thinking openai_thinking(const Context& c, const json& body) {
  auto t = thinking_from_settings(c.settings);
  if (auto e = get_string(body, "reasoning_effort")) {
    if (*e == "none" || *e == "minimal") t = tok::Thinking::kOff;
    else if (*e == "low") t = tok::Thinking::kLow;
    else if (*e == "medium") t = tok::Thinking::kMedium;
    else if (*e == "high") t = tok::Thinking::kHigh;
    else if (*e == "max" || *e == "xhigh") t = tok::Thinking::kMax;
    else fail("unknown reasoning_effort '" + *e + "'", "reasoning_effort");
  }
  if (auto b = get_bool(body, "enable_thinking")) t = *b ? tok::Thinking::kOn : tok::Thinking::kOff;
  if (auto kw = get_object(body, "chat_template_kwargs"))
    if (auto b = get_bool(*kw, "enable_thinking")) t = *b ? tok::Thinking::kOn : tok::Thinking::kOff;
  return t;
}

engine::GenRequest chat_request(const Context& c, const json& body) {
  engine::GenRequest r;
  auto msgs = get_array(body, "messages");
  if (!msgs || msgs->empty()) fail("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) r.conv.messages.push_back(convert_message((*msgs)[i], i));
  check_tool_types(body, Protocol::kChat);
  if (auto tools = get_array(body, "tools"))
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      if (!t.is_object()) fail("'tools' entries must be objects", "tools");
      check_chat_function(t, i);
      r.conv.tools.push_back(dump(t));
    }
  if (auto n = get_int(body, "n"); n && *n != 1) fail("only n = 1 is supported", "n");
  r.conv.thinking = openai_thinking(c, body);
  r.sampler = resolve_sampler(c, body);
  auto mt = get_int(body, "max_completion_tokens");
  if (!mt) mt = get_int(body, "max_tokens");
  r.max_tokens = resolve_max_tokens(c, mt);
  r.stop = stop_list(body, "stop");
  read_tool_choice(body, Protocol::kChat, r);
  read_speculative(body, r);
  return r;
}

// A tool call the model got wrong: "length" when the output was cut inside it, else
// "tool_call_error" (the choice's tool_call_error says what); valid calls: "tool_calls".
const char* openai_finish(const engine::GenEvent& done, bool tool_calls, bool tool_error = false) {
  const bool cut = done.finish == Finish::kLength || done.finish == Finish::kContext;
  if (tool_error) return cut ? "length" : "tool_call_error";
  if (tool_calls) return "tool_calls";
  switch (done.finish) {
    case Finish::kLength:
    case Finish::kContext: return "length";
    default: return "stop";
  }
}

json usage_json(const engine::Usage& u) {
  json j = {{"prompt_tokens", u.prompt_tokens},
           {"completion_tokens", u.completion_tokens},
           {"total_tokens", u.prompt_tokens + u.completion_tokens},
           {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
           {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
  j.update(usage_extras(u));
  return j;
}

json tool_call_json(const tok::ToolCall& tc) {
  return {{"id", tc.id.empty() ? new_id("call_") : tc.id},
          {"type", "function"},
          {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}};
}

// A chat tool's `function` as the other APIs check theirs (function_tool): an object with a
// non-empty string name, a string description and an object schema where given. The tool is
// rendered as the client sent it; malformed ones were rendered into the prompt before.
void check_chat_function(const json& t, size_t i) {
  const std::string where = "tools[" + std::to_string(i) + "].function";
  auto fn = t.find("function");
  if (fn == t.end() || !fn->is_object()) fail("'" + where + "' must be an object", where);
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    fail("'" + where + ".name' must be a non-empty string", where + ".name");
  if (auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string())
    fail("'" + where + ".description' must be a string", where + ".description");
  if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null() && !p->is_object())
    fail("'" + where + ".parameters' must be an object (a JSON schema)", where + ".parameters");
}

// A turn that fails mid-stream: the error event, then [DONE]; true when written, so that the
// provider still ends the chunked body (a body cut off without its last chunk is an
// IncompleteRead in clients, which then never see the error).
bool error_in_stream(httplib::DataSink& sink, const std::string& msg) {
  return sse_write(sink, "", dump({{"error", {{"message", msg}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}})) &&
         sse_write(sink, "", "[DONE]");
}

void chat_completions(Context& c, const httplib::Request& req, httplib::Response& res) {
  json body = parse_body(req);
  auto gen = chat_request(c, body);
  const bool stream = get_bool(body, "stream").value_or(false);
  bool include_usage = false;
  if (auto so = get_object(body, "stream_options")) include_usage = get_bool(*so, "include_usage").value_or(false);
  auto h = submit(c, std::move(gen));
  const std::string id = new_id("chatcmpl-");
  const int64_t created = unix_now();
  const std::string model = c.model_name;
  if (!stream) {
    auto r = collect(*h, req);
    if (r.done.kind == K::kError) throw ApiError{500, "server_error", r.done.text, ""};
    json msg = {{"role", "assistant"}, {"content", r.content}};
    if (!r.reasoning.empty()) msg["reasoning_content"] = r.reasoning;
    if (!r.calls.empty()) {
      msg["tool_calls"] = json::array();
      for (const auto& tc : r.calls) msg["tool_calls"].push_back(tool_call_json(tc));
      if (r.content.empty()) msg["content"] = nullptr;
    }
    json choice = {{"index", 0}, {"message", msg}, {"logprobs", nullptr},
                   {"finish_reason", openai_finish(r.done, !r.calls.empty(), !r.tool_errors.empty())}};
    if (!r.tool_errors.empty()) choice["tool_call_error"] = tool_call_error_json(r.tool_errors);
    json out = {{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model},
                {"choices", json::array({choice})}, {"usage", usage_json(r.done.usage)}};
    res.set_content(dump(out), "application/json");
    return;
  }
  start_sse(req, res, [h, id, created, model, include_usage](size_t, httplib::DataSink& sink) {
    std::vector<engine::GenEvent> tool_errors;
    auto chunk = [&](json delta, json finish) {
      json choice = {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", finish}};
      if (!finish.is_null() && !tool_errors.empty()) choice["tool_call_error"] = tool_call_error_json(tool_errors);
      json j = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                {"choices", json::array({std::move(choice)})}};
      return sse_write(sink, "", dump(j));
    };
    int tool_index = 0;
    bool sent_role = false;
    bool ok = pump(*h, sink, ": keepalive\n\n", [&](const engine::GenEvent& ev) {
      if (!sent_role && ev.kind != K::kError) {
        sent_role = true;
        if (!chunk({{"role", "assistant"}, {"content", ""}}, nullptr)) return false;
      }
      switch (ev.kind) {
        case K::kContent: return chunk({{"content", ev.text}}, nullptr);
        case K::kReasoning: return chunk({{"reasoning_content", ev.text}}, nullptr);
        case K::kToolCall: {
          json tc = tool_call_json(ev.call);
          tc["index"] = tool_index++;
          return chunk({{"tool_calls", json::array({tc})}}, nullptr);
        }
        case K::kToolCallError: tool_errors.push_back(ev); return true;  // reported with the finish
        case K::kDone: {
          if (!chunk(json::object(), openai_finish(ev, tool_index > 0, !tool_errors.empty()))) return false;
          if (include_usage) {
            json u = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                      {"choices", json::array()}, {"usage", usage_json(ev.usage)}};
            if (!sse_write(sink, "", dump(u))) return false;
          }
          return sse_write(sink, "", "[DONE]");
        }
        case K::kError: return error_in_stream(sink, ev.text);
        default: return true;
      }
    });
    if (ok) sink.done();
    return ok;
  });
}

void completions(Context& c, const httplib::Request& req, httplib::Response& res) {
  json body = parse_body(req);
  engine::GenRequest gen;
  auto p = body.find("prompt");
  if (p == body.end() || p->is_null()) fail("'prompt' is required", "prompt");
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) gen.raw_prompt = (*p)[0].get<std::string>();
  else if (p->is_string()) gen.raw_prompt = p->get<std::string>();
  else fail("'prompt' must be a string (or an array of one string)", "prompt");
  if (auto n = get_int(body, "n"); n && *n != 1) fail("only n = 1 is supported", "n");
  gen.sampler = resolve_sampler(c, body);
  gen.max_tokens = resolve_max_tokens(c, get_int(body, "max_tokens").value_or(16));
  gen.stop = stop_list(body, "stop");
  gen.parse_output = false;
  const bool stream = get_bool(body, "stream").value_or(false);
  auto h = submit(c, std::move(gen));
  const std::string id = new_id("cmpl-");
  const int64_t created = unix_now();
  const std::string model = c.model_name;
  if (!stream) {
    auto r = collect(*h, req);
    if (r.done.kind == K::kError) throw ApiError{500, "server_error", r.done.text, ""};
    json out = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                {"choices", json::array({{{"index", 0}, {"text", r.content}, {"logprobs", nullptr},
                                          {"finish_reason", openai_finish(r.done, false)}}})},
                {"usage", usage_json(r.done.usage)}};
    res.set_content(dump(out), "application/json");
    return;
  }
  start_sse(req, res, [h, id, created, model](size_t, httplib::DataSink& sink) {
    auto chunk = [&](const std::string& text, json finish) {
      json j = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr},
                                          {"finish_reason", std::move(finish)}}})}};
      return sse_write(sink, "", dump(j));
    };
    bool ok = pump(*h, sink, ": keepalive\n\n", [&](const engine::GenEvent& ev) {
      switch (ev.kind) {
        case K::kContent: return chunk(ev.text, nullptr);
        case K::kDone: return chunk("", openai_finish(ev, false)) && sse_write(sink, "", "[DONE]");
        case K::kError: return error_in_stream(sink, ev.text);
        default: return true;
      }
    });
    if (ok) sink.done();
    return ok;
  });
}

}  // namespace

void register_responses(Routes& svr, Context& c);

void register_openai(Routes& svr, Context& c) {
  svr.post("/v1/chat/completions", [&c](const httplib::Request& q, httplib::Response& r) { chat_completions(c, q, r); });
  svr.post("/v1/completions", [&c](const httplib::Request& q, httplib::Response& r) { completions(c, q, r); });
  svr.get("/v1/models", [&c](const httplib::Request&, httplib::Response& r) {
    json m = {{"id", c.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "ds4server"},
              {"family", c.engine.model_info().family}, {"context_size", c.engine.context_size()}};
    r.set_content(dump({{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  register_responses(svr, c);
}

}  // namespace ds4::server
