#pragma once
// Parsers of one complete tool-call block per family (the text between the family's
// open and close markers). They return false on anything malformed; the caller then keeps
// the block as plain text. Arguments come out as a JSON object text.
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

namespace ds4::tok {

bool parse_dsml_block(std::string_view body, std::vector<ToolCall>& out);  // DeepSeek V4
bool parse_qwen_block(std::string_view body, std::vector<ToolCall>& out);  // Qwen3.5+
bool parse_glm_block(std::string_view body, std::vector<ToolCall>& out);   // GLM 5

}  // namespace ds4::tok
