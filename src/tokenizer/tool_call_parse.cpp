#include "tokenizer/tool_call_parse.h"

#include <nlohmann/json.hpp>

#include "core/json_depth.h"

#include "tokenizer/json_schema.h"
#include "tokenizer/template_util.h"

namespace ds4::tok {

namespace {

using ojson = nlohmann::ordered_json;

// Text between `open` and `close` starting at pos; advances pos past close.
bool take(std::string_view s, size_t& pos, std::string_view open, std::string_view close, std::string_view& out) {
  size_t a = s.find(open, pos);
  if (a == std::string_view::npos) return false;
  a += open.size();
  size_t b = s.find(close, a);
  if (b == std::string_view::npos) return false;
  out = s.substr(a, b - a);
  pos = b + close.size();
  return true;
}

bool only_ws(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// A value written without a type tag: JSON numbers, booleans, null, arrays and objects
// are taken as JSON, anything else (including quoted text) as a string.
ojson loose_value(std::string_view v) {
  std::string t = py_strip(v);
  if (!t.empty() && t[0] != '"' && !json_nests_deeper(t)) {  // deeper: kept as text
    try {
      ojson j = ojson::parse(t);
      if (!j.is_string()) return j;
    } catch (const nlohmann::json::exception&) {
    }
  }
  return ojson(std::string(v));
}

std::string unescape_attr(std::string s) {
  s = replace_all(s, "&quot;", "\"");
  s = replace_all(s, "&lt;", "<");
  s = replace_all(s, "&gt;", ">");
  return replace_all(s, "&amp;", "&");
}

bool is_string_arg(const StringArgs* s, const std::string& fn, const std::string& key) {
  if (!s) return false;
  auto it = s->find(fn);
  return it != s->end() && it->second.count(key) > 0;
}

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace

StringArgs string_args_of(const std::vector<std::string>& tools) {
  StringArgs out;
  for (const auto& t : tools) {
    nlohmann::json j = nlohmann::json::parse(t, nullptr, false);
    if (!j.is_object()) continue;
    const nlohmann::json& fn = j.contains("function") && j["function"].is_object() ? j["function"] : j;
    if (!fn.contains("name") || !fn["name"].is_string() || !fn.contains("parameters")) continue;
    for (auto& p : string_properties(fn["parameters"])) out[fn["name"].get<std::string>()].insert(std::move(p));
  }
  return out;
}

bool parse_dsml_block(std::string_view body, std::vector<ToolCall>& out, const StringArgs*) {
  constexpr std::string_view kInvoke = "<｜DSML｜invoke name=\"", kInvokeEnd = "</｜DSML｜invoke>";
  constexpr std::string_view kParam = "<｜DSML｜parameter name=\"", kParamEnd = "</｜DSML｜parameter>";
  size_t pos = 0;
  std::vector<ToolCall> calls;
  while (true) {
    size_t a = body.find(kInvoke, pos);
    if (a == std::string_view::npos) break;
    if (!only_ws(body.substr(pos, a - pos))) return false;
    size_t q = body.find("\">", a + kInvoke.size());
    size_t end = body.find(kInvokeEnd, a);
    if (q == std::string_view::npos || end == std::string_view::npos || q > end) return false;
    ToolCall c;
    c.name = unescape_attr(std::string(body.substr(a + kInvoke.size(), q - a - kInvoke.size())));
    std::string_view inner = body.substr(q + 2, end - q - 2);
    ojson args = ojson::object();
    size_t p = 0;
    while (true) {
      size_t s = inner.find(kParam, p);
      if (s == std::string_view::npos) {
        if (!only_ws(inner.substr(p))) return false;
        break;
      }
      if (!only_ws(inner.substr(p, s - p))) return false;
      size_t nq = inner.find('"', s + kParam.size());
      size_t gt = inner.find("\">", nq == std::string_view::npos ? s : nq + 1);
      size_t e = inner.find(kParamEnd, s);
      if (nq == std::string_view::npos || gt == std::string_view::npos || e == std::string_view::npos || gt > e)
        return false;
      std::string key = unescape_attr(std::string(inner.substr(s + kParam.size(), nq - s - kParam.size())));
      std::string_view attrs = inner.substr(nq + 1, gt - nq);  //  string="true"
      std::string value(inner.substr(gt + 2, e - gt - 2));
      if (attrs.find("string=\"false\"") != std::string_view::npos) {
        if (json_nests_deeper(value)) return false;  // the model's text: never rendered recursively that deep
        try {
          args[key] = ojson::parse(replace_all(value, "\\u003c/｜DSML｜parameter>", "</｜DSML｜parameter>"));
        } catch (const nlohmann::json::exception&) {
          return false;
        }
      } else {
        args[key] = replace_all(value, "&lt;/｜DSML｜parameter>", "</｜DSML｜parameter>");
      }
      p = e + kParamEnd.size();
    }
    c.arguments = dump(args);
    calls.push_back(std::move(c));
    pos = end + kInvokeEnd.size();
  }
  if (calls.empty() || !only_ws(body.substr(pos))) return false;
  out.insert(out.end(), calls.begin(), calls.end());
  return true;
}

bool parse_qwen_block(std::string_view body, std::vector<ToolCall>& out, const StringArgs* strings) {
  size_t pos = 0;
  std::string_view fn;
  size_t f = body.find("<function=");
  if (f == std::string_view::npos || !only_ws(body.substr(0, f))) return false;
  size_t gt = body.find('>', f);
  size_t fend = body.find("</function>", f);
  if (gt == std::string_view::npos || fend == std::string_view::npos || gt > fend) return false;
  if (!only_ws(body.substr(fend + 11))) return false;
  ToolCall c;
  c.name = py_strip(body.substr(f + 10, gt - f - 10));
  if (c.name.empty()) return false;
  std::string_view inner = body.substr(gt + 1, fend - gt - 1);
  ojson args = ojson::object();
  while (true) {
    size_t s = inner.find("<parameter=", pos);
    if (s == std::string_view::npos) {
      if (!only_ws(inner.substr(pos))) return false;
      break;
    }
    size_t kg = inner.find('>', s);
    size_t e = inner.find("</parameter>", s);
    if (kg == std::string_view::npos || e == std::string_view::npos || kg > e) return false;
    std::string key = py_strip(inner.substr(s + 11, kg - s - 11));
    std::string_view v = inner.substr(kg + 1, e - kg - 1);
    // The template writes "\n" + value + "\n".
    if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
    if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
    args[key] = is_string_arg(strings, c.name, key) ? ojson(std::string(v)) : loose_value(v);
    pos = e + 12;
  }
  (void)fn;
  c.arguments = dump(args);
  out.push_back(std::move(c));
  return true;
}

bool parse_glm_block(std::string_view body, std::vector<ToolCall>& out, const StringArgs* strings) {
  size_t k = body.find("<arg_key>");
  ToolCall c;
  c.name = py_strip(body.substr(0, k));
  if (c.name.empty() || c.name.find('<') != std::string::npos) return false;
  ojson args = ojson::object();
  size_t pos = k == std::string_view::npos ? body.size() : k;
  while (pos < body.size()) {
    std::string_view key, val;
    size_t p = pos;
    if (!take(body, p, "<arg_key>", "</arg_key>", key)) return false;
    size_t q = p;
    if (!take(body, q, "<arg_value>", "</arg_value>", val)) return false;
    if (!only_ws(body.substr(pos, body.find("<arg_key>", pos) - pos))) return false;
    if (!only_ws(body.substr(p, body.find("<arg_value>", p) - p))) return false;
    const std::string k = py_strip(key);
    args[k] = is_string_arg(strings, c.name, k) ? ojson(std::string(val)) : loose_value(val);
    pos = q;
    size_t next = body.find("<arg_key>", pos);
    if (next == std::string_view::npos) {
      if (!only_ws(body.substr(pos))) return false;
      break;
    }
    pos = next;
  }
  c.arguments = dump(args);
  out.push_back(std::move(c));
  return true;
}

}  // namespace ds4::tok
