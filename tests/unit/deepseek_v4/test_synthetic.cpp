// Synthetic DeepSeek V4 models (issue #10): the shape table of synthetic_source() is the
// real model's, tensor for tensor (checked against the tiny reference model), the flash
// config parses to ds4's constants, and a synthetic file in ds4's layout loads and runs.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "formats/tensor_source.h"
#include "golden.h"
#include "models/deepseek_v4/gguf.h"
#include "models/deepseek_v4/synthetic.h"
#include "models/model.h"

using namespace ds4_test;
namespace dsv4 = ds4::deepseek_v4;

namespace {
std::string temp_path(const char* tag) {
  return (std::filesystem::temp_directory_path() / ("ds4_synth_" + std::to_string(::getpid()) + "_" + tag + ".gguf"))
      .string();
}
}  // namespace

TEST(DeepseekV4Synthetic, ShapeTableEqualsTheReferenceModel) {
  auto real = ds4::open_tensor_source(kModelDir);
  auto synth = dsv4::synthetic_source(real->config());
  std::map<std::string, std::vector<int64_t>> want, got;
  for (const auto& t : real->tensors()) want[t.name] = t.shape;
  for (const auto& t : synth->tensors()) {
    got[t.name] = t.shape;
    EXPECT_EQ(t.data, nullptr) << t.name;
  }
  EXPECT_EQ(got, want);
}

TEST(DeepseekV4Synthetic, FlashConfigHasDs4Constants) {
  const dsv4::Config c = dsv4::parse_config(dsv4::flash_hf_config(), "flash");
  EXPECT_EQ(c.layers, 43);
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.vocab, 129280);
  EXPECT_EQ(c.heads * c.head_dim, 32768);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_EQ(c.experts, 256);
  EXPECT_EQ(c.experts_used, 6);
  EXPECT_EQ(c.expert_ff, 2048);
  // ds4's compress_ratios: 0, 0, then 4 on even and 128 on odd layers; hash routing on 0-2.
  EXPECT_EQ(c.ratio(0), 0);
  EXPECT_EQ(c.ratio(1), 0);
  EXPECT_EQ(c.ratio(2), 4);
  EXPECT_EQ(c.ratio(3), 128);
  EXPECT_EQ(c.ratio(42), 4);
  EXPECT_TRUE(c.hash_moe[2]);
  EXPECT_FALSE(c.hash_moe[3]);
  auto src = dsv4::synthetic_source(dsv4::flash_hf_config());
  int64_t params = 0;
  for (const auto& t : src->tensors()) params += t.numel();
  // Summed by hand from the layout table (docs/formats/ds4-gguf-layout.md): embeddings and
  // head 2 x 129280 x 4096; per layer HC 2 x (24 x 16384 + 27), attention 106,956,352,
  // router 1,048,576, routed experts 256 x 3 x 2048 x 4096, shared 3 x 2048 x 4096; hash
  // tables 3 x 129280 x 6; CSA compressor + indexer 19,142,272 on 21 layers, HCA compressor
  // 4,260,352 on 20 layers: 284.3e9, the "284B" of DeepSeek V4 Flash.
  EXPECT_EQ(params, 284'334'567'511);
}

TEST(DeepseekV4Synthetic, SyntheticFileLoadsAndRuns) {
  auto real = ds4::open_tensor_source(kModelDir);
  const dsv4::Config c = dsv4::parse_config(real->config(), kModelDir);
  auto synth = dsv4::synthetic_source(real->config());
  for (bool holes : {false, true}) {
    const std::string path = temp_path(holes ? "holes" : "full");
    dsv4::Ds4ExportOptions opt;
    opt.expert_type = opt.expert_down_type = ds4::DType::Q8_0;  // hidden 64: no 256-blocks
    opt.synthetic_expert_holes = holes;
    dsv4::export_ds4_gguf(*synth, c, path, opt);
    auto m = ds4::load_model(path);
    auto st = m->new_state();
    const std::vector<int32_t> prompt = {5, 17, 300, 2, 999, 42, 7};
    auto logits = m->prefill(*st, prompt);
    ASSERT_EQ(logits.size(), size_t(c.vocab));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    auto src = ds4::open_tensor_source(path);
    const ds4::TensorInfo& e = src->get("blk.3.ffn_down_exps.weight");
    const auto* b = static_cast<const uint8_t*>(e.data);
    size_t nonzero = 0;
    for (size_t i = 0; i < e.bytes; ++i) nonzero += b[i] != 0;
    if (holes) EXPECT_EQ(nonzero, 0u);  // zeros: read back from the hole
    else EXPECT_GT(nonzero, e.bytes / 2);
    std::filesystem::remove(path);
  }
}
