#include "support/test_model.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "core/error.h"

namespace ds4::testmodel {
namespace {

std::atomic<int64_t> g_live_states{0};

class TestState : public ModelState {
 public:
  TestState() { g_live_states++; }
  TestState(const TestState& o) : ModelState(o), tokens(o.tokens) { g_live_states++; }
  TestState& operator=(const TestState&) = delete;
  ~TestState() override { g_live_states--; }
  std::vector<int32_t> tokens;
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<TestState>(*this); }
  int64_t position() const override { return int64_t(tokens.size()); }
  size_t bytes() const override { return tokens.size() * sizeof(int32_t) + 4096; }
  void save(std::vector<StateSection>& out) const override { StateWriter(out).vec("tokens", tokens); }
  void load(const std::vector<StateSection>& in) override {
    if (in.size() != 1) throw InputError("test model checkpoint: expected 1 section");
    StateReader(in).vec("tokens", tokens);
  }
};

void append_text(std::vector<int32_t>& out, const std::string& s) {
  // Control markers inside script text become control tokens.
  size_t i = 0;
  while (i < s.size()) {
    bool hit = false;
    for (int32_t id = kImStart; id <= kToolCallEnd; ++id) {
      std::string m = control_text(id);
      if (s.compare(i, m.size(), m) == 0) {
        out.push_back(id);
        i += m.size();
        hit = true;
        break;
      }
    }
    if (!hit) out.push_back(int32_t(uint8_t(s[i++])));
  }
}

std::string bytes_of(const std::vector<int32_t>& t, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i)
    if (t[i] < 256) s.push_back(char(t[i]));
  return s;
}

}  // namespace

int64_t TestModel::live_states() { return g_live_states.load(); }

const char* control_text(int32_t id) {
  switch (id) {
    case kImStart: return "<|im_start|>";
    case kImEnd: return "<|im_end|>";
    case kThink: return "<think>";
    case kThinkEnd: return "</think>";
    case kToolCall: return "<tool_call>";
    case kToolCallEnd: return "</tool_call>";
  }
  return nullptr;
}

TestModel::TestModel(std::string family, int64_t max_context, std::chrono::microseconds delay)
    : delay_(delay) {
  info_.family = std::move(family);
  info_.name = "ds4-test-scripted";
  info_.vocab_size = kVocab;
  info_.hidden_size = 8;
  info_.max_context = max_context;
  info_.eos_token_ids = {kImEnd};
  info_.default_prefill_chunk = 64;
}

std::unique_ptr<ModelState> TestModel::new_state() const { return std::make_unique<TestState>(); }

std::vector<int32_t> TestModel::script_for(const std::vector<int32_t>& h) {
  // The assistant turn starts after the last "<|im_start|>assistant\n".
  const std::string head = "assistant\n";
  size_t start = std::string::npos;
  for (size_t i = h.size(); i-- > 0;)
    if (h[i] == kImStart && bytes_of(h, i + 1, std::min(h.size(), i + 1 + head.size())) == head) {
      start = i + 1 + head.size();
      break;
    }
  if (start == std::string::npos) return {kImEnd};
  // Last user turn: "<|im_start|>user\n" ... "<|im_end|>" before `start`.
  std::string user;
  for (size_t i = start; i-- > 0;)
    if (h[i] == kImStart && bytes_of(h, i + 1, std::min(h.size(), i + 6)) == "user\n") {
      size_t end = i + 6;
      while (end < h.size() && h[end] != kImEnd) ++end;
      user = bytes_of(h, i + 6, end);
      break;
    }
  const bool thinking = start < h.size() && h[start] == kThink;
  std::string answer;
  if (user.rfind("<tool_response>", 0) == 0) {
    std::string r = user.substr(std::string("<tool_response>\n").size());
    r = r.substr(0, r.find("\n</tool_response>"));
    answer = "Tool said: " + r + ".";
  } else if (user.find("call tool") != std::string::npos) {
    answer = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>";
  } else if (user.find("count") != std::string::npos) {
    for (int i = 1; i <= 5000; ++i) answer += std::to_string(i) + " ";
  } else {
    answer = "Echo: " + user + ". Done.";
  }
  std::string text = thinking ? "\nThe user wrote " + std::to_string(user.size()) + " bytes.\n</think>\n\n" + answer
                              : answer;
  std::vector<int32_t> out;
  append_text(out, text);
  out.push_back(kImEnd);
  // Offset of generation inside the script: tokens already generated after `start`
  // (the "<think>" of the prompt belongs to the prompt).
  const size_t gen_from = start + (thinking ? 1 : 0);
  const size_t done = h.size() - std::min(h.size(), gen_from);
  if (done >= out.size()) return {kImEnd};
  return std::vector<int32_t>(out.begin() + done, out.end());
}

void TestModel::forward(ModelState& state, std::span<const int32_t> tokens, Logits mode,
                        std::vector<float>& logits) {
  auto& st = static_cast<TestState&>(state);
  if (int64_t(st.tokens.size() + tokens.size()) > info_.max_context)
    throw InputError("test model: context overflow");
  const size_t v = size_t(kVocab);
  logits.assign(mode == Logits::kAll ? tokens.size() * v : mode == Logits::kLast ? v : 0, 0.0f);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= kVocab) throw InputError("test model: token out of range");
    st.tokens.push_back(tokens[i]);
    forwarded_++;
    if (delay_.count()) std::this_thread::sleep_for(delay_);
    const bool want = mode == Logits::kAll || (mode == Logits::kLast && i + 1 == tokens.size());
    if (!want) continue;
    float* row = logits.data() + (mode == Logits::kAll ? i * v : 0);
    row[script_for(st.tokens).front()] = 20.0f;
  }
}

}  // namespace ds4::testmodel
