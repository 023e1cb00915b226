// OpenAI Responses API (/v1/responses): input items -> conversation; output items
// (reasoning, message, function_call) built once and either streamed as the documented
// response.* events (each with a sequence_number) or returned whole.
#include <algorithm>

#include "core/error.h"
#include "server/api_common.h"
#include "server/tool_choice.h"

namespace ds4::server {
namespace {
using engine::Finish;
using K = engine::GenEvent::Kind;

std::string item_text(const json& content, const std::string& where) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail("'" + where + "' must be a string or an array", where);
  std::string out;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& p = content[k];
    const std::string pw = where + "[" + std::to_string(k) + "]";
    if (!p.is_object()) fail("'" + where + "' parts must be objects", where);
    auto type = get_string(p, "type", pw).value_or("input_text");
    if (type != "input_text" && type != "output_text" && type != "text")
      fail("content type '" + type + "' is not supported (text only)", where);
    out += get_string(p, "text", pw).value_or("");
  }
  return out;
}

tok::Conversation conversation(const Context& c, const json& body) {
  tok::Conversation conv;
  if (auto ins = get_string(body, "instructions")) conv.messages.push_back(make_message("system", *ins));
  auto in = body.find("input");
  if (in == body.end() || in->is_null()) fail("'input' is required", "input");
  if (in->is_string()) {
    conv.messages.push_back(make_message("user", in->get<std::string>()));
  } else if (in->is_array()) {
    for (size_t i = 0; i < in->size(); ++i) {
      const json& it = (*in)[i];
      const std::string where = "input[" + std::to_string(i) + "]";
      if (!it.is_object()) fail("'" + where + "' must be an object", where);
      auto type = get_string(it, "type", where).value_or("message");
      tok::Message m;
      if (type == "message") {
        m.role = get_string(it, "role", where).value_or("");
        if (m.role == "developer") m.role = "system";
        if (m.role != "system" && m.role != "user" && m.role != "assistant") fail("unknown role '" + m.role + "'", where + ".role");
        m.content = item_text(it.contains("content") ? it["content"] : json(), where + ".content");
        conv.messages.push_back(std::move(m));
      } else if (type == "function_call") {
        tok::ToolCall tc{get_string(it, "call_id", where).value_or(""), get_string(it, "name", where).value_or(""),
                         get_string(it, "arguments", where).value_or("{}")};
        if (conv.messages.empty() || conv.messages.back().role != "assistant") conv.messages.push_back(make_message("assistant", {}));
        conv.messages.back().tool_calls.push_back(std::move(tc));
      } else if (type == "function_call_output") {
        m.role = "tool";
        m.tool_call_id = get_string(it, "call_id", where).value_or("");
        auto out = it.find("output");
        m.content = out == it.end() ? "" : out->is_string() ? out->get<std::string>() : item_text(*out, where + ".output");
        conv.messages.push_back(std::move(m));
      } else if (type != "reasoning") {
        fail("input item type '" + type + "' is not supported", where + ".type");
      }
    }
  } else {
    fail("'input' must be a string or an array", "input");
  }
  if (conv.messages.empty()) fail("'input' has no messages", "input");
  check_tool_types(body, Protocol::kResponses);
  if (auto tools = get_array(body, "tools"))
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      if (!t.is_object() || get_string(t, "type").value_or("") != "function") fail("only function tools are supported", "tools");
      conv.tools.push_back(function_tool(t, i, "parameters"));
    }
  conv.thinking = thinking_from_settings(c.settings);
  if (auto r = get_object(body, "reasoning"))
    if (auto e = get_string(*r, "effort", "reasoning")) {
      // The values Chat Completions' reasoning_effort takes; another one is a 400 there and
      // here (it was taken as "on", so a typo silently changed the turn).
      static const char* const kEfforts[] = {"none", "minimal", "low", "medium", "high", "max", "xhigh"};
      if (std::find(std::begin(kEfforts), std::end(kEfforts), *e) == std::end(kEfforts))
        fail("unknown reasoning.effort '" + *e + "'", "reasoning.effort");
      conv.thinking = (*e == "none" || *e == "minimal") ? tok::Thinking::kOff : tok::Thinking::kOn;
    }
  return conv;
}

