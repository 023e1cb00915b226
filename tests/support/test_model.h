#pragma once
// A deterministic scripted model for engine/server tests. Vocabulary: 256 byte tokens plus
// ChatML-like control tokens. Its "state" is the token history, so a wrong cached state
// shows up as a different answer. The answer is a pure function of the last user turn:
//   "call tool"      -> a <tool_call> JSON for get_weather(city=Paris)
//   "count"          -> "1 2 3 ..." (long; ends by max_tokens)
//   <tool_response>  -> "Tool said: <the response>."
//   anything else    -> "Echo: <the user text>. Done."
// Each step puts logit 20 on the scripted token and 0 elsewhere, so every sampler with
// top-p < 1 or top-k picks it; with thinking the answer starts with a reasoning block.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace ds4::testmodel {

enum TestToken : int32_t {
  kImStart = 256, kImEnd = 257, kThink = 258, kThinkEnd = 259, kToolCall = 260,
  kToolCallEnd = 261, kVocab = 300
};
const char* control_text(int32_t id);  // "<|im_start|>" ... or nullptr

class TestModel : public Model {
 public:
  explicit TestModel(std::string family = "qwen_test", int64_t max_context = 4096,
                     std::chrono::microseconds delay = {});
  const ModelInfo& info() const override { return info_; }
  std::unique_ptr<ModelState> new_state() const override;
  void forward(ModelState& state, std::span<const int32_t> tokens, Logits mode,
               std::vector<float>& logits) override;
  // The scripted continuation for a history (for test expectations).
  static std::vector<int32_t> script_for(const std::vector<int32_t>& history);
  uint64_t forwarded_tokens() const { return forwarded_; }
  // States alive in this process (every model's, clones included): what the prefix cache
  // and the live sessions hold; tests check that evicted entries free theirs.
  static int64_t live_states();

 private:
  ModelInfo info_;
  std::chrono::microseconds delay_;
  uint64_t forwarded_ = 0;
};

}  // namespace ds4::testmodel
