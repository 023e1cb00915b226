#pragma once
// Helpers shared by the engine tests: drain a request into one result, build chat requests,
// an engine on the scripted test model (tests/support).
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "support/test_codec.h"
#include "support/test_model.h"

namespace ds4::engine {
using namespace std::chrono_literals;

struct Result {
  std::string reasoning, content;
  std::vector<tok::ToolCall> calls;
  GenEvent done;
  int progress = 0;
};

inline Result collect(RequestHandle& h) {
  Result r;
  for (;;) {
    auto ev = h.next(10s);
    if (!ev) throw std::runtime_error("timeout");
    switch (ev->kind) {
      case GenEvent::Kind::kReasoning: r.reasoning += ev->text; break;
      case GenEvent::Kind::kContent: r.content += ev->text; break;
      case GenEvent::Kind::kToolCall: r.calls.push_back(ev->call); break;
      case GenEvent::Kind::kProgress: r.progress++; break;
      case GenEvent::Kind::kStarted: break;
      case GenEvent::Kind::kDone: r.done = *ev; return r;
      case GenEvent::Kind::kError: throw std::runtime_error(ev->text);
    }
  }
}

inline std::unique_ptr<Engine> make_engine(std::chrono::microseconds delay = {}, std::string family = "qwen_test",
                                           EngineOptions options = {}) {
  return std::make_unique<Engine>(std::make_unique<testmodel::TestModel>(family, 4096, delay),
                                  std::make_unique<testmodel::TestCodec>(), options);
}

inline GenRequest chat(std::vector<tok::Message> msgs, bool thinking = false) {
  GenRequest r;
  r.conv.messages = std::move(msgs);
  r.conv.thinking = thinking ? tok::Thinking::kOn : tok::Thinking::kOff;
  r.max_tokens = 200;
  return r;
}
inline tok::Message msg(std::string role, std::string s) {
  tok::Message m;
  m.role = std::move(role);
  m.content = std::move(s);
  return m;
}
inline tok::Message user(std::string s) { return msg("user", std::move(s)); }
inline tok::Message assistant(std::string s) { return msg("assistant", std::move(s)); }

}  // namespace ds4::engine