// Accumulates output items; `emit` (may be empty) receives streaming events.
class Builder {
 public:
  using Emit = std::function<bool(const std::string&, json)>;
  Builder(json base, Emit emit) : base_(std::move(base)), emit_(std::move(emit)) {}

  bool start() {
    json r = response("in_progress");
    return send("response.created", {{"response", r}}) && send("response.in_progress", {{"response", r}});
  }
  bool text(bool reasoning, const std::string& delta) {
    const std::string kind = reasoning ? "reasoning" : "message";
    if (open_ != kind && !close()) return false;
    if (open_.empty()) {
      open_ = kind;
      json item = reasoning ? json{{"type", "reasoning"}, {"id", new_id("rs_")}, {"summary", json::array()}, {"content", json::array()}}
                            : json{{"type", "message"}, {"id", new_id("msg_")}, {"status", "in_progress"}, {"role", "assistant"}, {"content", json::array()}};
      output_.push_back(item);
      buf_.clear();
      if (!send("response.output_item.added", {{"output_index", output_.size() - 1}, {"item", item}})) return false;
      if (!reasoning && !send("response.content_part.added", part_event(json{{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}})))
        return false;
    }
    buf_ += delta;
    json ev = {{"item_id", output_.back()["id"]}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"delta", delta}};
    if (!reasoning) ev["logprobs"] = json::array();
    return send(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", ev);
  }
  bool tool_call(const tok::ToolCall& tc) {
    if (!close()) return false;
    json item = {{"type", "function_call"}, {"id", new_id("fc_")}, {"call_id", tc.id.empty() ? new_id("call_") : tc.id},
                 {"name", tc.name}, {"arguments", tc.arguments}, {"status", "completed"}};
    output_.push_back(item);
    const size_t idx = output_.size() - 1;
    return send("response.output_item.added", {{"output_index", idx}, {"item", item}}) &&
           send("response.function_call_arguments.delta", {{"item_id", item["id"]}, {"output_index", idx}, {"delta", tc.arguments}}) &&
           send("response.function_call_arguments.done", {{"item_id", item["id"]}, {"output_index", idx}, {"name", tc.name}, {"arguments", tc.arguments}}) &&
           send("response.output_item.done", {{"output_index", idx}, {"item", item}});
  }
  // A tool call the model got wrong: reported with the finish (never as output text).
  bool tool_error(const engine::GenEvent& ev) {
    tool_errors_.push_back(ev);
    return true;
  }
  bool finish(const engine::GenEvent& done) {
    if (!close()) return false;
    const bool incomplete = done.finish == Finish::kLength || done.finish == Finish::kContext;
    // Cut inside a call: incomplete, as any cut; a malformed call: failed, with the error.
    const bool failed = !incomplete && !tool_errors_.empty();
    json r = response(incomplete ? "incomplete" : failed ? "failed" : "completed");
    if (incomplete) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    if (!tool_errors_.empty()) {
      r["tool_call_error"] = tool_call_error_json(tool_errors_);
      if (failed) r["error"] = {{"code", "tool_call_" + tool_errors_.front().error_type}, {"message", tool_errors_.front().error}};
    }
    const auto& u = done.usage;
    r["usage"] = {{"input_tokens", u.prompt_tokens}, {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
                  {"output_tokens", u.completion_tokens}, {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
                  {"total_tokens", u.prompt_tokens + u.completion_tokens}};
    r["usage"].update(usage_extras(u));
    final_ = r;
    return send(incomplete ? "response.incomplete" : failed ? "response.failed" : "response.completed", {{"response", r}});
  }
  const json& final_response() const { return final_; }

 private:
  json part_event(json part) {
    return {{"item_id", output_.back()["id"]}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"part", std::move(part)}};
  }
  bool close() {
    if (open_.empty()) return true;
    json& item = output_.back();
    bool ok = true;
    if (open_ == "message") {
      json part = {{"type", "output_text"}, {"text", buf_}, {"annotations", json::array()}};
      item["content"] = json::array({part});
      item["status"] = "completed";
      ok = send("response.output_text.done", {{"item_id", item["id"]}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"text", buf_}, {"logprobs", json::array()}}) &&
           send("response.content_part.done", part_event(part));
    } else {
      item["content"] = json::array({{{"type", "reasoning_text"}, {"text", buf_}}});
      ok = send("response.reasoning_text.done", {{"item_id", item["id"]}, {"output_index", output_.size() - 1}, {"content_index", 0}, {"text", buf_}});
    }
    open_.clear();
    return ok && send("response.output_item.done", {{"output_index", output_.size() - 1}, {"item", item}});
  }
  json response(const std::string& status) {
    json r = base_;
    r["status"] = status;
    r["output"] = output_;
    return r;
  }
  bool send(const std::string& type, json ev) {
    if (!emit_) return true;
    ev["type"] = type;
    ev["sequence_number"] = seq_++;
    return emit_(type, std::move(ev));
  }

