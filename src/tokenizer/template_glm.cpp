// GLM 5.x (5.3 Flash) template: [gMASK]<sop>, a "Reasoning Effort" system line (default
// Max), optional tools system turn, <|user|> / <|assistant|><think>..</think> /
// <|observation|><tool_response> turns without separators; tool calls as
// <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>. clear_thinking
// defaults to false, so past reasoning stays in the prompt.
#include "core/error.h"
#include "tokenizer/template_families.h"
#include "tokenizer/template_util.h"

namespace ds4::tok {

namespace {

constexpr const char* kToolsIntro =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
constexpr const char* kToolsRules =
    "</tools>\n\nFor each function call, output the function name and arguments within the following XML "
    "format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
    "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>";

const char* effort_name(Thinking t) {
  switch (t) {
    case Thinking::kLow: return "Low";
    case Thinking::kHigh: return "High";
    default: return "Max";  // the template's default, also for off: it has no "none" level
  }
}

// tool['function'] (or the tool itself) minus defer_loading/strict, as the template's
// tool_to_json macro prints it; deferred tools are not listed.
bool tool_json(const std::string& text, std::string& out) {
  auto tool = parse_object(text, "tool definition");
  if (tool.contains("function") && tool["function"].is_object()) tool = tool["function"];
  if (tool.contains("defer_loading") && tool["defer_loading"].is_boolean() && tool["defer_loading"].get<bool>())
    return false;
  tool.erase("defer_loading");
  tool.erase("strict");
  out = py_json(tool);
  return true;
}

class GlmTemplate : public ChatTemplate {
 public:
  explicit GlmTemplate(const Tokenizer& tok) : ChatTemplate(Family::kGlm5, tok) {
    stop_ids_ = stop_ids_of(tok, {"<|endoftext|>", "<|user|>", "<|observation|>"});
    stop_ids_of(tok, {"[gMASK]", "<sop>", "<|system|>", "<|assistant|>", "<think>", "</think>"});
  }

 protected:
  Rendered render_full(const Conversation& conv) const override;
};

void assistant_turn(TemplateOut& o, const Message& m) {
  o.t("<|assistant|>");
  std::string content = m.content, reasoning = m.reasoning;
  bool has_reasoning = !m.reasoning.empty();
  if (!has_reasoning && content.find("</think>") != std::string::npos) {
    // Reasoning inlined in content (clients that drop reasoning_content).
    std::string before = content.substr(0, content.find("</think>"));
    size_t open = before.rfind("<think>");
    reasoning = open == std::string::npos ? before : before.substr(open + 7);
    content = content.substr(content.rfind("</think>") + 8);
    has_reasoning = true;
  }
  o.t("<think>");
  if (has_reasoning) o.u(reasoning);
  o.t("</think>");
  o.u(py_strip(content));
  for (const auto& c : m.tool_calls) {
    o.t("<tool_call>");
    o.u(c.name);
    if (!py_strip(c.arguments).empty()) {
      auto args = parse_object(c.arguments, "tool call '" + c.name + "' arguments");
      for (auto it = args.begin(); it != args.end(); ++it) {
        o.t("<arg_key>");
        o.u(it.key());
        o.t("</arg_key><arg_value>");
        o.u(it.value().is_string() ? it.value().get<std::string>() : py_json(it.value()));
        o.t("</arg_value>");
      }
    }
    o.t("</tool_call>");
  }
}

ChatTemplate::Rendered GlmTemplate::render_full(const Conversation& conv) const {
  TemplateOut o;
  o.t("[gMASK]<sop>");
  o.t(std::string("<|system|>Reasoning Effort: ") + effort_name(conv.thinking));
  if (!conv.tools.empty()) {
    o.t(kToolsIntro);
    std::string js;
    for (const auto& t : conv.tools) {
      if (!tool_json(t, js)) continue;
      o.u(js);
      o.t("\n");
    }
    o.t(kToolsRules);
  }
  for (const auto& m : conv.messages) {
    if (m.role == "user") {
      o.t("<|user|>");
      o.u(m.content);
    } else if (m.role == "assistant") {
      assistant_turn(o, m);
    } else if (m.role == "tool" || m.role == "observation") {
      o.t("<|observation|><tool_response>");
      o.u(m.content);
      o.t("</tool_response>");
    } else if (m.role == "system") {
      o.t("<|system|>");
      o.u(m.content);
    } else {
      throw InputError("glm5 template: unknown message role '" + m.role + "'");
    }
  }
  if (conv.add_generation_prompt)
    o.t(conv.thinking == Thinking::kOff ? "<|assistant|><think></think>" : "<|assistant|><think>");
  return {std::move(o.text), std::move(o.plain)};
}

}  // namespace

std::unique_ptr<ChatTemplate> make_glm_template(const Tokenizer& tok) {
  return std::make_unique<GlmTemplate>(tok);
}

}  // namespace ds4::tok
