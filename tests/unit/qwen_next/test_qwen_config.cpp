// Config parsing: every layer-type spelling transformers 5.17..5.25 loads for qwen4_exp, and a
// loud refusal (naming the field) of what it or our engine does not.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "models/qwen_next/config.h"

namespace ds4::qwen_next {
namespace {

// A tiny valid qwen4_exp text config; `layers` replaces layer_types.
nlohmann::json tiny(const nlohmann::json& layers) {
  nlohmann::json j = nlohmann::json::parse(R"({"model_type": "qwen4_exp_text", "vocab_size": 64,
    "hidden_size": 16, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 8, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 8, "indexer_budget": 8,
    "indexer_compress_ratio": 4, "linear_conv_kernel_dim": 4, "linear_num_key_heads": 1,
    "linear_num_value_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8, "num_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 8, "shared_expert_intermediate_size": 8,
    "hc_count": 2, "hc_lowrank": 4, "hidden_act": "silu", "eos_token_id": 3})");
  j["layer_types"] = layers;
  return j;
}

std::string refusal(const nlohmann::json& j) {
  try {
    parse_config(j, "cfg.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(QwenConfig, EveryQsaSpellingIsAnIndexedLayer) {
  // 5.24+ writes indexed_attention, 5.17 qwen_sparse_attention, checkpoints full_attention;
  // 5.25 remaps deepseek_sparse_attention too.
  for (const char* s : {"indexed_attention", "qwen_sparse_attention", "full_attention", "deepseek_sparse_attention"}) {
    const Config c = parse_config(tiny({"linear_attention", s, "linear_attention"}), "cfg.json");
    ASSERT_EQ(c.is_linear.size(), 3u) << s;
    EXPECT_TRUE(c.is_linear[0]) << s;
    EXPECT_FALSE(c.is_linear[1]) << s;
    EXPECT_TRUE(c.is_linear[2]) << s;
  }
}

TEST(QwenConfig, MambaIsALinearLayer) {  // 5.25's legacy remap
  const Config c = parse_config(tiny({"mamba", "indexed_attention", "mamba"}), "cfg.json");
  EXPECT_TRUE(c.is_linear[0]);
  EXPECT_FALSE(c.is_linear[1]);
  EXPECT_TRUE(c.is_linear[2]);
}

TEST(QwenConfig, IntervalWhenNoLayerTypes) {
  nlohmann::json j = tiny(nullptr);
  j.erase("layer_types");
  j["num_hidden_layers"] = 4;
  j["full_attention_interval"] = 2;
  const Config c = parse_config(j, "cfg.json");
  EXPECT_EQ(c.is_linear, (std::vector<bool>{true, false, true, false}));
}

TEST(QwenConfig, RefusesNamesNoVersionLoads) {
  // "attention" and "conv": transformers 5.25 refuses both for qwen4_exp (5.17 too).
  for (const char* s : {"attention", "conv", "sliding_attention", "compressed_sparse_attention"}) {
    const std::string msg = refusal(tiny({"linear_attention", s, "linear_attention"}));
    EXPECT_NE(msg.find("cfg.json: config field 'layer_types'"), std::string::npos) << s << ": " << msg;
    EXPECT_NE(msg.find(s), std::string::npos) << msg;
  }
  EXPECT_NE(refusal(tiny({"linear_attention", "indexed_attention"})).find("length differs"), std::string::npos);
}

TEST(QwenConfig, RefusesWhatTheEngineDoesNotImplement) {
  nlohmann::json j = tiny({"linear_attention", "indexed_attention", "linear_attention"});
  j["attention_bias"] = true;
  EXPECT_NE(refusal(j).find("'attention_bias' = true"), std::string::npos);
  j["attention_bias"] = false;
  EXPECT_EQ(refusal(j), "");
  j["hidden_act"] = "gelu";
  j["output_gate_type"] = "sigmoid";
  EXPECT_NE(refusal(j).find("'hidden_act' = \"gelu\""), std::string::npos);
  j["hidden_act"] = "silu";
  j["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_NE(refusal(j).find("rope_type"), std::string::npos);
}

TEST(QwenConfig, MissingFieldsTakeMtplxDefaults) {
  // MTPLX (golden master) TextArgs: partial_rotary_factor 0.25 (HF: 1.0); indexer 4 heads x 128,
  // budget 2048, ratio 4 (HF cannot build the model without them).
  nlohmann::json j = tiny({"linear_attention", "indexed_attention", "linear_attention"});
  j["head_dim"] = 256;
  j["rope_parameters"].erase("partial_rotary_factor");
  for (const char* k : {"indexer_n_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio"}) j.erase(k);
  const Config c = parse_config(j, "cfg.json");
  EXPECT_EQ(c.rot_dim, 64);
  EXPECT_EQ(c.idx_heads, 4);
  EXPECT_EQ(c.idx_dim, 128);
  EXPECT_EQ(c.idx_budget, 2048);
  EXPECT_EQ(c.idx_ratio, 4);
  j["partial_rotary_factor"] = 0.5;  // top level, as older configs carry it
  EXPECT_EQ(parse_config(j, "cfg.json").rot_dim, 128);
}

TEST(QwenConfig, PleOnlyOnLinearLayers) {
  nlohmann::json j = tiny({"linear_attention", "full_attention", "linear_attention"});
  j["ple_layer_ids"] = {2};
  EXPECT_NE(refusal(j).find("'ple_layer_ids'"), std::string::npos);
  j["ple_layer_ids"] = {3, 1, 3};  // HF sorts and dedups
  j["ple_embed_dim"] = 8;
  j["ngram_size"] = 3;
  j["heads_per_ngram"] = 2;
  const Config c = parse_config(j, "cfg.json");
  EXPECT_EQ(c.ple_layers, (std::vector<int64_t>{0, 2}));
}

}  // namespace
}  // namespace ds4::qwen_next
