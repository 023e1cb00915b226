#include "engine/token_constraint.h"

#include <limits>

namespace ds4::engine {

std::shared_ptr<const TokenTable> make_token_table(const TokenSource& src) {
  auto t = std::make_shared<TokenTable>();
  t->role.assign(size_t(std::max(0, src.vocab_size)), TokenTable::Role::kUnused);
  t->bytes.resize(t->role.size());
  t->plain_text.assign(t->role.size(), 0);
  t->plain_json.assign(t->role.size(), 0);
  for (int32_t id = 0; id < src.vocab_size; ++id) {
    std::string b = src.bytes(id);
    if (src.is_stop(id)) {
      t->role[size_t(id)] = TokenTable::Role::kStop;
      t->stops.push_back(id);
      t->vocab.stops.push_back(id);
    } else if (src.is_control(id)) {
      t->role[size_t(id)] = TokenTable::Role::kControl;
      t->controls.push_back(id);
      if (!b.empty()) t->vocab.controls.emplace_back(b, id);
    } else if (!b.empty()) {
      t->role[size_t(id)] = TokenTable::Role::kText;
      t->by_first[static_cast<unsigned char>(b[0])].push_back(id);
      t->plain_text[size_t(id)] = tok::ToolGrammar::plain_token(b, tok::ToolGrammar::State::Plain::kRawText);
      t->plain_json[size_t(id)] = tok::ToolGrammar::plain_token(b, tok::ToolGrammar::State::Plain::kJsonString);
      t->bytes[size_t(id)] = std::move(b);
    }
  }
  return t;
}

namespace {

class GrammarConstraint : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const tok::ToolGrammar> g, std::shared_ptr<const TokenTable> t)
      : g_(std::move(g)), t_(std::move(t)), state_(g_->start()) {}

  size_t mask(std::span<float> logits) override {
    allowed_.assign(logits.size(), 0);
    auto try_unit = [&](int32_t id, int32_t unit) {
      if (size_t(id) >= allowed_.size()) return;
      scratch_.assign(state_);
      allowed_[size_t(id)] = scratch_.feed(unit);
    };
    // In plain free text most tokens need no check (see State::plain).
    const auto kind = state_.plain();
    const std::vector<uint8_t>* plain = kind == tok::ToolGrammar::State::Plain::kRawText    ? &t_->plain_text
                                        : kind == tok::ToolGrammar::State::Plain::kJsonString ? &t_->plain_json
                                                                                               : nullptr;
    for (int32_t id : t_->stops) try_unit(id, tok::kStopUnit);
    for (int32_t id : t_->controls) try_unit(id, tok::kControlBase + id);
    for (int b = 0; b < 256; ++b) {
      const auto& ids = t_->by_first[size_t(b)];
      if (ids.empty()) continue;
      first_.assign(state_);
      if (!first_.feed(b)) continue;  // no token starting with this byte fits
      for (int32_t id : ids) {
        if (size_t(id) >= allowed_.size()) continue;
        if (plain && (*plain)[size_t(id)]) {
          allowed_[size_t(id)] = 1;
          continue;
        }
        const std::string& s = t_->bytes[size_t(id)];
        if (s.size() == 1) {
          allowed_[size_t(id)] = 1;
          continue;
        }
        scratch_.assign(first_);
        allowed_[size_t(id)] = scratch_.feed_bytes(std::string_view(s).substr(1));
      }
    }
    size_t n = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (allowed_[i]) ++n;
      else logits[i] = -std::numeric_limits<float>::infinity();
    }
    return n;
  }

  bool accept(int32_t token) override {
    if (token < 0 || size_t(token) >= t_->role.size()) return false;
    switch (t_->role[size_t(token)]) {
      case TokenTable::Role::kStop: return state_.feed(tok::kStopUnit);
      case TokenTable::Role::kControl: return state_.feed(tok::kControlBase + token);
      case TokenTable::Role::kText: return state_.feed_bytes(t_->bytes[size_t(token)]);
      default: return false;
    }
  }

  bool done() const override { return state_.done(); }

 private:
  std::shared_ptr<const tok::ToolGrammar> g_;
  std::shared_ptr<const TokenTable> t_;
  tok::ToolGrammar::State state_, first_, scratch_;
  std::vector<uint8_t> allowed_;
};

}  // namespace

std::unique_ptr<TokenConstraint> make_grammar_constraint(std::shared_ptr<const tok::ToolGrammar> grammar,
                                                         std::shared_ptr<const TokenTable> table) {
  return std::make_unique<GrammarConstraint>(std::move(grammar), std::move(table));
}

}  // namespace ds4::engine
