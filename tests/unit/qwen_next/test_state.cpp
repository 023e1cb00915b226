// State semantics: chunk sizes never change results, verify(k) equals k decodes, a cloned
// state continues bit-identically, and bad input is rejected with a clear error.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "golden.h"
#include "models/model.h"

namespace ds4::qwen_next::test {
namespace {

struct Fixture : ::testing::Test {
  static void SetUpTestSuite() {
    model = load_tiny().release();
    golden = new Golden();
  }
  static void TearDownTestSuite() {
    delete model;
    delete golden;
  }
  static QwenNextModel* model;
  static Golden* golden;
};
QwenNextModel* Fixture::model = nullptr;
Golden* Fixture::golden = nullptr;

using QwenState = Fixture;

TEST_F(QwenState, ChunkedPrefillAgreesWithOneShot) {
  // p64 crosses the indexer's sparse threshold (16 blocks > 8 kept) and holds an EOS.
  const auto tokens = golden->i32("p64.tokens");
  auto one = model->new_state();
  const auto ref = model->prefill(*one, tokens, int64_t(tokens.size()));
  for (int64_t chunk : {1, 3, 64}) {
    auto st = model->new_state();
    const auto got = model->prefill(*st, tokens, chunk);
    EXPECT_LE(max_abs_diff(got, ref), 2e-5f) << "chunk " << chunk;
    EXPECT_EQ(argmax(got), argmax(ref));
    // The states agree too: the next decode step gives the same logits.
    const auto a = model->decode(*st, 5), b = model->decode(*one->clone(), 5);
    EXPECT_LE(max_abs_diff(a, b), 2e-5f) << "chunk " << chunk;
  }
}

TEST_F(QwenState, VerifyEqualsSequentialDecodes) {
  const auto tokens = golden->i32("p300.tokens");
  const auto greedy = golden->i32("p300.greedy");
  auto st = model->new_state();
  model->prefill(*st, tokens);
  auto st2 = st->clone();
  const int64_t V = model->info().vocab_size, k = 5;
  const auto all = model->verify(*st, std::span<const int32_t>(greedy.data(), size_t(k)));
  ASSERT_EQ(all.size(), size_t(k * V));
  for (int64_t i = 0; i < k; ++i) {
    const auto one = model->decode(*st2, greedy[size_t(i)]);
    EXPECT_LE(max_abs_diff(std::span<const float>(all.data() + i * V, size_t(V)), one), 2e-5f) << "row " << i;
  }
  EXPECT_EQ(st->position(), st2->position());
}

TEST_F(QwenState, CloneContinuesBitIdentically) {
  const auto tokens = golden->i32("p64.tokens");
  auto st = model->new_state();
  model->prefill(*st, tokens);
  auto snap = st->clone();
  EXPECT_EQ(snap->position(), 64);
  EXPECT_GT(snap->bytes(), size_t(0));
  std::vector<float> a, b;
  for (int32_t t : {3, 1000, 17, 17}) {  // includes EOS: PLE context must be part of the copy
    a = model->decode(*st, t);
    b = model->decode(*snap, t);
    ASSERT_EQ(a, b);
  }
}

TEST_F(QwenState, RejectsBadTokensAndContext) {
  auto st = model->new_state();
  const std::vector<int32_t> bad = {1, 1024};
  EXPECT_THROW(model->prefill(*st, bad), InputError);
  const std::vector<int32_t> neg = {-1};
  EXPECT_THROW(model->decode(*st, neg[0]), InputError);
  try {
    model->prefill(*st, bad);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("1024"), std::string::npos) << e.what();
  }
}

TEST(QwenConfig, RejectsBadFieldsNamingThem) {
  std::ifstream f(model_dir() + "/config.json");
  const auto good = nlohmann::json::parse(f);
  EXPECT_NO_THROW(parse_config(good, "cfg"));
  auto j = good;
  j["indexer_budget"] = 30;  // not a multiple of the block ratio
  try {
    parse_config(j, "cfg");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("indexer_budget"), std::string::npos);
  }
  j = good;
  j.erase("hidden_size");
  EXPECT_THROW(parse_config(j, "cfg"), InputError);
  j = good;
  j["ple_layer_ids"] = {4};  // layer 4 (one-indexed) is QSA
  EXPECT_THROW(parse_config(j, "cfg"), InputError);
  const auto c = parse_config(good, "cfg");
  EXPECT_EQ(c.layers, 8);
  EXPECT_EQ(c.rot_dim, 8);
  EXPECT_EQ(std::count(c.is_linear.begin(), c.is_linear.end(), false), 2);
  EXPECT_EQ(c.ple_layers, std::vector<int64_t>{1});
}

TEST(QwenRegistry, LoadModelPicksTheFamily) {
  auto m = load_model(model_dir());
  EXPECT_EQ(m->info().family, "qwen_next");
  EXPECT_EQ(m->info().vocab_size, 1024);
  EXPECT_TRUE(m->info().has_draft_head);
  EXPECT_EQ(m->info().eos_token_ids, std::vector<int32_t>{1000});
}

}  // namespace
}  // namespace ds4::qwen_next::test

namespace ds4::qwen_next::test {
namespace {

// The MTP head's history follows the token stream whatever the call pattern, and drafting
// leaves the state untouched.
TEST(QwenMtp, HistoryIndependentOfCallPatternAndDraftIsPure) {
  auto model = load_tiny();
  Golden g;
  const auto tokens = g.i32("p64.tokens");
  const auto greedy = g.i32("p64.greedy");
  auto a = model->new_state(), b = model->new_state();
  model->enable_mtp(*a);
  model->enable_mtp(*b);
  model->prefill(*a, tokens, 16);
  for (int i = 0; i < 4; ++i) model->decode(*a, greedy[size_t(i)]);
  std::vector<int32_t> all(tokens);
  all.insert(all.end(), greedy.begin(), greedy.begin() + 4);
  model->prefill(*b, all);
  std::vector<float> la, la2, lb;
  std::vector<int32_t> da, da2, db;
  model->mtp_draft(*a, greedy[4], 3, la, da);
  model->mtp_draft(*a, greedy[4], 3, la2, da2);  // again: drafting must not have moved the state
  model->mtp_draft(*b, greedy[4], 3, lb, db);
  EXPECT_EQ(la, la2);
  EXPECT_EQ(da, da2);
  EXPECT_LE(max_abs_diff(la, lb), 2e-5f);
  EXPECT_EQ(da, db);
  auto plain = model->new_state();
  EXPECT_THROW(model->mtp_draft(*plain, 1, 1, la, da), InputError);  // enable_mtp() missing
}

}  // namespace
}  // namespace ds4::qwen_next::test
