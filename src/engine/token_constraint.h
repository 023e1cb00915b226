#pragma once
// Constrained decoding for one turn: before each draw the logits of every token that would
// leave the allowed language are set to -inf, and the drawn token then advances the
// constraint. The language is a tool-call grammar (tokenizer/tool_grammar.h: tool_choice
// none / required / a named function); this file maps it onto token ids. A token stands for
// several grammar units (its bytes), so each candidate token is fed unit by unit into a copy
// of the grammar state; tokens are grouped by their first byte so a state that admits one
// byte only checks the tokens that start with it.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tool_grammar.h"

namespace ds4::engine {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets disallowed logits to -inf (ids past the table too); returns how many stay allowed
  // (0: a dead end, the turn cannot go on).
  virtual size_t mask(std::span<float> logits) = 0;
  // Advances past the drawn token; false when it was not allowed (then the state is spent).
  virtual bool accept(int32_t token) = 0;
  // The language is complete (its turn end accepted).
  virtual bool done() const = 0;
};

// A vocabulary as the grammar sees it, built once per codec.
struct TokenTable {
  enum class Role : uint8_t { kUnused, kText, kControl, kStop };
  std::vector<Role> role;                          // per id
  std::vector<std::string> bytes;                  // per id: kText tokens' bytes
  std::array<std::vector<int32_t>, 256> by_first;  // kText ids by first byte
  std::vector<int32_t> controls, stops;
  // Per id: allowed in any plain raw text / JSON string state without a check
  // (tok::ToolGrammar::plain_token).
  std::vector<uint8_t> plain_text, plain_json;
  tok::GrammarVocab vocab;                         // control texts and stop ids for the grammar
};
struct TokenSource {
  int vocab_size = 0;
  std::function<std::string(int32_t)> bytes;  // a token's bytes (control tokens: their text)
  std::function<bool(int32_t)> is_control;    // added tokens: markers, never plain text
  std::function<bool(int32_t)> is_stop;       // turn ends
};
std::shared_ptr<const TokenTable> make_token_table(const TokenSource& src);

std::unique_ptr<TokenConstraint> make_grammar_constraint(std::shared_ptr<const tok::ToolGrammar> grammar,
                                                         std::shared_ptr<const TokenTable> table);

}  // namespace ds4::engine
