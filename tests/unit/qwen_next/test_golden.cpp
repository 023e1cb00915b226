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
    if (i + 1 < greedy.size()) {
      EXPECT_EQ(argmax(logits), greedy[i + 1]) << p << " step " << i;
    }
  }
  std::printf("[qwen golden] %s: max |logit diff| %.3g over prefill+32 decode rows, mtp %.3g\n", p.c_str(),
              worst, mtp_diff);
}

INSTANTIATE_TEST_SUITE_P(Prompts, QwenGolden, ::testing::ValuesIn(kPrompts));

}  // namespace
}  // namespace ds4::qwen_next::test

namespace ds4::qwen_next::test {
namespace {

// Per-layer checksums of the last prompt row (debug aid: localizes a mismatch to a layer).
// HF's hidden_states are (decoder input, outputs of layers 0..L-2, final mixer output):
// golden "L0" is the widened embedding, "L<k>" the output of layer k-1, "final" the mixer.
TEST(QwenGoldenHidden, LayerChecksumsMatch) {
  auto model = load_tiny();
  Golden g;
  const auto tokens = g.i32("p64.tokens");
  const int64_t d = model->config().hidden, W = model->config().wide();
  std::vector<std::vector<float>> rows(9);  // index = golden L index; 8 = final
  {
    auto src = open_tensor_source(model_dir());
    const float* e = static_cast<const float*>(src->get("model.embed_tokens.weight").data) + tokens.back() * d;
    for (int64_t k = 0; k < W / d; ++k) rows[0].insert(rows[0].end(), e, e + d);
  }
  model->on_layer = [&](int64_t l, const float* h, int64_t n) {
    if (l < 0) rows[8].assign(h + (n - 1) * d, h + n * d);
    else if (l + 1 < 8) rows[size_t(l + 1)].assign(h + (n - 1) * W, h + n * W);
  };
  auto st = model->new_state();
  model->prefill(*st, tokens);
  for (size_t l = 0; l < rows.size(); ++l) {
    const auto& r = rows[l];
    ASSERT_FALSE(r.empty());
    double mean = 0;
    float amax = 0;
    for (float v : r) mean += v, amax = std::max(amax, std::fabs(v));
    const int64_t n = int64_t(r.size());
    const std::vector<float> got = {float(mean / double(n)), amax, r[0], r[size_t(37 % n)], r[size_t(70 % n)],
                                    r[size_t(127 % n)]};
    const auto ref = g.f32(l < 8 ? "p64.hidden.L" + std::to_string(l) : std::string("p64.hidden.final"));
    EXPECT_LE(max_abs_diff(got, ref), 1e-4f) << "golden L" << l;
  }
}

}  // namespace
}  // namespace ds4::qwen_next::test
