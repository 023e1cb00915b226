#pragma once
// Text side of one model for the engine: prompt rendering, plain-text encoding, streaming
// detokenization and output parsing. The production codec wraps src/tokenizer (tok_codec);
// tests plug in their own. The engine never looks inside a template or a tokenizer.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/token_constraint.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tool_grammar.h"

namespace ds4::engine {

// Token ids in, always-valid UTF-8 text out (multibyte characters held back until complete).
class TextStream {
 public:
  virtual ~TextStream() = default;
  virtual std::string push(int32_t id) = 0;
  virtual std::string finish() = 0;
};

class Codec {
 public:
  virtual ~Codec() = default;
  virtual std::string family() const = 0;  // tok::family_name(): "qwen35", "deepseek_v4", "glm5"
  // Whole prompt for a conversation (template markers as control tokens).
  virtual std::vector<int32_t> render(const tok::Conversation& conv) const = 0;
  // Incremental append onto tokens already in a cache (ChatTemplate::render_continuation).
  // Default: the longest common prefix with render(conv).
  virtual tok::Continuation continuation(const std::vector<int32_t>& history,
                                         const tok::Conversation& conv) const;
  // Plain text (no control tokens), for /v1/completions prompts and stop/count helpers.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::unique_ptr<TextStream> stream() const = 0;
  // thinking: generation starts inside a reasoning block.
  virtual std::unique_ptr<tok::OutputParser> parser(bool thinking) const = 0;
  // The same, told the request's tools: arguments whose schema allows only strings stay
  // text, and a tool call in another family's format is reported rather than kept as text.
  virtual std::unique_ptr<tok::OutputParser> parser(bool thinking, const std::vector<std::string>& tools) const {
    (void)tools;
    return parser(thinking);
  }
  // Constrained decoding for a tool choice that needs it (none / required / a function);
  // nullptr when the codec has no grammar (then the engine refuses such a choice). Throws
  // ds4::InputError for a choice the tools cannot satisfy (an unknown function name).
  virtual std::unique_ptr<TokenConstraint> tool_constraint(const tok::Conversation& conv,
                                                           const tok::ToolChoice& choice) const {
    (void)conv, (void)choice;
    return nullptr;
  }
  // True when the rendered prompt leaves the model inside a reasoning block.
  virtual bool starts_in_reasoning(const tok::Conversation& conv) const = 0;
  // The bytes one token stands for (control tokens: their text).
  virtual std::string token_bytes(int32_t id) const = 0;
  // Tokens that end an assistant turn (EOS, end-of-turn).
  virtual bool is_stop_token(int32_t id) const = 0;
};

// When `cached` spells exactly (byte for byte) a prefix of `full` that ends on one of full's
// token boundaries, returns the tokens of `full` after that boundary; else nullopt (also when
// nothing would be left to feed). Lets generated tokens that are not the canonical encoding
// of the text a client sends back keep their cached state.
std::optional<std::vector<int32_t>> byte_continuation(const Codec& codec, const std::vector<int32_t>& cached,
                                                      const std::vector<int32_t>& full);

}  // namespace ds4::engine
