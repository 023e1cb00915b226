// Prompt reuse with thinking on when the client drops the reasoning (issue #25): the test
// codec, like the real templates, renders a past assistant turn without its reasoning, so
// neither the prompt-end nor the turn-end state is a prefix of the next prompt. The engine
// keeps the state at the end of the last message (engine/turn_boundary.h): the next turn
// continues from there, in memory and after a restart from disk, with the answer a full
// prefill gives; evicted entries free their states.
#include <gtest/gtest.h>

#include "chat_test_util.h"
#include "engine/turn_boundary.h"
#include "engine_test_util.h"

using namespace ds4;
using namespace ds4::engine;
using ds4::test::TempDir;

namespace {

GenRequest thinking_chat(const std::vector<tok::Message>& msgs) {
  GenRequest r = chat(msgs, /*thinking=*/true);
  r.max_tokens = 200;
  return r;
}

Result run(Engine& e, const std::vector<tok::Message>& msgs) { return collect(*e.submit(thinking_chat(msgs))); }

// Tokens of the conversation up to the end of its last message (no generation prompt).
size_t history_tokens(const std::vector<tok::Message>& msgs) {
  tok::Conversation c = thinking_chat(msgs).conv;
  c.add_generation_prompt = false;
  return testmodel::TestCodec().render(c).size();
}

std::unique_ptr<Engine> engine_with(EngineOptions o) {
  return std::make_unique<Engine>(std::make_unique<testmodel::TestModel>("qwen_test", 4096),
                                  std::make_unique<testmodel::TestCodec>(), o);
}

EngineOptions no_cache() {
  EngineOptions o;
  o.cache_bytes = 0;  // nothing fits: every turn is a full prefill (the reference)
  return o;
}

}  // namespace

TEST(TurnBoundary, EndOfTheLastMessage) {
  testmodel::TestCodec codec;
  GenRequest r = thinking_chat({user("one")});
  const auto prompt = codec.render(r.conv);
  // <|im_start|>user\none<|im_end|>\n = 11 tokens, then <|im_start|>assistant\n<think> (12).
  EXPECT_EQ(prompt.size(), 23u);
  EXPECT_EQ(turn_boundary(codec, r.conv, prompt), 11u);
  r.conv.add_generation_prompt = false;
  EXPECT_EQ(turn_boundary(codec, r.conv, codec.render(r.conv)), 0u);  // nothing after it
}

TEST(TurnBoundary, DroppedReasoningReusesEverythingUpToThePreviousUserMessage) {
  EngineOptions o;
  o.prefill_chunk = 5;  // the boundary falls inside a chunk: the engine cuts the chunk there
  auto e = engine_with(o);
  auto ref = engine_with(no_cache());
  std::vector<tok::Message> msgs = {user("one")};
  const auto r1 = run(*e, msgs);
  EXPECT_EQ(r1.reasoning, "\nThe user wrote 3 bytes.\n");
  EXPECT_EQ(r1.content, "Echo: one. Done.");
  EXPECT_EQ(r1.done.usage.cached_tokens, 0);
  for (const char* next : {"two", "three", "four"}) {
    const size_t must = history_tokens(msgs);
    msgs.push_back(assistant(run(*ref, msgs).content));  // the answer only, no reasoning
    msgs.push_back(user(next));
    const auto got = run(*e, msgs);
    const auto want = run(*ref, msgs);
    EXPECT_EQ(got.content, std::string("Echo: ") + next + ". Done.");
    EXPECT_EQ(got.content, want.content);
    EXPECT_EQ(got.reasoning, want.reasoning);
    EXPECT_EQ(want.done.usage.cached_tokens, 0);
    EXPECT_EQ(got.done.usage.cached_tokens, int64_t(must)) << next;
    EXPECT_EQ(got.done.usage.prompt_tokens, want.done.usage.prompt_tokens);
  }
  const auto m = e->metrics();
  EXPECT_EQ(m.computed_prompt_tokens, m.prompt_tokens - m.cached_tokens);
}

TEST(TurnBoundary, RestartedEngineResumesAtTheBoundaryFromDisk) {
  TempDir dir("ds4-turn-boundary");
  EngineOptions o;
  o.checkpoint_dir = dir.path;
  std::vector<tok::Message> msgs = {user("one")};
  {
    auto e = engine_with(o);
    msgs.push_back(assistant(run(*e, msgs).content));
    msgs.push_back(user("two"));
    msgs.push_back(assistant(run(*e, msgs).content));
  }  // destroying the engine finishes the queued writes
  const size_t must = history_tokens({msgs.begin(), msgs.end() - 1});
  msgs.push_back(user("three"));
  auto e = engine_with(o);
  const auto got = run(*e, msgs);
  const auto want = run(*engine_with(no_cache()), msgs);
  EXPECT_EQ(got.content, "Echo: three. Done.");
  EXPECT_EQ(got.content, want.content);
  EXPECT_EQ(got.done.usage.cached_tokens, int64_t(must));
  EXPECT_EQ(e->metrics().checkpoints.restores, 1u);
}

TEST(TurnBoundary, EvictedSnapshotsFreeTheirStates) {
  const int64_t before = testmodel::TestModel::live_states();
  {
    EngineOptions o;
    o.cache_bytes = 4 * 4400;  // room for about four test states (4096 bytes + tokens each)
    auto e = engine_with(o);
    for (int i = 0; i < 12; ++i) {
      std::vector<tok::Message> msgs = {user("session " + std::to_string(i))};
      msgs.push_back(assistant(run(*e, msgs).content));
      msgs.push_back(user("next"));
      EXPECT_EQ(run(*e, msgs).done.usage.cached_tokens, int64_t(history_tokens({msgs.begin(), msgs.end() - 2})));
    }
    const auto m = e->metrics();
    EXPECT_LE(m.cache_bytes, o.cache_bytes);
    EXPECT_GT(m.cache_evictions, 0u);
    // Only the cached entries hold states once every turn is done.
    EXPECT_EQ(testmodel::TestModel::live_states() - before, int64_t(m.cache_entries));
  }
  EXPECT_EQ(testmodel::TestModel::live_states(), before);
}
