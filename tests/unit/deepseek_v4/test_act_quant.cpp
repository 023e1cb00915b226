// ds4's activation quantization in the DeepSeek V4 CPU model (Config::act_quant,
// DS4_ACT_QUANT=q8|f32, unset = on for ds4-layout files; core/act_quant.h): a synthetic 256-wide model exported in ds4's
// layout, so its projections and lm_head are Q8_0 and its routed experts IQ2_XXS (gate/up)
// and Q2_K (down), the three formats that take quantized activations. The switch must change
// the logits a little and keep the CPU exactness rules: a chunked forward, decode steps,
// verify rows and batched decode give the same bits for the same row.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "models/deepseek_v4/gguf.h"
#include "models/model.h"
#include "act_quant_env.h"
#include "synthetic_blocks_model.h"

using namespace ds4_test;

namespace {

// The synthetic model in ds4's layout: `dense` unset = ds4's per-tensor types (Q8_0
// projections and lm_head, F16 HC / router / compressor), else every dense tensor in it.
std::string export_model(const char* tag, std::optional<ds4::DType> dense, ds4::DType experts, ds4::DType down) {
  MemSource src(synth_config());
  const dsv4::Config c = dsv4::parse_config(src.config(), "synthetic");
  build(src, c);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ds4_actq_" + std::string(tag) + "_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  dsv4::Ds4ExportOptions o;
  o.dense_type = dense;
  o.expert_type = experts;
  o.expert_down_type = down;
  dsv4::export_ds4_gguf(src, c, path, o);
  return path;
}

// The ds4-typed model, written once for the whole suite and removed at exit.
const std::string& ds4_model_path() {
  static const struct File {
    std::string path = export_model("ds4", std::nullopt, ds4::DType::IQ2_XXS, ds4::DType::Q2_K);
    ~File() { std::filesystem::remove(path); }
  } file;
  return file.path;
}

std::vector<int32_t> prompt(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t(2 + (i * 37) % 1000));
  return t;
}

// All rows' logits of one forward over `tokens` from a fresh state, fed `chunk` rows at a time.
std::vector<float> chunked_rows(ds4::Model& m, const std::vector<int32_t>& tokens, size_t chunk) {
  auto st = m.new_state();
  std::vector<float> all, part;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t len = std::min(chunk, tokens.size() - i);
    m.forward(*st, std::span<const int32_t>(tokens).subspan(i, len), ds4::Logits::kAll, part);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) num += std::pow(got[i] - want[i], 2), den += std::pow(want[i], 2);
  return num / den;
}

