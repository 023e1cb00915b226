// The CPU model against HF's golden vectors: prefill logits, 32 teacher-forced decode
// steps, 32 free-running greedy tokens.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "models/deepseek_v4/model.h"
#include "models/model.h"

using namespace ds4_test;

namespace {
ds4::Model& model() {
  static auto m = ds4::load_model(kModelDir);
  return *m;
}
}  // namespace

TEST(DeepseekV4Golden, LoadsTinyModel) {
  const auto& info = model().info();
  EXPECT_EQ(info.family, "deepseek_v4");
  EXPECT_EQ(info.vocab_size, 1024);
  EXPECT_EQ(info.hidden_size, 64);
  EXPECT_EQ(info.default_prefill_chunk, 4096);
  ASSERT_EQ(info.eos_token_ids.size(), 1u);
  EXPECT_EQ(info.eos_token_ids[0], 1);
}

class PerPrompt : public ::testing::TestWithParam<int> {};

TEST_P(PerPrompt, PrefillAndDecodeLogitsMatchHf) {
  const Golden g;
  const std::string k = "p" + std::to_string(GetParam());
  const auto tokens = g.i32(k + ".tokens");
  const auto want = g.f32(k + ".prefill_logits");
  const auto greedy = g.i32(k + ".greedy");
  const auto dec = g.f32(k + ".decode_logits");
  const size_t V = want.size();
  auto st = model().new_state();
  auto logits = model().prefill(*st, tokens);
  ASSERT_EQ(logits.size(), V);
  const float d0 = max_abs_diff(logits.data(), want.data(), V);
  EXPECT_LT(d0, kLogitTol) << k << " prefill";
  float worst = d0;
  for (size_t i = 0; i < greedy.size(); ++i) {
    logits = model().decode(*st, greedy[i]);
    const float d = max_abs_diff(logits.data(), dec.data() + i * V, V);
    worst = std::max(worst, d);
    EXPECT_LT(d, kLogitTol) << k << " decode step " << i;
  }
  std::printf("[ %s ] max |logit diff| vs HF over prefill + 32 decode rows: %.3g\n", k.c_str(), worst);
  // The tolerance stays well above HF's own cached-vs-uncached spread for this prompt.
  const float hf_spread = g.f32(k + ".nocache_max_diff")[0];
  EXPECT_GT(hf_spread, 0.0f);
  EXPECT_LT(10 * hf_spread, kLogitTol) << k;
}

TEST_P(PerPrompt, GreedyTokensMatchHf) {
  const Golden g;
  const std::string k = "p" + std::to_string(GetParam());
  const auto tokens = g.i32(k + ".tokens");
  const auto greedy = g.i32(k + ".greedy");
  auto st = model().new_state();
  auto logits = model().prefill(*st, tokens);
  std::vector<int32_t> got;
  for (size_t i = 0; i < greedy.size(); ++i) {
    got.push_back(argmax(logits.data(), logits.size()));
    logits = model().decode(*st, got.back());
  }
  EXPECT_EQ(got, greedy);
}

INSTANTIATE_TEST_SUITE_P(Prompts, PerPrompt, ::testing::ValuesIn(kPrompts),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

TEST_P(PerPrompt, HiddenChecksumsMatchHf) {
  const Golden g;
  const int n = GetParam();
  const std::string k = "p" + std::to_string(n);
  std::vector<std::vector<float>> last;  // per layer: HC state of the last prompt position
  ds4::deepseek_v4::set_layer_observer(model(), [&](int64_t l, const float* x, int64_t T) {
    const int64_t flat = 4 * 64;
    if (int64_t(last.size()) <= l) last.resize(size_t(l + 1));
    last[size_t(l)].assign(x + (T - 1) * flat, x + T * flat);
  });
  auto st = model().new_state();
  model().prefill(*st, g.i32(k + ".tokens"));
  ds4::deepseek_v4::set_layer_observer(model(), nullptr);
  ASSERT_EQ(last.size(), 5u);
  for (size_t l = 0; l < last.size(); ++l) {
    const auto want = g.f32(k + ".hidden.L" + std::to_string(l));  // mean, absmax, [0], [17], [100], [255]
    const auto& v = last[l];
    double mean = 0;
    float amax = 0;
    for (float e : v) mean += e, amax = std::max(amax, std::abs(e));
    mean /= double(v.size());
    const float tol = 1e-3f * want[1];
    EXPECT_NEAR(mean, want[0], tol) << k << " L" << l;
    EXPECT_NEAR(amax, want[1], tol) << k << " L" << l;
    const size_t idx[4] = {0, 17, 100, 255};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(v[idx[i]], want[size_t(2 + i)], tol) << k << " L" << l << " [" << idx[i] << "]";
  }
}
