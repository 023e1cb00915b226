#pragma once
// Helpers shared by the per-family chat templates: an output buffer that records which
// bytes are plain (user/model) text, Python-compatible string/JSON formatting (the
// references are Jinja/Python), and a raw JSON scanner (ds4 keeps client JSON bytes as is).
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds4::tok {

struct TemplateOut {
  std::string text;
  std::vector<std::pair<size_t, size_t>> plain;
  // Template text: control-token strings in it become control tokens.
  void t(std::string_view s) { text += s; }
  // Conversation text: always plain (invalid UTF-8 is replaced by U+FFFD first).
  void u(std::string_view s);
};

// Python str.strip() / lstrip / rstrip with Python's whitespace set (Jinja's |trim too).
std::string py_strip(std::string_view s);
// Python json.dumps(v, ensure_ascii=False) with default separators (", ", ": ").
std::string py_json(const nlohmann::ordered_json& v);
// Parses a JSON object given as text keeping key order; throws InputError naming `what`.
nlohmann::ordered_json parse_object(std::string_view text, const std::string& what);

// A raw JSON scanner: key -> raw value text, for objects only, preserving bytes.
struct RawMember {
  std::string key;     // unescaped
  std::string raw;     // exact bytes of the value
  bool is_string;
  std::string str;     // unescaped value when is_string
};
// Returns false if text is not a JSON object.
bool raw_object_members(std::string_view text, std::vector<RawMember>& out);
// Removes insignificant whitespace from a raw JSON value (keeps number spellings).
std::string json_minify(std::string_view raw);

std::string replace_all(std::string s, std::string_view from, std::string_view to);
// & < > " as XML entities (DSML names are attribute values).
std::string xml_attr_escape(std::string_view s);

}  // namespace ds4::tok
