#pragma once
// Normalizers and pre-tokenizers of tokenizer.json: the regex splits (PCRE2 with JIT, the
// Oniguruma patterns of HF carry over unchanged for these families) and NFC/NFKC.
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ds4::tok {

// A compiled pattern; find() is thread-safe (match data and JIT stack are per thread).
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Next match in subject at or after `from`: returns false when none. Subject must be
  // valid UTF-8 (checked once by the caller).
  bool find(std::string_view subject, size_t from, size_t& begin, size_t& end) const;

 private:
  void* code_;  // pcre2_code_8*
};

// One pre-tokenizer step applied to every current piece.
struct PreStep {
  enum class Kind { kSplit, kByteLevelRegex, kPrefixSpace };
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
  Kind kind = Kind::kSplit;
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  std::shared_ptr<Regex> regex;
};

// Splits text into pre-tokens (byte ranges of `text`). Pieces are views into storage:
// most steps only cut, a prefix space adds bytes (stored in `owned`, whose elements never
// move).
void pre_tokenize(const std::vector<PreStep>& steps, std::string_view text,
                  std::vector<std::string_view>& pieces, std::deque<std::string>& owned);

enum class NormForm { kNFC, kNFKC, kLowercase };
// Applies normalizers in order; input must be valid UTF-8.
std::string normalize(const std::vector<NormForm>& forms, std::string_view text);

}  // namespace ds4::tok
