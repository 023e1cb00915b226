// Engine behaviour on the scripted test model (tests/support): exact texts, finish
// reasons, usage counts, prefix-cache reuse across turns, cancel, concurrency.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/stop_matcher.h"
#include "support/test_codec.h"
#include "support/test_model.h"
#include "engine_test_util.h"

using namespace ds4;
using namespace ds4::engine;
using namespace std::chrono_literals;


TEST(StopMatcher, SplitAcrossFeedsAndHeldBack) {
  StopMatcher m({"STOP", "xy"});
  EXPECT_EQ(m.feed("abc S"), "abc ");
  EXPECT_EQ(m.feed("T"), "");
  EXPECT_EQ(m.feed("OP tail"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.matched_string(), "STOP");
  StopMatcher n({"STOP"});
  EXPECT_EQ(n.feed("ST"), "");
  EXPECT_EQ(n.feed("ATE"), "STATE");
  EXPECT_EQ(n.feed("S"), "");
  EXPECT_EQ(n.flush(), "S");
  EXPECT_FALSE(n.matched());
}

TEST(Engine, EchoAnswerUsageAndFinish) {
  auto e = make_engine();
  auto req = chat({user("hello")});
  const int64_t prompt = e->count_tokens(req);
  auto r = collect(*e->submit(req));
  EXPECT_EQ(r.content, "Echo: hello. Done.");
  EXPECT_EQ(r.done.finish, Finish::kStop);
  EXPECT_EQ(r.done.usage.prompt_tokens, prompt);
  EXPECT_EQ(r.done.usage.cached_tokens, 0);
  EXPECT_EQ(r.done.usage.completion_tokens, int64_t(std::string("Echo: hello. Done.").size()) + 1);
}

TEST(Engine, ReasoningIsSeparated) {
  auto e = make_engine();
  auto r = collect(*e->submit(chat({user("hi")}, true)));
  EXPECT_EQ(r.reasoning, "\nThe user wrote 2 bytes.\n");
  EXPECT_EQ(r.content, "Echo: hi. Done.");
  // Reasoning tokens: the reasoning text, the </think> marker and the two separator newlines.
  EXPECT_EQ(r.done.usage.reasoning_tokens, int64_t(std::string("\nThe user wrote 2 bytes.\n").size()) + 3);
}

TEST(Engine, StopStringNeverInOutput) {
  auto e = make_engine();
  auto req = chat({user("hello")});
  req.stop = {"Done", "never"};
  auto r = collect(*e->submit(req));
  EXPECT_EQ(r.content, "Echo: hello. ");
  EXPECT_EQ(r.done.finish, Finish::kStopString);
  EXPECT_EQ(r.done.stop_string, "Done");
}

TEST(Engine, MaxTokensGivesLength) {
  auto e = make_engine();
  auto req = chat({user("count please")});
  req.max_tokens = 10;
  auto r = collect(*e->submit(req));
  EXPECT_EQ(r.content, "1 2 3 4 5 ");
  EXPECT_EQ(r.done.finish, Finish::kLength);
  EXPECT_EQ(r.done.usage.completion_tokens, 10);
}

TEST(Engine, ContextEnd) {
  auto e = std::make_unique<Engine>(std::make_unique<testmodel::TestModel>("qwen_test", 80),
                                    std::make_unique<testmodel::TestCodec>(), EngineOptions{});
  auto req = chat({user("count")});
  req.max_tokens = 1000;
  auto r = collect(*e->submit(req));
  EXPECT_EQ(r.done.finish, Finish::kContext);
  EXPECT_EQ(r.done.usage.prompt_tokens + r.done.usage.completion_tokens, 80);
}

TEST(Engine, ToolCallParsed) {
  auto e = make_engine();
  auto r = collect(*e->submit(chat({user("please call tool")})));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(r.content, "");
}

TEST(Engine, ThreeTurnsReuseCache) {
  auto e = make_engine();
  std::vector<tok::Message> msgs = {user("one")};
  auto r1 = collect(*e->submit(chat(msgs)));
  msgs.push_back(assistant(r1.content));
  msgs.push_back(user("two"));
  auto r2 = collect(*e->submit(chat(msgs)));
  EXPECT_EQ(r2.content, "Echo: two. Done.");
  EXPECT_EQ(r2.done.usage.cached_tokens, r1.done.usage.prompt_tokens + r1.done.usage.completion_tokens);
  msgs.push_back(assistant(r2.content));
  msgs.push_back(user("three"));
  auto r3 = collect(*e->submit(chat(msgs)));
  EXPECT_EQ(r3.content, "Echo: three. Done.");
  EXPECT_EQ(r3.done.usage.cached_tokens, r2.done.usage.prompt_tokens + r2.done.usage.completion_tokens);
  auto m = e->metrics();
  EXPECT_EQ(m.cache_hits, 2u);
  EXPECT_EQ(m.cache_misses, 1u);
  // Only the new tokens were computed: total prompt minus cached.
  EXPECT_EQ(m.computed_prompt_tokens, m.prompt_tokens - m.cached_tokens);
}

namespace {
GenRequest req2_short() {
  auto r = chat({user("count")});
  r.max_tokens = 3;
  return r;
}
}  // namespace

TEST(Engine, CancelKeepsPartialAndPublishesNothing) {
  auto e = make_engine(200us);
  auto req = chat({user("count")});
  req.max_tokens = 100000;
  auto h = e->submit(req);
  std::string partial;
  while (partial.size() < 20) {
    auto ev = h->next(10s);
    ASSERT_TRUE(ev);
    if (ev->kind == GenEvent::Kind::kContent) partial += ev->text;
  }
  h->cancel();
  auto rest = collect(*h);
  EXPECT_EQ(rest.done.finish, Finish::kCancelled);
  EXPECT_EQ((partial + rest.content).rfind("1 2 3 4 5 6 7 8 9 10", 0), 0u);
  // Only the prompt-end snapshot exists; nothing with generated tokens was published.
  EXPECT_EQ(e->metrics().cache_entries, 1u);
  EXPECT_EQ(e->metrics().requests_cancelled, 1u);
  auto again = collect(*e->submit(req2_short()));
  EXPECT_EQ(again.done.usage.cached_tokens, again.done.usage.prompt_tokens);  // the prompt snapshot
}

TEST(Engine, ConcurrentSessionsAllComplete) {
  auto e = make_engine(20us);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 12; ++i) hs.push_back(e->submit(chat({user("n" + std::to_string(i))})));
  for (int i = 0; i < 12; ++i) {
    auto r = collect(*hs[i]);
    EXPECT_EQ(r.content, "Echo: n" + std::to_string(i) + ". Done.");
    EXPECT_EQ(r.done.finish, Finish::kStop);
  }
}

