#pragma once
// How deep a JSON text nests, counted on the bytes ('[' and '{' outside strings) before it is
// parsed. nlohmann's parser is iterative and takes any depth, but copying, dumping or rendering
// the parsed value recurses once per level: a 6 KB request of 3,000 nested arrays in a tool
// schema overflowed the server's stack. Every JSON text that comes from a client (request
// bodies, tool-call arguments sent as strings) or from the model (tool-call output) is checked
// against kMaxJsonDepth first; deeper text is refused (client) or kept as plain text (model).
#include <string_view>

namespace ds4 {

inline constexpr int kMaxJsonDepth = 128;

// True when `text` opens more than `limit` arrays / objects at once. Strings (with their
// escapes) are skipped; malformed text is only counted, never rejected here.
inline bool json_nests_deeper(std::string_view text, int limit = kMaxJsonDepth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace ds4
