// Model::verify_batch: several sequences' speculative verify windows (ragged: next token +
// 0..3 drafts each) in one forward. Every row is bit for bit the row of that state's own
// captured verify (DraftHead::verify_capture), and after each state commits its kept prefix
// (commit_prefix: all rows, a part, only `next`) it is byte for byte the state the single
// path leaves (saved sections), decodes the same next logits and drafts the same chain, over
// two verify rounds. All three CPU families verify natively (ModelInfo::batched_verify); the
// default Model::verify_batch (the labelled fallback loop) gives the same rows.
#include <gtest/gtest.h>

#include <cstring>

#include "batch_cases.h"
#include "core/error.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4 {
namespace {

using namespace batch_test;

std::vector<StateSection> saved(const ModelState& s) {
  std::vector<StateSection> out;
  s.save(out);
  return out;
}

void expect_same_state(const ModelState& a, const ModelState& b, const std::string& what) {
  ASSERT_EQ(a.position(), b.position()) << what;
  const auto sa = saved(a), sb = saved(b);
  ASSERT_EQ(sa.size(), sb.size()) << what;
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].name, sb[i].name) << what;
    EXPECT_TRUE(sa[i].bytes == sb[i].bytes) << what << ": section " << sa[i].name << " differs";
  }
}

class VerifyBatch : public ::testing::TestWithParam<Case> {};

TEST_P(VerifyBatch, RowsAndCommittedStatesEqualEachSequenceAlone) {
  const Case& c = GetParam();
  auto m = load(c);
  const int64_t V = m->info().vocab_size;
  DraftHead* head = m->draft_head();
  EXPECT_EQ(m->info().batched_verify, c.native);
  constexpr int kSeq = 4;
  const int lens[kSeq] = {5, 38, 12, 70};  // across GLM's dense/sparse indexer switch
  if (!head) {  // nothing to verify with: refused, nothing run
    auto st = m->new_state();
    m->prefill(*st, prompt(V, 0, 6));
    std::vector<ModelState*> in{st.get()};
    const std::vector<int32_t> w{1, 2};
    std::vector<std::span<const int32_t>> win{w};
    std::vector<float> rows{1.0f};
    EXPECT_FALSE(m->verify_batch(in, win, rows));
    EXPECT_TRUE(rows.empty());
    EXPECT_EQ(st->position(), 6);
    return;
  }
  // Per sequence: how many drafts its window carries and how many rows each round keeps
  // (1 = only `next`: every draft rejected; the window's size = all accepted).
  const int depth[kSeq] = {3, 1, 2, 0};
  const int keep[2][kSeq] = {{2, 2, 1, 1}, {4, 1, 3, 1}};
  std::vector<std::unique_ptr<ModelState>> base(kSeq);
  std::vector<int32_t> first(kSeq);
  for (int i = 0; i < kSeq; ++i) {
    base[size_t(i)] = m->new_state();
    head->enable_draft(*base[size_t(i)]);
    first[size_t(i)] = argmax(m->prefill(*base[size_t(i)], prompt(V, i, lens[i])));
  }
  // The window of sequence i in a round: its next token and the head's drafts (the last
  // draft replaced so that a kept prefix is not always what the target would pick).
  auto window = [&](ModelState& st, int i, int32_t next) {
    std::vector<int32_t> w{next}, d;
    if (depth[i] > 0) head->draft(st, next, depth[i], d);
    d.resize(size_t(depth[i]), 1);
    if (!d.empty()) d.back() = int32_t((d.back() + 7) % V);
    w.insert(w.end(), d.begin(), d.end());
    return w;
  };
  // Alone: each sequence's verify_capture + commit_prefix, two rounds.
  std::vector<std::unique_ptr<ModelState>> alone(kSeq), batched(kSeq), fallback(kSeq);
  std::vector<std::vector<std::vector<float>>> alone_rows(2, std::vector<std::vector<float>>(kSeq));
  std::vector<std::vector<std::vector<int32_t>>> windows(2, std::vector<std::vector<int32_t>>(kSeq));
  for (int i = 0; i < kSeq; ++i) {
    alone[size_t(i)] = base[size_t(i)]->clone();
    batched[size_t(i)] = base[size_t(i)]->clone();
    fallback[size_t(i)] = base[size_t(i)]->clone();
    int32_t next = first[size_t(i)];
    for (int r = 0; r < 2; ++r) {
      windows[size_t(r)][size_t(i)] = window(*alone[size_t(i)], i, next);
      const auto& w = windows[size_t(r)][size_t(i)];
      ASSERT_TRUE(head->verify_capture(*alone[size_t(i)], w, alone_rows[size_t(r)][size_t(i)]));
      const int k = std::min<int>(keep[r][i], int(w.size()));
      head->commit_prefix(*alone[size_t(i)], k);
      next = argmax(std::span<const float>(alone_rows[size_t(r)][size_t(i)].data() + (k - 1) * V, size_t(V)));
    }
  }
  // Batched (the family's verify_batch) and the default fallback loop, same windows.
  for (auto* group : {&batched, &fallback}) {
    const bool native = group == &batched;
    std::vector<int32_t> next(first);
    for (int r = 0; r < 2; ++r) {
      std::vector<ModelState*> in;
      std::vector<std::span<const int32_t>> win;
      for (int i = 0; i < kSeq; ++i) {
        // The draft runs here too (the engine drafts every sequence before the batch), and
        // drafts what the lone sequence drafted.
        ASSERT_EQ(window(*(*group)[size_t(i)], i, next[size_t(i)]), windows[size_t(r)][size_t(i)])
            << c.tag << ": round " << r << " sequence " << i << " drafts";
        in.push_back((*group)[size_t(i)].get());
        win.push_back(windows[size_t(r)][size_t(i)]);
      }
      std::vector<float> rows;
      ASSERT_TRUE(native ? m->verify_batch(in, win, rows) : m->Model::verify_batch(in, win, rows));
      size_t r0 = 0;
      for (int i = 0; i < kSeq; ++i) {
        const auto& ref = alone_rows[size_t(r)][size_t(i)];
        ASSERT_EQ(ref.size(), win[size_t(i)].size() * size_t(V));
        ASSERT_LE((r0 + win[size_t(i)].size()) * size_t(V), rows.size());
        EXPECT_EQ(std::memcmp(ref.data(), rows.data() + r0 * size_t(V), ref.size() * sizeof(float)), 0)
            << c.tag << (native ? " native" : " fallback") << ": round " << r << " sequence " << i
            << " rows differ from its verify alone";
        const int k = std::min<int>(keep[r][i], int(win[size_t(i)].size()));
        next[size_t(i)] = argmax(std::span<const float>(rows.data() + (r0 + size_t(k) - 1) * size_t(V), size_t(V)));
        r0 += win[size_t(i)].size();
        head->commit_prefix(*in[size_t(i)], k);
      }
      ASSERT_EQ(rows.size(), r0 * size_t(V));
    }
  }
  // The committed states: the same bytes, the same next logits, the same draft chain.
  for (int i = 0; i < kSeq; ++i) {
    expect_same_state(*alone[size_t(i)], *batched[size_t(i)], c.tag + " sequence " + std::to_string(i));
    const std::vector<float> a = m->decode(*alone[size_t(i)], 3), b = m->decode(*batched[size_t(i)], 3);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "sequence " << i << " next logits";
    std::vector<int32_t> da, db;
    head->draft(*alone[size_t(i)], argmax(a), 2, da);
    head->draft(*batched[size_t(i)], argmax(b), 2, db);
    EXPECT_EQ(da, db) << "sequence " << i << " drafts";
  }
}

