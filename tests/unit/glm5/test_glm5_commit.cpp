// Captured-prefix commit of GLM 5.x (models/glm5/spec_commit.cpp): after one captured verify
// window of 4 rows (depth 3), keeping any prefix 1..4 equals the AR state section by section
// (KDA recurrent + conv, MLA latent, indexer keys/gates/k-pool keys, MTP queue), within
// 2e-5 of each section's scale (batched vs one-row summation order), at prompt lengths that
// put k-pool boundaries at every row of the window. A commit that keeps one row too many,
// and a perturbed state, are caught.
#include <gtest/gtest.h>

#include "capture_commit_test_util.h"
#include "draft_head_test_util.h"
#include "golden.h"
#include "models/model.h"

namespace ds4::glm5_test {
namespace {

class Glm5Commit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    m_ = draft_test::load_with_head("glm5_commit", model_dir(), data_dir() + "/mtp/mtp.safetensors").release();
  }
  static void TearDownTestSuite() { delete m_; }
  // Prompt of `len` tokens, head enabled and caught up (as at the start of a cycle).
  static std::unique_ptr<ModelState> base(int64_t len) {
    std::vector<int32_t> prompt;
    for (int64_t i = 0; i < len; ++i) prompt.push_back(int32_t((37 * i + 11) % 1000));
    auto s = m_->new_state();
    m_->draft_head()->enable_draft(*s);
    m_->prefill(*s, prompt);
    std::vector<int32_t> d;
    m_->draft_head()->draft(*s, 5, 2, d);
    return s;
  }
  static inline Model* m_ = nullptr;
};

const std::vector<int32_t> kWindow = {17, 902, 3, 440};

TEST_F(Glm5Commit, EqualsArStateAtEveryKeep) {
  for (int64_t len = 9; len < 13; ++len) {  // index_kpool 4: a pool completes at every row
    auto b = base(len);
    EXPECT_EQ(draft_test::commit_vs_ar(*m_, *b, kWindow), "") << "prompt " << len;
  }
}

TEST_F(Glm5Commit, TwoRowVerifyEqualsTwoSingleRowSteps) {
  // GLM's integrated MTP drafts one token: the verify is one 2-row batched pass [next, d1].
  // Both rows' logits equal two single-row decode steps; keep 2 is the state after both,
  // keep 1 (d1 rejected) restores the KDA backup taken after row 0.
  for (int64_t len : {7, 8}) {
    auto b = base(len);
    EXPECT_EQ(draft_test::commit_vs_ar(*m_, *b, {kWindow[0], kWindow[1]}, draft_test::real_commit, 1), "")
        << "prompt " << len;
  }
}

TEST_F(Glm5Commit, BrokenCommitIsCaught) {
  auto b = base(10);
  draft_test::expect_broken_commit_caught(*m_, *b, kWindow);
  draft_test::expect_perturbation_caught(*m_, *b, "layer.0.kda.recurrent");
  draft_test::expect_perturbation_caught(*m_, *b, "layer.0.kda.conv");
  draft_test::expect_perturbation_caught(*m_, *b, "layer.1.mla.pool_keys");
}

TEST_F(Glm5Commit, RejectsBadKeep) {
  auto s = base(6);
  DraftHead& h = *m_->draft_head();
  EXPECT_THROW(h.commit_prefix(*s, 1), Error);  // nothing captured
  std::vector<float> rows;
  ASSERT_TRUE(h.verify_capture(*s, kWindow, rows));
  EXPECT_THROW(h.commit_prefix(*s, 0), Error);
  EXPECT_THROW(h.commit_prefix(*s, 5), Error);
  EXPECT_THROW(h.verify_capture(*s, kWindow, rows), Error);  // uncommitted window
}

}  // namespace
}  // namespace ds4::glm5_test
