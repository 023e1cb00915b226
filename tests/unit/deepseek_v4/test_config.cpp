// Config spellings transformers 5.17 .. 5.25 load for deepseek_v4 (DeepseekV4Config.__post_init__)
// and the ones it does not, refused with the field named.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "models/deepseek_v4/config.h"

namespace ds4::deepseek_v4 {
namespace {

// What transformers 5.17 and 5.25 both write (to_dict) for a 4-layer model: explicit
// layer_types / mlp_layer_types / compress_rates, nested {main, compress} rope parameters.
nlohmann::json modern() {
  return nlohmann::json::parse(R"({
    "vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 32, "q_lora_rank": 16, "o_groups": 2, "o_lora_rank": 8,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16, "n_shared_experts": 1,
    "sliding_window": 8, "index_n_heads": 4, "index_head_dim": 16, "index_topk": 4,
    "rope_theta": 10000.0, "compress_rope_theta": 160000.0, "partial_rotary_factor": 0.25,
    "qk_rope_head_dim": 8, "max_position_embeddings": 1048576, "hidden_act": "silu", "mlp_bias": false,
    "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                    "compressed_sparse_attention"],
    "mlp_layer_types": ["hash_moe", "hash_moe", "moe", "moe"],
    "compress_rates": {"compressed_sparse_attention": 8, "heavily_compressed_attention": 32},
    "rope_parameters": {
      "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
      "compress": {"rope_type": "yarn", "type": "yarn", "rope_theta": 160000.0, "factor": 16.0,
                   "original_max_position_embeddings": 65536, "attention_factor": 1.0,
                   "partial_rotary_factor": 0.25}}})");
}

// The same model in the legacy top-level spellings __post_init__ folds in.
nlohmann::json legacy() {
  nlohmann::json j = modern();
  for (const char* k : {"layer_types", "mlp_layer_types", "compress_rates", "rope_parameters", "partial_rotary_factor"})
    j.erase(k);
  j["compress_ratios"] = {0, 4, 128, 4, 0};  // real checkpoints list the MTP layer too: truncated
  j["compress_rate_csa"] = 8;
  j["compress_rate_hca"] = 32;
  j["num_hash_layers"] = 2;
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 16.0}, {"original_max_position_embeddings", 65536}};
  return j;
}

