#pragma once
// ChatML-like codec for the scripted test model (test_model.h): byte tokens + control
// tokens, a tiny template, and a streaming parser for <think> and <tool_call> blocks.
#include "engine/codec.h"

namespace ds4::testmodel {

class TestCodec : public engine::Codec {
 public:
  std::string family() const override { return "test"; }
  std::vector<int32_t> render(const tok::Conversation& conv) const override;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::unique_ptr<engine::TextStream> stream() const override;
  std::unique_ptr<tok::OutputParser> parser(bool thinking) const override;
  bool starts_in_reasoning(const tok::Conversation& conv) const override;
  bool is_stop_token(int32_t id) const override;
};

}  // namespace ds4::testmodel
