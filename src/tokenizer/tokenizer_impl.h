#pragma once
// Internal state of Tokenizer (shared by tokenizer_load.cpp and tokenizer.cpp).
#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace ds4::tok {

// Added tokens matched as exact strings, leftmost-longest (HF uses Aho-Corasick with the
// same semantics). A byte trie: a few hundred tokens, the first byte filters most positions.
class AddedMatcher {
 public:
  void add(const std::string& s, TokenId id);
  bool empty() const { return nodes_.size() <= 1; }
  // Finds the leftmost-longest match at or after `from`; false if none.
  bool find(std::string_view text, size_t from, size_t& begin, size_t& len, TokenId& id) const;

 private:
  struct Node {
    std::unordered_map<unsigned char, int> next;
    TokenId id = -1;
  };
  std::vector<Node> nodes_{1};
  std::array<bool, 256> first_{};
};

struct Tokenizer::Impl {
  std::string path;
  std::vector<std::string> id_str;    // vocab / added-token string as in tokenizer.json
  std::vector<std::string> id_piece;  // raw bytes it decodes to
  std::vector<uint8_t> id_flags;      // kAdded | kSpecial
  static constexpr uint8_t kAdded = 1, kSpecial = 2, kPresent = 4;
  std::unordered_map<std::string, TokenId> str_to_id;
  std::unordered_map<std::string, TokenId> piece_to_id;  // model vocab, raw bytes -> id
  std::array<TokenId, 256> byte_id{};                     // single-byte symbols
  MergeTable merges;
  bool ignore_merges = false;
  std::vector<NormForm> norm;
  std::vector<PreStep> pre;
  AddedMatcher added_raw;   // added tokens with normalized=false (matched on raw text)
  AddedMatcher added_norm;  // normalized=true (matched after normalization)
  AddedMatcher added_all;   // both, for chat-template text (no normalizer changes markers)
  TokenId bos = -1;
  std::vector<TokenId> eos;

  void encode_plain(std::string_view normalized, std::vector<TokenId>& out) const;
  void encode_normalizable(std::string_view raw, bool allow_special, std::vector<TokenId>& out) const;
};

}  // namespace ds4::tok
