#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/ucasemap.h>
#include <unicode/uchar.h>

#include <map>

#include <cstdio>

#include "core/error.h"

namespace ds4::tok {

namespace {
// Per-thread match state: a JIT stack big enough for long whitespace runs (the default
// 32 KiB one fails on `\s+(?!\S)` over a few thousand spaces).
struct ThreadMatch {
  pcre2_match_context* ctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_data* data = nullptr;
  ThreadMatch() {
    ctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(ctx, nullptr, stack);
    data = pcre2_match_data_create(16, nullptr);
  }
  ~ThreadMatch() {
    pcre2_match_data_free(data);
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(ctx);
  }
};
ThreadMatch& thread_match() {
  thread_local ThreadMatch tm;
  return tm;
}
}  // namespace

namespace {

// Debian 12's PCRE2 (10.42) knows Unicode 14; HF's Oniguruma knows Unicode 15, so a letter
// or emoji added in 15.0 (e.g. U+1FAAF) falls in different regex alternatives and changes
// the split. ICU 72 knows 15.0: collect the code points assigned after 14.0, by major
// general category, as explicit class ranges.
const std::map<char, std::string>& newer_unicode_ranges() {
  static const std::map<char, std::string> ranges = [] {
    std::map<char, std::string> out;
    auto major = [](int8_t t) -> char {
      switch (t) {
        case U_UPPERCASE_LETTER: case U_LOWERCASE_LETTER: case U_TITLECASE_LETTER:
        case U_MODIFIER_LETTER: case U_OTHER_LETTER: return 'L';
        case U_NON_SPACING_MARK: case U_ENCLOSING_MARK: case U_COMBINING_SPACING_MARK: return 'M';
        case U_DECIMAL_DIGIT_NUMBER: case U_LETTER_NUMBER: case U_OTHER_NUMBER: return 'N';
        case U_DASH_PUNCTUATION: case U_START_PUNCTUATION: case U_END_PUNCTUATION:
        case U_CONNECTOR_PUNCTUATION: case U_OTHER_PUNCTUATION: case U_INITIAL_PUNCTUATION:
        case U_FINAL_PUNCTUATION: return 'P';
        case U_MATH_SYMBOL: case U_CURRENCY_SYMBOL: case U_MODIFIER_SYMBOL: case U_OTHER_SYMBOL: return 'S';
        default: return 0;
      }
    };
    char prev_cls = 0;
    UChar32 start = 0;
    auto flush = [&](UChar32 end) {
      if (!prev_cls) return;
      char buf[64];
      std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", static_cast<unsigned>(start), static_cast<unsigned>(end));
      out[prev_cls] += buf;
    };
    for (UChar32 c = 0; c <= 0x10FFFF; ++c) {
      UVersionInfo age;
      u_charAge(c, age);
      char cls = (age[0] > 14 && u_charType(c) != U_UNASSIGNED) ? major(u_charType(c)) : 0;
      if (cls != prev_cls) {
        flush(c - 1);
        prev_cls = cls;
        start = c;
      }
    }
    flush(0x10FFFF);
    return out;
  }();
  return ranges;
}

// Adds the newer code points to every \p{L} \p{M} \p{N} \p{P} \p{S} of the pattern.
std::string widen_unicode_classes(const std::string& pat) {
  const auto& extra = newer_unicode_ranges();
  std::string out;
  int in_class = 0;
  for (size_t i = 0; i < pat.size(); ++i) {
    char c = pat[i];
    if (c == '\\' && i + 1 < pat.size()) {
      if (pat[i + 1] == 'p' && i + 4 < pat.size() && pat[i + 2] == '{' && pat[i + 4] == '}') {
        auto it = extra.find(pat[i + 3]);
        std::string prop = pat.substr(i, 5);
        if (it != extra.end() && !it->second.empty())
          out += in_class ? prop + it->second : "[" + prop + it->second + "]";
        else
          out += prop;
        i += 4;
        continue;
      }
      out += c;
      out += pat[++i];
      continue;
    }
    if (c == '[') ++in_class;
    if (c == ']' && in_class) --in_class;
    out += c;
  }
  return out;
}

}  // namespace

Regex::Regex(const std::string& raw_pattern, const std::string& where) {
  int err = 0;
  PCRE2_SIZE off = 0;
  std::string pattern = widen_unicode_classes(raw_pattern);
  // UCP: \s \d \w and POSIX classes follow Unicode properties, as in Oniguruma.
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw InputError(where + ": bad regex at offset " + std::to_string(off) + ": " +
                     reinterpret_cast<char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if absent
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool Regex::find(std::string_view s, size_t from, size_t& begin, size_t& end) const {
  auto& tm = thread_match();
  int rc = pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(s.data()),
                       s.size(), from, PCRE2_NO_UTF_CHECK, tm.data, tm.ctx);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw Error("pre-tokenizer regex failed with PCRE2 error " + std::to_string(rc));
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(tm.data);
  begin = ov[0];
  end = ov[1];
  return true;
}

namespace {

size_t next_char(std::string_view s, size_t i) {
  ++i;
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  return i;
}

// HF Split: cut `piece` at the regex matches; behaviour decides where matches go.
void split_piece(const PreStep& st, std::string_view piece, std::vector<std::string_view>& out) {
  // (begin, end, is_match) spans covering the piece.
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t pos = 0, last = 0;
  size_t mb, me;
  while (pos <= piece.size() && st.regex->find(piece, pos, mb, me)) {
    if (me == mb) {  // empty match: step one character, like onig's find_iter
      pos = next_char(piece, mb);
      if (mb >= piece.size()) break;
      continue;
    }
    if (mb > last) spans.push_back({last, mb, false});
    spans.push_back({mb, me, true});
    last = pos = me;
  }
  if (last < piece.size()) spans.push_back({last, piece.size(), false});
  if (st.invert)
    for (auto& s : spans) s.match = !s.match;

  using B = PreStep::Behavior;
  size_t i = 0;
  while (i < spans.size()) {
    Span s = spans[i++];
    switch (st.behavior) {
      case B::kIsolated:
        break;
      case B::kRemoved:
        if (s.match) continue;
        break;
      case B::kMergedWithPrevious:
        while (i < spans.size() && spans[i].match) s.e = spans[i++].e;
        break;
      case B::kMergedWithNext:
        if (s.match && i < spans.size() && !spans[i].match) s.e = spans[i++].e;
        break;
      case B::kContiguous:
        while (i < spans.size() && spans[i].match == s.match) s.e = spans[i++].e;
        break;
    }
    out.push_back(piece.substr(s.b, s.e - s.b));
  }
}

}  // namespace

void pre_tokenize(const std::vector<PreStep>& steps, std::string_view text,
                  std::vector<std::string_view>& pieces, std::deque<std::string>& owned) {
  pieces.clear();
  if (text.empty()) return;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& st : steps) {
    next.clear();
    for (auto p : pieces) {
      if (st.kind == PreStep::Kind::kPrefixSpace) {
        if (!p.empty() && p[0] != ' ') {
          owned.push_back(" " + std::string(p));
          p = owned.back();
        }
        next.push_back(p);
      } else {
        split_piece(st, p, next);
      }
    }
    pieces.swap(next);
  }
}

namespace {
std::u16string to_u16(std::string_view s) {
  std::u16string out(s.size() + 1, u'\0');
  int32_t len = 0;
  UErrorCode st = U_ZERO_ERROR;
  u_strFromUTF8(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &len,
                s.data(), static_cast<int32_t>(s.size()), &st);
  if (U_FAILURE(st)) throw Error("normalizer: UTF-8 -> UTF-16 failed");
  out.resize(len);
  return out;
}
std::string to_u8(const std::u16string& s) {
  std::string out(s.size() * 3 + 1, '\0');
  int32_t len = 0;
  UErrorCode st = U_ZERO_ERROR;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &len,
              reinterpret_cast<const UChar*>(s.data()), static_cast<int32_t>(s.size()), &st);
  if (U_FAILURE(st)) throw Error("normalizer: UTF-16 -> UTF-8 failed");
  out.resize(len);
  return out;
}
bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}
}  // namespace

