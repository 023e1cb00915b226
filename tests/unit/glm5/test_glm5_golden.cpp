// GLM 5.x tiny model vs the HF glm5_next golden vectors (tests/data/glm5/README.md):
// max |logit diff| <= 1e-3 and exact greedy tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "golden.h"
#include "models/glm5/model.h"
#include "models/model.h"

namespace ds4::glm5_test {
namespace {

constexpr float kTol = 1e-3f;
constexpr int kSteps = 32;
const int kLengths[] = {1, 7, 64, 300};

float max_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

int32_t argmax(const std::vector<float>& v, size_t off = 0, size_t n = 0) {
  if (!n) n = v.size() - off;
  return int32_t(std::max_element(v.begin() + off, v.begin() + off + n) - (v.begin() + off));
}

class Glm5Golden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LoadOptions o;
    o.threads = 2;
    model_ = load_model(model_dir(), o).release();
    golden_ = new Golden();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete golden_;
  }
  static std::vector<int32_t> tokens(int n) { return golden_->get<int32_t>("p" + std::to_string(n) + ".tokens"); }
  static Model* model_;
  static Golden* golden_;
};
Model* Glm5Golden::model_ = nullptr;
Golden* Glm5Golden::golden_ = nullptr;

TEST_F(Glm5Golden, LoadsEveryCommittedFile) {
  EXPECT_EQ(model_->info().family, "glm5");
  EXPECT_EQ(model_->info().vocab_size, 1024);
  EXPECT_EQ(model_->info().eos_token_ids, std::vector<int32_t>{1023});
  for (int n : kLengths) {
    const std::string p = "p" + std::to_string(n);
    EXPECT_EQ(golden_->get<int32_t>(p + ".tokens").size(), size_t(n));
    EXPECT_EQ(golden_->get<float>(p + ".prefill_logits").size(), 1024u);
    EXPECT_EQ(golden_->get<float>(p + ".decode_logits").size(), size_t(kSteps * 1024));
    EXPECT_EQ(golden_->get<int32_t>(p + ".greedy").size(), size_t(kSteps));
    for (int l = 0; l < 6; ++l) EXPECT_EQ(golden_->get<float>(p + ".hidden.L" + std::to_string(l)).size(), 6u);
  }
}

TEST_F(Glm5Golden, PrefillAndGreedyDecodeMatchHF) {
  for (int n : kLengths) {
    SCOPED_TRACE("prompt p" + std::to_string(n));
    const std::string p = "p" + std::to_string(n);
    const auto want_prefill = golden_->get<float>(p + ".prefill_logits");
    const auto want_decode = golden_->get<float>(p + ".decode_logits");
    const auto greedy = golden_->get<int32_t>(p + ".greedy");
    auto st = model_->new_state();
    auto logits = model_->prefill(*st, tokens(n));
    float worst = max_diff(logits.data(), want_prefill.data(), 1024);
    ASSERT_EQ(argmax(logits), greedy[0]);
    for (int i = 0; i < kSteps; ++i) {
      logits = model_->decode(*st, greedy[size_t(i)]);
      worst = std::max(worst, max_diff(logits.data(), want_decode.data() + i * 1024, 1024));
      if (i + 1 < kSteps) {
        ASSERT_EQ(argmax(logits), greedy[size_t(i + 1)]) << "step " << i;
      }
    }
    EXPECT_LE(worst, kTol);
    std::printf("[glm5] p%d: max |logit diff| vs HF = %.3g over prefill + %d decode steps\n", n, worst, kSteps);
    EXPECT_EQ(st->position(), n + kSteps);
  }
}

TEST_F(Glm5Golden, ChunkedPrefillGivesTheSameLogits) {
  const auto toks = tokens(300);
  const auto want = golden_->get<float>("p300.prefill_logits");
  auto one = model_->new_state();
  const auto ref = model_->prefill(*one, toks, int64_t(toks.size()));
  EXPECT_LE(max_diff(ref.data(), want.data(), 1024), kTol);
  for (int64_t chunk : {1, 3, 64}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    auto st = model_->new_state();
    const auto got = model_->prefill(*st, toks, chunk);
    EXPECT_LE(max_diff(got.data(), ref.data(), 1024), 1e-4f);
    // The states must agree too: the next decode step gives the same logits.
    const auto a = model_->decode(*st, 5);
    auto one_copy = one->clone();
    const auto b = model_->decode(*one_copy, 5);
    EXPECT_LE(max_diff(a.data(), b.data(), 1024), 1e-4f);
  }
}

