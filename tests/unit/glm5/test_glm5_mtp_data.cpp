// Loader test for the GLM integrated-MTP reference files (tests/data/glm5/mtp, README there):
// every file opens, names/shapes are what the reference wrote, drafts are the argmax of
// their logit rows and the chain starts from the trunk golden's first greedy token.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "golden.h"

namespace ds4::glm5_test {
namespace {

SafetensorsFile open_mtp(const std::string& name) {
  return read_safetensors(MappedFile::open(data_dir() + "/mtp/" + name));
}

const TensorInfo& need(const SafetensorsFile& f, const std::string& name) {
  for (const auto& t : f.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("missing " + name);
}

TEST(Glm5MtpData, HeadWeightsHaveCheckpointNamesAndShapes) {
  SafetensorsFile f = open_mtp("mtp.safetensors");
  const std::string p = "model.layers.6.";
  const std::map<std::string, std::vector<int64_t>> want = {
      {p + "enorm.weight", {64}},
      {p + "hnorm.weight", {64}},
      {p + "eh_proj.weight", {64, 128}},
      {p + "shared_head.norm.weight", {64}},
      {p + "input_layernorm.weight", {64}},
      {p + "post_attention_layernorm.weight", {64}},
      {p + "attn_hc.fn", {24, 256}},
      {p + "ffn_hc.fn", {24, 256}},
      {p + "mlp.gate.weight", {6, 64}},
      {p + "mlp.gate.e_score_correction_bias", {6}},
  };
  for (const auto& [name, shape] : want) {
    const TensorInfo& t = need(f, name);
    EXPECT_EQ(t.shape, shape) << name;
    EXPECT_EQ(t.type, DType::F32) << name;
  }
  for (const auto& t : f.tensors) {
    EXPECT_EQ(t.name.rfind(p, 0), 0u) << t.name;
    EXPECT_EQ(t.name.find("embed_tokens"), std::string::npos) << t.name;
  }
}

TEST(Glm5MtpData, DraftsAreArgmaxAndFollowTheTrunk) {
  SafetensorsFile f = open_mtp("golden_mtp.safetensors");
  Golden g;
  for (int n : {1, 7, 64, 300}) {
    const std::string k = "p" + std::to_string(n);
    const TensorInfo& lg = need(f, k + ".draft_logits");
    ASSERT_EQ(lg.shape, (std::vector<int64_t>{4, 1024})) << k;
    const auto* rows = static_cast<const float*>(lg.data);
    const auto* drafts = static_cast<const int32_t*>(need(f, k + ".drafts").data);
    for (int d = 0; d < 4; ++d) {
      const float* r = rows + d * 1024;
      EXPECT_EQ(std::max_element(r, r + 1024) - r, drafts[d]) << k << " depth " << d;
    }
    const auto* next = static_cast<const int32_t*>(need(f, k + ".next_token").data);
    EXPECT_EQ(next[0], g.get<int32_t>(k + ".greedy")[0]) << k;
    EXPECT_EQ(need(f, k + ".tokens").numel(), n);
    EXPECT_EQ(g.get<int32_t>(k + ".tokens"),
              std::vector<int32_t>(static_cast<const int32_t*>(need(f, k + ".tokens").data),
                                   static_cast<const int32_t*>(need(f, k + ".tokens").data) + n));
  }
}

}  // namespace
}  // namespace ds4::glm5_test
