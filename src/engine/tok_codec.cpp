#include "engine/tok_codec.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace ds4::engine {
namespace {
class Stream : public TextStream {
 public:
  explicit Stream(const tok::Tokenizer& t) : dec_(t, false) {}
  std::string push(int32_t id) override { return dec_.push(id); }
  std::string finish() override { return dec_.finish(); }

 private:
  tok::StreamDecoder dec_;
};
}  // namespace

tok::Family template_family(const std::string& f) {
  if (f.rfind("qwen", 0) == 0) return tok::Family::kQwen35;
  if (f.rfind("deepseek", 0) == 0) return tok::Family::kDeepSeekV4;
  if (f.rfind("glm", 0) == 0) return tok::Family::kGlm5;
  throw InputError("no chat template for model family '" + f + "'");
}

std::unique_ptr<TokCodec> TokCodec::open(const std::string& model_path, const std::string& model_family) {
  namespace fs = std::filesystem;
  fs::path p(model_path);
  fs::path file = fs::is_directory(p) ? p / "tokenizer.json" : p.parent_path() / "tokenizer.json";
  if (!fs::exists(file)) throw InputError("tokenizer.json not found: " + file.string());
  auto t = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(file.string()));
  return std::make_unique<TokCodec>(template_family(model_family), std::move(t));
}

TokCodec::TokCodec(tok::Family family, std::unique_ptr<tok::Tokenizer> t)
    : family_(family), tok_(std::move(t)), tpl_(tok::ChatTemplate::create(family, *tok_)) {}

std::vector<int32_t> TokCodec::render(const tok::Conversation& conv) const { return tpl_->render_tokens(conv); }

tok::Continuation TokCodec::continuation(const std::vector<int32_t>& history, const tok::Conversation& conv) const {
  return tpl_->render_continuation(history, conv);
}

std::vector<int32_t> TokCodec::encode(std::string_view text) const { return tok_->encode(text, false); }

std::unique_ptr<TextStream> TokCodec::stream() const { return std::make_unique<Stream>(*tok_); }

std::unique_ptr<tok::OutputParser> TokCodec::parser(bool thinking) const {
  return tok::OutputParser::create(family_, thinking);
}

std::unique_ptr<tok::OutputParser> TokCodec::parser(bool thinking, const std::vector<std::string>& tools) const {
  return tok::OutputParser::create(family_, thinking, tools);
}

std::unique_ptr<TokenConstraint> TokCodec::tool_constraint(const tok::Conversation& conv,
                                                           const tok::ToolChoice& choice) const {
  if (!choice.constrains()) return nullptr;
  std::call_once(table_once_, [this] {
    TokenSource src;
    src.vocab_size = tok_->vocab_size();
    src.bytes = [this](int32_t id) { return tok_->token_to_piece(id); };
    src.is_control = [this](int32_t id) { return tok_->is_added(id); };
    src.is_stop = [this](int32_t id) { return is_stop_token(id); };
    table_ = make_token_table(src);
  });
  auto grammar = tok::ToolGrammar::build(family_, conv.tools, choice, starts_in_reasoning(conv), table_->vocab);
  return make_grammar_constraint(std::move(grammar), table_);
}

bool TokCodec::starts_in_reasoning(const tok::Conversation& conv) const {
  // All three families open reasoning with <think>; the prompt starts in reasoning when its
  // last <think> is not closed.
  if (!conv.add_generation_prompt) return false;
  const std::string text = tpl_->render(conv);
  const size_t open = text.rfind("<think>");
  if (open == std::string::npos) return false;
  const size_t close = text.rfind("</think>");
  return close == std::string::npos || close < open;
}

bool TokCodec::is_stop_token(int32_t id) const {
  const auto& s = tpl_->stop_ids();
  return std::find(s.begin(), s.end(), id) != s.end() || tok_->is_eos(id);
}

}  // namespace ds4::engine
