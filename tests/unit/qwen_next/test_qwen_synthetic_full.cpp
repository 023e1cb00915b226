// The synthetic full-size Qwen3.8 Flash Next (models/qwen_next/synthetic_full.h) on the CPU:
// the SPEC shapes parse, and the real-width model with fewer layers, experts, vocabulary and
// a small PLE table, materialized on the host with the GPU's generator (MLX q4 g64 words,
// BF16 scales and biases), binds through the CPU model and gives finite, non-degenerate logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/qwen_next/config.h"
#include "models/qwen_next/model.h"
#include "models/qwen_next/synthetic_full.h"

namespace ds4::qwen_next {
namespace {

TEST(QwenSyntheticFull, ConfigIsTheFlashNextOne) {
  SyntheticFullOptions o;
  ASSERT_TRUE(parse_synthetic_full("synthetic-full", o));
  const Config c = parse_config(synthetic_full_config(o), "t");
  EXPECT_EQ(c.layers, 48);
  EXPECT_EQ(std::count(c.is_linear.begin(), c.is_linear.end(), true), 36);
  EXPECT_EQ(c.hidden, 2560);
  EXPECT_EQ(c.experts, 512);
  EXPECT_EQ(c.top_k, 10);
  EXPECT_EQ(c.moe_inter, 640);
  EXPECT_EQ(c.v_heads, 48);
  EXPECT_EQ(c.k_heads, 16);
  EXPECT_EQ(c.heads, 24);
  EXPECT_EQ(c.rot_dim, 64);
  EXPECT_EQ(c.vocab, 248320);
  EXPECT_EQ(c.ple_dim / ((c.ngram - 1) * c.heads_per_ngram), 160);
  ASSERT_TRUE(parse_synthetic_full("synthetic-full:64:8", o));
  EXPECT_EQ(o.n_experts, 64);
  EXPECT_EQ(o.layers, 8);
  EXPECT_FALSE(parse_synthetic_full("models/default", o));
  EXPECT_THROW(parse_synthetic_full("synthetic-full:x", o), std::exception);
}

TEST(QwenSyntheticFull, RealWidthsRunFiniteOnTheCpu) {
  SyntheticFullOptions o;
  o.layers = 4, o.n_experts = 12, o.vocab = 2048, o.ngram_base = 2003, o.materialize = true;
  auto m = std::make_unique<QwenNextModel>(synthetic_full_source(o), LoadOptions{2});
  std::vector<int32_t> prompt = {1, 5, 9, 200, 7};
  auto st = m->new_state();
  auto l = m->prefill(*st, prompt);
  ASSERT_EQ(l.size(), 2048u);
  for (size_t i = 0; i < l.size(); ++i) ASSERT_TRUE(std::isfinite(l[i])) << "logit " << i << " = " << l[i];
  EXPECT_GT(*std::max_element(l.begin(), l.end()) - *std::min_element(l.begin(), l.end()), 1e-4f);
  l = m->decode(*st, 3);
  for (size_t i = 0; i < l.size(); ++i) ASSERT_TRUE(std::isfinite(l[i])) << "decode logit " << i << " = " << l[i];
}

}  // namespace
}  // namespace ds4::qwen_next
