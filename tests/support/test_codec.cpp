#include "support/test_codec.h"

#include <nlohmann/json.hpp>

#include "support/test_model.h"

namespace ds4::testmodel {
namespace {

void text(std::vector<int32_t>& out, std::string_view s) {
  for (unsigned char c : s) out.push_back(int32_t(c));
}

void turn(std::vector<int32_t>& out, std::string_view role, std::string_view body) {
  out.push_back(kImStart);
  text(out, role);
  text(out, "\n");
  text(out, body);
  out.push_back(kImEnd);
  text(out, "\n");
}

class ByteStream : public engine::TextStream {
 public:
  std::string push(int32_t id) override {
    if (id >= 256) return control_text(id) ? control_text(id) : "";
    pending_.push_back(char(id));
    // Emit the longest prefix that does not end inside an incomplete UTF-8 sequence.
    size_t n = pending_.size(), cut = n;
    for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
      unsigned char c = pending_[n - back];
      if ((c & 0xC0) == 0x80) continue;
      size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (need > back) cut = n - back;
      break;
    }
    std::string out = pending_.substr(0, cut);
    pending_.erase(0, cut);
    return out;
  }
  std::string finish() override {
    std::string out;
    out.swap(pending_);
    return out;
  }

 private:
  std::string pending_;
};

// Streams reasoning until </think>, content until <tool_call>, then one JSON call per block.
class Parser : public tok::OutputParser {
 public:
  explicit Parser(bool thinking) : mode_(thinking ? kReasoning : kContent) {}
  std::vector<tok::ParseEvent> feed(std::string_view chunk) override {
    buf_.append(chunk);
    std::vector<tok::ParseEvent> out;
    while (step(out, false)) {}
    return out;
  }
  std::vector<tok::ParseEvent> finish() override {
    std::vector<tok::ParseEvent> out;
    while (step(out, true)) {}
    if (!buf_.empty()) {
      out.push_back({mode_ == kReasoning ? tok::ParseEvent::Kind::kReasoning : tok::ParseEvent::Kind::kContent,
                     (mode_ == kTool ? "<tool_call>" : "") + buf_, {}, {}, {}});
      buf_.clear();
    }
    return out;
  }

 private:
  enum Mode { kReasoning, kContent, kTool } mode_;
  std::string buf_;
  bool skip_newlines_ = false;

  bool step(std::vector<tok::ParseEvent>& out, bool final) {
    const std::string marker = mode_ == kReasoning ? "</think>" : mode_ == kContent ? "<tool_call>" : "</tool_call>";
    size_t at = buf_.find(marker);
    if (at == std::string::npos) {
      if (mode_ == kTool) return false;
      // Keep a possible partial marker at the end.
      size_t keep = 0;
      if (!final)
        for (size_t n = std::min(marker.size() - 1, buf_.size()); n > 0; --n)
          if (buf_.compare(buf_.size() - n, n, marker, 0, n) == 0) {
            keep = n;
            break;
          }
      emit(out, buf_.substr(0, buf_.size() - keep));
      buf_.erase(0, buf_.size() - keep);
      return false;
    }
    if (mode_ == kTool) {
      auto j = nlohmann::json::parse(buf_.substr(0, at), nullptr, false);
      if (j.is_object() && j.contains("name")) {
        tok::ToolCall c;
        c.name = j["name"].get<std::string>();
        c.arguments = j.value("arguments", nlohmann::json::object()).dump();
        out.push_back({tok::ParseEvent::Kind::kToolCall, {}, c, {}, {}});
      } else {
        out.push_back({tok::ParseEvent::Kind::kContent, "<tool_call>" + buf_.substr(0, at + marker.size()), {}, {}, {}});
      }
      mode_ = kContent;
    } else {
      emit(out, buf_.substr(0, at));
      if (mode_ == kReasoning) {
        mode_ = kContent;
        skip_newlines_ = true;  // the template puts "\n\n" after </think>
        buf_.erase(0, at + marker.size());
        return true;
      }
      mode_ = kTool;
    }
    buf_.erase(0, at + marker.size());
    return true;
  }

  void emit(std::vector<tok::ParseEvent>& out, std::string s) {
    if (mode_ == kTool && s.size() && s.front() == '\n') s.erase(0, 1);
    if (mode_ == kContent && skip_newlines_) {
      size_t n = 0;
      while (n < s.size() && s[n] == '\n') ++n;
      s.erase(0, n);
      if (!s.empty()) skip_newlines_ = false;
    }
    if (s.empty()) return;
    out.push_back({mode_ == kReasoning ? tok::ParseEvent::Kind::kReasoning : tok::ParseEvent::Kind::kContent, s, {}, {}, {}});
  }
};

}  // namespace

std::vector<int32_t> TestCodec::render(const tok::Conversation& conv) const {
  std::vector<int32_t> out;
  if (!conv.tools.empty()) {
    std::string sys = "# Tools\n";
    for (const auto& t : conv.tools) sys += t + "\n";
    turn(out, "system", sys);
  }
  for (const auto& m : conv.messages) {
    if (m.role == "tool") {
      turn(out, "user", "<tool_response>\n" + m.content + "\n</tool_response>");
    } else if (m.role == "assistant") {
      out.push_back(kImStart);
      text(out, "assistant\n");
      text(out, m.content);
      for (const auto& c : m.tool_calls) {
        out.push_back(kToolCall);
        text(out, "\n{\"name\": \"" + c.name + "\", \"arguments\": " + c.arguments + "}\n");
        out.push_back(kToolCallEnd);
      }
      out.push_back(kImEnd);
      text(out, "\n");
    } else {
      turn(out, m.role, m.content);
    }
  }
  if (conv.add_generation_prompt) {
    out.push_back(kImStart);
    text(out, "assistant\n");
    if (conv.thinking != tok::Thinking::kOff) out.push_back(kThink);
  }
  return out;
}

std::vector<int32_t> TestCodec::encode(std::string_view s) const {
  std::vector<int32_t> out;
  text(out, s);
  return out;
}

std::unique_ptr<engine::TextStream> TestCodec::stream() const { return std::make_unique<ByteStream>(); }

std::unique_ptr<tok::OutputParser> TestCodec::parser(bool thinking) const {
  return std::make_unique<Parser>(thinking);
}

bool TestCodec::starts_in_reasoning(const tok::Conversation& conv) const {
  return conv.add_generation_prompt && conv.thinking != tok::Thinking::kOff;
}

bool TestCodec::is_stop_token(int32_t id) const { return id == kImEnd; }

std::string TestCodec::token_bytes(int32_t id) const {
  if (id < 256) return std::string(1, char(id));
  return control_text(id) ? control_text(id) : "";
}

}  // namespace ds4::testmodel
