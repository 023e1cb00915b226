// The batch checks every family shares (check_batch / check_decode_batch, models/model.h):
// each bad batch (the same state twice, a token outside the vocabulary, more tokens than the
// context holds, an empty verify window, a count mismatch, a null state) is refused by every
// CPU family's decode_batch and verify_batch with InputError in the one message format, before
// any state advances (the bad entry comes last, so a batch run part way would show).
#include <gtest/gtest.h>

#include <functional>

#include "batch_cases.h"
#include "core/error.h"
#include "models/model.h"

namespace ds4 {
namespace {

using namespace batch_test;

constexpr int64_t kContext = 24;  // a small context, so a full state is quick to make

class BatchChecks : public ::testing::TestWithParam<Case> {};

// Runs `call`, expects InputError whose message holds `part`.
void expect_refused(const std::function<void()>& call, const std::string& part, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << ": no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << what << ": \"" << e.what() << "\"";
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": not an InputError: " << e.what();
  }
}

TEST_P(BatchChecks, BadBatchesAreRefusedBeforeAnyStateAdvances) {
  const Case& c = GetParam();
  auto m = load(c, kContext);
  ASSERT_EQ(m->info().max_context, kContext);
  const int32_t V = int32_t(m->info().vocab_size);
  const std::string fam = m->info().family;
  auto a = m->new_state(), b = m->new_state(), full = m->new_state();
  if (DraftHead* h = m->draft_head())
    for (ModelState* s : {a.get(), b.get(), full.get()}) h->enable_draft(*s);
  m->prefill(*a, prompt(V, 0, 3));
  m->prefill(*full, prompt(V, 1, int(kContext)));
  auto unchanged = [&](const std::string& what) {
    EXPECT_EQ(a->position(), 3) << what;
    EXPECT_EQ(b->position(), 0) << what;
    EXPECT_EQ(full->position(), kContext) << what;
  };
  std::vector<float> rows;
  using Tokens = std::vector<int32_t>;
  using States = std::vector<ModelState*>;
  auto decode = [&](States s, Tokens t, const std::string& part, const std::string& what) {
    expect_refused([&] { m->decode_batch(s, t, rows); }, fam + ": decode_batch: " + part, "decode_batch " + what);
    unchanged("decode_batch " + what);
  };
  decode({a.get(), a.get()}, {1, 2}, "window 1: the state of window 0 again", "the same state twice");
  decode({a.get(), b.get()}, {1, V}, "window 1: token id " + std::to_string(V) + " outside the vocabulary [0, " +
                                         std::to_string(V) + ")",
         "token = vocab");
  decode({a.get(), b.get()}, {1, -1}, "window 1: token id -1 outside the vocabulary", "token -1");
  decode({a.get(), full.get()}, {1, 2},
         "window 1: context full: position " + std::to_string(kContext) + " + 1 tokens > max_context " +
             std::to_string(kContext),
         "over the context");
  decode({a.get(), b.get()}, {1}, "2 states for 1 tokens", "a count mismatch");
  decode({a.get(), nullptr}, {1, 2}, "window 1: the state is null", "a null state");

  // verify_batch: the same checks over ragged windows, before the draft head is asked (a model
  // without one refuses a bad batch too, rather than answering false).
  auto verify = [&](States s, std::vector<Tokens> w, const std::string& part, const std::string& what) {
    std::vector<std::span<const int32_t>> win(w.begin(), w.end());
    expect_refused([&] { m->verify_batch(s, win, rows); }, fam + ": verify_batch: " + part, "verify_batch " + what);
    unchanged("verify_batch " + what);
  };
  verify({a.get(), a.get()}, {{1, 2}, {3}}, "window 1: the state of window 0 again", "the same state twice");
  verify({a.get(), b.get()}, {{1, 2}, {3, V}}, "window 1: token id " + std::to_string(V) + " outside the vocabulary",
         "token = vocab");
  verify({b.get(), a.get()}, {{1, 2}, Tokens(size_t(kContext - 2), 1)},
         "window 1: context full: position 3 + " + std::to_string(kContext - 2) + " tokens > max_context " +
             std::to_string(kContext),
         "over the context");
  verify({a.get(), b.get()}, {{1, 2}, {}}, "window 1: no tokens", "an empty window");
  verify({a.get(), b.get()}, {{1, 2}}, "2 states for 1 windows", "a count mismatch");
  verify({a.get(), nullptr}, {{1, 2}, {3}}, "window 1: the state is null", "a null state");

  // The single forward shares the window check (check_window): the same words.
  std::vector<float> lg;
  expect_refused([&] { m->forward(*b, Tokens{1, V}, Logits::kLast, lg); },
                 fam + ": token id " + std::to_string(V) + " outside the vocabulary [0, " + std::to_string(V) + ")",
                 "forward, token = vocab");
  expect_refused([&] { m->forward(*full, Tokens{1}, Logits::kLast, lg); },
                 fam + ": context full: position " + std::to_string(kContext) + " + 1 tokens > max_context " +
                     std::to_string(kContext),
                 "forward over the context");
  unchanged("forward");
}

INSTANTIATE_TEST_SUITE_P(Families, BatchChecks, family_cases(),
                         [](const auto& info) { return info.param.tag; });

}  // namespace
}  // namespace ds4
