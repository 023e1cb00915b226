// ToolGrammar::State: a stack of frames, each a small recognizer (a literal, a choice among
// literals, raw text up to a terminator, a JSON value of a schema node, an object, an array,
// the family's call sequence, the root). A frame that completes is popped and the frame below
// resumes: a container (root, call, object, array) takes the result and pushes what comes
// next; any other frame below was pushed as the next item of a sequence and simply starts.
#include <algorithm>
#include <cstring>

#include "tokenizer/tool_grammar.h"

namespace ds4::tok {

namespace {

enum Kind : uint8_t { kRoot, kLit, kChoice, kText, kValue, kStr, kNum, kObj, kArr, kCall };
enum CallState : uint8_t { kOpen, kName, kParams, kValueDue, kAfter };
using Frame = ToolGrammar::Frame;
using NK = SchemaNode::Kind;

bool is_digit(int32_t u) { return u >= '0' && u <= '9'; }
bool is_hex(int32_t u) { return is_digit(u) || (u >= 'a' && u <= 'f') || (u >= 'A' && u <= 'F'); }

// One UTF-8 byte of text (need/lead carry a character across bytes and tokens). Rejects what
// is not valid UTF-8 (overlongs, surrogates, > U+10FFFF: JSON parsers refuse them) and C0
// controls other than tab / newline / return (json_string: all of them).
bool utf8_next(Frame& f, uint8_t b, bool json_string) {
  if (f.need > 0) {
    uint8_t lo = 0x80, hi = 0xBF;
    if (f.lead == 0xE0) lo = 0xA0;
    if (f.lead == 0xED) hi = 0x9F;
    if (f.lead == 0xF0) lo = 0x90;
    if (f.lead == 0xF4) hi = 0x8F;
    f.lead = 0;
    if (b < lo || b > hi) return false;
    --f.need;
    return true;
  }
  if (b < 0x20) return !json_string && (b == '\t' || b == '\n' || b == '\r');
  if (b < 0x80) return true;
  f.lead = b;
  if (b >= 0xC2 && b <= 0xDF) f.need = 1;
  else if (b >= 0xE0 && b <= 0xEF) f.need = 2;
  else if (b >= 0xF0 && b <= 0xF4) f.need = 3;
  else return false;
  if (f.need == 1) f.lead = 0;
  return true;
}

bool tail_ends_with(const Frame& f, std::string_view s) {
  return !s.empty() && f.tail_len >= s.size() && std::memcmp(f.tail + f.tail_len - s.size(), s.data(), s.size()) == 0;
}

// The longest proper prefix of `term` that the text ends with (a terminator under way).
size_t partial(const Frame& f, std::string_view term) {
  if (term.empty()) return 0;
  for (size_t k = std::min<size_t>(f.tail_len, term.size() - 1); k > 0; --k)
    if (std::memcmp(f.tail + f.tail_len - k, term.data(), k) == 0) return k;
  return 0;
}

int64_t code_points(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

Frame ToolGrammar::State::make(uint8_t kind, int32_t id) const {
  Frame f;
  f.kind = kind;
  f.id = id;
  if (kind == kChoice) f.hi = int32_t(g_->sets_[size_t(id)].cands.size());
  return f;
}

bool ToolGrammar::State::push(const Frame& f) {
  if (depth_ >= kMaxDepth) return false;
  frames_[size_t(depth_++)] = f;
  return true;
}

void ToolGrammar::State::assign(const State& o) {
  g_ = o.g_;
  depth_ = o.depth_;
  result_ = o.result_;
  std::copy_n(o.frames_.begin(), depth_, frames_.begin());
}

ToolGrammar::State::Plain ToolGrammar::State::plain() const {
  if (depth_ == 0) return Plain::kNone;
  const Frame& f = frames_[size_t(depth_ - 1)];
  if (f.need) return Plain::kNone;
  if (f.kind == kStr) {
    const SchemaNode& n = g_->nodes_[size_t(f.id)];
    return f.st == 1 && (n.kind != NK::kString || n.max_len < 0) ? Plain::kJsonString : Plain::kNone;
  }
  if (f.kind != kText) return Plain::kNone;
  const TextSpec& t = g_->texts_[size_t(f.id)];
  if (t.max_len >= 0 || partial(f, t.term) > 0) return Plain::kNone;
  for (const auto& a : t.avoid)
    if (partial(f, a) > 0) return Plain::kNone;
  return Plain::kRawText;
}

bool ToolGrammar::plain_token(std::string_view bytes, State::Plain kind) {
  if (bytes.empty() || kind == State::Plain::kNone) return false;
  Frame f;
  for (char c : bytes) {
    const uint8_t b = static_cast<uint8_t>(c);
    if (b == '<') return false;
    if (kind == State::Plain::kJsonString && (b == '"' || b == '\\')) return false;
    if (!utf8_next(f, b, kind == State::Plain::kJsonString)) return false;
  }
  return f.need == 0;
}

bool ToolGrammar::State::feed_bytes(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(int32_t(static_cast<unsigned char>(c)))) return false;
  return true;
}

bool ToolGrammar::State::feed(int32_t u) {
  // Each unit moves the top frame; a frame that ends without taking it (a number before a
  // comma) hands it to the frame below, hence the loop. Bounded: every pass pops or pushes.
  for (int guard = 0; guard < 4 * kMaxDepth; ++guard) {
    if (depth_ == 0) return false;
    switch (step(frames_[size_t(depth_ - 1)], u)) {
      case Step::kTake: return true;
      case Step::kReject: return false;
      case Step::kRetry: continue;
      case Step::kDone:
        --depth_;
        return resume();
      case Step::kPass:
        --depth_;
        if (!resume()) return false;
        continue;
    }
  }
  return false;
}

bool ToolGrammar::State::resume() {
  while (depth_ > 0) {
    Frame& f = frames_[size_t(depth_ - 1)];
    Resume r = Resume::kGoOn;
    switch (f.kind) {
      case kRoot: r = root_resume(f); break;
      case kCall: r = call_resume(f); break;
      case kObj: r = object_resume(f); break;
      case kArr:
        ++f.count;
        f.st = 6;
        break;
      default: break;  // the next item of a sequence: it starts with the next unit
    }
    if (r == Resume::kFail) return false;
    if (r == Resume::kGoOn) return true;
    --depth_;  // the container completed too
    result_ = 0;
  }
  return true;
}

ToolGrammar::State::Step ToolGrammar::State::step(Frame& f, int32_t u) {
  switch (f.kind) {
    case kLit: {
      const auto& lit = g_->lits_[size_t(f.id)];
      if (lit[size_t(f.pos)] != u) return Step::kReject;
      return size_t(++f.pos) == lit.size() ? Step::kDone : Step::kTake;
    }
    case kChoice: return choice_step(f, u);
    case kText: return text_step(f, u);
    case kValue: return value_step(f, u);
    case kStr: return string_step(f, u);
    case kNum: return number_step(f, u);
    case kObj: return object_step(f, u);
    case kArr: return array_step(f, u);
    default: return Step::kReject;  // root and call only ever wait for their children
  }
}

// ---- sequencing: root and call ------------------------------------------------------------

ToolGrammar::State::Resume ToolGrammar::State::root_resume(Frame& f) {
  if (f.st == 0 && g_->reasoning_text_ >= 0) {
    f.st = 1;
    return push(make(kText, g_->reasoning_text_)) ? Resume::kGoOn : Resume::kFail;
  }
  if (f.st == 1 && result_ == 1) return Resume::kComplete;  // the turn ended inside reasoning
  if (f.st == 2) return Resume::kComplete;
  f.st = 2;
  if (g_->mode_ == ToolChoice::Mode::kNone) return push(make(kText, g_->content_text_)) ? Resume::kGoOn : Resume::kFail;
  Frame call = make(kCall, -1);
  call.st = kOpen;
  return push(call) && push(make(kLit, g_->open_first_)) ? Resume::kGoOn : Resume::kFail;
}

bool ToolGrammar::State::push_param_choice(const Frame& call) {
  const FnFmt& fn = g_->fns_[size_t(call.id)];
  Frame c = make(kChoice, fn.param_set);
  c.bits = call.bits;  // a parameter is written once
  if (fn.required & ~call.bits) c.bits |= uint64_t(1) << fn.params.size();  // no close yet
  return push(c);
}

ToolGrammar::State::Resume ToolGrammar::State::call_resume(Frame& f) {
  bool ok = true;
  switch (f.st) {
    case kOpen:
      f.st = kName;
      ok = push(make(kChoice, g_->name_set_));
      break;
    case kName:
      f.id = result_;
      f.bits = 0;
      f.st = kParams;
      ok = push_param_choice(f);
      break;
    case kParams: {
      const FnFmt& fn = g_->fns_[size_t(f.id)];
      if (size_t(result_) == fn.params.size()) {  // the call's close
        ++f.count;
        f.st = kAfter;
        ok = push(make(kChoice, f.count < g_->max_calls_ ? g_->after_more_ : g_->after_end_));
        break;
      }
      const ParamFmt& p = fn.params[size_t(result_)];
      f.bits |= uint64_t(1) << result_;
      f.st = kValueDue;
      if (p.after >= 0) ok = push(make(kLit, p.after));
      if (p.form == ParamFmt::Form::kRaw) ok = ok && push(make(kText, p.text));
      else if (p.form == ParamFmt::Form::kRawEnum) ok = ok && push(make(kChoice, p.set));
      else ok = ok && push(make(kValue, p.node));
      break;
    }
    case kValueDue:
      f.st = kParams;
      ok = push_param_choice(f);
      break;
    case kAfter:
      if (result_ == 0) return Resume::kComplete;  // the end (and the stop token)
      f.st = kName;
      ok = push(make(kChoice, g_->name_set_));
      break;
  }
  return ok ? Resume::kGoOn : Resume::kFail;
}

// ---- literals and text --------------------------------------------------------------------

ToolGrammar::State::Step ToolGrammar::State::choice_step(Frame& f, int32_t u) {
  const LitSet& s = g_->sets_[size_t(f.id)];
  auto out = [&](int i) { const int o = s.orig[size_t(i)]; return o < 64 && ((f.bits >> o) & 1); };
  // Candidates in [lo, hi) share the first pos units; sorted, so those whose next unit is u
  // are contiguous, after the ones that end here.
  int nlo = -1, nhi = -1, ends = -1;
  for (int i = f.lo; i < f.hi; ++i) {
    if (out(i)) continue;
    const auto& c = s.cands[size_t(i)];
    if (c.size() == size_t(f.pos)) ends = i;
    else if (c[size_t(f.pos)] == u) {
      if (nlo < 0) nlo = i;
      nhi = i + 1;
    }
  }
  if (nlo < 0) {
    if (ends < 0) return Step::kReject;
    result_ = s.orig[size_t(ends)];  // a candidate ended before u (a name, then a marker)
    return Step::kPass;
  }
  f.lo = nlo, f.hi = nhi, ++f.pos;
  int done = -1;
  bool longer = false;
  for (int i = f.lo; i < f.hi; ++i) {
    if (out(i)) continue;
    if (s.cands[size_t(i)].size() == size_t(f.pos)) done = i;
    else longer = true;
  }
  if (done >= 0 && !longer) {
    result_ = s.orig[size_t(done)];
    return Step::kDone;
  }
  return Step::kTake;
}

ToolGrammar::State::Step ToolGrammar::State::text_byte(Frame& f, uint8_t b, bool check_utf8) {
  const TextSpec& t = g_->texts_[size_t(f.id)];
  if (check_utf8 && !utf8_next(f, b, false)) return Step::kReject;
  f.count += (b & 0xC0) != 0x80;
  if (f.tail_len == sizeof f.tail) {
    std::memmove(f.tail, f.tail + 1, sizeof f.tail - 1);
    --f.tail_len;
  }
  f.tail[f.tail_len++] = char(b);
  if (tail_ends_with(f, t.term)) {
    const size_t before = f.tail_len - t.term.size();  // tail index just past the text
    const int64_t len = f.count - code_points(t.term) - (t.strip_nl && before > 0 && f.tail[before - 1] == '\n');
    if (len < t.min_len || (t.max_len >= 0 && len > t.max_len)) return Step::kReject;
    result_ = 0;
    return Step::kDone;
  }
  for (const auto& a : t.avoid)
    if (tail_ends_with(f, a)) return Step::kReject;
  if (t.max_len >= 0) {
    // Text beyond the limit is allowed only while it may still become the terminator.
    const size_t k = partial(f, t.term);
    const int64_t len = f.count - code_points(std::string_view(f.tail + f.tail_len - k, k));
    // One char over is the newline the parser drops, if that is what it is.
    const bool dropped_nl = t.strip_nl && len == t.max_len + 1 && f.tail_len > k && f.tail[f.tail_len - k - 1] == '\n';
    if (len > t.max_len && !dropped_nl) return Step::kReject;
  }
  return Step::kTake;
}

ToolGrammar::State::Step ToolGrammar::State::text_step(Frame& f, int32_t u) {
  const TextSpec& t = g_->texts_[size_t(f.id)];
  if (u == kStopUnit) {
    if (!t.stop_ends || f.need) return Step::kReject;
    result_ = 1;
    return Step::kDone;
  }
  if (u < kControlBase) return text_byte(f, uint8_t(u), true);
  // A control token inside text only as (part of) the terminator, e.g. </think>.
  auto it = g_->control_text_.find(u);
  if (f.need || it == g_->control_text_.end()) return Step::kReject;
  const std::string& s = it->second;
  for (size_t i = 0; i < s.size(); ++i) {
    const Step r = text_byte(f, uint8_t(s[i]), false);
    if (r == Step::kReject) return r;
    if (r == Step::kDone) return i + 1 == s.size() ? r : Step::kReject;
  }
  return partial(f, t.term) >= s.size() ? Step::kTake : Step::kReject;
}

// ---- JSON values --------------------------------------------------------------------------

bool ToolGrammar::State::can_start(int node, int32_t u) const {
  const SchemaNode& n = g_->nodes_[size_t(node)];
  switch (n.kind) {
    case NK::kAny: return u == '"' || u == '-' || is_digit(u) || u == 't' || u == 'f' || u == 'n' || u == '{' || u == '[';
    case NK::kString: return u == '"';
    case NK::kNumber:
    case NK::kInteger: return u == '-' || is_digit(u);
    case NK::kBoolean: return u == 't' || u == 'f';
    case NK::kNull: return u == 'n';
    case NK::kObject: return u == '{';
    case NK::kArray: return u == '[';
    case NK::kEnum:
      for (const auto& t : n.enum_json)
        if (!t.empty() && static_cast<unsigned char>(t[0]) == u) return true;
      return false;
    case NK::kUnion:
      for (int a : n.alts)
        if (can_start(a, u)) return true;
      return false;
  }
  return false;
}

ToolGrammar::State::Step ToolGrammar::State::value_step(Frame& f, int32_t u) {
  // Resolves which concrete frame this value is from its first byte, then replays the byte.
  const int node = f.id;
  const SchemaNode& n = g_->nodes_[size_t(node)];
  if (!can_start(node, u)) return Step::kReject;
  const bool deep = depth_ >= kMaxDepth - 4;  // nesting limit: no new containers
  switch (n.kind) {
    case NK::kUnion:
      for (int a : n.alts)
        if (can_start(a, u)) {
          f = make(kValue, a);
          return Step::kRetry;
        }
      return Step::kReject;
    case NK::kEnum: f = make(kChoice, g_->enum_set_[size_t(node)]); return Step::kRetry;
    case NK::kObject:
      if (deep) return Step::kReject;
      f = make(kObj, node);
      return Step::kRetry;
    case NK::kArray:
      if (deep) return Step::kReject;
      f = make(kArr, node);
      return Step::kRetry;
    default: break;
  }
  if (u == '"') f = make(kStr, node);
  else if (u == 't') f = make(kLit, g_->lit_true_);
  else if (u == 'f') f = make(kLit, g_->lit_false_);
  else if (u == 'n') f = make(kLit, g_->lit_null_);
  else if (u == '{' && !deep) f = make(kObj, 1);
  else if (u == '[' && !deep) f = make(kArr, 2);
  else if (u == '-' || is_digit(u)) f = make(kNum, node);
  else return Step::kReject;
  return Step::kRetry;
}

ToolGrammar::State::Step ToolGrammar::State::string_step(Frame& f, int32_t u) {
  const SchemaNode& n = g_->nodes_[size_t(f.id)];
  const bool limits = n.kind == NK::kString;
  const int64_t max = limits ? n.max_len : -1, min = limits ? n.min_len : 0;
  if (u < 0 || u > 255) return Step::kReject;
  const uint8_t b = uint8_t(u);
  switch (f.st) {
    case 0:
      if (b != '"') return Step::kReject;
      f.st = 1;
      return Step::kTake;
    case 1:
      if (f.need) return utf8_next(f, b, true) ? Step::kTake : Step::kReject;
      if (b == '"') return f.count >= min ? Step::kDone : Step::kReject;
      if (max >= 0 && f.count >= max) return Step::kReject;
      if (b == '\\') {
        f.st = 2;
        return Step::kTake;
      }
      if (!utf8_next(f, b, true)) return Step::kReject;
      ++f.count;
      return Step::kTake;
    case 2:
      if (b == 'u') {
        f.st = 3, f.pos = 0, f.aux = 0;
        return Step::kTake;
      }
      if (!std::strchr("\"\\/bfnrt", b) || b == 0) return Step::kReject;
      ++f.count, f.st = 1;
      return Step::kTake;
    default:  // \uXXXX; no surrogate halves (\uD800-\uDFFF), which JSON parsers may refuse alone
      if (!is_hex(u)) return Step::kReject;
      if (f.pos == 0 && (b == 'd' || b == 'D')) f.aux = 1;
      if (f.pos == 1 && f.aux == 1 && !(b >= '0' && b <= '7')) return Step::kReject;
      if (++f.pos == 4) ++f.count, f.st = 1;
      return Step::kTake;
  }
}

ToolGrammar::State::Step ToolGrammar::State::number_step(Frame& f, int32_t u) {
  // -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?, at most 15 digits per part (exact in a double) and 2
  // in the exponent (1e999 overflows a double: parsers refuse it) so a model cannot run on
  // forever; integer nodes stop before the fraction.
  const bool integer = g_->nodes_[size_t(f.id)].kind == NK::kInteger;
  const bool digit = is_digit(u);
  auto go = [&](uint8_t st, int32_t count) {
    f.st = st, f.count = count;
    return Step::kTake;
  };
  auto end = [&](bool complete) {
    result_ = 0;
    return complete ? Step::kPass : Step::kReject;
  };
  switch (f.st) {
    case 0:
      if (u == '-') return go(1, 0);
      [[fallthrough]];
    case 1:
      if (u == '0') return go(2, 1);
      if (digit) return go(3, 1);
      return Step::kReject;
    case 2:
    case 3:
      if (f.st == 3 && digit && f.count < 15) return go(3, f.count + 1);
      if (!integer && u == '.') return go(4, 0);
      if (!integer && (u == 'e' || u == 'E')) return go(6, 0);
      return end(true);
    case 4: return digit ? go(5, 1) : Step::kReject;
    case 5:
      if (digit && f.count < 15) return go(5, f.count + 1);
      if (u == 'e' || u == 'E') return go(6, 0);
      return end(true);
    case 6:
      if (u == '+' || u == '-') return go(7, 0);
      return digit ? go(8, 1) : Step::kReject;
    case 7: return digit ? go(8, 1) : Step::kReject;
    default:
      if (digit && f.count < 2) return go(8, f.count + 1);
      return end(true);
  }
}

// Object states: 0 '{' due; 1 after '{'; 2 after "{ "; 3 after ','; 4 after ", "; 5 after a
// key; 6 after "key "; 7 after ':'; 8 value under way; 9 after a value; 10 after "value ".
// One optional space at each of those places (how the family templates print JSON).
ToolGrammar::State::Step ToolGrammar::State::object_step(Frame& f, int32_t u) {
  const SchemaNode& n = g_->nodes_[size_t(f.id)];
  uint64_t required = 0;
  for (size_t i = 0; i < n.props.size(); ++i)
    if (n.props[i].required) required |= uint64_t(1) << i;
  const bool can_close = (required & ~f.bits) == 0;
  const bool free_keys = n.props.empty() && n.extra >= 0;
  bool keys_left = free_keys;
  for (size_t i = 0; i < n.props.size() && !keys_left; ++i) keys_left = !((f.bits >> i) & 1);
  auto key = [&]() {
    if (u != '"' || !keys_left) return Step::kReject;
    if (free_keys) {
      push(make(kStr, 0));
      return Step::kRetry;
    }
    Frame c = make(kChoice, g_->key_set_[size_t(f.id)]);
    c.bits = f.bits;
    return push(c) ? Step::kTake : Step::kReject;
  };
  switch (f.st) {
    case 0:
      if (u != '{') return Step::kReject;
      f.st = 1;
      return Step::kTake;
    case 1:
    case 2:
      if (u == ' ' && f.st == 1) return f.st = 2, Step::kTake;
      if (u == '}') return can_close ? Step::kDone : Step::kReject;
      return key();
    case 3:
    case 4:
      if (u == ' ' && f.st == 3) return f.st = 4, Step::kTake;
      return key();
    case 5:
      if (u == ' ') return f.st = 6, Step::kTake;
      [[fallthrough]];
    case 6:
      if (u != ':') return Step::kReject;
      f.st = 7;
      return Step::kTake;
    case 7:
      if (u == ' ') return f.st = 8, Step::kTake;
      [[fallthrough]];
    case 8: {
      f.st = 8;
      const int node = f.aux >= 0 ? n.props[size_t(f.aux)].node : n.extra;
      return push(make(kValue, node)) ? Step::kRetry : Step::kReject;
    }
    case 9:
      if (u == ' ') return f.st = 10, Step::kTake;
      [[fallthrough]];
    default:
      if (u == ',') return keys_left ? (f.st = 3, Step::kTake) : Step::kReject;
      if (u == '}') return can_close ? Step::kDone : Step::kReject;
      return Step::kReject;
  }
}

ToolGrammar::State::Resume ToolGrammar::State::object_resume(Frame& f) {
  if (f.st >= 1 && f.st <= 4) {  // a key
    const SchemaNode& n = g_->nodes_[size_t(f.id)];
    f.aux = n.props.empty() ? -1 : result_;
    if (f.aux >= 0) f.bits |= uint64_t(1) << f.aux;
    f.st = 5;
  } else {
    f.st = 9;  // a value
  }
  return Resume::kGoOn;
}

// Array states: 0 '[' due; 1 after '['; 2 after "[ "; 3 after ','; 4 after ", "; 5 value under
// way; 6 after a value; 7 after "value ".
ToolGrammar::State::Step ToolGrammar::State::array_step(Frame& f, int32_t u) {
  const SchemaNode& n = g_->nodes_[size_t(f.id)];
  const bool more = n.max_items < 0 || f.count < n.max_items;
  auto item = [&]() {
    if (!more) return Step::kReject;
    f.st = 5;
    return push(make(kValue, n.items)) ? Step::kRetry : Step::kReject;
  };
  switch (f.st) {
    case 0:
      if (u != '[') return Step::kReject;
      f.st = 1;
      return Step::kTake;
    case 1:
    case 2:
      if (u == ' ' && f.st == 1) return f.st = 2, Step::kTake;
      if (u == ']') return n.min_items == 0 ? Step::kDone : Step::kReject;
      return item();
    case 3:
    case 4:
      if (u == ' ' && f.st == 3) return f.st = 4, Step::kTake;
      return item();
    case 6:
      if (u == ' ') return f.st = 7, Step::kTake;
      [[fallthrough]];
    default:
      if (u == ',') return more ? (f.st = 3, Step::kTake) : Step::kReject;
      if (u == ']') return f.count >= n.min_items ? Step::kDone : Step::kReject;
      return Step::kReject;
  }
}

}  // namespace ds4::tok
