// Family-independent parts of ChatTemplate: names, factory, encoding of a rendered prompt
// and incremental append.
#include "tokenizer/chat_template.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/template_families.h"

namespace ds4::tok {

Family family_from_name(std::string_view n) {
  if (n == "deepseek_v4" || n == "deepseek" || n == "dsv4") return Family::kDeepSeekV4;
  if (n == "qwen35" || n == "qwen" || n == "qwen38") return Family::kQwen35;
  if (n == "glm5" || n == "glm") return Family::kGlm5;
  throw InputError("unknown model family '" + std::string(n) + "' (deepseek_v4, qwen35, glm5)");
}

const char* family_name(Family f) {
  switch (f) {
    case Family::kDeepSeekV4: return "deepseek_v4";
    case Family::kQwen35: return "qwen35";
    case Family::kGlm5: return "glm5";
  }
  return "?";
}

Thinking thinking_from_name(std::string_view n) {
  if (n == "off" || n == "none" || n == "false") return Thinking::kOff;
  if (n == "on" || n == "true") return Thinking::kOn;
  if (n == "max") return Thinking::kMax;
  if (n == "low") return Thinking::kLow;
  if (n == "medium") return Thinking::kMedium;
  if (n == "high" || n == "xhigh") return Thinking::kHigh;
  throw InputError("unknown thinking level '" + std::string(n) + "' (off on low medium high max)");
}

std::unique_ptr<ChatTemplate> ChatTemplate::create(Family family, const Tokenizer& tok) {
  switch (family) {
    case Family::kDeepSeekV4: return make_deepseek_template(tok);
    case Family::kQwen35: return make_qwen_template(tok);
    case Family::kGlm5: return make_glm_template(tok);
  }
  throw InputError("unknown family");
}

void ChatTemplate::configure_tokenizer(Family family, Tokenizer& tok) {
  switch (family) {
    case Family::kDeepSeekV4:
      tok.set_bos("<｜begin▁of▁sentence｜>");
      tok.set_eos({"<｜end▁of▁sentence｜>"});
      break;
    case Family::kQwen35:
      tok.set_eos({"<|im_end|>", "<|endoftext|>"});
      break;
    case Family::kGlm5:
      // GLM ends a turn by starting the next one: <|user|> or <|observation|> are EOS.
      tok.set_eos({"<|endoftext|>", "<|user|>", "<|observation|>"});
      break;
  }
}

std::vector<TokenId> ChatTemplate::render_tokens(const Conversation& conv) const {
  Rendered r = render_full(conv);
  return tok_->encode_template(r.text, r.plain);
}

Continuation ChatTemplate::render_continuation(const std::vector<TokenId>& history,
                                               const Conversation& conv) const {
  // The full re-render is the truth; the cache keeps its longest common prefix. For a
  // history that is exactly what this template renders plus the generated tokens of a
  // finished turn this is the whole history (the pure-append fast path); where the
  // template rewrites the past (DeepSeek drops old reasoning) or generation diverged from
  // the canonical encoding, `keep` says where re-prefill starts: never a silent mismatch.
  std::vector<TokenId> full = render_tokens(conv);
  size_t n = std::min(full.size(), history.size());
  size_t k = 0;
  while (k < n && full[k] == history[k]) ++k;
  Continuation c;
  c.keep = k;
  c.append.assign(full.begin() + static_cast<long>(k), full.end());
  return c;
}

Continuation ChatTemplate::append_user_turn(const std::vector<TokenId>& history, Conversation conv,
                                            const ParsedOutput& answer, const std::string& user_text) const {
  Message a;
  a.role = "assistant";
  a.content = answer.content;
  a.reasoning = answer.reasoning;
  a.tool_calls = answer.tool_calls;
  conv.messages.push_back(std::move(a));
  Message u;
  u.role = "user";
  u.content = user_text;
  conv.messages.push_back(std::move(u));
  conv.add_generation_prompt = true;
  return render_continuation(history, conv);
}

std::vector<TokenId> stop_ids_of(const Tokenizer& tok, const std::vector<std::string>& names) {
  std::vector<TokenId> ids;
  for (const auto& s : names) {
    TokenId id = tok.str_to_token(s);
    if (id < 0) throw InputError("tokenizer lacks the chat control token '" + s + "'");
    ids.push_back(id);
  }
  return ids;
}

}  // namespace ds4::tok