  json base_, output_ = json::array(), final_;
  std::vector<engine::GenEvent> tool_errors_;
  Emit emit_;
  std::string open_, buf_;
  int64_t seq_ = 0;
};

void responses(Context& c, const httplib::Request& req, httplib::Response& res) {
  json body = parse_body(req);
  // Responses are not stored (no state kept between requests), so a chained request would
  // silently lose its history: refused, naming the feature.
  if (get_string(body, "previous_response_id"))
    fail("'previous_response_id' is not supported: this server does not store responses; send the whole "
         "conversation in 'input'", "previous_response_id");
  engine::GenRequest gen;
  gen.conv = conversation(c, body);
  gen.sampler = resolve_sampler(c, body);
  gen.max_tokens = resolve_max_tokens(c, get_int(body, "max_output_tokens"));
  read_tool_choice(body, Protocol::kResponses, gen);
  read_speculative(body, gen);
  const bool stream = get_bool(body, "stream").value_or(false);
  json base = {{"id", new_id("resp_")}, {"object", "response"}, {"created_at", unix_now()}, {"model", c.model_name},
               {"error", nullptr}, {"incomplete_details", nullptr}, {"instructions", body.value("instructions", json())},
               {"max_output_tokens", gen.max_tokens}, {"parallel_tool_calls", gen.tool_choice.parallel},
               {"tool_choice", tool_choice_echo(gen.tool_choice)},
               {"tools", body.value("tools", json::array())}, {"temperature", gen.sampler.temperature},
               {"top_p", gen.sampler.top_p}, {"metadata", json::object()}, {"store", false}, {"usage", nullptr}};
  auto h = submit(c, std::move(gen));
  auto relay = [](Builder& b, const engine::GenEvent& ev) {
    switch (ev.kind) {
      case K::kReasoning: return b.text(true, ev.text);
      case K::kContent: return b.text(false, ev.text);
      case K::kToolCall: return b.tool_call(ev.call);
      case K::kToolCallError: return b.tool_error(ev);
      case K::kDone: return b.finish(ev);
      default: return true;
    }
  };
  if (!stream) {
    Builder b(base, nullptr);
    std::optional<std::string> error;
    wait_events(*h, req, [&](const engine::GenEvent& ev) {
      if (ev.kind == K::kError) error = ev.text;
      else relay(b, ev);
    });
    if (error) throw ApiError{500, "server_error", *error, ""};
    res.set_content(dump(b.final_response()), "application/json");
    return;
  }
  start_sse(req, res, [h, base, relay](size_t, httplib::DataSink& sink) {
    Builder b(base, [&sink](const std::string& type, json ev) { return sse_write(sink, type, dump(ev)); });
    if (!b.start()) return false;
    bool ok = pump(*h, sink, ": keepalive\n\n", [&](const engine::GenEvent& ev) {
      // The error event ends the stream; true when written, so the chunked body is finished.
      if (ev.kind == K::kError)
        return sse_write(sink, "error", dump({{"type", "error"}, {"code", "server_error"}, {"message", ev.text}, {"param", nullptr}}));
      return relay(b, ev);
    });
    if (ok) sink.done();
    return ok;
  });
}

}  // namespace

void register_responses(Routes& svr, Context& c) {
  svr.post("/v1/responses", [&c](const httplib::Request& q, httplib::Response& r) { responses(c, q, r); });
  // Nothing is stored to retrieve: a clear 404 naming the feature, not "no such route".
  svr.get(R"(/v1/responses/([^/]+))", [](const httplib::Request& q, httplib::Response&) {
    fail("response '" + q.matches[1].str() + "' not found: this server does not store responses "
         "(GET /v1/responses/{id} and previous_response_id are not supported)", "response_id", 404);
  });
}

}  // namespace ds4::server