TEST(Engine, BadRequestsRejected) {
  auto e = make_engine();
  auto req = chat({user("x")});
  req.sampler.min_p = 0.1;
  EXPECT_THROW(e->submit(req), InputError);  // MTPLX path has no min-p
  auto big = chat({user(std::string(5000, 'a'))});
  EXPECT_THROW(e->submit(big), InputError);  // longer than the context
  auto zero = chat({user("x")});
  zero.max_tokens = 0;
  EXPECT_THROW(e->submit(zero), InputError);
  auto ds4 = make_engine({}, "deepseek_v4");
  auto ok = chat({user("x")});
  ok.sampler = default_sampler_params(SamplerKind::kDs4);
  EXPECT_EQ(collect(*ds4->submit(ok)).content, "Echo: x. Done.");
}

TEST(Engine, ShutdownCancelsInFlight) {
  auto e = make_engine(200us);
  auto req = chat({user("count")});
  req.max_tokens = 100000;
  auto h = e->submit(req);
  std::this_thread::sleep_for(5ms);
  e->shutdown();
  auto r = collect(*h);
  EXPECT_EQ(r.done.finish, Finish::kCancelled);
  EXPECT_THROW(e->submit(chat({user("x")})), Error);
}

namespace {
// Token 290 stands for "ab": a merge the template never produces, as a BPE model can emit.
class MergingCodec : public testmodel::TestCodec {
 public:
  std::string token_bytes(int32_t id) const override { return id == 290 ? "ab" : TestCodec::token_bytes(id); }
};
}  // namespace

TEST(Engine, ByteContinuationAcrossNonCanonicalTokens) {
  MergingCodec c;
  const int32_t h = 'h', i = 'i', a = 'a', b = 'b', x = 'x';
  using V = std::vector<int32_t>;
  EXPECT_EQ(byte_continuation(c, {h, i, 290}, {h, i, a, b, x, testmodel::kImEnd}), (V{x, testmodel::kImEnd}));
  EXPECT_EQ(byte_continuation(c, {h, i, a, b}, {h, i, 290, x}), (V{x}));
  EXPECT_FALSE(byte_continuation(c, {h, i, a}, {h, i, 290, x}));   // boundary inside a token
  EXPECT_FALSE(byte_continuation(c, {h, i, 290}, {h, i, a, 'c'})); // bytes differ
  EXPECT_FALSE(byte_continuation(c, {h, i, 290}, {h, i, a, b}));   // nothing left to feed
}

TEST(Engine, ChangedAnswerStillReusesThePrompt) {
  auto e = make_engine();
  std::vector<tok::Message> msgs = {user("hello")};
  auto r1 = collect(*e->submit(chat(msgs)));
  msgs.push_back(assistant(r1.content + "  "));  // the client sends back a different answer
  msgs.push_back(user("two"));
  auto r2 = collect(*e->submit(chat(msgs)));
  EXPECT_EQ(r2.done.usage.cached_tokens, r1.done.usage.prompt_tokens);  // prompt-end snapshot
  EXPECT_EQ(r2.content, "Echo: two. Done.");
}
