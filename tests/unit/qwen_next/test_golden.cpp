// The CPU model against the HF oracle: prefill and 32 teacher-forced greedy decode steps
// per prompt, logits within tolerance and identical greedy tokens; MTP draft logits.
#include <gtest/gtest.h>

#include <cstdio>

#include "golden.h"

namespace ds4::qwen_next::test {
namespace {

class QwenGolden : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    model_ = load_tiny().release();
    golden_ = new Golden();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete golden_;
  }
  static QwenNextModel* model_;
  static Golden* golden_;
};
QwenNextModel* QwenGolden::model_ = nullptr;
Golden* QwenGolden::golden_ = nullptr;

TEST_P(QwenGolden, PrefillDecodeAndMtpMatchOracle) {
  const std::string p = GetParam();
  const auto tokens = golden_->i32(p + ".tokens");
  const auto greedy = golden_->i32(p + ".greedy");
  const auto ref_prefill = golden_->f32(p + ".prefill_logits");
  const auto ref_decode = golden_->f32(p + ".decode_logits");
  const int64_t V = model_->info().vocab_size;
  auto st = model_->new_state();
  model_->enable_mtp(*st);
  auto logits = model_->prefill(*st, tokens);
  float worst = max_abs_diff(logits, ref_prefill);
  EXPECT_LE(worst, kLogitTol) << p << " prefill";
  EXPECT_EQ(argmax(logits), greedy[0]) << p;
  // MTP draft chain right after the prompt (before any decode step).
  std::vector<float> draft_logits;
  std::vector<int32_t> drafts;
  model_->mtp_draft(*st, greedy[0], 3, draft_logits, drafts);
  const auto ref_mtp = golden_->f32(p + ".mtp_logits");
  const float mtp_diff = max_abs_diff(draft_logits, ref_mtp);
  EXPECT_LE(mtp_diff, kLogitTol) << p << " mtp";
  EXPECT_EQ(drafts, golden_->i32(p + ".mtp_drafts")) << p;
  for (size_t i = 0; i < greedy.size(); ++i) {
    logits = model_->decode(*st, greedy[i]);
    std::span<const float> ref(ref_decode.data() + i * V, size_t(V));
    const float d = max_abs_diff(logits, ref);
    worst = std::max(worst, d);
    EXPECT_LE(d, kLogitTol) << p << " decode step " << i;
    if (i + 1 < greedy.size()) EXPECT_EQ(argmax(logits), greedy[i + 1]) << p << " step " << i;
  }
  std::printf("[qwen golden] %s: max |logit diff| %.3g over prefill+32 decode rows, mtp %.3g\n", p.c_str(),
              worst, mtp_diff);
}

INSTANTIATE_TEST_SUITE_P(Prompts, QwenGolden, ::testing::ValuesIn(kPrompts));

}  // namespace
}  // namespace ds4::qwen_next::test
