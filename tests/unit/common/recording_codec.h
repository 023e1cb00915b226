#pragma once
// A production codec (TokCodec) that records the token ids every turn pushed into its
// detokenizer, so tests compare exact emitted ids (the text of a random-weight model is
// noise), and that reads a raw prompt spelled "#ids 1 2 3" as exactly those ids.
#include <deque>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/codec.h"
#include "engine/tok_codec.h"

namespace ds4::engine {

// One vector per turn, in the order the turns' streams were made (the engine makes a turn's
// stream when it starts the turn: admission order). A deque: a stream keeps a pointer to its
// vector while later turns' vectors are appended (concurrent turns).
using IdLog = std::shared_ptr<std::deque<std::vector<int32_t>>>;

class RecordingStream : public TextStream {
 public:
  RecordingStream(std::unique_ptr<TextStream> s, std::vector<int32_t>* ids) : s_(std::move(s)), ids_(ids) {}
  std::string push(int32_t id) override {
    ids_->push_back(id);
    return s_->push(id);
  }
  std::string finish() override { return s_->finish(); }

 private:
  std::unique_ptr<TextStream> s_;
  std::vector<int32_t>* ids_;
};

class RecordingCodec : public Codec {
 public:
  RecordingCodec(std::unique_ptr<TokCodec> c, IdLog log) : c_(std::move(c)), log_(std::move(log)) {}
  std::string family() const override { return c_->family(); }
  std::vector<int32_t> render(const tok::Conversation& conv) const override { return c_->render(conv); }
  tok::Continuation continuation(const std::vector<int32_t>& h, const tok::Conversation& conv) const override {
    return c_->continuation(h, conv);
  }
  std::vector<int32_t> encode(std::string_view text) const override {
    if (!text.starts_with(kIdPrompt)) return c_->encode(text);
    std::vector<int32_t> ids;
    std::istringstream in{std::string(text.substr(kIdPrompt.size()))};
    for (int32_t id; in >> id;) ids.push_back(id);
    return ids;
  }
  static constexpr std::string_view kIdPrompt = "#ids ";
  std::unique_ptr<TextStream> stream() const override {
    log_->emplace_back();  // on the engine thread
    return std::make_unique<RecordingStream>(c_->stream(), &log_->back());
  }
  std::unique_ptr<tok::OutputParser> parser(bool thinking) const override { return c_->parser(thinking); }
  bool starts_in_reasoning(const tok::Conversation& conv) const override { return c_->starts_in_reasoning(conv); }
  std::string token_bytes(int32_t id) const override { return c_->token_bytes(id); }
  bool is_stop_token(int32_t id) const override { return c_->is_stop_token(id); }

 private:
  std::unique_ptr<TokCodec> c_;
  IdLog log_;
};

}  // namespace ds4::engine
