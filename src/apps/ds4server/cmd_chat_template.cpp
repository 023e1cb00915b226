// `ds4server chat-template`: render conversations, compute continuations and parse model
// output with the native templates, one JSON request per stdin line (--jsonl) or one JSON
// object on stdin. This is what the template oracle tests and debugging use.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/ds4server/commands.h"
#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace ds4::cli {

nlohmann::ordered_json tokenizer_request(const tok::Tokenizer& tk, const nlohmann::ordered_json& req, bool special);

namespace {

using nlohmann::ordered_json;

std::string content_text(const ordered_json& c) {
  if (c.is_null()) return "";
  if (c.is_string()) return c.get<std::string>();
  std::string out;
  if (c.is_array())
    for (const auto& part : c)
      if (part.is_object() && part.value("type", "") == "text") out += part.value("text", "");
  return out;
}

std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

tok::Conversation parse_conversation(const ordered_json& req) {
  tok::Conversation conv;
  for (const auto& m : req.at("messages")) {
    tok::Message msg;
    msg.role = m.at("role").get<std::string>();
    msg.content = content_text(m.value("content", ordered_json()));
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string())
      msg.reasoning = m["reasoning_content"].get<std::string>();
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (const auto& tc : m["tool_calls"]) {
        tok::ToolCall c;
        c.id = tc.value("id", "");
        const auto& fn = tc.contains("function") ? tc["function"] : tc;
        c.name = fn.value("name", "");
        const auto& args = fn.value("arguments", ordered_json());
        c.arguments = args.is_string() ? args.get<std::string>() : args.is_null() ? "" : dump(args);
        msg.tool_calls.push_back(std::move(c));
      }
    }
    msg.tool_call_id = m.value("tool_call_id", "");
    msg.name = m.value("name", "");
    conv.messages.push_back(std::move(msg));
  }
  if (req.contains("tools") && req["tools"].is_array())
    for (const auto& t : req["tools"]) conv.tools.push_back(dump(t));
  conv.thinking = tok::thinking_from_name(req.value("thinking", "on"));
  conv.add_generation_prompt = req.value("add_generation_prompt", true);
  return conv;
}

ordered_json parse_request(tok::Family fam, const ordered_json& req) {
  std::string text = req.at("text").get<std::string>();
  size_t chunk = req.value("chunk", size_t{0});
  auto parser = tok::OutputParser::create(fam, req.value("thinking", false));
  std::vector<tok::ParseEvent> ev;
  if (chunk == 0) chunk = text.size() + 1;
  for (size_t i = 0; i < text.size(); i += chunk) {
    auto e = parser->feed(std::string_view(text).substr(i, chunk));
    ev.insert(ev.end(), e.begin(), e.end());
  }
  auto e = parser->finish();
  ev.insert(ev.end(), e.begin(), e.end());
  ordered_json res = {{"reasoning", ""}, {"content", ""}, {"tool_calls", ordered_json::array()},
                      {"tool_errors", ordered_json::array()}};
  for (const auto& x : ev) {
    if (x.kind == tok::ParseEvent::Kind::kReasoning) res["reasoning"] = res["reasoning"].get<std::string>() + x.text;
    else if (x.kind == tok::ParseEvent::Kind::kContent) res["content"] = res["content"].get<std::string>() + x.text;
    else if (x.kind == tok::ParseEvent::Kind::kToolCallError)
      res["tool_errors"].push_back({{"type", x.error_type}, {"message", x.error}, {"text", x.text}});
    else res["tool_calls"].push_back({{"name", x.call.name}, {"arguments", x.call.arguments}});
  }
  return res;
}

ordered_json handle(tok::Family fam, const tok::ChatTemplate& tmpl, const ordered_json& req) {
  std::string op = req.value("op", "render");
  if (op == "parse") return parse_request(fam, req);
  tok::Conversation conv = parse_conversation(req);
  if (op == "continue") {
    auto c = tmpl.render_continuation(req.at("history").get<std::vector<tok::TokenId>>(), conv);
    return {{"keep", c.keep}, {"append", c.append}};
  }
  return {{"text", tmpl.render(conv)}, {"ids", tmpl.render_tokens(conv)}};
}

}  // namespace

int cmd_chat_template(const Args& args) {
  std::string path, family;
  bool jsonl = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--tokenizer" && i + 1 < args.size()) path = args[++i];
    else if (args[i] == "--family" && i + 1 < args.size()) family = args[++i];
    else if (args[i] == "--jsonl") jsonl = true;
    else throw InputError("chat-template: unknown argument '" + args[i] + "'");
  }
  if (path.empty() || family.empty())
    throw InputError("usage: ds4server chat-template --family F --tokenizer PATH [--jsonl] < request.json");
  tok::Family fam = tok::family_from_name(family);
  auto tk = tok::Tokenizer::load(path);
  tok::ChatTemplate::configure_tokenizer(fam, tk);
  auto tmpl = tok::ChatTemplate::create(fam, tk);
  auto reply_text = [](const std::string& out) {
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);  // a test client may wait for each answer
  };
  auto reply = [&](const ordered_json& res) { reply_text(dump(res)); };
  if (!jsonl) {
    std::string in(std::istreambuf_iterator<char>(std::cin), {});
    reply(handle(fam, *tmpl, ordered_json::parse(in)));
    return 0;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    try {
      // Tokenizer requests ride the same process so a test session loads the vocabulary once.
      auto req = ordered_json::parse(line);
      std::string op = req.value("op", "render");
      reply(op == "encode" || op == "decode" ? tokenizer_request(tk, req, false) : handle(fam, *tmpl, req));
    } catch (const std::exception& e) {
      // One bad request must not end the batch: it answers with its error.
      reply({{"error", e.what()}});
    }
  }
  return 0;
}

}  // namespace ds4::cli