// Position 35 is the first one whose query sees more complete k-pools (9) than the budget
// (index_topk / index_kpool = 8): a 2-row verify at positions 34, 35 crosses the switch.
TEST_F(Glm5Golden, TwoRowVerifyAcrossDenseSparseSwitchMatchesDecode) {
  auto prompt = tokens(7);
  const auto greedy = golden_->get<int32_t>("p7.greedy");
  const auto want = golden_->get<float>("p7.decode_logits");
  std::vector<int32_t> ctx = prompt;
  ctx.insert(ctx.end(), greedy.begin(), greedy.begin() + 27);  // positions 0..33
  auto st = model_->new_state();
  model_->prefill(*st, ctx);
  ASSERT_EQ(st->position(), 34);
  auto dec = st->clone();
  const std::vector<int32_t> rows = {greedy[27], greedy[28]};
  const auto v = model_->verify(*st, rows);
  ASSERT_EQ(v.size(), 2u * 1024);
  for (int r = 0; r < 2; ++r) {
    const auto d = model_->decode(*dec, rows[size_t(r)]);
    EXPECT_LE(max_diff(v.data() + r * 1024, d.data(), 1024), 1e-4f) << "row " << r;
    EXPECT_LE(max_diff(v.data() + r * 1024, want.data() + (27 + r) * 1024, 1024), kTol) << "row " << r;
  }
}

TEST_F(Glm5Golden, VerifyOfFourRowsEqualsFourDecodes) {
  const auto greedy = golden_->get<int32_t>("p64.greedy");
  const auto want = golden_->get<float>("p64.decode_logits");
  auto st = model_->new_state();
  model_->prefill(*st, tokens(64));
  const std::vector<int32_t> rows(greedy.begin(), greedy.begin() + 4);
  const auto v = model_->verify(*st, rows);
  for (int r = 0; r < 4; ++r) {
    EXPECT_LE(max_diff(v.data() + r * 1024, want.data() + r * 1024, 1024), kTol) << "row " << r;
    EXPECT_EQ(argmax(v, size_t(r) * 1024, 1024), r + 1 < 4 ? greedy[size_t(r + 1)] : argmax(want, 3 * 1024, 1024));
  }
}

TEST_F(Glm5Golden, SnapshotRestoreAcrossTheSwitchContinuesIdentically) {
  const auto greedy = golden_->get<int32_t>("p7.greedy");
  auto st = model_->new_state();
  model_->prefill(*st, tokens(7));
  for (int i = 0; i < 25; ++i) model_->decode(*st, greedy[size_t(i)]);  // position 32: dense
  auto snap = st->clone();
  std::vector<std::vector<float>> first;
  for (int i = 25; i < 32; ++i) first.push_back(model_->decode(*st, greedy[size_t(i)]));  // crosses 35
  for (int i = 25; i < 32; ++i) {
    const auto again = model_->decode(*snap, greedy[size_t(i)]);
    ASSERT_EQ(again, first[size_t(i - 25)]) << "step " << i;  // bit-identical
  }
  EXPECT_EQ(snap->position(), st->position());
  EXPECT_EQ(snap->bytes(), st->bytes());
}

TEST_F(Glm5Golden, RejectsTokenOutsideVocab) {
  auto st = model_->new_state();
  const std::vector<int32_t> bad = {1024};
  std::vector<float> logits;
  EXPECT_THROW(model_->forward(*st, bad, Logits::kLast, logits), InputError);
  EXPECT_EQ(st->position(), 0);
}

}  // namespace
}  // namespace ds4::glm5_test

namespace ds4::glm5_test {
namespace {

// Per-layer checksums of the prefill streams {tokens, 4, 64}: mean, abs-max and the flat
// elements [0, n/3, 2n/3, n-1] (make_golden.py). Localizes a mismatch to its layer.
TEST_F(Glm5Golden, LayerOutputChecksumsMatchHF) {
  for (int n : {7, 64}) {
    const auto outs = glm5::layer_outputs(*model_, tokens(n));
    ASSERT_EQ(outs.size(), 6u);
    for (int l = 0; l < 6; ++l) {
      SCOPED_TRACE("p" + std::to_string(n) + " layer " + std::to_string(l));
      const auto want = golden_->get<float>("p" + std::to_string(n) + ".hidden.L" + std::to_string(l));
      const auto& x = outs[size_t(l)];
      const size_t sz = x.size();
      double mean = 0;
      float amax = 0;
      for (float v : x) mean += v, amax = std::max(amax, std::fabs(v));
      const float got[6] = {float(mean / double(sz)), amax, x[0], x[sz / 3], x[(2 * sz) / 3], x[sz - 1]};
      for (int i = 0; i < 6; ++i) EXPECT_NEAR(got[i], want[size_t(i)], 1e-4f) << "checksum " << i;
    }
  }
}

}  // namespace
}  // namespace ds4::glm5_test
