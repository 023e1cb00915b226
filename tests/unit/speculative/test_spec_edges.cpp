// Speculative decoding at the edges of a turn, through the engine on models/default (which
// has an MTP head): a cancel between cycles, the context ending inside a draft, and a chat
// that is checkpointed to disk, restarted and continued mid-conversation.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "chat_test_util.h"
#include "engine/engine.h"
#include "engine/tok_codec.h"
#include "models/model.h"

namespace ds4::engine {
namespace {
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kModel = std::string(DS4_ROOT) + "/models/default";

std::unique_ptr<Engine> engine(int depth, int64_t context = 0, const std::string& ckpt = "") {
  auto model = load_model(kModel);
  auto codec = TokCodec::open(kModel, model->info().family);
  EngineOptions o;
  o.spec_depth = depth;
  o.context_size = context;
  o.checkpoint_dir = ckpt;
  return std::make_unique<Engine>(std::move(model), std::move(codec), o);
}

using ds4::test::msg;

struct Answer {
  std::string text;
  GenEvent done;
};

// cancel_after > 0: cancel once that many content events arrived.
Answer run(Engine& e, const std::vector<tok::Message>& msgs, int64_t max_tokens, int cancel_after = 0) {
  GenRequest r;
  r.conv.messages = msgs;
  r.conv.thinking = tok::Thinking::kOff;
  r.max_tokens = max_tokens;
  r.sampler.temperature = 0;
  auto h = e.submit(r);
  Answer a;
  int events = 0;
  for (;;) {
    auto ev = h->next(60s);
    if (!ev) throw std::runtime_error("timeout");
    if (ev->kind == GenEvent::Kind::kError) throw std::runtime_error(ev->text);
    if (ev->kind == GenEvent::Kind::kDone) {
      a.done = *ev;
      return a;
    }
    if (ev->kind == GenEvent::Kind::kContent) {
      a.text += ev->text;
      if (cancel_after > 0 && ++events == cancel_after) h->cancel();
    }
  }
}

const std::vector<tok::Message> kStory = {msg("user", "Tell me a short story about a cat who learns to fly.")};

TEST(SpecEdges, CancelBetweenCyclesKeepsTextAndPublishesNoHalfState) {
  auto ref = engine(0);
  const Answer full = run(*ref, kStory, 120);
  auto e = engine(3);
  const Answer cut = run(*e, kStory, 120, 3);
  EXPECT_EQ(cut.done.finish, Finish::kCancelled);
  ASSERT_FALSE(cut.text.empty());
  EXPECT_EQ(full.text.rfind(cut.text, 0), 0u) << "the partial text is a prefix of the answer";
  EXPECT_LT(cut.text.size(), full.text.size());
  EXPECT_EQ(cut.done.usage.spec_full_replays, 0);
  // Whatever the cancelled turn left in the prefix cache, the same question again gives the
  // uncancelled answer (a half-finished speculative state would change it).
  const Answer again = run(*e, kStory, 120);
  EXPECT_EQ(again.text, full.text);
  EXPECT_EQ(again.done.finish, full.done.finish);
}

TEST(SpecEdges, ContextEndInsideDraftStopsLikeTargetOnly) {
  // Sweep the context size so its end falls at every offset of a 3-draft cycle.
  int ended = 0;
  for (int64_t ctx = 40; ctx < 48; ++ctx) {
    auto a = engine(0, ctx), s = engine(3, ctx);
    const Answer ar = run(*a, kStory, 200), sp = run(*s, kStory, 200);
    EXPECT_EQ(sp.text, ar.text) << "context " << ctx;
    EXPECT_EQ(sp.done.finish, ar.done.finish) << "context " << ctx;
    EXPECT_EQ(sp.done.usage.completion_tokens, ar.done.usage.completion_tokens) << "context " << ctx;
    EXPECT_EQ(sp.done.usage.spec_full_replays, 0);
    ended += ar.done.finish == Finish::kContext;
  }
  EXPECT_GT(ended, 4) << "the sweep must actually hit the context end";
}

using ds4::test::TempDir;

// Two turns; returns the messages of turn 3.
std::vector<tok::Message> two_turns(Engine& e, Usage* u2 = nullptr) {
  std::vector<tok::Message> msgs = {msg("user", "Hello!")};
  msgs.push_back(msg("assistant", run(e, msgs, 60).text));
  msgs.push_back(msg("user", "What is a dictionary in Python?"));
  const Answer r2 = run(e, msgs, 60);
  if (u2) *u2 = r2.done.usage;
  msgs.push_back(msg("assistant", r2.text));
  msgs.push_back(msg("user", "Write a Python function that returns the square of a number."));
  return msgs;
}

TEST(SpecEdges, SaveRestoreMidChatContinuesLikeNeverLeaving) {
  TempDir dir("ds4-spec-ckpt");
  auto stay = engine(3);
  const auto msgs = two_turns(*stay);
  const Answer ref3 = run(*stay, msgs, 80);
  auto plain = engine(0);
  two_turns(*plain);
  EXPECT_EQ(run(*plain, msgs, 80).text, ref3.text) << "speculation changed a greedy answer";

  Usage u2;
  {
    auto e = engine(3, 0, dir.path);
    const auto again = two_turns(*e, &u2);
    ASSERT_EQ(again.size(), msgs.size());
    for (size_t i = 0; i < msgs.size(); ++i) EXPECT_EQ(again[i].content, msgs[i].content);
  }  // destroying the engine finishes the checkpoint writes
  ASSERT_FALSE(fs::is_empty(dir.path));
  auto e = engine(3, 0, dir.path);
  const Answer r3 = run(*e, msgs, 80);
  EXPECT_EQ(r3.text, ref3.text);
  EXPECT_EQ(r3.done.usage.cached_tokens, u2.prompt_tokens + u2.completion_tokens) << "restored, no full prefill";
  EXPECT_EQ(r3.done.usage.spec_mode, "greedy");
  EXPECT_GT(r3.done.usage.spec_accepted, 0);
  EXPECT_EQ(r3.done.usage.spec_full_replays, 0);
}

}  // namespace
}  // namespace ds4::engine
