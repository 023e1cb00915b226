#include "tokenizer/template_util.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/json_depth.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ds4::tok {

void TemplateOut::u(std::string_view s) {
  if (s.empty()) return;
  std::string fixed;
  if (!utf8_is_valid(s)) {
    fixed = utf8_lossy(s);
    s = fixed;
  }
  size_t b = text.size();
  text += s;
  if (!plain.empty() && plain.back().second == b)
    plain.back().second = text.size();
  else
    plain.emplace_back(b, text.size());
}

namespace {
bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
}  // namespace

std::string py_strip(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t l = utf8_valid_len(s, b);
    if (!l || !py_space(utf8_decode(s.data() + b, l))) break;
    b += l;
  }
  while (e > b) {
    size_t k = e - 1;
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    size_t l = utf8_valid_len(s, k);
    if (!l || k + l != e || !py_space(utf8_decode(s.data() + k, l))) break;
    e = k;
  }
  return std::string(s.substr(b, e - b));
}

namespace {
void py_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// Python's float repr: shortest round-trip digits; fixed notation for 1e-4 <= |x| < 1e16
// (always with a fractional part), else d.ddde+XX.
void py_float(std::string& out, double v) {
  if (std::isnan(v)) { out += "NaN"; return; }
  if (std::isinf(v)) { out += v > 0 ? "Infinity" : "-Infinity"; return; }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. -1.2345e+02
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (neg) out += '-';
  if (exp >= -5 && exp < 16) {
    // Python switches to exponent form below 1e-4 (exp < -4).
    if (exp < -4) goto sci_form;
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return;
  }
sci_form:
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  std::snprintf(buf, sizeof buf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  out += buf;
}

void py_json_into(std::string& out, const nlohmann::ordered_json& v) {
  using T = nlohmann::ordered_json::value_t;
  switch (v.type()) {
    case T::null: out += "null"; break;
    case T::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case T::number_integer: out += std::to_string(v.get<int64_t>()); break;
    case T::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
    case T::number_float: py_float(out, v.get<double>()); break;
    case T::string: py_string(out, v.get_ref<const std::string&>()); break;
    case T::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        py_json_into(out, e);
      }
      out += ']';
      break;
    }
    case T::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        py_string(out, it.key());
        out += ": ";
        py_json_into(out, it.value());
      }
      out += '}';
      break;
    }
    default: out += "null";
  }
}
}  // namespace

std::string py_json(const nlohmann::ordered_json& v) {
  std::string out;
  py_json_into(out, v);
  return out;
}

nlohmann::ordered_json parse_object(std::string_view text, const std::string& what) {
  if (json_nests_deeper(text))
    throw InputError(what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(what + ": not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::exception&) {
    throw InputError(what + ": not valid JSON");
  }
  if (!j.is_object()) throw InputError(what + ": must be a JSON object, got: " + std::string(text.substr(0, 80)));
  return j;
}

namespace {
struct Scan {
  std::string_view s;
  size_t i = 0;
  void ws() { while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i; }
  bool string(std::string* out) {
    if (i >= s.size() || s[i] != '"') return false;
    ++i;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') { if (out) *out += c; continue; }
      if (i >= s.size()) return false;
      char e = s[i++];
      switch (e) {
        case 'n': if (out) *out += '\n'; break;
        case 't': if (out) *out += '\t'; break;
        case 'r': if (out) *out += '\r'; break;
        case 'b': if (out) *out += '\b'; break;
        case 'f': if (out) *out += '\f'; break;
        case 'u': {
          if (i + 4 > s.size()) return false;
          uint32_t cp = std::stoul(std::string(s.substr(i, 4)), nullptr, 16);
          i += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= s.size() && s[i] == '\\' && s[i + 1] == 'u') {
            uint32_t lo = std::stoul(std::string(s.substr(i + 2, 4)), nullptr, 16);
            if (lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              i += 6;
            }
          }
          if (out) utf8_append(*out, cp);
          break;
        }
        default: if (out) *out += e;
      }
    }
    if (i >= s.size()) return false;
    ++i;
    return true;
  }
  bool value() {
    ws();
    if (i >= s.size()) return false;
    char c = s[i];
    if (c == '"') return string(nullptr);
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++i;
      ws();
      if (i < s.size() && s[i] == close) { ++i; return true; }
      while (true) {
        if (c == '{') {
          ws();
          if (!string(nullptr)) return false;
          ws();
          if (i >= s.size() || s[i] != ':') return false;
          ++i;
        }
        if (!value()) return false;
        ws();
        if (i < s.size() && s[i] == ',') { ++i; continue; }
        if (i < s.size() && s[i] == close) { ++i; return true; }
        return false;
      }
    }
    size_t b = i;
    while (i < s.size() && std::string_view(",}] \t\r\n").find(s[i]) == std::string_view::npos) ++i;
    return i > b;
  }
};
}  // namespace

bool raw_object_members(std::string_view text, std::vector<RawMember>& out) {
  out.clear();
  Scan sc{text};
  sc.ws();
  if (sc.i >= text.size() || text[sc.i] != '{') return false;
  ++sc.i;
  sc.ws();
  if (sc.i < text.size() && text[sc.i] == '}') return true;
  while (true) {
    sc.ws();
    RawMember m;
    if (!sc.string(&m.key)) return false;
    sc.ws();
    if (sc.i >= text.size() || text[sc.i] != ':') return false;
    ++sc.i;
    sc.ws();
    size_t b = sc.i;
    m.is_string = sc.i < text.size() && text[sc.i] == '"';
    if (m.is_string) {
      if (!sc.string(&m.str)) return false;
    } else if (!sc.value()) {
      return false;
    }
    m.raw = std::string(text.substr(b, sc.i - b));
    out.push_back(std::move(m));
    sc.ws();
    if (sc.i < text.size() && text[sc.i] == ',') { ++sc.i; continue; }
    if (sc.i < text.size() && text[sc.i] == '}') return true;
    return false;
  }
}

std::string json_minify(std::string_view raw) {
  std::string out;
  bool in_str = false;
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (in_str) {
      out += c;
      if (c == '\\' && i + 1 < raw.size()) out += raw[++i];
      else if (c == '"') in_str = false;
    } else if (c == '"') {
      in_str = true;
      out += c;
    } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      out += c;
    }
  }
  return out;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

std::string xml_attr_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

}  // namespace ds4::tok
