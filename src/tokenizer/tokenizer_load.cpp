// tokenizer.json -> Tokenizer::Impl. Only what these families use is accepted; anything
// else is an InputError naming the field, never a silent approximation.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace ds4::tok {

using json = nlohmann::json;

namespace {

// GPT-2's split, used by a ByteLevel pre-tokenizer with use_regex=true.
const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

[[noreturn]] void bad(const std::string& path, const std::string& field, const std::string& what) {
  throw InputError(path + ": field '" + field + "': " + what);
}

void load_normalizer(const json& n, const std::string& path, std::vector<NormForm>& out) {
  if (n.is_null()) return;
  std::string type = n.value("type", "");
  if (type == "Sequence") {
    for (const auto& c : n.at("normalizers")) load_normalizer(c, path, out);
  } else if (type == "NFC") {
    out.push_back(NormForm::kNFC);
  } else if (type == "NFKC") {
    out.push_back(NormForm::kNFKC);
  } else if (type == "Lowercase") {
    out.push_back(NormForm::kLowercase);
  } else {
    bad(path, "normalizer.type", "unsupported normalizer '" + type + "'");
  }
}

PreStep::Behavior behavior(const std::string& b, const std::string& path) {
  using B = PreStep::Behavior;
  if (b == "Isolated") return B::kIsolated;
  if (b == "Removed") return B::kRemoved;
  if (b == "MergedWithPrevious") return B::kMergedWithPrevious;
  if (b == "MergedWithNext") return B::kMergedWithNext;
  if (b == "Contiguous") return B::kContiguous;
  bad(path, "pre_tokenizer.behavior", "unsupported '" + b + "'");
}

std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// Returns true if a ByteLevel step was seen (the model then works on the byte alphabet).
void load_pre(const json& p, const std::string& path, std::vector<PreStep>& out, bool& byte_level) {
  if (p.is_null()) return;
  std::string type = p.value("type", "");
  if (type == "Sequence") {
    for (const auto& c : p.at("pretokenizers")) load_pre(c, path, out, byte_level);
  } else if (type == "Split") {
    PreStep st;
    const auto& pat = p.at("pattern");
    std::string rx = pat.contains("Regex") ? pat.at("Regex").get<std::string>()
                                           : regex_escape(pat.at("String").get<std::string>());
    st.regex = std::make_shared<Regex>(rx, path + ": pre_tokenizer Split pattern");
    st.behavior = behavior(p.value("behavior", "Isolated"), path);
    st.invert = p.value("invert", false);
    out.push_back(std::move(st));
  } else if (type == "ByteLevel") {
    byte_level = true;
    if (p.value("add_prefix_space", false)) {
      PreStep st;
      st.kind = PreStep::Kind::kPrefixSpace;
      out.push_back(std::move(st));
    }
    if (p.value("use_regex", true)) {
      PreStep st;
      st.regex = std::make_shared<Regex>(kGpt2Pattern, path + ": ByteLevel regex");
      out.push_back(std::move(st));
    }
  } else {
    bad(path, "pre_tokenizer.type", "unsupported pre-tokenizer '" + type + "'");
  }
}

void set_token(Tokenizer::Impl& t, TokenId id, const std::string& str, std::string piece, uint8_t flags) {
  if (id < 0 || id > 50'000'000) bad(t.path, "id", "out of range: " + std::to_string(id));
  size_t need = static_cast<size_t>(id) + 1;
  if (t.id_str.size() < need) {
    t.id_str.resize(need);
    t.id_piece.resize(need);
    t.id_flags.resize(need, 0);
  }
  t.id_str[id] = str;
  t.id_piece[id] = std::move(piece);
  t.id_flags[id] |= flags | Tokenizer::Impl::kPresent;
  t.str_to_id[str] = id;
}

void load_model(const json& m, Tokenizer::Impl& t) {
  const std::string& path = t.path;
  if (m.value("type", "BPE") != "BPE") bad(path, "model.type", "only BPE is supported");
  if (m.contains("byte_fallback") && m["byte_fallback"].is_boolean() && m["byte_fallback"].get<bool>())
    bad(path, "model.byte_fallback", "byte_fallback is not supported");
  for (const char* f : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(f) && !m[f].is_null() && !m[f].get<std::string>().empty())
      bad(path, std::string("model.") + f, "not supported");
  t.ignore_merges = m.value("ignore_merges", false);
  const auto& vocab = m.at("vocab");
  if (!vocab.is_object()) bad(path, "model.vocab", "must be an object");
  // Sized up front: rehashing 250k string keys dominated load time.
  t.str_to_id.reserve(vocab.size() * 2 + 4096);
  t.piece_to_id.reserve(vocab.size() * 2);
  t.id_str.reserve(vocab.size() + 4096);
  t.id_piece.reserve(vocab.size() + 4096);
  t.id_flags.reserve(vocab.size() + 4096);
  std::string raw;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    TokenId id = it.value().get<TokenId>();
    if (!byte_level_to_bytes(it.key(), raw)) raw = it.key();
    set_token(t, id, it.key(), raw, 0);
    t.piece_to_id[raw] = id;
  }
  t.byte_id.fill(-1);
  for (int b = 0; b < 256; ++b) {
    std::string s;
    utf8_append(s, byte_to_cp(static_cast<uint8_t>(b)));
    auto it = t.str_to_id.find(s);
    if (it != t.str_to_id.end()) t.byte_id[b] = it->second;
  }
  const auto& merges = m.at("merges");
  t.merges.reserve(merges.size());
  int32_t rank = 0;
  std::string a, b, ab;  // reused: no allocation per merge
  for (const auto& mg : merges) {
    if (mg.is_string()) {
      const auto& s = mg.get_ref<const std::string&>();
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) bad(path, "model.merges", "entry without a space: " + s);
      a.assign(s, 0, sp);
      b.assign(s, sp + 1);
    } else {
      a = mg.at(0).get_ref<const std::string&>();
      b = mg.at(1).get_ref<const std::string&>();
    }
    ab.assign(a).append(b);
    auto ia = t.str_to_id.find(a), ib = t.str_to_id.find(b), im = t.str_to_id.find(ab);
    if (ia == t.str_to_id.end() || ib == t.str_to_id.end() || im == t.str_to_id.end())
      bad(path, "model.merges", "merge '" + a + " " + b + "' uses a token not in the vocab");
    t.merges.insert(ia->second, ib->second, rank++, im->second);
  }
}

