// Synthetic GLM 5.x weights (models/glm5/synthetic.h, for the CUDA bench) bind through the
// CPU model: every tensor bind_weights() asks for is there with its shape, and a forward
// pass over the sparse-indexer switch gives finite logits, equal from two sources of the same
// weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "models/glm5/config.h"
#include "models/glm5/model.h"
#include "models/glm5/synthetic.h"

namespace ds4::glm5 {
namespace {

nlohmann::json small_config() {
  nlohmann::json j = synthetic_config(4, 4, 256);
  for (auto [k, v] : {std::pair<const char*, int64_t>{"hidden_size", 64}, {"intermediate_size", 64},
                      {"moe_intermediate_size", 32}, {"linear_num_heads", 4}, {"linear_head_dim", 16},
                      {"num_attention_heads", 4}, {"kv_lora_rank", 32}, {"q_lora_rank", 32},
                      {"qk_nope_head_dim", 16}, {"v_head_dim", 16}, {"index_n_heads", 4}, {"index_head_dim", 16},
                      {"index_topk", 8}, {"index_kpool", 4}, {"num_experts_per_tok", 2}})
    j[k] = v;
  return j;
}

TEST(Glm5Synthetic, BindsAndRunsThroughTheSparseSwitch) {
  const auto w = make_synthetic(small_config(), DType::BF16);
  auto a = load_source(synthetic_source(w), LoadOptions{1});
  auto b = load_source(synthetic_source(w), LoadOptions{1});
  EXPECT_EQ(a->info().vocab_size, 256);
  std::vector<int32_t> prompt(20);
  std::iota(prompt.begin(), prompt.end(), 3);  // 5 complete pools > budget 2: sparse selection
  auto sa = a->new_state(), sb = b->new_state();
  auto la = a->prefill(*sa, prompt), lb = b->prefill(*sb, prompt);
  ASSERT_EQ(la.size(), 256u);
  EXPECT_TRUE(std::all_of(la.begin(), la.end(), [](float x) { return std::isfinite(x); }));
  EXPECT_EQ(la, lb);
  la = a->decode(*sa, 7);
  EXPECT_TRUE(std::all_of(la.begin(), la.end(), [](float x) { return std::isfinite(x); }));
  // Not all equal: the weights are not degenerate.
  EXPECT_GT(*std::max_element(la.begin(), la.end()) - *std::min_element(la.begin(), la.end()), 1e-3f);
}

TEST(Glm5Synthetic, BenchConfigHasFlashShapes) {
  const Config c = parse_config(synthetic_config(4, 16, 32768), "synthetic");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.n_routed_experts, 16);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.layer_types[3], LayerKind::kIndexed);
  EXPECT_EQ(c.layer_types[2], LayerKind::kLinear);
  EXPECT_FALSE(c.mlp_sparse[0]);
  EXPECT_TRUE(c.mlp_sparse[1]);
}

TEST(Glm5Synthetic, RefusesBlockTypes) {
  EXPECT_THROW(make_synthetic(small_config(), DType::Q8_0), InputError);
}

}  // namespace
}  // namespace ds4::glm5