TEST_P(VerifyBatch, RejectsBadInputWithoutCapturing) {
  const Case& c = GetParam();
  auto m = load(c);
  DraftHead* head = m->draft_head();  // without one the checks still come first
  auto a = m->new_state(), b = m->new_state();
  if (head) head->enable_draft(*a), head->enable_draft(*b);
  m->prefill(*a, prompt(m->info().vocab_size, 1, 5));
  m->prefill(*b, prompt(m->info().vocab_size, 2, 7));
  const std::vector<int32_t> w{3, 4}, bad{3, int32_t(m->info().vocab_size)}, none;
  std::vector<float> rows;
  std::vector<ModelState*> twice{a.get(), a.get()}, pair{a.get(), b.get()};
  std::vector<std::span<const int32_t>> two{w, w}, with_bad{w, bad}, with_empty{w, none}, one{w};
  // The shared checks (check_batch; every case and message: test_batch_checks.cpp) refuse
  // these before the head is asked, so with or without one.
  EXPECT_THROW(m->verify_batch(twice, two, rows), InputError);
  EXPECT_THROW(m->verify_batch(pair, with_empty, rows), InputError);
  EXPECT_THROW(m->verify_batch(pair, one, rows), InputError);
  EXPECT_THROW(m->verify_batch(pair, with_bad, rows), InputError);
  EXPECT_EQ(a->position(), 5) << "a refused batch must not advance a state";
  EXPECT_EQ(b->position(), 7);
  // No captured window was left behind: both states verify and commit normally.
  ASSERT_EQ(m->verify_batch(pair, two, rows), head != nullptr) << c.tag;
  if (!head) return;
  EXPECT_EQ(rows.size(), 4 * size_t(m->info().vocab_size));
  head->commit_prefix(*a, 1);
  head->commit_prefix(*b, 2);
  EXPECT_EQ(a->position(), 6);
  EXPECT_EQ(b->position(), 9);
}

INSTANTIATE_TEST_SUITE_P(Families, VerifyBatch, family_cases(), [](const auto& info) { return info.param.tag; });

}  // namespace
}  // namespace ds4
