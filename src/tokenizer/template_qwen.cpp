// Qwen3.5+ ChatML template in the Qwen3.8 Flash Next form, rendered the way MTPLX calls it
// (apply_chat_template with enable_thinking, preserve_thinking=True, reasoning_effort):
// an effort instruction leads the system turn, every assistant turn keeps its <think>
// block, tool calls are <tool_call><function=..><parameter=..> XML, tool results are user
// turns of <tool_response> blocks.
#include "core/error.h"
#include "tokenizer/template_families.h"
#include "tokenizer/template_util.h"

namespace ds4::tok {

namespace {

constexpr const char* kXhigh =
    "Reasoning effort is set to xhigh. Please think carefully through the task, validate key assumptions, "
    "consider plausible alternatives, and prioritize correctness, consistency, and clarity in the final answer.";
constexpr const char* kLow =
    "Reasoning effort is set to low. Keep your thinking brief and focused, moving directly to the conclusion "
    "without unnecessary elaboration.";
constexpr const char* kToolsIntro = "# Tools\n\nYou have access to the following functions:\n\n<tools>";
constexpr const char* kToolsRules =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested "
    "within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the function call, "
    "but NOT after\n"
    "- If there is no function call available, answer the question like normal with your current knowledge and "
    "do not tell the user about function calls\n</IMPORTANT>";

const char* effort_text(Thinking t) {
  switch (t) {
    case Thinking::kOff: return "";
    case Thinking::kLow: return kLow;
    case Thinking::kMedium: return "";  // medium is the trained baseline: no instruction
    default: return kXhigh;
  }
}

void tool_call(TemplateOut& o, const ToolCall& c, bool first, bool after_content) {
  if (first)
    o.t(after_content ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
  else
    o.t("\n<tool_call>\n<function=");
  o.u(c.name);
  o.t(">\n");
  if (!py_strip(c.arguments).empty()) {
    auto args = parse_object(c.arguments, "tool call '" + c.name + "' arguments");
    for (auto it = args.begin(); it != args.end(); ++it) {
      o.t("<parameter=");
      o.u(it.key());
      o.t(">\n");
      o.u(it.value().is_string() ? it.value().get<std::string>() : py_json(it.value()));
      o.t("\n</parameter>\n");
    }
  }
  o.t("</function>\n</tool_call>");
}

class QwenTemplate : public ChatTemplate {
 public:
  explicit QwenTemplate(const Tokenizer& tok) : ChatTemplate(Family::kQwen35, tok) {
    stop_ids_ = stop_ids_of(tok, {"<|im_end|>", "<|endoftext|>"});
    stop_ids_of(tok, {"<|im_start|>", "<think>", "</think>", "<tool_call>", "</tool_call>"});
  }

 protected:
  Rendered render_full(const Conversation& conv) const override;
  void system_turn(TemplateOut& o, const Conversation& conv) const;
};

void QwenTemplate::system_turn(TemplateOut& o, const Conversation& conv) const {
  const auto& msgs = conv.messages;
  const std::string instr = effort_text(conv.thinking);
  const bool has_system = !msgs.empty() && msgs[0].role == "system";
  const std::string sys = has_system ? py_strip(msgs[0].content) : std::string();
  if (!conv.tools.empty()) {
    o.t("<|im_start|>system\n");
    if (!instr.empty()) o.t(instr + "\n\n");
    o.t(kToolsIntro);
    for (const auto& t : conv.tools) {
      o.t("\n");
      o.u(py_json(parse_object(t, "tool definition")));
    }
    o.t("\n</tools>");
    o.t(kToolsRules);
    if (!sys.empty()) {
      o.t("\n\n");
      o.u(sys);
    }
    o.t("<|im_end|>\n");
  } else if (has_system) {
    o.t("<|im_start|>system\n");
    if (!instr.empty()) o.t(instr + "\n\n");
    o.u(sys);
    o.t("<|im_end|>\n");
  } else if (!instr.empty()) {
    o.t("<|im_start|>system\n" + instr + "<|im_end|>\n");
  }
}

ChatTemplate::Rendered QwenTemplate::render_full(const Conversation& conv) const {
  const auto& msgs = conv.messages;
  if (msgs.empty()) throw InputError("qwen35 template: no messages");
  TemplateOut o;
  system_turn(o, conv);
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Message& m = msgs[i];
    const std::string content = py_strip(m.content);
    if (m.role == "system") {
      if (i != 0) throw InputError("qwen35 template: a system message must be the first message");
    } else if (m.role == "user") {
      o.t("<|im_start|>user\n");
      o.u(content);
      o.t("<|im_end|>\n");
    } else if (m.role == "assistant") {
      // preserve_thinking=True (MTPLX): every turn keeps its reasoning block, so a cached
      // history never has to be re-rendered without it.
      o.t("<|im_start|>assistant\n<think>\n");
      o.u(py_strip(m.reasoning));
      o.t("\n</think>\n\n");
      o.u(content);
      for (size_t k = 0; k < m.tool_calls.size(); ++k)
        tool_call(o, m.tool_calls[k], k == 0, !content.empty());
      o.t("<|im_end|>\n");
    } else if (m.role == "tool") {
      if (i > 0 && msgs[i - 1].role != "tool") o.t("<|im_start|>user");
      o.t("\n<tool_response>\n");
      o.u(content);
      o.t("\n</tool_response>");
      if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") o.t("<|im_end|>\n");
    } else {
      throw InputError("qwen35 template: unknown message role '" + m.role + "'");
    }
  }
  if (conv.add_generation_prompt) {
    o.t("<|im_start|>assistant\n");
    o.t(conv.thinking == Thinking::kOff ? "<think>\n\n</think>\n\n" : "<think>\n");
  }
  return {std::move(o.text), std::move(o.plain)};
}

}  // namespace

std::unique_ptr<ChatTemplate> make_qwen_template(const Tokenizer& tok) {
  return std::make_unique<QwenTemplate>(tok);
}

}  // namespace ds4::tok
