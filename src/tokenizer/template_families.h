#pragma once
// Factories of the per-family templates (one file each) and shared bits.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace ds4::tok {

std::unique_ptr<ChatTemplate> make_deepseek_template(const Tokenizer& tok);
std::unique_ptr<ChatTemplate> make_qwen_template(const Tokenizer& tok);
std::unique_ptr<ChatTemplate> make_glm_template(const Tokenizer& tok);
// Looks up control tokens by string; throws InputError naming the missing one.
std::vector<TokenId> stop_ids_of(const Tokenizer& tok, const std::vector<std::string>& names);

}  // namespace ds4::tok
