// ModelState::save/load for every family on the tiny test models: a state restored into a
// fresh state continues bit-identically, and a damaged or foreign state is refused with an
// error naming the section.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "models/model.h"

namespace ds4 {
namespace {

std::string model_dir(const std::string& family) { return std::string(DS4_TEST_DATA) + "/" + family + "/model"; }

std::vector<int32_t> prompt(int64_t vocab, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + 11) % vocab));
  return t;
}

int32_t argmax(const std::vector<float>& v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class StateCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(StateCheckpoint, RestoredStateDecodesBitIdentically) {
  auto model = load_model(model_dir(GetParam()), LoadOptions{.threads = 2});
  const int64_t V = model->info().vocab_size;
  auto st = model->new_state();
  auto logits = model->prefill(*st, prompt(V, 70), 16);

  std::vector<StateSection> sections;
  st->save(sections);
  ASSERT_FALSE(sections.empty());
  auto restored = model->new_state();
  restored->load(sections);
  EXPECT_EQ(restored->position(), 70);
  EXPECT_EQ(restored->bytes(), st->bytes());

  int32_t tok = argmax(logits);
  for (int step = 0; step < 8; ++step) {
    const auto a = model->decode(*st, tok), b = model->decode(*restored, tok);
    ASSERT_TRUE(same_bits(a, b)) << GetParam() << " decode " << step;
    tok = argmax(a);
  }
  // Saving the continued states again gives the same bytes.
  std::vector<StateSection> s1, s2;
  st->save(s1);
  restored->save(s2);
  ASSERT_EQ(s1.size(), s2.size());
  for (size_t i = 0; i < s1.size(); ++i) EXPECT_EQ(s1[i].bytes, s2[i].bytes) << s1[i].name;
}

TEST_P(StateCheckpoint, DamagedSectionsAreRefusedByName) {
  auto model = load_model(model_dir(GetParam()), LoadOptions{.threads = 2});
  auto st = model->new_state();
  model->prefill(*st, prompt(model->info().vocab_size, 40), 16);
  std::vector<StateSection> good;
  st->save(good);

  // The biggest section loses one float.
  auto cut = good;
  auto big = std::max_element(cut.begin(), cut.end(),
                              [](const auto& a, const auto& b) { return a.bytes.size() < b.bytes.size(); });
  big->bytes.resize(big->bytes.size() - sizeof(float));
  auto fresh = model->new_state();
  try {
    fresh->load(cut);
    FAIL() << "truncated section " << big->name << " was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(big->name), std::string::npos) << e.what();
  }
  EXPECT_EQ(fresh->position(), 0);  // a refused load leaves the state untouched

  // A missing section.
  auto missing = good;
  const std::string gone = missing.back().name;
  missing.pop_back();
  try {
    model->new_state()->load(missing);
    FAIL() << "missing section accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(gone), std::string::npos) << e.what();
  }
  // A foreign section (another layer count).
  auto extra = good;
  extra.push_back({"layer.999.k", {}});
  EXPECT_THROW(model->new_state()->load(extra), InputError);
}

INSTANTIATE_TEST_SUITE_P(Families, StateCheckpoint, ::testing::Values("qwen_next", "deepseek_v4", "glm5"));

TEST(StateCheckpointCross, OtherFamilyStateIsRefused) {
  auto qwen = load_model(model_dir("qwen_next"), LoadOptions{.threads = 2});
  auto glm = load_model(model_dir("glm5"), LoadOptions{.threads = 2});
  auto st = qwen->new_state();
  qwen->prefill(*st, prompt(qwen->info().vocab_size, 8));
  std::vector<StateSection> sections;
  st->save(sections);
  EXPECT_THROW(glm->new_state()->load(sections), InputError);
}

TEST(ModelFingerprint, StableAndFamilySpecific) {
  auto a = load_model(model_dir("glm5"), LoadOptions{.threads = 2});
  auto b = load_model(model_dir("glm5"), LoadOptions{.threads = 1});
  auto c = load_model(model_dir("deepseek_v4"), LoadOptions{.threads = 2});
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  EXPECT_NE(a->fingerprint(), c->fingerprint());
  EXPECT_EQ(a->fingerprint().rfind("glm5:", 0), 0u) << a->fingerprint();
}

}  // namespace
}  // namespace ds4
