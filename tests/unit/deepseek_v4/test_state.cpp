// Chunking, verify, snapshot/restore and bad input on the tiny DeepSeek V4 model.
// Chunk boundaries cross the sliding window (16), CSA windows (4) and HCA windows (16):
// results must not depend on them beyond float summation noise.
#include <gtest/gtest.h>

#include "core/error.h"
#include "golden.h"
#include "models/model.h"

using namespace ds4_test;

namespace {
ds4::Model& model() {
  static auto m = ds4::load_model(kModelDir);
  return *m;
}
constexpr float kChunkTol = 1e-4f;  // same math, different batching: only summation order differs
}  // namespace

TEST(DeepseekV4State, ChunkedPrefillMatchesOneShot) {
  const Golden g;
  const auto tokens = g.i32("p300.tokens");
  const auto want = g.f32("p300.prefill_logits");
  for (int64_t chunk : {1, 3, 64, 4096, 300, 0}) {  // 0 = default (4096)
    auto st = model().new_state();
    const auto logits = model().prefill(*st, tokens, chunk);
    EXPECT_EQ(st->position(), 300);
    const float d = max_abs_diff(logits.data(), want.data(), want.size());
    EXPECT_LT(d, kLogitTol) << "chunk " << chunk;
    auto one = model().new_state();
    const auto ref = model().prefill(*one, tokens, 300);
    EXPECT_LT(max_abs_diff(logits.data(), ref.data(), ref.size()), kChunkTol) << "chunk " << chunk;
  }
}

TEST(DeepseekV4State, VerifyEqualsDecodes) {
  const Golden g;
  const auto tokens = g.i32("p64.tokens");
  const auto greedy = g.i32("p64.greedy");
  const size_t V = 1024;
  auto a = model().new_state();
  model().prefill(*a, tokens);
  auto b = a->clone();
  // k = 7 rows in one batched pass crosses CSA windows (64 + 7 > 68)
  const std::vector<int32_t> draft(greedy.begin(), greedy.begin() + 7);
  const auto batched = model().verify(*a, draft);
  ASSERT_EQ(batched.size(), 7 * V);
  for (size_t i = 0; i < draft.size(); ++i) {
    const auto one = model().decode(*b, draft[i]);
    EXPECT_LT(max_abs_diff(one.data(), batched.data() + i * V, V), kChunkTol) << "row " << i;
  }
  EXPECT_EQ(a->position(), b->position());
}

TEST(DeepseekV4State, SnapshotRestoreContinuesIdentically) {
  const Golden g;
  const auto tokens = g.i32("p300.tokens");
  const auto greedy = g.i32("p300.greedy");
  auto st = model().new_state();
  model().prefill(*st, tokens);
  const auto snap = st->clone();
  EXPECT_EQ(snap->bytes(), st->bytes());
  EXPECT_GT(snap->bytes(), 0u);
  std::vector<float> first;
  for (int i = 0; i < 20; ++i) first = model().decode(*st, greedy[size_t(i)]);
  // Restore: continue from the snapshot (a clone of it, so the snapshot stays reusable).
  auto restored = snap->clone();
  std::vector<float> second;
  for (int i = 0; i < 20; ++i) second = model().decode(*restored, greedy[size_t(i)]);
  EXPECT_EQ(first, second);  // bit-identical
  EXPECT_EQ(restored->position(), 320);
}

TEST(DeepseekV4State, RejectsBadTokens) {
  auto st = model().new_state();
  const std::vector<int32_t> bad = {5, 1024};
  EXPECT_THROW(model().prefill(*st, bad), ds4::InputError);
  const std::vector<int32_t> neg = {-1};
  EXPECT_THROW(model().prefill(*st, neg), ds4::InputError);
}
