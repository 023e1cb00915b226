// Model config values and tensor layouts refused with the file and key / tensors named
// (issue #25's mutated-file probe: rope_theta = -1, eos_token_id = 2^63, type errors, a tensor
// whose type changes its size, overlapping data offsets).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/config_checks.h"
#include "formats/tensor_layout.h"

using nlohmann::json;

namespace {
std::string error_of(const json& j) {
  try {
    ds4::check_config_values(j, "m/config.json");
  } catch (const ds4::InputError& e) {
    return e.what();
  }
  return "";
}
const json kGood = json::parse(R"({"vocab_size": 1024, "hidden_size": 64, "rope_theta": 10000000.0,
  "rms_norm_eps": 1e-6, "eos_token_id": [1000, 1001], "pad_token_id": 1024, "tie_word_embeddings": false,
  "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25}})");
}  // namespace

TEST(ConfigChecks, AcceptsARealShape) { EXPECT_EQ(error_of(kGood), ""); }

TEST(ConfigChecks, RefusesOutOfRangeValuesNamingFileAndKey) {
  struct Case {
    json::json_pointer at;
    json value;
    std::string key;
  };
  const Case cases[] = {
      {json::json_pointer("/rope_theta"), -1, "'rope_theta' = -1"},
      {json::json_pointer("/rope_parameters/rope_theta"), 0, "'rope_parameters.rope_theta' = 0"},
      {json::json_pointer("/eos_token_id"), uint64_t(1) << 63, "'eos_token_id' = 9223372036854775808"},
      {json::json_pointer("/eos_token_id"), 1024, "'eos_token_id' = 1024"},  // past the vocabulary
      {json::json_pointer("/eos_token_id"), json::array({1, -3}), "'eos_token_id'"},
      {json::json_pointer("/bos_token_id"), -1, "'bos_token_id'"},
      {json::json_pointer("/rms_norm_eps"), 2.0, "'rms_norm_eps'"},
      {json::json_pointer("/hidden_size"), "64", "'hidden_size' = \"64\" is not an integer"},
      {json::json_pointer("/vocab_size"), uint64_t(1) << 40, "'vocab_size'"},
      {json::json_pointer("/tie_word_embeddings"), "yes", "'tie_word_embeddings' = \"yes\" is not a boolean"},
      {json::json_pointer("/rope_parameters/partial_rotary_factor"), 1.5, "'rope_parameters.partial_rotary_factor'"},
      {json::json_pointer("/rope_parameters"), "default", "'rope_parameters' = \"default\" is not an object"},
      {json::json_pointer("/hidden_act"), 3, "'hidden_act' = 3 is not a string"},
  };
  for (const auto& c : cases) {
    json j = kGood;
    j[c.at] = c.value;
    const std::string e = error_of(j);
    EXPECT_NE(e.find("m/config.json: config field "), std::string::npos) << e;
    EXPECT_NE(e.find(c.key), std::string::npos) << c.key << " / " << e;
  }
  json nested = {{"text_config", kGood}};
  nested["text_config"]["rope_theta"] = -1;
  EXPECT_NE(error_of(nested).find("'text_config.rope_theta' = -1"), std::string::npos);
}

TEST(TensorLayout, OverlapsAndGaps) {
  using ds4::TensorRange;
  EXPECT_EQ(ds4::tensor_layout_error({{"a", 0, 64}, {"b", 64, 128}}, 32), "");
  EXPECT_EQ(ds4::tensor_layout_error({{"b", 64, 100}, {"a", 0, 64}, {"c", 128, 160}}, 32), "");  // padding < alignment
  const std::string overlap = ds4::tensor_layout_error({{"a", 0, 96}, {"b", 64, 128}});
  EXPECT_NE(overlap.find("tensor 'b' data [64, 128) overlaps tensor 'a' data [0, 96)"), std::string::npos) << overlap;
  // A type that halves a tensor's size leaves the rest of its data unclaimed.
  const std::string gap = ds4::tensor_layout_error({{"a", 0, 32}, {"b", 64, 128}}, 32);
  EXPECT_NE(gap.find("tensor 'a' data [0, 32) is followed by 32 unused bytes"), std::string::npos) << gap;
  EXPECT_EQ(ds4::tensor_layout_error({{"a", 0, 32}, {"b", 64, 128}}), "");  // no gap rule (safetensors)
  EXPECT_EQ(ds4::tensor_layout_error({{"empty", 10, 10}, {"a", 0, 32}}), "");
}