std::string normalize(const std::vector<NormForm>& forms, std::string_view text) {
  std::string cur(text);
  for (NormForm f : forms) {
    if (f == NormForm::kLowercase) {
      for (auto& c : cur)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (is_ascii(cur)) continue;
      UErrorCode st = U_ZERO_ERROR;
      UCaseMap* cm = ucasemap_open("", 0, &st);
      std::string out(cur.size() * 3 + 4, '\0');
      int32_t n = ucasemap_utf8ToLower(cm, out.data(), static_cast<int32_t>(out.size()), cur.data(),
                                       static_cast<int32_t>(cur.size()), &st);
      ucasemap_close(cm);
      if (U_FAILURE(st)) throw Error("normalizer: lowercase failed");
      out.resize(n);
      cur.swap(out);
      continue;
    }
    if (is_ascii(cur)) continue;  // ASCII is NFC/NFKC-stable
    UErrorCode st = U_ZERO_ERROR;
    const UNormalizer2* n = f == NormForm::kNFC ? unorm2_getNFCInstance(&st) : unorm2_getNFKCInstance(&st);
    std::u16string src = to_u16(cur);
    if (unorm2_isNormalized(n, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()), &st))
      continue;
    st = U_ZERO_ERROR;
    std::u16string dst(src.size() * 4 + 16, u'\0');
    int32_t len = unorm2_normalize(n, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()),
                                   reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()), &st);
    if (U_FAILURE(st)) throw Error("normalizer: ICU normalize failed");
    dst.resize(len);
    cur = to_u8(dst);
  }
  return cur;
}

}  // namespace ds4::tok