float abs_max(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace

// The default follows ds4's numerics (deepseek_v4::act_quant_for): on for this ds4-layout
// file (= DS4_ACT_QUANT=q8 bit for bit, and not the f32 activations' logits); with
// DS4_DSV4_NUMERICS=hf (HF's graph on a ds4 file, e.g. against the HF oracle) off (= f32, not
// q8). DS4_ACT_QUANT=f32 switches it off; another value is an InputError.
TEST(DeepseekV4ActQuant, SwitchParsesAndFollowsDs4Numerics) {
  const auto tokens = prompt(12);
  auto rows = [&](const char* numerics, const char* mode) {
    const ScopedEnv n("DS4_DSV4_NUMERICS", numerics);
    auto m = load_dsv4_act(ds4_model_path(), mode);
    auto s = m->new_state();
    return m->verify(*s, tokens);
  };
  const auto def = rows(nullptr, nullptr), q8 = rows(nullptr, "q8"), f32 = rows(nullptr, "f32");
  EXPECT_TRUE(same_bits(def, q8)) << "ds4-layout file: act_quant on by default";
  EXPECT_FALSE(same_bits(def, f32));
  const auto hf_def = rows("hf", nullptr), hf_q8 = rows("hf", "q8"), hf_f32 = rows("hf", "f32");
  EXPECT_TRUE(same_bits(hf_def, hf_f32)) << "DS4_DSV4_NUMERICS=hf: act_quant off by default";
  EXPECT_FALSE(same_bits(hf_def, hf_q8));
  EXPECT_THROW(load_dsv4_act(ds4_model_path(), "q4"), ds4::InputError);
}

// How far the switch moves the logits of a 40-row forward. Activation rounding has the grid
// of Q8_0 weight rounding (half a step of 1/127 of a block's max; Q8_K blocks are 256 wide),
// but activations are heavier-tailed than weights (SwiGLU products, attention outputs), so the
// relative error per product is larger. Measured here: nmse 1.2e-2, max|diff| 1.51 (the same
// model's Q8_0 weights against F32 weights, activations f32: nmse 1.2e-3, max 0.21); most rows
// move by 0.05-0.2 (logit abs-max 3.96), the rows where a top-k routing choice flips by ~1.4
// and they dominate the nmse. The bound: nmse < 3e-2 (test_gguf allows 2e-2 for Q8_0 weights
// against the golden logits); a wrong dot (a missing scale, a shifted block) moves every
// logit by its own size.
TEST(DeepseekV4ActQuant, QuantizedActivationsMoveLogitsSlightly) {
  {
    auto s = ds4::open_tensor_source(ds4_model_path());
    EXPECT_EQ(s->get("output.weight", {1024, 256}).type, ds4::DType::Q8_0);
    EXPECT_EQ(s->get("blk.0.attn_q_a.weight", {32, 256}).type, ds4::DType::Q8_0);
    EXPECT_EQ(s->get("blk.2.ffn_gate_exps.weight", {5, 256, 256}).type, ds4::DType::IQ2_XXS);
    EXPECT_EQ(s->get("blk.2.ffn_down_exps.weight", {5, 256, 256}).type, ds4::DType::Q2_K);
  }
  const auto tokens = prompt(40);
  auto on = load_dsv4_act(ds4_model_path(), "q8"), off = load_dsv4_act(ds4_model_path(), "f32");
  auto s1 = on->new_state(), s2 = off->new_state();
  const auto lq = on->verify(*s1, tokens), lf = off->verify(*s2, tokens);
  ASSERT_EQ(lq.size(), lf.size());
  const float scale = abs_max(lf), d = max_abs_diff(lq.data(), lf.data(), lf.size());
  const double e = nmse(lq, lf);
  std::printf("[ act_quant ] q8 vs f32 activations: nmse %.3g, max|logit diff| %.3g (logit abs-max %.3g)\n", e, d,
              scale);
  EXPECT_GT(scale, 1.0f);
  EXPECT_GT(d, 1e-3f * scale);
  EXPECT_LT(e, 3e-2);
}

// Each format's path runs inside the model: with every other product on f32 activations, the
// switch still moves the logits when only the Q8_0 products (dense Q8_0, experts F32), or only
// the Q8_K ones (dense F32, experts IQ2_XXS / Q2_K), take quantized activations. Measured:
// Q8_0 only nmse 6.6e-3 (max 1.32: a routing flip), Q8_K only nmse 2.7e-4 (max 0.076).
TEST(DeepseekV4ActQuant, BothActivationBlocksRunInTheModel) {
  const auto tokens = prompt(20);
  struct Case {
    const char* tag;
    std::optional<ds4::DType> dense;
    ds4::DType experts, down;
  };
  for (const Case& k : {Case{"q8_0_only", std::nullopt, ds4::DType::F32, ds4::DType::F32},
                        Case{"q8_k_only", ds4::DType::F32, ds4::DType::IQ2_XXS, ds4::DType::Q2_K}}) {
    const std::string path = export_model(k.tag, k.dense, k.experts, k.down);
    auto on = load_dsv4_act(path, "q8"), off = load_dsv4_act(path, "f32");
    auto s1 = on->new_state(), s2 = off->new_state();
    const auto lq = on->verify(*s1, tokens), lf = off->verify(*s2, tokens);
    const float d = max_abs_diff(lq.data(), lf.data(), lf.size());
    std::printf("[ act_quant ] %s: nmse %.3g, max|logit diff| %.3g (logit abs-max %.3g)\n", k.tag, nmse(lq, lf), d,
                abs_max(lf));
    EXPECT_GT(d, 1e-3f * abs_max(lf)) << k.tag;
    EXPECT_LT(nmse(lq, lf), 3e-2) << k.tag;
    std::filesystem::remove(path);
  }
}

// The CPU exactness rule with quantized activations: every row is quantized and dotted on its
// own, so one 40-row pass, chunks of 7 and 40 decode steps give the same bits.
TEST(DeepseekV4ActQuant, DecodeStepsEqualTheChunkedForwardBitForBit) {
  const auto tokens = prompt(40);
  auto m = load_dsv4_act(ds4_model_path(), "q8");
  const auto one_pass = chunked_rows(*m, tokens, tokens.size());
  EXPECT_TRUE(same_bits(chunked_rows(*m, tokens, 7), one_pass));
  EXPECT_TRUE(same_bits(chunked_rows(*m, tokens, 1), one_pass));
}

TEST(DeepseekV4ActQuant, VerifyRowsAndBatchedDecodeEqualDecodeSteps) {
  const auto tokens = prompt(30), window = prompt(37);
  const std::vector<int32_t> draft(window.end() - 7, window.end());
  auto m = load_dsv4_act(ds4_model_path(), "q8");
  const size_t V = size_t(m->info().vocab_size);
  auto a = m->new_state();
  m->prefill(*a, tokens);
  auto b = a->clone(), c = a->clone();
  const auto rows = m->verify(*a, draft);
  ASSERT_EQ(rows.size(), draft.size() * V);
  for (size_t i = 0; i < draft.size(); ++i) {
    const auto one = m->decode(*b, draft[i]);
    EXPECT_EQ(std::memcmp(one.data(), rows.data() + i * V, V * sizeof(float)), 0) << "row " << i;
  }
  // Two sequences in one decode_batch: each row is its own decode step.
  auto other = m->new_state();
  m->prefill(*other, prompt(11));
  auto other_alone = other->clone();
  std::vector<float> batched;
  std::vector<ds4::ModelState*> states = {c.get(), other.get()};
  const std::vector<int32_t> next = {draft[0], 5};
  m->decode_batch(states, next, batched);
  ASSERT_EQ(batched.size(), 2 * V);
  auto first = m->new_state();
  m->prefill(*first, tokens);
  const auto d0 = m->decode(*first, draft[0]), d1 = m->decode(*other_alone, 5);
  EXPECT_EQ(std::memcmp(batched.data(), d0.data(), V * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(batched.data() + V, d1.data(), V * sizeof(float)), 0);
}

// Greedy decoding, 24 tokens free-running with each setting. This random model's top-1
// margins are often below the switch's logit move (0.05-0.2 per row), so the runs agree only
// until a close call: observed, the first 13 tokens are equal and they part at step 13, where
// the f32 run's top-1 margin is 0.007. Asserted: at least 13 equal tokens, and wherever they
// part, the f32 margin there is below 0.05 (a close call, not a broken product).
TEST(DeepseekV4ActQuant, GreedyTokensAgreeUntilACloseCall) {
  auto on = load_dsv4_act(ds4_model_path(), "q8"), off = load_dsv4_act(ds4_model_path(), "f32");
  auto greedy = [&](ds4::Model& m, std::vector<float>* margins) {
    auto st = m.new_state();
    std::vector<float> lg = m.prefill(*st, prompt(16));
    std::vector<int32_t> out;
    for (int i = 0; i < 24; ++i) {
      std::vector<float> top = lg;
      std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
      if (margins) margins->push_back(top[0] - top[1]);
      out.push_back(int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin()));
      lg = m.decode(*st, out.back());
    }
    return out;
  };
  std::vector<float> margin;
  const auto tf = greedy(*off, &margin), tq = greedy(*on, nullptr);
  size_t same = 0;
  while (same < tf.size() && tf[same] == tq[same]) ++same;
  std::printf("[ act_quant ] greedy: %zu of 24 tokens equal", same);
  if (same < tf.size()) std::printf("; f32 top-1 margin where they part %.3g", margin[same]);
  std::printf("\n");
  EXPECT_GE(same, 13u);
  if (same < tf.size()) EXPECT_LT(margin[same], 0.05f);
}
