// Model::decode_batch: every sequence's logits in a batch are bit for bit its logits alone
// (forward of one token on its own state), for every family, with sequences of different
// lengths joining and leaving the batch between steps, draft heads on (their per-sequence
// history must follow the batched rows). All three CPU families implement it natively
// (ModelInfo::batched_decode).
#include <gtest/gtest.h>

#include <cstring>

#include "batch_cases.h"
#include "support/batch_candidates_check.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4 {
namespace {

using namespace batch_test;

class DecodeBatch : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeBatch, EachRowEqualsTheSequenceAlone) {
  const Case& c = GetParam();
  auto m = load(c);
  EXPECT_EQ(m->info().batched_decode, c.native);
  const int64_t V = m->info().vocab_size;
  // A draft head in use (GLM's from its file, Qwen's built into the checkpoint): its
  // per-sequence history must follow the batched rows too.
  const bool head = m->draft_head() != nullptr;
  if (!c.head.empty()) ASSERT_TRUE(head);
  // Five sequences; prompt lengths cross GLM's dense/sparse indexer switch (index_topk 32).
  const int lens[] = {3, 17, 40, 9, 70};
  const int kSeq = 5, kSteps = 6;
  // Sequence i is in the batch at steps [join[i], leave[i]).
  const int join[] = {0, 0, 2, 1, 0}, leave[] = {6, 3, 6, 5, 6};
  auto fresh = [&](int i) {
    auto st = m->new_state();
    if (head) m->draft_head()->enable_draft(*st);
    std::vector<float> lg = m->prefill(*st, prompt(V, i, lens[i]));
    return std::make_pair(std::move(st), argmax(lg));
  };
  // Alone: greedy steps one forward at a time; the logits rows it sees.
  std::vector<std::vector<std::vector<float>>> alone(kSeq);
  std::vector<std::vector<int32_t>> alone_drafts(kSeq);
  for (int i = 0; i < kSeq; ++i) {
    auto [st, next] = fresh(i);
    for (int s = join[i]; s < leave[i]; ++s) {
      std::vector<float> row = m->decode(*st, next);
      next = argmax(row);
      alone[size_t(i)].push_back(std::move(row));
    }
    if (head) m->draft_head()->draft(*st, next, 2, alone_drafts[size_t(i)]);
  }
  // Batched: the same sequences stepping together, joining and leaving.
  std::vector<std::unique_ptr<ModelState>> states(kSeq);
  std::vector<int32_t> next(kSeq);
  for (int i = 0; i < kSeq; ++i) std::tie(states[size_t(i)], next[size_t(i)]) = fresh(i);
  std::vector<float> rows;
  int batched_steps_of_three_or_more = 0;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<ModelState*> in;
    std::vector<int32_t> tok;
    std::vector<int> who;
    for (int i = 0; i < kSeq; ++i)
      if (s >= join[i] && s < leave[i]) in.push_back(states[size_t(i)].get()), tok.push_back(next[size_t(i)]), who.push_back(i);
    batched_steps_of_three_or_more += in.size() >= 3;
    m->decode_batch(in, tok, rows);
    ASSERT_EQ(rows.size(), in.size() * size_t(V));
    for (size_t b = 0; b < who.size(); ++b) {
      const int i = who[b];
      const std::vector<float>& ref = alone[size_t(i)][size_t(s - join[i])];
      ASSERT_EQ(std::memcmp(ref.data(), rows.data() + b * size_t(V), size_t(V) * sizeof(float)), 0)
          << c.tag << ": sequence " << i << " step " << s << " differs from its run alone";
      next[size_t(i)] = argmax(std::span<const float>(rows.data() + b * size_t(V), size_t(V)));
    }
  }
  EXPECT_GE(batched_steps_of_three_or_more, 4);
  for (int i = 0; i < kSeq; ++i) {
    EXPECT_EQ(states[size_t(i)]->position(), lens[i] + leave[i] - join[i]);
    if (!head) continue;
    // The draft head saw the batched rows exactly as the lone ones (mtp history per sequence).
    std::vector<int32_t> d;
    m->draft_head()->draft(*states[size_t(i)], next[size_t(i)], 2, d);
    EXPECT_EQ(d, alone_drafts[size_t(i)]) << "sequence " << i;
  }
}

TEST_P(DecodeBatch, RejectsMismatchedInput) {
  auto m = load(GetParam());
  auto a = m->new_state();
  m->prefill(*a, prompt(m->info().vocab_size, 0, 4));
  std::vector<ModelState*> one{a.get()};
  std::vector<int32_t> two{1, 2};
  std::vector<float> rows;
  EXPECT_THROW(m->decode_batch(one, two, rows), Error);
  std::vector<int32_t> bad{int32_t(m->info().vocab_size)};
  EXPECT_THROW(m->decode_batch(one, bad, rows), Error);
}

