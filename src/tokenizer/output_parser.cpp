// Streaming split of generated text into reasoning / content / tool calls. One state
// machine for all families; what differs is a spec (markers, trimming) and the parser of
// one complete tool-call block. Markers can arrive split across chunks at any byte: text
// that could still be the start of a marker is held back until it is decided.
#include <algorithm>

#include "tokenizer/chat_template.h"
#include "tokenizer/template_util.h"
#include "tokenizer/tool_call_parse.h"
#include "tokenizer/utf8.h"

namespace ds4::tok {

namespace {

struct Spec {
  std::string think_open = "<think>", think_close = "</think>";
  std::string tool_open, tool_close;
  bool trim = false;  // template strips content/reasoning: drop edge whitespace (Qwen, GLM)
  bool (*parse_block)(std::string_view body, std::vector<ToolCall>& out, const StringArgs* strings) = nullptr;
  // The other style of tool-call block (DSML vs <tool_call>): a model that writes it means
  // a call, in a format this family's parser cannot take.
  std::string foreign_open, foreign_close;
};

Spec spec_for(Family f) {
  Spec s;
  switch (f) {
    case Family::kDeepSeekV4:
      s.tool_open = "<｜DSML｜tool_calls>";
      s.tool_close = "</｜DSML｜tool_calls>";
      s.parse_block = parse_dsml_block;
      s.foreign_open = "<tool_call>";
      s.foreign_close = "</tool_call>";
      break;
    case Family::kQwen35:
      s.tool_open = "<tool_call>";
      s.tool_close = "</tool_call>";
      s.trim = true;
      s.parse_block = parse_qwen_block;
      s.foreign_open = "<｜DSML｜tool_calls>";
      s.foreign_close = "</｜DSML｜tool_calls>";
      break;
    case Family::kGlm5:
      s.tool_open = "<tool_call>";
      s.tool_close = "</tool_call>";
      s.trim = true;
      s.parse_block = parse_glm_block;
      s.foreign_open = "<｜DSML｜tool_calls>";
      s.foreign_close = "</｜DSML｜tool_calls>";
      break;
  }
  return s;
}

// Length of the longest suffix of s that is a proper prefix of marker.
size_t partial_suffix(std::string_view s, std::string_view marker) {
  if (marker.empty()) return 0;
  size_t max = std::min(s.size(), marker.size() - 1);
  for (size_t k = max; k > 0; --k)
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

class Parser : public OutputParser {
 public:
  Parser(Family f, bool thinking, const std::vector<std::string>& tools)
      : spec_(spec_for(f)), state_(thinking ? kReasoning : kContent), strings_(string_args_of(tools)) {
    if (tools.empty()) spec_.foreign_open.clear();  // without tools such text is just text
  }

  std::vector<ParseEvent> feed(std::string_view chunk) override {
    buf_.append(chunk);
    std::vector<ParseEvent> ev;
    while (step(ev, false)) {
    }
    return ev;
  }

  std::vector<ParseEvent> finish() override {
    std::vector<ParseEvent> ev;
    while (step(ev, false)) {
    }
    if (state_ == kTool) {
      error(ev, "truncated", "the output ended inside a tool call (no " + spec_.tool_close + ")",
            spec_.tool_open + buf_);
    } else if (state_ == kForeign) {
      error(ev, "foreign_format", "a tool call in another format than this model's " + spec_.tool_open,
            spec_.foreign_open + buf_);
    } else {
      emit_text(ev, state_ == kReasoning ? ParseEvent::Kind::kReasoning : ParseEvent::Kind::kContent, buf_, true);
    }
    buf_.clear();
    state_ = kContent;
    return ev;
  }

 private:
  enum State { kReasoning, kContent, kTool, kForeign };

  void error(std::vector<ParseEvent>& ev, const char* type, std::string message, std::string text) {
    ParseEvent e{ParseEvent::Kind::kToolCallError, std::move(text), {}, type, std::move(message)};
    ev.push_back(std::move(e));
    kind_ = ParseEvent::Kind::kToolCall;
  }

  // Emits text of one segment kind; with trim, leading whitespace of a segment and trailing
  // whitespace (until more text proves it inner) are held back.
  void emit_text(std::vector<ParseEvent>& ev, ParseEvent::Kind kind, std::string_view text, bool final) {
    if (kind != kind_) {
      kind_ = kind;
      at_start_ = true;
      ws_.clear();
    }
    std::string out;
    for (char c : text) {
      if (is_ws(c) && (spec_.trim || kind == ParseEvent::Kind::kContent)) {
        if (!(spec_.trim && at_start_)) ws_ += c;
        continue;
      }
      out += ws_;
      ws_.clear();
      out += c;
      at_start_ = false;
    }
    // Trailing whitespace of content is dropped before a tool call and at the end only in
    // trimming families; DeepSeek keeps it at the end (its template keeps content as is).
    if (final && !spec_.trim) {
      out += ws_;
      ws_.clear();
    }
    if (out.empty()) return;
    if (!ev.empty() && ev.back().kind == kind)
      ev.back().text += out;
    else
      ev.push_back({kind, out, {}, {}, {}});
  }

  // Safe length to emit: not inside a possible marker start nor a UTF-8 character.
  size_t safe_len(std::initializer_list<const std::string*> markers) const {
    size_t hold = 0;
    for (const auto* m : markers) hold = std::max(hold, partial_suffix(buf_, *m));
    size_t n = buf_.size() - hold;
    return utf8_complete_prefix(std::string_view(buf_).substr(0, n));
  }

  bool step(std::vector<ParseEvent>& ev, bool) {
    using K = ParseEvent::Kind;
    if (state_ == kReasoning) {
      size_t p = buf_.find(spec_.think_close);
      if (p == std::string::npos) {
        size_t n = safe_len({&spec_.think_close});
        emit_text(ev, K::kReasoning, std::string_view(buf_).substr(0, n), false);
        buf_.erase(0, n);
        return false;
      }
      emit_text(ev, K::kReasoning, std::string_view(buf_).substr(0, p), false);
      buf_.erase(0, p + spec_.think_close.size());
      ws_.clear();  // whitespace before </think> never belongs to the answer
      state_ = kContent;
      return true;
    }
    if (state_ == kContent) {
      if (!started_content_) {
        // A model may open its own <think> block at the start of a non-thinking prompt.
        if (buf_.size() < spec_.think_open.size() && spec_.think_open.compare(0, buf_.size(), buf_) == 0)
          return false;
        started_content_ = true;
        if (buf_.compare(0, spec_.think_open.size(), spec_.think_open) == 0) {
          buf_.erase(0, spec_.think_open.size());
          state_ = kReasoning;
          return true;
        }
      }
      size_t p = buf_.find(spec_.tool_open);
      const size_t q = spec_.foreign_open.empty() ? std::string::npos : buf_.find(spec_.foreign_open);
      if (p == std::string::npos && q == std::string::npos) {
        size_t n = safe_len({&spec_.tool_open, &spec_.foreign_open});
        emit_text(ev, K::kContent, std::string_view(buf_).substr(0, n), false);
        buf_.erase(0, n);
        return false;
      }
      const bool foreign = q < p;
      if (foreign) p = q;
      emit_text(ev, K::kContent, std::string_view(buf_).substr(0, p), false);
      ws_.clear();  // the template's separator before a tool call is not content
      buf_.erase(0, p + (foreign ? spec_.foreign_open : spec_.tool_open).size());
      state_ = foreign ? kForeign : kTool;
      return true;
    }
    if (state_ == kForeign) {
      size_t p = buf_.find(spec_.foreign_close);
      if (p == std::string::npos) return false;
      error(ev, "foreign_format", "a tool call in another format than this model's " + spec_.tool_open,
            spec_.foreign_open + buf_.substr(0, p + spec_.foreign_close.size()));
      buf_.erase(0, p + spec_.foreign_close.size());
      state_ = kContent;
      return true;
    }
    size_t p = buf_.find(spec_.tool_close);
    if (p == std::string::npos) return false;
    std::string body = buf_.substr(0, p);
    std::vector<ToolCall> calls;
    if (spec_.parse_block(body, calls, &strings_)) {
      for (auto& c : calls) ev.push_back({K::kToolCall, {}, std::move(c), {}, {}});
      kind_ = K::kToolCall;
    } else {
      error(ev, "malformed", "a tool call block that is not in this model's format", spec_.tool_open + body + spec_.tool_close);
    }
    buf_.erase(0, p + spec_.tool_close.size());
    state_ = kContent;
    return true;
  }

  Spec spec_;
  State state_;
  StringArgs strings_;
  std::string buf_;
  std::string ws_;
  ParseEvent::Kind kind_ = ParseEvent::Kind::kToolCall;
  bool at_start_ = true;
  bool started_content_ = false;
};

}  // namespace

std::unique_ptr<OutputParser> OutputParser::create(Family family, bool thinking, const std::vector<std::string>& tools) {
  return std::make_unique<Parser>(family, thinking, tools);
}

ParsedOutput parse_output(Family family, bool thinking, std::string_view text, const std::vector<std::string>& tools) {
  auto p = OutputParser::create(family, thinking, tools);
  auto ev = p->feed(text);
  auto tail = p->finish();
  ev.insert(ev.end(), tail.begin(), tail.end());
  ParsedOutput out;
  for (auto& e : ev) {
    if (e.kind == ParseEvent::Kind::kReasoning) out.reasoning += e.text;
    else if (e.kind == ParseEvent::Kind::kContent) out.content += e.text;
    else if (e.kind == ParseEvent::Kind::kToolCallError) out.tool_errors.push_back(std::move(e));
    else out.tool_calls.push_back(std::move(e.call));
  }
  return out;
}

}  // namespace ds4::tok