std::string refusal(const nlohmann::json& j) {
  try {
    parse_config(j, "cfg");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(loaded)";
}

void expect_same(const Config& a, const Config& b) {
  EXPECT_EQ(a.attn_types, b.attn_types);
  EXPECT_EQ(a.hash_moe, b.hash_moe);
  EXPECT_EQ(a.csa_ratio, b.csa_ratio);
  EXPECT_EQ(a.hca_ratio, b.hca_ratio);
  EXPECT_EQ(a.rope_dim, b.rope_dim);
  EXPECT_EQ(a.rope_main.theta, b.rope_main.theta);
  EXPECT_EQ(a.rope_main.yarn, b.rope_main.yarn);
  EXPECT_EQ(a.rope_compress.theta, b.rope_compress.theta);
  EXPECT_EQ(a.rope_compress.yarn, b.rope_compress.yarn);
  EXPECT_EQ(a.rope_compress.yarn_params.factor, b.rope_compress.yarn_params.factor);
  EXPECT_EQ(a.rope_compress.yarn_params.original_max_positions, b.rope_compress.yarn_params.original_max_positions);
}

TEST(DeepseekV4Config, ModernSpelling) {
  const Config c = parse_config(modern(), "cfg");
  EXPECT_EQ(c.attn_types[0], AttnType::kSliding);
  EXPECT_EQ(c.attn_types[2], AttnType::kHeavilyCompressed);
  EXPECT_EQ(c.ratio(1), 8);
  EXPECT_EQ(c.ratio(2), 32);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_FALSE(c.rope_main.yarn);
  EXPECT_TRUE(c.rope_compress.yarn);
  EXPECT_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_TRUE(c.hash_moe[1]);
  EXPECT_FALSE(c.hash_moe[2]);
}

TEST(DeepseekV4Config, LegacySpellingsLoadAsTheModernOne) {
  const Config a = parse_config(modern(), "cfg"), b = parse_config(legacy(), "cfg");
  expect_same(a, b);
  EXPECT_EQ(b.rope_compress.yarn_params.factor, 16.0);
  // The flat rope dict under its 5.x name too.
  nlohmann::json j = legacy();
  j["rope_parameters"] = j["rope_scaling"];
  j.erase("rope_scaling");
  expect_same(a, parse_config(j, "cfg"));
}

TEST(DeepseekV4Config, LegacyRateOverridesCompressRates) {
  nlohmann::json j = modern();
  j["compress_rate_hca"] = 64;  // __post_init__ folds it over compress_rates
  EXPECT_EQ(parse_config(j, "cfg").ratio(2), 64);
}

TEST(DeepseekV4Config, DefaultScheduleIsV4Pro) {
  nlohmann::json j = legacy();
  j.erase("compress_ratios");
  j.erase("num_hash_layers");
  j["num_hidden_layers"] = 6;
  const Config c = parse_config(j, "cfg");
  // two HCA layers, then CSA on odd and HCA on even indices; three hash layers
  const std::vector<AttnType> want = {AttnType::kHeavilyCompressed, AttnType::kHeavilyCompressed,
                                      AttnType::kHeavilyCompressed, AttnType::kCompressedSparse,
                                      AttnType::kHeavilyCompressed, AttnType::kCompressedSparse};
  EXPECT_EQ(c.attn_types, want);
  EXPECT_EQ(c.hash_moe, (std::vector<bool>{true, true, true, false, false, false}));
}

TEST(DeepseekV4Config, RopeDimTruncatesLikeTransformers) {
  nlohmann::json j = legacy();
  j["head_dim"] = 24;
  j["partial_rotary_factor"] = 0.37;  // 8.88 -> int() 8 (rounding would give 9, odd)
  EXPECT_EQ(parse_config(j, "cfg").rope_dim, 8);
  j["partial_rotary_factor"] = 0.3;  // 7.2 -> 7: odd, refused
  EXPECT_NE(refusal(j).find("'partial_rotary_factor'"), std::string::npos);
}

TEST(DeepseekV4Config, YarnFactorDefaultsToThePositionRatio) {
  nlohmann::json j = legacy();
  j["rope_scaling"].erase("factor");
  j["max_position_embeddings"] = 262144;
  EXPECT_EQ(parse_config(j, "cfg").rope_compress.yarn_params.factor, 4.0);
}

TEST(DeepseekV4Config, FieldsTransformersNeverReadLoad) {
  nlohmann::json j = modern();
  j["num_key_value_heads"] = 4;  // the KV head is always one
  j["n_shared_experts"] = 2;     // always one shared MLP
  j["norm_topk_prob"] = false;   // the router always normalizes
  j["tie_word_embeddings"] = true;
  j["hidden_act"] = "swish";  // ACT2FN["swish"] is SiLU
  const Config c = parse_config(j, "cfg");
  EXPECT_TRUE(c.norm_topk);
  EXPECT_TRUE(c.tie_embeddings);
}

TEST(DeepseekV4Config, RefusalsNameTheField) {
  const auto refused = [](nlohmann::json j, const std::string& field) {
    const std::string msg = refusal(j);
    EXPECT_NE(msg.find("'" + field + "'"), std::string::npos) << msg;
  };
  nlohmann::json j = modern();
  j["layer_types"][1] = "full_attention";
  refused(j, "layer_types");
  j = legacy();
  j["compress_ratios"][1] = 16;  // transformers maps 0 / 4 / 128 only
  refused(j, "compress_ratios");
  j = modern();
  j["compress_rates"].erase("heavily_compressed_attention");  // layer 2 needs it
  refused(j, "compress_rates");
  j = modern();
  j["rope_parameters"]["compress"].erase("attention_factor");  // transformers would use mscale
  refused(j, "rope_parameters.compress");
  j = modern();
  j["rope_parameters"]["compress"]["attention_factor"] = 1.2772588722239782;
  refused(j, "rope_parameters.compress");
  j = modern();
  j["rope_parameters"]["compress"]["partial_rotary_factor"] = 0.5;
  refused(j, "rope_parameters.compress.partial_rotary_factor");
  j = modern();
  j["rope_parameters"]["main"]["rope_type"] = "llama3";
  refused(j, "rope_parameters.main");
  j = modern();
  j["mlp_layer_types"][0] = "dense";
  refused(j, "mlp_layer_types");
  j = modern();
  j["hidden_act"] = "gelu";
  refused(j, "hidden_act");
  j = modern();
  j["mlp_bias"] = true;
  refused(j, "mlp_bias");
}

}  // namespace
}  // namespace ds4::deepseek_v4
