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

// Every layer_types spelling that transformers 5.17..5.25 runs as a GLM layer loads; the
// generic names HF's config accepts but its GLM model cannot run are refused by name.
TEST(Glm5Config, LayerTypeSpellingsOfEveryTransformersVersion) {
  auto j = tiny();
  j["layer_types"] = {"mamba", "deepseek_sparse_attention", "qwen_sparse_attention", "linear_attention"};
  Config c = parse_config(j, "cfg");
  EXPECT_EQ(c.layer_types[0], LayerKind::kLinear);
  EXPECT_EQ(c.layer_types[1], LayerKind::kIndexed);
  EXPECT_EQ(c.layer_types[2], LayerKind::kIndexed);
  j["layer_types"] = {"linear_attention", "full_attention", "indexed_attention", "linear_attention"};
  c = parse_config(j, "cfg");
  EXPECT_EQ(c.layer_types[1], LayerKind::kIndexed);
  EXPECT_EQ(c.layer_types[3], LayerKind::kLinear);
  for (const char* bad : {"attention", "sliding_attention", "hybrid", "conv"}) {
    j["layer_types"] = {"linear_attention", bad, "indexed_attention", "linear_attention"};
    try {
      parse_config(j, "cfg.json");
      FAIL() << bad << ": expected InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("layer_types[1] = '") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

// index_topk_pattern: F/S letters, or a list used as indexer_types (HF), longer lists allowed
// (HF indexes by layer); other letters are refused like HF's KeyError.
TEST(Glm5Config, IndexerPatternForms) {
  auto j = tiny();
  j.erase("indexer_types");
  j["index_topk_pattern"] = "FFSF";
  EXPECT_TRUE(parse_config(j, "cfg").indexer_shared[2]);
  j["index_topk_pattern"] = {"full", "full", "shared", "full", "shared"};
  const Config c = parse_config(j, "cfg");
  EXPECT_TRUE(c.indexer_shared[2]);
  EXPECT_EQ(c.indexer_shared.size(), 4u);
  j["index_topk_pattern"] = "FFXF";
  try {
    parse_config(j, "cfg");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("index_topk_pattern[2] = 'X'"), std::string::npos) << e.what();
  }
  j["index_topk_pattern"] = "FFS";  // shorter than the layers: HF raises IndexError
  EXPECT_THROW(parse_config(j, "cfg"), InputError);
  j.erase("index_topk_pattern");
  j["index_topk_freq"] = 2;
  j["index_skip_topk_offset"] = 1;
  j["layer_types"] = {"indexed_attention", "indexed_attention", "indexed_attention", "linear_attention"};
  const Config f = parse_config(j, "cfg");  // HF: full iff max(i - offset + 1, 0) % freq == 0
  EXPECT_FALSE(f.indexer_shared[0]);
  EXPECT_TRUE(f.indexer_shared[1]);
  EXPECT_FALSE(f.indexer_shared[2]);
}

TEST(Glm5Config, AliasesAndNulls) {
  auto j = tiny();
  j["num_local_experts"] = 6;  // HF attribute_map alias of n_routed_experts (set last: it wins)
  j["n_routed_experts"] = 4;
  j["num_experts_per_tok"] = 2;
  EXPECT_EQ(parse_config(j, "cfg").n_routed_experts, 6);
  j = tiny();
  j["num_key_value_heads"] = nullptr;  // HF: null = num_attention_heads
  j["eos_token_id"] = nullptr;
  j["linear_lower_bound"] = nullptr;   // the softplus gate
  Config c = parse_config(j, "cfg");
  EXPECT_FALSE(c.has_lower_bound);
  EXPECT_TRUE(c.eos_token_ids.empty());
  j["linear_attn_config"] = {{"gate_lower_bound", nullptr}};  // safe_gate defaults to true: -5
  c = parse_config(j, "cfg");
  EXPECT_TRUE(c.has_lower_bound);
  EXPECT_EQ(c.linear_lower_bound, -5.0f);
  j["linear_attn_config"] = {{"gate_lower_bound", nullptr}, {"safe_gate", false}};
  EXPECT_FALSE(parse_config(j, "cfg").has_lower_bound);
  j = tiny();
  EXPECT_FALSE(parse_config(j, "cfg").tie_word_embeddings);
  nlohmann::json outer = {{"model_type", "glm5_next"}, {"tie_word_embeddings", true}, {"text_config", tiny()}};
  EXPECT_TRUE(parse_config(outer, "cfg").tie_word_embeddings);  // the generation model's flag
  j["q_lora_rank"] = nullptr;  // a strict int field in HF: refused there too
  try {
    parse_config(j, "cfg.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'q_lora_rank' is null"), std::string::npos) << e.what();
  }
}

// Fields HF reads that we do not implement, or values HF itself refuses or cannot route.
TEST(Glm5Config, RefusesWhatWeDoNotComputeNamingTheField) {
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"attention_bias", true}}, "attention_bias"},
      {{{"hidden_act", "gelu"}}, "hidden_act"},
      {{{"num_key_value_heads", 8}, {"num_attention_heads", 4}}, "num_key_value_heads"},
      {{{"n_routed_experts", 6}, {"n_group", 6}, {"topk_group", 1}}, "experts per group"},
      {{{"n_routed_experts", 8}, {"n_group", 4}, {"topk_group", 1}, {"num_experts_per_tok", 3}}, "num_experts_per_tok"},
      {{{"linear_conv_kernel_dim", 0}}, "linear_conv_kernel_dim"},
  };
  for (const auto& [patch, field] : cases) {
    auto j = tiny();
    j.update(patch);
    try {
      parse_config(j, "cfg.json");
      FAIL() << patch.dump() << ": expected InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ds4::glm5
