// Config parsing: HF defaults, schedules, and loud rejection of bad fields.
#include <gtest/gtest.h>

#include "core/error.h"
#include "models/glm5/config.h"

namespace ds4::glm5 {
namespace {

nlohmann::json tiny() {
  return nlohmann::json::parse(R"({"model_type": "glm5_next", "num_hidden_layers": 4, "index_topk": 32,
    "index_kpool": 4, "layer_types": ["linear_attention", "indexed_attention", "indexed_attention", "linear_attention"],
    "indexer_types": ["full", "full", "shared", "full"], "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]})");
}

TEST(Glm5Config, DefaultsFollowHF) {
  nlohmann::json j = {{"model_type", "glm5_next"}, {"num_hidden_layers", 8}};
  const Config c = parse_config(j, "cfg");
  // HF: layer i is KDA unless i % 4 == 3; first three MLPs dense; every indexer full.
  EXPECT_EQ(c.layer_types[3], LayerKind::kIndexed);
  EXPECT_EQ(c.layer_types[4], LayerKind::kLinear);
  EXPECT_FALSE(c.mlp_sparse[2]);
  EXPECT_TRUE(c.mlp_sparse[3]);
  EXPECT_FALSE(c.indexer_shared[7]);
  EXPECT_EQ(c.kpool_budget(), 2048 / 16);
}

TEST(Glm5Config, NestedTextConfigAndLinearAttnDict) {
  nlohmann::json j = {{"model_type", "glm5_next"},
                      {"text_config", {{"num_hidden_layers", 4}, {"hidden_size", 128},
                                       {"linear_attn_config", {{"num_heads", 8}, {"head_dim", 32}}}}}};
  const Config c = parse_config(j, "cfg");
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.linear_num_heads, 8);
  EXPECT_EQ(c.linear_head_dim, 32);
  EXPECT_EQ(c.linear_lower_bound, -5.0f);
}

TEST(Glm5Config, SharedIndexerNeedsAFullDsaLayerRightBefore) {
  auto j = tiny();
  EXPECT_TRUE(parse_config(j, "cfg").indexer_shared[2]);
  j["indexer_types"] = {"full", "shared", "full", "full"};  // layer 1 follows a KDA layer
  try {
    parse_config(j, "cfg.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cfg.json: layer 1"), std::string::npos) << e.what();
  }
}

TEST(Glm5Config, RejectsBadValues) {
  auto j = tiny();
  j["index_topk"] = 30;  // not a multiple of kpool 4
  EXPECT_THROW(parse_config(j, "cfg"), InputError);
  j = tiny();
  j["qk_rope_head_dim"] = 64;
  EXPECT_THROW(parse_config(j, "cfg"), InputError);
  j = tiny();
  j["layer_types"] = {"linear_attention"};
  EXPECT_THROW(parse_config(j, "cfg"), InputError);
  j = tiny();
  j["mlp_layer_types"][0] = "mixture";
  EXPECT_THROW(parse_config(j, "cfg"), InputError);
  j = tiny();
  j["hidden_size"] = "wide";
  EXPECT_THROW(parse_config(j, "cfg"), InputError);
  j = tiny();
  j["index_kpool_always_select_tail"] = false;
  EXPECT_THROW(parse_config(j, "cfg"), InputError);
}

}  // namespace
}  // namespace ds4::glm5
