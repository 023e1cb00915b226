// Encode / decode. Order of work follows HF `tokenizers` exactly, because the order decides
// the IDs: (1) cut out added tokens with normalized=false on the raw text, (2) normalize each
// remaining segment, (3) cut out normalized added tokens, (4) pre-tokenize, (5) BPE.
#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace ds4::tok {

void AddedMatcher::add(const std::string& s, TokenId id) {
  int n = 0;
  for (unsigned char c : s) {
    auto it = nodes_[n].next.find(c);
    if (it == nodes_[n].next.end()) {
      nodes_.push_back(Node{});
      int k = static_cast<int>(nodes_.size()) - 1;
      nodes_[n].next[c] = k;
      n = k;
    } else {
      n = it->second;
    }
  }
  // First definition wins when a content repeats (HF keeps the first id too).
  if (nodes_[n].id < 0) nodes_[n].id = id;
  first_[static_cast<unsigned char>(s[0])] = true;
}

bool AddedMatcher::find(std::string_view text, size_t from, size_t& begin, size_t& len, TokenId& id) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_[static_cast<unsigned char>(text[i])]) continue;
    int n = 0;
    size_t best = 0;
    TokenId best_id = -1;
    for (size_t k = i; k < text.size(); ++k) {
      auto it = nodes_[n].next.find(static_cast<unsigned char>(text[k]));
      if (it == nodes_[n].next.end()) break;
      n = it->second;
      if (nodes_[n].id >= 0) {
        best = k + 1 - i;
        best_id = nodes_[n].id;
      }
    }
    if (best_id >= 0) {
      begin = i;
      len = best;
      id = best_id;
      return true;
    }
  }
  return false;
}

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::Impl::encode_plain(std::string_view text, std::vector<TokenId>& out) const {
  thread_local std::vector<std::string_view> pieces;
  thread_local std::deque<std::string> owned;  // deque: views into it stay valid on growth
  thread_local std::vector<TokenId> word;
  owned.clear();
  pre_tokenize(pre, text, pieces, owned);
  for (auto p : pieces) {
    if (p.empty()) continue;
    if (p.size() == 1) {
      out.push_back(byte_id[static_cast<unsigned char>(p[0])]);
      continue;
    }
    if (ignore_merges) {
      // A pre-token that is itself a vocab entry is emitted whole (HF ignore_merges).
      auto it = piece_to_id.find(std::string(p));
      if (it != piece_to_id.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    word.clear();
    for (unsigned char b : p) word.push_back(byte_id[b]);
    bpe_merge(merges, word, out);
  }
}

void Tokenizer::Impl::encode_normalizable(std::string_view raw, bool allow_special,
                                          std::vector<TokenId>& out) const {
  if (raw.empty()) return;
  std::string normed = norm.empty() ? std::string() : normalize(norm, raw);
  std::string_view text = norm.empty() ? raw : std::string_view(normed);
  if (!allow_special || added_norm.empty()) {
    encode_plain(text, out);
    return;
  }
  size_t pos = 0, b, len;
  TokenId id;
  while (added_norm.find(text, pos, b, len, id)) {
    encode_plain(text.substr(pos, b - pos), out);
    out.push_back(id);
    pos = b + len;
  }
  encode_plain(text.substr(pos), out);
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool allow_special) const {
  // HF only takes valid Unicode strings; bytes that are not valid UTF-8 are read the way a
  // caller would have decoded them (errors="replace"), so the IDs stay comparable.
  std::string fixed;
  if (!utf8_is_valid(text)) {
    fixed = utf8_lossy(text);
    text = fixed;
  }
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  const Impl& t = *impl_;
  if (!allow_special || t.added_raw.empty()) {
    t.encode_normalizable(text, allow_special, out);
    return out;
  }
  size_t pos = 0, b, len;
  TokenId id;
  while (t.added_raw.find(text, pos, b, len, id)) {
    t.encode_normalizable(text.substr(pos, b - pos), true, out);
    out.push_back(id);
    pos = b + len;
  }
  t.encode_normalizable(text.substr(pos), true, out);
  return out;
}

std::vector<TokenId> Tokenizer::encode_template(std::string_view text,
                                                const std::vector<std::pair<size_t, size_t>>& plain) const {
  // The rendered text is built from valid UTF-8 pieces; a lossy fix-up would move the
  // spans, so invalid input is rejected here instead (callers validate user text first).
  if (!utf8_is_valid(text)) throw InputError("chat template produced invalid UTF-8");
  const Impl& t = *impl_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 8);
  size_t pos = 0, seg = 0, b, len;
  size_t k = 0;  // first plain span that may still overlap
  TokenId id;
  while (t.added_all.find(text, pos, b, len, id)) {
    while (k < plain.size() && plain[k].second <= b) ++k;
    bool in_plain = k < plain.size() && plain[k].first < b + len && b < plain[k].second;
    if (in_plain) {
      // A look-alike inside user text: skip past this start byte, keep scanning.
      pos = b + 1;
      continue;
    }
    t.encode_normalizable(text.substr(seg, b - seg), false, out);
    out.push_back(id);
    pos = seg = b + len;
  }
  t.encode_normalizable(text.substr(seg), false, out);
  return out;
}

static void check_id(const Tokenizer::Impl& t, TokenId id) {
  if (id < 0 || static_cast<size_t>(id) >= t.id_flags.size() || !(t.id_flags[id] & Tokenizer::Impl::kPresent))
    throw InputError(t.path + ": unknown token id " + std::to_string(id));
}

std::string Tokenizer::decode_bytes(const std::vector<TokenId>& ids, bool skip_special) const {
  const Impl& t = *impl_;
  std::string out;
  for (TokenId id : ids) {
    check_id(t, id);
    if (skip_special && (t.id_flags[id] & Impl::kSpecial)) continue;
    out += t.id_piece[id];
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool skip_special) const {
  return utf8_lossy(decode_bytes(ids, skip_special));
}

const std::string& Tokenizer::token_to_piece(TokenId id) const {
  check_id(*impl_, id);
  return impl_->id_piece[id];
}

const std::string& Tokenizer::token_to_str(TokenId id) const {
  check_id(*impl_, id);
  return impl_->id_str[id];
}

TokenId Tokenizer::str_to_token(std::string_view s) const {
  auto it = impl_->str_to_id.find(std::string(s));
  return it == impl_->str_to_id.end() ? -1 : it->second;
}

int Tokenizer::vocab_size() const { return static_cast<int>(impl_->id_flags.size()); }

bool Tokenizer::is_special(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_flags.size() && (impl_->id_flags[id] & Impl::kSpecial);
}

bool Tokenizer::is_added(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_flags.size() && (impl_->id_flags[id] & Impl::kAdded);
}

TokenId Tokenizer::bos_id() const { return impl_->bos; }
const std::vector<TokenId>& Tokenizer::eos_ids() const { return impl_->eos; }
bool Tokenizer::is_eos(TokenId id) const {
  return std::find(impl_->eos.begin(), impl_->eos.end(), id) != impl_->eos.end();
}

void Tokenizer::set_bos(std::string_view token) {
  TokenId id = str_to_token(token);
  if (id < 0) throw InputError(impl_->path + ": BOS token '" + std::string(token) + "' not in vocabulary");
  impl_->bos = id;
}

void Tokenizer::set_eos(const std::vector<std::string>& tokens) {
  std::vector<TokenId> ids;
  for (const auto& s : tokens) {
    TokenId id = str_to_token(s);
    if (id < 0) throw InputError(impl_->path + ": EOS token '" + s + "' not in vocabulary");
    ids.push_back(id);
  }
  impl_->eos = std::move(ids);
}

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special) : tok_(&tok), skip_special_(skip_special) {}

std::string StreamDecoder::push(TokenId id) {
  if (skip_special_ && tok_->is_special(id)) return {};
  pending_ += tok_->token_to_piece(id);
  size_t k = utf8_complete_prefix(pending_);
  if (k == 0) return {};
  std::string out = utf8_lossy(std::string_view(pending_).substr(0, k));
  pending_.erase(0, k);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace ds4::tok
