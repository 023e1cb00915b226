#pragma once
// Parsers of one complete tool-call block per family (the text between the family's
// open and close markers). They return false on anything malformed; the caller then keeps
// the block as plain text. Arguments come out as a JSON object text.
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

namespace ds4::tok {

// Function name -> its arguments whose schema allows only strings. Qwen and GLM write every
// argument bare; a bare value is read as JSON when it parses as a non-string, except for
// these, which stay text ("42" for a string argument is the string "42").
using StringArgs = std::map<std::string, std::set<std::string>>;
StringArgs string_args_of(const std::vector<std::string>& tools);

bool parse_dsml_block(std::string_view body, std::vector<ToolCall>& out, const StringArgs* strings = nullptr);
bool parse_qwen_block(std::string_view body, std::vector<ToolCall>& out, const StringArgs* strings = nullptr);
bool parse_glm_block(std::string_view body, std::vector<ToolCall>& out, const StringArgs* strings = nullptr);

}  // namespace ds4::tok
