// DeepSeek V4 prompt, as antirez/ds4 renders it (ds4_server.c render_chat_prompt_text):
// BOS, optional Think-Max prefix, system text (tool schemas first), then <｜User｜> /
// <｜Assistant｜> turns with <think> handling and DSML tool calls, each assistant turn closed
// by EOS. Differences from DeepSeek's own encoder are listed in docs/reference-differences.md.
#include "core/error.h"
#include "tokenizer/template_families.h"
#include "tokenizer/template_util.h"

namespace ds4::tok {

namespace {

constexpr const char* kBos = "<｜begin▁of▁sentence｜>";
constexpr const char* kEos = "<｜end▁of▁sentence｜>";
constexpr const char* kUser = "<｜User｜>";
constexpr const char* kAssistant = "<｜Assistant｜>";
constexpr const char* kParamEnd = "</｜DSML｜parameter>";

constexpr const char* kMaxPrefix =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

constexpr const char* kToolsHeader =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user question. "
    "You can invoke tools by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as raw text and set `string=\"true\"`. "
    "Preserve characters such as `>`, `&`, and `&&` exactly; never replace normal string characters with XML or "
    "HTML entity escapes. "
    "Only if a string value itself contains the exact closing parameter tag `</｜DSML｜parameter>`, write that tag "
    "as `&lt;/｜DSML｜parameter>` inside the value. "
    "For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr const char* kToolsFooter =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls. "
    "Use the exact parameter names from the schemas.";

// Only a literal closing tag inside a value needs protection (its '<' becomes &lt; in
// text, \u003c in JSON); everything else stays byte-exact.
std::string param_text(const std::string& s) { return replace_all(s, kParamEnd, std::string("&lt;") + (kParamEnd + 1)); }
std::string param_json(const std::string& s) { return replace_all(s, kParamEnd, std::string("\\u003c") + (kParamEnd + 1)); }

bool is_system(const std::string& r) { return r == "system" || r == "developer"; }
bool is_tool(const std::string& r) { return r == "tool" || r == "function"; }

// One raw function schema per tool: OpenAI's {"type":"function","function":{..}} is
// unwrapped, a bare schema is kept; the client's bytes are kept as sent.
std::string tool_schemas(const std::vector<std::string>& tools) {
  std::string out;
  std::vector<RawMember> members;
  for (const auto& t : tools) {
    std::string schema = t;
    if (raw_object_members(t, members))
      for (const auto& m : members)
        if (m.key == "function") { schema = m.raw; break; }
    if (schema.empty()) continue;
    if (!out.empty()) out += '\n';
    out += schema;
  }
  return out;
}

void tool_calls(TemplateOut& o, const std::vector<ToolCall>& calls) {
  if (calls.empty()) return;
  o.t("\n\n<｜DSML｜tool_calls>\n");
  std::vector<RawMember> args;
  for (const auto& c : calls) {
    o.t("<｜DSML｜invoke name=\"");
    o.u(xml_attr_escape(c.name));
    o.t("\">\n");
    if (raw_object_members(c.arguments, args)) {
      for (const auto& a : args) {
        o.t("<｜DSML｜parameter name=\"");
        o.u(xml_attr_escape(a.key));
        o.t(a.is_string ? "\" string=\"true\">" : "\" string=\"false\">");
        o.u(a.is_string ? param_text(a.str) : param_json(json_minify(a.raw)));
        o.t("</｜DSML｜parameter>\n");
      }
    } else {
      o.t("<｜DSML｜parameter name=\"arguments\" string=\"true\">");
      o.u(param_text(c.arguments));
      o.t("</｜DSML｜parameter>\n");
    }
    o.t("</｜DSML｜invoke>\n");
  }
  o.t("</｜DSML｜tool_calls>");
}

class DeepSeekTemplate : public ChatTemplate {
 public:
  explicit DeepSeekTemplate(const Tokenizer& tok) : ChatTemplate(Family::kDeepSeekV4, tok) {
    stop_ids_ = stop_ids_of(tok, {kEos});
    stop_ids_of(tok, {kBos, kUser, kAssistant, "<think>", "</think>", "｜DSML｜"});
  }

 protected:
  Rendered render_full(const Conversation& conv) const override;
};

ChatTemplate::Rendered DeepSeekTemplate::render_full(const Conversation& conv) const {
  const auto& msgs = conv.messages;
  const bool think = conv.thinking != Thinking::kOff;
  bool tool_context = !conv.tools.empty();
  int last_user = -1;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& r = msgs[i].role;
    if (!is_system(r) && r != "user" && !is_tool(r) && r != "assistant")
      throw InputError("deepseek_v4 template: unknown message role '" + r + "'");
    if ((r == "assistant" && !msgs[i].tool_calls.empty()) || is_tool(r)) tool_context = true;
    if (r == "user" || is_tool(r)) last_user = static_cast<int>(i);
  }
  TemplateOut o;
  o.t(kBos);
  if (conv.thinking == Thinking::kMax) o.t(kMaxPrefix);
  bool system_nonempty = false;
  if (!conv.tools.empty()) {
    std::string schemas = tool_schemas(conv.tools);
    if (!schemas.empty()) {
      o.t(kToolsHeader);
      o.u(schemas);
      o.t(kToolsFooter);
      system_nonempty = true;
    }
  }
  for (const auto& m : msgs) {
    if (!is_system(m.role)) continue;
    if (system_nonempty) o.t("\n\n");
    o.u(m.content);
    system_nonempty = system_nonempty || !m.content.empty();
  }
  bool pending_assistant = false, pending_tool = false;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Message& m = msgs[i];
    if (is_system(m.role)) continue;
    if (m.role == "user") {
      o.t(kUser);
      o.u(m.content);
      pending_assistant = true;
      pending_tool = false;
    } else if (is_tool(m.role)) {
      if (!pending_tool) o.t(kUser);
      o.t("<tool_result>");
      o.u(replace_all(m.content, "</tool_result>", "&lt;/tool_result>"));
      o.t("</tool_result>");
      pending_assistant = pending_tool = true;
    } else {
      if (pending_assistant) {
        o.t(kAssistant);
        // Old reasoning is dropped after a later user turn, except in tool conversations
        // where the model needs its earlier plan (ds4's rule).
        if (think && (tool_context || static_cast<int>(i) > last_user)) {
          o.t("<think>");
          o.u(m.reasoning);
          o.t("</think>");
        } else {
          o.t("</think>");
        }
      }
      o.u(m.content);
      tool_calls(o, m.tool_calls);
      o.t(kEos);
      pending_assistant = pending_tool = false;
    }
  }
  if (pending_assistant && conv.add_generation_prompt) {
    o.t(kAssistant);
    o.t(think ? "<think>" : "</think>");
  }
  return {std::move(o.text), std::move(o.plain)};
}

}  // namespace

std::unique_ptr<ChatTemplate> make_deepseek_template(const Tokenizer& tok) {
  return std::make_unique<DeepSeekTemplate>(tok);
}

}  // namespace ds4::tok
