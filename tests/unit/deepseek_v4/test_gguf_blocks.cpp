// ds4's 2-bit expert formats: a synthetic 256-wide DeepSeek V4 (hidden and expert ff are
// multiples of the 256-element K-quant block) whose routed experts are random but valid
// IQ2_XXS (gate/up) and Q2_K (down) blocks, exported in ds4's layout with those bytes kept
// as they are, against the same model with the experts dequantized to F32. Both load
// through the registry; the logits must agree to float32 noise, so the block decoders,
// stacked-expert slicing and the gate/up split are exercised exactly.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "models/deepseek_v4/gguf.h"
#include "models/model.h"
#include "act_quant_env.h"
#include "synthetic_blocks_model.h"

using namespace ds4_test;

TEST(DeepseekV4Gguf, Iq2xxsAndQ2kExpertsMatchTheirF32Dequantization) {
  MemSource src(synth_config());
  const dsv4::Config c = dsv4::parse_config(src.config(), "synthetic");
  build(src, c);
  const auto dir = std::filesystem::temp_directory_path();
  const std::string pid = std::to_string(::getpid());
  const std::string q = (dir / ("ds4_synth_q2_" + pid + ".gguf")).string();
  const std::string f = (dir / ("ds4_synth_f32_" + pid + ".gguf")).string();
  dsv4::Ds4ExportOptions oq, of;
  oq.dense_type = of.dense_type = ds4::DType::F32;
  oq.expert_type = ds4::DType::IQ2_XXS;
  oq.expert_down_type = ds4::DType::Q2_K;
  of.expert_type = of.expert_down_type = ds4::DType::F32;
  dsv4::export_ds4_gguf(src, c, q, oq);
  dsv4::export_ds4_gguf(src, c, f, of);
  {
    auto s = ds4::open_tensor_source(q);
    EXPECT_EQ(s->get("blk.2.ffn_gate_exps.weight", {5, 256, 256}).type, ds4::DType::IQ2_XXS);
    EXPECT_EQ(s->get("blk.2.ffn_up_exps.weight", {5, 256, 256}).type, ds4::DType::IQ2_XXS);
    EXPECT_EQ(s->get("blk.2.ffn_down_exps.weight", {5, 256, 256}).type, ds4::DType::Q2_K);
  }
  // f32 activations on both (DS4_ACT_QUANT=f32): the decoders against their dequantization;
  // ds4's quantized activations (on by default for these files) are test_act_quant's.
  auto mq = load_dsv4_act(q, "f32"), mf = load_dsv4_act(f, "f32");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(int32_t(2 + (i * 37) % 1000));
  auto sq = mq->new_state(), sf = mf->new_state();
  const auto lq = mq->verify(*sq, tokens), lf = mf->verify(*sf, tokens);
  ASSERT_EQ(lq.size(), lf.size());
  float scale = 0;
  for (float v : lf) scale = std::max(scale, std::abs(v));
  const float d = max_abs_diff(lq.data(), lf.data(), lq.size());
  std::printf("[ synthetic ] IQ2_XXS/Q2_K experts vs F32 dequantized: max|diff| %.3g (logit abs-max %.3g)\n", d, scale);
  EXPECT_GT(scale, 1.0f);  // not a degenerate all-zero model
  EXPECT_LT(d, 1e-3f * scale);
  // The experts matter: rounding only them to F16 moves the logits (a little: F16 is fine;
  // Q8_0 here flips a top-k routing choice and moves them by ~1.5).
  dsv4::Ds4ExportOptions o8 = of;
  o8.expert_type = o8.expert_down_type = ds4::DType::F16;
  const std::string q8 = (dir / ("ds4_synth_f16_" + pid + ".gguf")).string();
  dsv4::export_ds4_gguf(src, c, q8, o8);
  auto m8 = ds4::load_model(q8);
  auto s8 = m8->new_state();
  const auto l8 = m8->verify(*s8, tokens);
  const float d8 = max_abs_diff(l8.data(), lf.data(), lf.size());
  std::printf("[ synthetic ] experts rounded to F16 vs F32: max|diff| %.3g\n", d8);
  EXPECT_GT(d8, 1e-5f);
  EXPECT_LT(d8, 0.01f * scale);
  std::filesystem::remove(q8);
  std::filesystem::remove(q);
  std::filesystem::remove(f);
}

TEST(DeepseekV4Gguf, Ds4NumericsAreOnForDs4FilesAndChunkInvariant) {
  MemSource src(synth_config(true));
  const dsv4::Config c = dsv4::parse_config(src.config(), "synthetic");
  ASSERT_EQ(c.head_dim - c.rope_dim, 64);
  build(src, c);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ds4_synth_num_" + std::to_string(::getpid()) + ".gguf")).string();
  dsv4::Ds4ExportOptions o;
  o.dense_type = o.expert_type = o.expert_down_type = ds4::DType::F32;
  dsv4::export_ds4_gguf(src, c, path, o);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 90; ++i) tokens.push_back(int32_t(2 + (i * 53) % 1000));
  auto run = [&](const char* mode, int64_t chunk) {
    if (mode) setenv("DS4_DSV4_NUMERICS", mode, 1);
    auto m = ds4::load_model(path);
    unsetenv("DS4_DSV4_NUMERICS");
    auto st = m->new_state();
    return m->prefill(*st, tokens, chunk);
  };
  const auto def = run(nullptr, 0), ds4n = run("ds4", 0), hf = run("hf", 0), ds4_chunked = run("ds4", 7);
  EXPECT_EQ(def, ds4n);  // ds4-layout files default to ds4 numerics
  const float d = max_abs_diff(ds4n.data(), hf.data(), hf.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < hf.size(); ++i) num += std::pow(ds4n[i] - hf[i], 2), den += std::pow(hf[i], 2);
  std::printf("[ synthetic ] ds4 numerics vs HF numerics: max|diff| %.3g, nmse %.3g\n", d, num / den);
  EXPECT_GT(d, 1e-4f);        // the FP8 / FP4 round trips are really applied
  EXPECT_LT(num / den, 0.1);  // and only perturb
  EXPECT_LT(max_abs_diff(ds4_chunked.data(), ds4n.data(), ds4n.size()), 1e-4f);
  setenv("DS4_DSV4_NUMERICS", "fp4", 1);
  EXPECT_THROW(ds4::load_model(path), ds4::InputError);
  unsetenv("DS4_DSV4_NUMERICS");
  std::filesystem::remove(path);
}
