#include "tokenizer/utf8.h"

#include <array>

#include "tokenizer/tokenizer.h"

namespace ds4::tok {

size_t utf8_valid_len(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  unsigned char c = p[i];
  if (c < 0x80) return 1;
  // Ranges per the Unicode table of well-formed byte sequences (no overlongs, no
  // surrogates, nothing above U+10FFFF).
  auto in = [&](size_t k, unsigned lo, unsigned hi) {
    return i + k < n && p[i + k] >= lo && p[i + k] <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (c == 0xE0) return in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
    return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xED) return in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xF0) return in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3)
    return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (c == 0xF4) return in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

// Length of the maximal subpart of an ill-formed sequence at i (>= 1): the longest prefix
// that could still start a valid sequence. Each one becomes one U+FFFD (Unicode 3.9, the
// rule Rust's from_utf8_lossy and Python's errors="replace" follow).
static size_t maximal_subpart(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  unsigned char c = p[i];
  unsigned lo = 0x80, hi = 0xBF;
  size_t need;
  if (c >= 0xC2 && c <= 0xDF) need = 1;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  size_t k = 1;
  if (i + 1 < n && p[i + 1] >= lo && p[i + 1] <= hi) {
    k = 2;
    while (k <= need && i + k < n && p[i + k] >= 0x80 && p[i + k] <= 0xBF) ++k;
  }
  return k;
}

bool utf8_is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t l = utf8_valid_len(s, i);
    if (!l) return false;
    i += l;
  }
  return true;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t l = utf8_valid_len(s, i);
    if (l) {
      out.append(s.data() + i, l);
      i += l;
    } else {
      out += "\xEF\xBF\xBD";
      i += maximal_subpart(s, i);
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Look at the last up-to-3 bytes for the start of a sequence that is incomplete but
  // still a valid prefix; everything before it is complete.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) return n;
    if (c >= 0xC0) {
      // A lead byte: held back only if its maximal subpart reaches the end of input and
      // is shorter than the full sequence it announces.
      size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      if (maximal_subpart(s, i) == back && back < need && c >= 0xC2 && c <= 0xF4) return i;
      return n;
    }
  }
  return n;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t utf8_decode(const char* s, size_t len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  switch (len) {
    case 1: return p[0];
    case 2: return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3: return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

namespace {
struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 324> to_byte{};  // code points 0..323 -> byte or -1
  ByteTables() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? b : 256 + extra++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
      utf8_append(to_utf8[b], to_cp[b]);
    }
  }
};
const ByteTables& tables() {
  static const ByteTables t;
  return t;
}
}  // namespace

uint32_t byte_to_cp(uint8_t b) { return tables().to_cp[b]; }

int cp_to_byte(uint32_t cp) { return cp < 324 ? tables().to_byte[cp] : -1; }

std::string bytes_to_byte_level(std::string_view bytes) {
  const auto& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += t.to_utf8[b];
  return out;
}

bool byte_level_to_bytes(std::string_view s, std::string& out) {
  out.clear();
  size_t i = 0;
  while (i < s.size()) {
    size_t l = utf8_valid_len(s, i);
    if (!l) return false;
    int b = cp_to_byte(utf8_decode(s.data() + i, l));
    if (b < 0) return false;
    out += static_cast<char>(b);
    i += l;
  }
  return true;
}

}  // namespace ds4::tok
