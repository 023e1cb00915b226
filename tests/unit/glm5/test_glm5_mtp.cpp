// GLM 5.x integrated MTP head (src/models/glm5/mtp.cpp) against the torch reference
// (tests/data/glm5/mtp, tools/reference/glm5/mtp_ref.py): draft logits within 1e-3, drafts
// exact, chunked prefill gives the same drafts, drafting leaves the state unchanged, and a
// draft after committing a token equals the draft of a state that consumed it directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include "core/error.h"
#include "draft_head_test_util.h"
#include "golden.h"
#include "models/draft_head.h"
#include "models/glm5/model.h"
#include "models/model.h"

namespace ds4::glm5_test {
namespace {

constexpr float kTol = 1e-3f;  // README: float32 vs float64 reference differ by <= 7.6e-6
constexpr int kDepth = 4;
const int kLengths[] = {1, 7, 64, 300};

float max_diff(const std::vector<float>& a, const float* b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Trunk + head: a directory with the trunk files and mtp.safetensors side by side.
class Glm5Mtp : public draft_test::DraftHeadSuite<Glm5Mtp> {
 protected:
  static void SetUpTestSuite() {
    open(draft_test::trunk_with_head_dir("glm5_mtp", model_dir(), data_dir() + "/mtp/mtp.safetensors"),
         data_dir() + "/mtp/golden_mtp.safetensors");
  }
  // Prefill `toks` in chunks of `chunk` (0: one shot) into a head-enabled state.
  static std::unique_ptr<ModelState> prefilled(const std::vector<int32_t>& toks, size_t chunk = 0) {
    return DraftHeadSuite::prefilled(toks, chunk, Logits::kLast);
  }
};

TEST_F(Glm5Mtp, HeadOnlyWhenTheCheckpointHasIt) {
  EXPECT_NE(model_->draft_head(), nullptr);
  auto plain = load_model(model_dir());
  EXPECT_EQ(plain->draft_head(), nullptr);
  auto st = plain->new_state();
  std::vector<float> lg;
  std::vector<int32_t> d;
  EXPECT_THROW(glm5::mtp_draft_logits(*plain, *st, 0, 1, lg, d), InputError);
}

TEST_F(Glm5Mtp, DraftLogitsMatchTheReference) {
  for (int n : kLengths) {
    const std::string k = "p" + std::to_string(n);
    auto st = prefilled(ref<int32_t>(k + ".tokens"));
    std::vector<float> lg;
    std::vector<int32_t> drafts;
    glm5::mtp_draft_logits(*model_, *st, ref<int32_t>(k + ".next_token")[0], kDepth, lg, drafts);
    const auto want = ref<float>(k + ".draft_logits");
    ASSERT_EQ(lg.size(), want.size());
    const float d = max_diff(lg, want.data());
    EXPECT_LE(d, kTol) << k;
    EXPECT_EQ(drafts, ref<int32_t>(k + ".drafts")) << k;
    std::printf("glm5 mtp %s: max |draft logit diff| %.3g\n", k.c_str(), d);
  }
}

TEST_F(Glm5Mtp, ChunkedPrefillDraftsTheSame) {
  const auto toks = ref<int32_t>("p64.tokens");
  const int32_t next = ref<int32_t>("p64.next_token")[0];
  std::vector<float> a, b;
  std::vector<int32_t> da, db;
  auto s1 = prefilled(toks);
  glm5::mtp_draft_logits(*model_, *s1, next, kDepth, a, da);
  for (size_t chunk : {1u, 3u}) {
    auto s2 = prefilled(toks, chunk);
    glm5::mtp_draft_logits(*model_, *s2, next, kDepth, b, db);
    EXPECT_EQ(da, db) << chunk;
    EXPECT_LE(max_diff(a, b.data()), 1e-4f) << chunk;
  }
}

TEST_F(Glm5Mtp, DraftingLeavesNoTraceAndCommitsLikeADirectPrefill) {
  auto toks = ref<int32_t>("p7.tokens");
  const int32_t next = ref<int32_t>("p7.next_token")[0];
  auto st = prefilled(toks);
  std::vector<StateSection> before, after;
  st->save(before);
  std::vector<float> a, b;
  std::vector<int32_t> da, db;
  glm5::mtp_draft_logits(*model_, *st, next, kDepth, a, da);
  glm5::mtp_draft_logits(*model_, *st, next, kDepth, b, db);
  EXPECT_EQ(da, db);
  EXPECT_EQ(max_diff(a, b.data()), 0.0f);
  // Commit next (the head's pending row now has its token) and draft again...
  std::vector<float> lg;
  model_->forward(*st, std::span<const int32_t>(&next, 1), Logits::kLast, lg);
  const int32_t next2 = int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
  glm5::mtp_draft_logits(*model_, *st, next2, kDepth, a, da);
  // ...equals a state that consumed prompt + next in one prefill.
  toks.push_back(next);
  auto direct = prefilled(toks);
  glm5::mtp_draft_logits(*model_, *direct, next2, kDepth, b, db);
  EXPECT_EQ(da, db);
  EXPECT_LE(max_diff(a, b.data()), 1e-4f);
  // The first draft call consumed queued rows into the head's history, nothing more:
  // a clone saved before drafting, caught up the same way, saves identically.
  auto again = prefilled(ref<int32_t>("p7.tokens"));
  glm5::mtp_draft_logits(*model_, *again, next, 1, a, da);
  again->save(after);
  auto ref_state = prefilled(ref<int32_t>("p7.tokens"));
  glm5::mtp_draft_logits(*model_, *ref_state, next, kDepth, a, da);
  std::vector<StateSection> deep;
  ref_state->save(deep);
  ASSERT_EQ(after.size(), deep.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].bytes, deep[i].bytes) << after[i].name;
  EXPECT_EQ(before.size(), after.size());
}

TEST_F(Glm5Mtp, BadDraftInputsAreInputErrors) {
  auto st = model_->new_state();
  std::vector<float> lg;
  std::vector<int32_t> d;
  EXPECT_THROW(glm5::mtp_draft_logits(*model_, *st, 0, 1, lg, d), InputError);  // not enabled
  auto ok = prefilled(ref<int32_t>("p7.tokens"));
  EXPECT_THROW(glm5::mtp_draft_logits(*model_, *ok, 1024, 1, lg, d), InputError);
  EXPECT_THROW(glm5::mtp_draft_logits(*model_, *ok, 0, -1, lg, d), InputError);
  auto late = model_->new_state();
  const int32_t t = 5;
  model_->forward(*late, std::span<const int32_t>(&t, 1), Logits::kNone, lg);
  EXPECT_THROW(model_->draft_head()->enable_draft(*late), InputError);
}

}  // namespace
}  // namespace ds4::glm5_test
