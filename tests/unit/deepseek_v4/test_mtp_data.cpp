// Loader test for ds4's MTP (mtp.0.*) reference files (tests/data/deepseek_v4/mtp, README
// there): names/shapes, drafts = argmax of their rows, margins = top-1 minus top-2 logit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "golden.h"

namespace ds4_test {
namespace {

const std::string kMtpDir = std::string(DS4_TEST_DATA) + "/deepseek_v4/mtp/";

const ds4::TensorInfo& need(const ds4::SafetensorsFile& f, const std::string& name) {
  for (const auto& t : f.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("missing " + name);
}

TEST(DeepseekMtpData, HeadWeightsHaveDs4Names) {
  auto f = ds4::read_safetensors(ds4::MappedFile::open(kMtpDir + "mtp.safetensors"));
  const std::map<std::string, std::vector<int64_t>> want = {
      {"mtp.0.e_proj.weight", {64, 64}},        {"mtp.0.h_proj.weight", {64, 64}},
      {"mtp.0.enorm.weight", {64}},             {"mtp.0.hnorm.weight", {64}},
      {"mtp.0.norm.weight", {64}},              {"mtp.0.hc_head.hc_fn", {4, 256}},
      {"mtp.0.hc_head.hc_base", {4}},           {"mtp.0.hc_head.hc_scale", {1}},
      {"mtp.0.block.attn_hc.fn", {24, 256}},    {"mtp.0.block.self_attn.sinks", {4}},
      {"mtp.0.block.mlp.gate.weight", {5, 64}}, {"mtp.0.block.mlp.gate.e_score_correction_bias", {5}},
  };
  for (const auto& [name, shape] : want) EXPECT_EQ(need(f, name).shape, shape) << name;
  for (const auto& t : f.tensors) {
    EXPECT_EQ(t.name.rfind("mtp.0.", 0), 0u) << t.name;
    EXPECT_EQ(t.name.find("compressor"), std::string::npos) << t.name;
    EXPECT_EQ(t.name.find("tid2eid"), std::string::npos) << t.name;
  }
}

TEST(DeepseekMtpData, DraftsMarginsAndPrompts) {
  auto f = ds4::read_safetensors(ds4::MappedFile::open(kMtpDir + "golden_mtp.safetensors"));
  Golden g;
  for (const char* c : {"p1h1", "p7h1", "p64h1", "p64h4", "p300h1", "p7h8", "p64h65", "p300h301"}) {
    const std::string k = c;
    const auto& lg = need(f, k + ".draft_logits");
    ASSERT_EQ(lg.shape, (std::vector<int64_t>{4, 1024})) << k;
    const auto* rows = static_cast<const float*>(lg.data);
    const auto* drafts = static_cast<const int32_t*>(need(f, k + ".drafts").data);
    const auto* margin = static_cast<const float*>(need(f, k + ".margin").data);
    for (int d = 0; d < 4; ++d) {
      std::vector<float> r(rows + d * 1024, rows + (d + 1) * 1024);
      EXPECT_EQ(std::max_element(r.begin(), r.end()) - r.begin(), drafts[d]) << k;
      std::partial_sort(r.begin(), r.begin() + 2, r.end(), std::greater<float>());
      EXPECT_NEAR(r[0] - r[1], margin[d], 1e-6f) << k;
    }
    const int n = int(need(f, k + ".tokens").numel());
    const std::string p = "p" + std::to_string(n);
    EXPECT_EQ(g.i32(p + ".tokens"),
              std::vector<int32_t>(static_cast<const int32_t*>(need(f, k + ".tokens").data),
                                   static_cast<const int32_t*>(need(f, k + ".tokens").data) + n));
    // The chain starts after the target's greedy token (golden pN.greedy[0]).
    EXPECT_EQ(static_cast<const int32_t*>(need(f, k + ".next_token").data)[0],
              g.i32(p + ".greedy")[0]) << k;
  }
}

}  // namespace
}  // namespace ds4_test