void load_added(const json& added, Tokenizer::Impl& t) {
  for (const auto& a : added) {
    TokenId id = a.at("id").get<TokenId>();
    std::string content = a.at("content").get<std::string>();
    if (content.empty()) bad(t.path, "added_tokens.content", "empty content for id " + std::to_string(id));
    if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false))
      bad(t.path, "added_tokens", "lstrip/rstrip/single_word unsupported (token '" + content + "')");
    bool special = a.value("special", false);
    // What the HF ByteLevel decoder outputs for it: mapped bytes if every character is in
    // the byte alphabet, else the raw UTF-8.
    std::string piece;
    if (!byte_level_to_bytes(content, piece)) piece = content;
    set_token(t, id, content, piece, static_cast<uint8_t>(Tokenizer::Impl::kAdded | (special ? Tokenizer::Impl::kSpecial : 0)));
    // HF: normalized=false tokens are cut out of the raw text, the others after the
    // normalizer ran on the remaining segments.
    if (!a.value("normalized", !special))
      t.added_raw.add(content, id);
    else
      t.added_norm.add(content, id);
    t.added_all.add(content, id);
  }
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(path + ": not valid JSON: " + e.what());
  }
  Tokenizer tk;
  Impl& t = *tk.impl_;
  t.path = path;
  try {
    if (!j.contains("model")) bad(path, "model", "missing");
    load_model(j.at("model"), t);
    if (j.contains("normalizer")) load_normalizer(j["normalizer"], path, t.norm);
    bool byte_level = false;
    if (j.contains("pre_tokenizer")) load_pre(j["pre_tokenizer"], path, t.pre, byte_level);
    if (!byte_level) bad(path, "pre_tokenizer", "no ByteLevel step: only byte-level BPE is supported");
    for (int b = 0; b < 256; ++b)
      if (t.byte_id[b] < 0) bad(path, "model.vocab", "byte " + std::to_string(b) + " has no token");
    if (j.contains("added_tokens")) load_added(j["added_tokens"], t);
  } catch (const json::exception& e) {
    throw InputError(path + ": malformed tokenizer.json: " + e.what());
  }
  return tk;
}

Tokenizer Tokenizer::load(const std::string& path) {
  // A directory opens and reads as nothing: it would be reported as JSON ending early.
  if (std::filesystem::is_directory(path)) throw InputError(path + ": is a directory, not a tokenizer file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open tokenizer file");
  std::stringstream ss;
  ss << f.rdbuf();
  return from_json(ss.str(), path);
}

}  // namespace ds4::tok
