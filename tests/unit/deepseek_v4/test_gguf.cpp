// A tiny model written in antirez/ds4's GGUF layout (ds4 names and metadata keys; F16 /
// Q8_0 / F32 / I32 as ds4's quantizer picks them; experts Q8_0 because the tiny hidden
// size 64 is not a multiple of the 256-wide K-quant blocks) loads through the registry
// and stays close to the f32 golden logits.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "formats/tensor_source.h"
#include "golden.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/gguf.h"
#include "models/model.h"

using namespace ds4_test;
namespace dsv4 = ds4::deepseek_v4;

namespace {
// exact = every float tensor F32 (checks names, shapes, metadata without quant error);
// otherwise ds4's per-tensor types, experts Q8_0. `all` overrides every float tensor.
std::string write_tiny(bool exact, std::optional<ds4::DType> all = std::nullopt) {
  const std::string tag = all ? std::string(ds4::dtype_name(*all)) : exact ? "f32" : "q8";
  const auto p = std::filesystem::temp_directory_path() /
                 ("ds4_tiny_deepseek_v4_" + std::to_string(::getpid()) + "_" + tag + ".gguf");
  auto src = ds4::open_tensor_source(kModelDir);
  const auto cfg = dsv4::parse_config(src->config(), kModelDir);
  dsv4::Ds4ExportOptions opt;
  opt.expert_type = opt.expert_down_type = exact ? ds4::DType::F32 : ds4::DType::Q8_0;
  if (exact) opt.dense_type = ds4::DType::F32;
  if (all) opt.dense_type = opt.expert_type = opt.expert_down_type = *all;
  dsv4::export_ds4_gguf(*src, cfg, p.string(), opt);
  return p.string();
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) num += std::pow(got[i] - want[i], 2), den += std::pow(want[i], 2);
  return num / den;
}
std::string tiny_gguf() {
  static const std::string path = write_tiny(false);
  return path;
}
struct Cleanup {
  std::string path;
  ~Cleanup() { std::filesystem::remove(path); }
};
}  // namespace

TEST(DeepseekV4Gguf, Ds4LayoutInF32MatchesGolden) {
  Cleanup f{write_tiny(true)};
  auto m = ds4::load_model(f.path);
  const Golden g;
  auto st = m->new_state();
  auto logits = m->prefill(*st, g.i32("p300.tokens"), 64);
  const auto want = g.f32("p300.prefill_logits");
  EXPECT_LT(max_abs_diff(logits.data(), want.data(), want.size()), kLogitTol);
  const auto greedy = g.i32("p300.greedy");
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(argmax(logits.data(), logits.size()), greedy[i]) << "step " << i;
    logits = m->decode(*st, greedy[i]);
  }
}

TEST(DeepseekV4Gguf, Bf16AndF16WeightsStayCloseToGolden) {
  const Golden g;
  for (ds4::DType t : {ds4::DType::BF16, ds4::DType::F16}) {
    Cleanup f{write_tiny(false, t)};
    auto m = ds4::load_model(f.path);
    for (int n : kPrompts) {
      const std::string k = "p" + std::to_string(n);
      auto st = m->new_state();
      const auto logits = m->prefill(*st, g.i32(k + ".tokens"));
      const double e = nmse(logits, g.f32(k + ".prefill_logits"));
      std::printf("[ %s ] all weights %s vs f32 golden: nmse %.3g\n", k.c_str(), std::string(ds4::dtype_name(t)).c_str(), e);
      // Every float tensor (norms, sinks, HC base/scale too) in bf16 / f16. Measured:
      // bf16 3.4e-4 / 6.7e-4 / 5.2e-3 / 6.9e-4, f16 1.1e-6 / 1.1e-5 / 6.0e-6 / 1.1e-4
      // (p1 / p7 / p64 / p300); the random tiny model amplifies weight rounding.
      EXPECT_LT(e, t == ds4::DType::BF16 ? 2e-2 : 1e-3) << k;
    }
  }
}

TEST(DeepseekV4Gguf, WritesDs4NamesTypesAndMetadata) {
  auto src = ds4::open_tensor_source(tiny_gguf());
  EXPECT_EQ(src->metadata()["general.architecture"], "deepseek4");
  EXPECT_EQ(src->get("token_embd.weight", {1024, 64}).type, ds4::DType::F16);
  EXPECT_EQ(src->get("output.weight", {1024, 64}).type, ds4::DType::Q8_0);
  EXPECT_EQ(src->get("blk.0.hc_attn_fn.weight", {24, 256}).type, ds4::DType::F16);
  EXPECT_EQ(src->get("blk.0.ffn_gate_tid2eid.weight", {1024, 2}).type, ds4::DType::I32);
  EXPECT_EQ(src->get("blk.2.indexer.attn_q_b.weight", {256, 32}).type, ds4::DType::F16);
  EXPECT_EQ(src->get("blk.2.attn_compressor_ape.weight", {4, 64}).type, ds4::DType::F16);
  EXPECT_EQ(src->get("blk.3.attn_compressor_ape.weight", {16, 32}).type, ds4::DType::F16);
  EXPECT_EQ(src->find("blk.3.indexer.proj.weight"), nullptr);  // HCA: no indexer
  EXPECT_EQ(src->get("blk.4.ffn_gate_exps.weight", {5, 32, 64}).type, ds4::DType::Q8_0);
  EXPECT_EQ(src->get("blk.4.exp_probs_b.bias", {5}).type, ds4::DType::F32);
  const auto& ratios = src->metadata()["deepseek4.attention.compress_ratios"];
  EXPECT_EQ(ratios, nlohmann::json({0, 0, 4, 16, 4}));
}

TEST(DeepseekV4Gguf, LoadsAndMatchesGoldenWithinQuantError) {
  Cleanup cleanup{tiny_gguf()};
  auto m = ds4::load_model(tiny_gguf());
  EXPECT_EQ(m->info().family, "deepseek_v4");
  ASSERT_EQ(m->info().eos_token_ids.size(), 1u);
  EXPECT_EQ(m->info().eos_token_ids[0], 1);
  const Golden g;
  for (int n : kPrompts) {
    const std::string k = "p" + std::to_string(n);
    auto st = m->new_state();
    const auto logits = m->prefill(*st, g.i32(k + ".tokens"));
    const auto want = g.f32(k + ".prefill_logits");
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) num += std::pow(logits[i] - want[i], 2), den += std::pow(want[i], 2);
    const double nmse = num / den;
    std::printf("[ %s ] ds4-layout GGUF (F16/Q8_0) vs f32 golden: nmse %.3g, max|diff| %.3g\n", k.c_str(), nmse,
                max_abs_diff(logits.data(), want.data(), want.size()));
    // The file's default numerics: ds4's, with its quantized activations (reference-differences
    // #8) against HF's f32 golden (no golden from ds4's own run exists for this model). Measured
    // 1.1e-3 / 8.6e-3 / 7.2e-3 / 5.4e-3 (p1 / p7 / p64 / p300); with f32 activations
    // (DS4_ACT_QUANT=f32) 6.9e-4 / 3.0e-3 / 6.8e-3 / 2.4e-3, and HF with the same Q8_0 round
    // trip of these weights gives that nmse: the tiny random model amplifies weight error.
    EXPECT_LT(nmse, 2e-2) << k;
  }
}
