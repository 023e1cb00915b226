#pragma once
// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (the format all three
// families ship or that tools/tokenizer/ converts to). Encoding = added/special tokens first
// (longest match), then normalizer, pre-tokenizer regex splits (PCRE2 JIT), byte-level
// mapping and BPE merges by rank. Thread-safe after load(): encode/decode are const.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds4::tok {

using TokenId = int32_t;

class Tokenizer {
 public:
  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Loads tokenizer.json; throws ds4::InputError naming the file and field on bad input.
  static Tokenizer load(const std::string& path);
  // Same from the JSON text (path is only used in error messages).
  static Tokenizer from_json(std::string_view json_text, const std::string& path = "<memory>");

  // Text -> IDs. allow_special=false: added/special token strings in `text` are encoded as
  // plain text (user input never yields control tokens). allow_special=true: they are
  // matched exactly like HF `tokenizers`. Bytes that are not valid UTF-8 are first replaced
  // by U+FFFD (what a caller decoding with errors="replace" hands HF); never throws.
  std::vector<TokenId> encode(std::string_view text, bool allow_special = false) const;
  // Chat-template encoding: added tokens are matched everywhere except inside the byte
  // ranges [begin, end) of `plain` (sorted, non-overlapping: the user-supplied text).
  // Equals HF encode(text) whenever user text contains no added-token string.
  std::vector<TokenId> encode_template(std::string_view text,
                                       const std::vector<std::pair<size_t, size_t>>& plain) const;

  // IDs -> bytes, concatenated raw (may contain incomplete UTF-8 at the end). Unknown IDs
  // throw ds4::InputError. skip_special drops tokens flagged "special" in tokenizer.json.
  std::string decode_bytes(const std::vector<TokenId>& ids, bool skip_special = false) const;
  // IDs -> valid UTF-8 text; invalid sequences become U+FFFD like HF's decode (lossy).
  std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const;

  // The raw bytes one token stands for (added tokens: their content).
  const std::string& token_to_piece(TokenId id) const;
  // Vocabulary string of a token as stored in tokenizer.json (byte-level alphabet).
  const std::string& token_to_str(TokenId id) const;
  // Exact lookup of a vocabulary/added-token string; -1 if absent.
  TokenId str_to_token(std::string_view s) const;

  int vocab_size() const;  // max id + 1
  bool is_special(TokenId id) const;  // added token with "special": true
  bool is_added(TokenId id) const;    // any added token (special or not)

  // Family control tokens, -1 where the tokenizer has none.
  TokenId bos_id() const;
  const std::vector<TokenId>& eos_ids() const;  // every id that ends a turn (EOS, EOT...)
  bool is_eos(TokenId id) const;
  // Sets bos/eos by string (done by the chat template layer; tokenizer.json lacks them).
  void set_bos(std::string_view token);
  void set_eos(const std::vector<std::string>& tokens);

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: feed token IDs as they are generated, get text that is always
// valid UTF-8. Bytes of a multibyte character split across tokens are held back until the
// character is complete; a byte sequence that can never become valid is emitted as U+FFFD
// (same result as HF decode of the whole sequence, `errors="replace"`).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false);
  // Returns the newly completed text (possibly empty).
  std::string push(TokenId id);
  // Flushes what is held back (incomplete tail -> U+FFFD per HF rules) and resets.
  std::string finish();
  // Bytes currently held back (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::string pending_;
};

// Converts a byte string to valid UTF-8, replacing each maximal invalid subpart with U+FFFD
// (the WHATWG / Python errors="replace" rule that HF's String::from_utf8_lossy follows).
std::string utf8_lossy(std::string_view bytes);
// Length of the longest prefix of `bytes` that does not end inside a (still possibly valid)
// incomplete UTF-8 sequence.
size_t utf8_complete_prefix(std::string_view bytes);

}  // namespace ds4::tok