// decode_batch_candidates (the engine's batched draw): every row's candidates and the rows
// handed back equal the sequence's own step (support/batch_candidates_check.h), 9 sequences
// over 6 steps of mixed requests; a request count unlike the state count throws.
TEST_P(DecodeBatch, CandidatesEqualTheSequenceAlone) {
  auto m = load(GetParam());
  EXPECT_EQ(batch_candidates::run(*m, 9, 6), "");
  EXPECT_EQ(batch_candidates::bad_requests(*m), "");
}

// prefill_batch (the engine feeds the prompt slices of sessions that joined together in one
// pass): every window of a batch, of lengths 1..260 and starting at different positions (a
// prefix fed alone first), gives its state the logits row and the state of forward(kLast) on
// that window alone, bit for bit; then a decode step of each state still matches. With a draft
// head on, its per-sequence records follow the batched rows too (the next draft matches).
TEST_P(DecodeBatch, PrefillBatchEqualsEachWindowAlone) {
  const Case& c = GetParam();
  auto m = load(c);
  EXPECT_EQ(m->info().batched_prefill, c.native);
  const int64_t V = m->info().vocab_size;
  const bool head = m->draft_head() != nullptr;
  const int lens[] = {1, 9, 33, 70, 129, 260}, prefix[] = {0, 5, 0, 17, 3, 0};
  const int kSeq = 6;
  std::vector<std::unique_ptr<ModelState>> batched, alone;
  std::vector<std::vector<int32_t>> windows;
  for (int i = 0; i < kSeq; ++i) {
    auto st = m->new_state();
    if (head) m->draft_head()->enable_draft(*st);
    if (prefix[i] > 0) m->prefill(*st, prompt(V, 50 + i, prefix[i]));
    alone.push_back(st->clone());
    batched.push_back(std::move(st));
    windows.push_back(prompt(V, i, lens[i]));
  }
  std::vector<ModelState*> in;
  std::vector<std::span<const int32_t>> w;
  for (int i = 0; i < kSeq; ++i) in.push_back(batched[size_t(i)].get()), w.emplace_back(windows[size_t(i)]);
  std::vector<float> rows, one, step_a, step_b;
  m->prefill_batch(in, w, rows);
  ASSERT_EQ(rows.size(), size_t(kSeq) * size_t(V));
  for (int i = 0; i < kSeq; ++i) {
    m->forward(*alone[size_t(i)], windows[size_t(i)], Logits::kLast, one);
    ASSERT_EQ(std::memcmp(one.data(), rows.data() + size_t(i) * size_t(V), size_t(V) * sizeof(float)), 0)
        << c.tag << ": window " << i << " (" << lens[i] << " tokens after " << prefix[i] << ")";
    EXPECT_EQ(batched[size_t(i)]->position(), alone[size_t(i)]->position());
    const int32_t next = argmax(std::span<const float>(one));
    step_a = m->decode(*batched[size_t(i)], next);
    step_b = m->decode(*alone[size_t(i)], next);
    EXPECT_EQ(std::memcmp(step_a.data(), step_b.data(), size_t(V) * sizeof(float)), 0)
        << c.tag << ": the step after window " << i;
    if (!head) continue;
    std::vector<int32_t> da, db;
    m->draft_head()->draft(*batched[size_t(i)], argmax(std::span<const float>(step_a)), 2, da);
    m->draft_head()->draft(*alone[size_t(i)], argmax(std::span<const float>(step_b)), 2, db);
    EXPECT_EQ(da, db) << c.tag << ": the next draft after window " << i;
  }
  // Bad input: the same state twice, an empty window, a state / window count mismatch throw and
  // advance no state.
  auto a = m->new_state(), b = m->new_state();
  const std::vector<int32_t> t3{1, 2, 3}, none;
  std::vector<ModelState*> twice{a.get(), a.get()}, two{a.get(), b.get()};
  std::vector<std::span<const int32_t>> w2{t3, t3}, w_empty{t3, none}, w1{t3};
  EXPECT_THROW(m->prefill_batch(twice, w2, rows), Error);
  EXPECT_THROW(m->prefill_batch(two, w_empty, rows), Error);
  EXPECT_THROW(m->prefill_batch(two, w1, rows), Error);
  EXPECT_EQ(a->position(), 0);
  EXPECT_EQ(b->position(), 0);
}

INSTANTIATE_TEST_SUITE_P(Families, DecodeBatch, family_cases(), [](const auto& info) { return info.param.tag; });

TEST(DecodeBatchGlm, RefusesTheSameStateTwice) {
  LoadOptions o;
  o.threads = 2;
  auto m = load_model(kData + "/glm5/model", o);
  auto a = m->new_state();
  m->prefill(*a, prompt(m->info().vocab_size, 1, 5));
  std::vector<ModelState*> twice{a.get(), a.get()};
  std::vector<int32_t> tok{3, 4};
  std::vector<float> rows;
  EXPECT_THROW(m->decode_batch(twice, tok, rows), Error);
  EXPECT_EQ(a->position(), 5) << "a refused batch must not advance the state";
}

}  // namespace
}  // namespace ds4
