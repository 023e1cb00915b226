#pragma once
// Chat templates as native C++ (no template engine at run time), one per model family,
// byte-identical to each family's reference renderer (see docs/reference-differences.md):
//   DeepSeek V4  - DeepSeek's V4 prompt encoder as antirez/ds4 renders it (DSML tools)
//   Qwen 3.5+    - the Qwen3.5/3.6 chat_template as MTPLX renders it (Qwen3.8 Flash Next)
//   GLM 5        - GLM 5's chat_template
// plus the matching output parsers (reasoning / answer / tool calls), streaming-friendly.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ds4::tok {

enum class Family { kDeepSeekV4, kQwen35, kGlm5 };
// "deepseek_v4" / "qwen35" / "glm5" (also accepts "deepseek", "qwen", "glm"); throws
// ds4::InputError on anything else.
Family family_from_name(std::string_view name);
const char* family_name(Family f);

// kOff: non-thinking mode. kOn: thinking at the family's default effort. The effort levels
// map per family (DeepSeek V4: high / max prefix; Qwen3.8: low / medium / xhigh system
// line; GLM 5.3: Low / High / Max system line); a level a family lacks maps to its nearest:
//              kOn     kLow    kMedium  kHigh   kMax
//   DeepSeek   high    high    high     high    max
//   Qwen       xhigh   low     medium   xhigh   xhigh
//   GLM        Max     Low     Max      High    Max
enum class Thinking { kOff, kOn, kMax, kLow, kMedium, kHigh };
// "off" "on" "max" "low" "medium" "high" (also "none"/"false"/"true"/"xhigh").
Thinking thinking_from_name(std::string_view name);

struct ToolCall {
  std::string id;         // optional call id (OpenAI "id"); not rendered by every family
  std::string name;
  std::string arguments;  // a JSON object as text, e.g. {"city":"Paris"}
};

struct Message {
  std::string role;       // "system" | "user" | "assistant" | "tool"
  std::string content;
  std::string reasoning;  // assistant reasoning_content (may be empty)
  std::vector<ToolCall> tool_calls;  // assistant only
  std::string tool_call_id;          // tool only (which call this result answers)
  std::string name;                  // tool only: the function name (optional)
};

struct Conversation {
  std::vector<Message> messages;
  // Tool definitions, each a JSON object as text in OpenAI form:
  // {"type":"function","function":{"name":..,"description":..,"parameters":{..}}}
  std::vector<std::string> tools;
  Thinking thinking = Thinking::kOn;
  bool add_generation_prompt = true;
};

struct ParsedOutput;

// What render_continuation says: keep the first `keep` tokens of the cached history, then
// feed `append`. keep == history.size() on the fast path (pure append).
struct Continuation {
  size_t keep = 0;
  std::vector<TokenId> append;
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  // tok must outlive the template. Looks up the family's control tokens in tok (stop ids);
  // throws ds4::InputError if a required token is missing.
  static std::unique_ptr<ChatTemplate> create(Family family, const Tokenizer& tok);
  // Sets the family's BOS / EOS ids on a freshly loaded tokenizer.
  static void configure_tokenizer(Family family, Tokenizer& tok);

  Family family() const { return family_; }
  // The prompt text, byte-identical to the reference renderer. Throws ds4::InputError on a
  // conversation the family cannot express (unknown role, misplaced system message...).
  std::string render(const Conversation& conv) const { return render_full(conv).text; }
  // render() encoded with special tokens allowed (template markers become control tokens;
  // user text never does: message text is encoded as plain text).
  std::vector<TokenId> render_tokens(const Conversation& conv) const;

  // Incremental append. `history` = the tokens already in the cache (the previous prompt
  // plus the tokens actually generated, usually ending in an EOS/stop token); `conv` = the
  // whole conversation including the new messages. Returns the longest valid prefix of
  // history and the tokens to feed after it so that the result equals render_tokens(conv).
  Continuation render_continuation(const std::vector<TokenId>& history,
                                   const Conversation& conv) const;

  // The engine's chat loop in one call: `conv` is the conversation whose prompt produced
  // `history` (prompt + generated tokens, stop token included), `answer` the parsed
  // generation (parse_output of the generated text without the stop token). Appends the
  // assistant turn and the next user message, then calls render_continuation.
  Continuation append_user_turn(const std::vector<TokenId>& history, Conversation conv,
                                const ParsedOutput& answer, const std::string& user_text) const;

  // Tokens that end an assistant turn (the engine stops on them; they are not text).
  const std::vector<TokenId>& stop_ids() const { return stop_ids_; }

 protected:
  ChatTemplate(Family f, const Tokenizer& tok) : family_(f), tok_(&tok) {}
  // The rendered text plus the byte ranges that came from the conversation (user, tool,
  // model text): those are encoded as plain text, never as control tokens.
  struct Rendered {
    std::string text;
    std::vector<std::pair<size_t, size_t>> plain;
  };
  virtual Rendered render_full(const Conversation& conv) const = 0;

  Family family_;
  const Tokenizer* tok_;
  std::vector<TokenId> stop_ids_;
};

// ---- output parsing ----------------------------------------------------------------------

struct ParseEvent {
  // kToolCallError: a tool call that could not be taken; text = what the model wrote
  // (markers included), error_type "truncated" (the output ended inside the call),
  // "malformed" (the family's markers around a body its parser refuses) or "foreign_format"
  // (another family's tool-call markers; only looked for when the request has tools).
  enum class Kind { kReasoning, kContent, kToolCall, kToolCallError };
  Kind kind;
  std::string text;  // kReasoning / kContent: a text delta
  ToolCall call;     // kToolCall: one complete call (arguments = JSON object text)
  std::string error_type, error;  // kToolCallError
};

// Feed generated text in chunks of any size (even split inside a UTF-8 character or a
// marker); get reasoning/content deltas and complete tool calls. Never throws on model
// output: malformed or truncated tool calls come out as kToolCallError events.
class OutputParser {
 public:
  virtual ~OutputParser() = default;
  // thinking: the prompt ended inside a reasoning block (generation starts in reasoning).
  // tools: the request's tool definitions: arguments their schema types as strings stay
  // text (Qwen / GLM write every argument bare), and other families' call markers are
  // reported as errors (without tools they are just text).
  static std::unique_ptr<OutputParser> create(Family family, bool thinking,
                                              const std::vector<std::string>& tools = {});
  virtual std::vector<ParseEvent> feed(std::string_view chunk) = 0;
  virtual std::vector<ParseEvent> finish() = 0;
};

// Whole-text convenience: reasoning, content and tool calls of one assistant output.
struct ParsedOutput {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  std::vector<ParseEvent> tool_errors;  // kToolCallError events
};
ParsedOutput parse_output(Family family, bool thinking, std::string_view text,
                          const std::vector<std::string>& tools = {});

}  // namespace ds4::tok
