#pragma once
// The production codec: src/tokenizer's Tokenizer + ChatTemplate + OutputParser for a
// model family, loaded from the tokenizer.json next to the model.
#include <memory>
#include <mutex>
#include <string>

#include "engine/codec.h"
#include "tokenizer/tokenizer.h"

namespace ds4::engine {

// Model family (ModelInfo::family: "qwen_next", "deepseek_v4", "glm5") -> template family.
tok::Family template_family(const std::string& model_family);

class TokCodec : public Codec {
 public:
  // Finds tokenizer.json in `model_path` (a directory) or beside it (a file).
  static std::unique_ptr<TokCodec> open(const std::string& model_path, const std::string& model_family);
  TokCodec(tok::Family family, std::unique_ptr<tok::Tokenizer> tok);

  std::string family() const override { return tok::family_name(family_); }
  std::vector<int32_t> render(const tok::Conversation& conv) const override;
  tok::Continuation continuation(const std::vector<int32_t>& history, const tok::Conversation& conv) const override;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::unique_ptr<TextStream> stream() const override;
  std::unique_ptr<tok::OutputParser> parser(bool thinking) const override;
  std::unique_ptr<tok::OutputParser> parser(bool thinking, const std::vector<std::string>& tools) const override;
  std::unique_ptr<TokenConstraint> tool_constraint(const tok::Conversation& conv,
                                                   const tok::ToolChoice& choice) const override;
  bool starts_in_reasoning(const tok::Conversation& conv) const override;
  bool is_stop_token(int32_t id) const override;
  std::string token_bytes(int32_t id) const override { return tok_->token_to_piece(id); }
  int vocab_size() const { return tok_->vocab_size(); }  // the tokenizer's largest id + 1

 private:
  tok::Family family_;
  std::unique_ptr<tok::Tokenizer> tok_;  // heap: the template keeps a pointer to it
  std::unique_ptr<tok::ChatTemplate> tpl_;
  // The vocabulary as the tool grammar sees it: made on the first constrained request.
  mutable std::once_flag table_once_;
  mutable std::shared_ptr<const TokenTable> table_;
};

}  // namespace ds4::engine
