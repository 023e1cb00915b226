#pragma once
// A synthetic 256-wide DeepSeek V4 (hidden and expert ff are multiples of the 256-element
// K-quant block) held in memory with HF names: F32 dense tensors and routed experts as random
// but valid IQ2_XXS (gate/up) and Q2_K (down) blocks, for exporting in ds4's layout
// (export_ds4_gguf) in tests that need those block formats in a loadable model.
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/half.h"
#include "formats/tensor_source.h"
#include "golden.h"
#include "models/deepseek_v4/config.h"

namespace ds4_test {

namespace dsv4 = ds4::deepseek_v4;

// An in-memory TensorSource with HF names (what a converter would read).
class MemSource : public ds4::TensorSource {
 public:
  explicit MemSource(nlohmann::json cfg) : cfg_(std::move(cfg)) {}
  const std::vector<ds4::TensorInfo>& tensors() const override { return infos_; }
  const nlohmann::json& config() const override { return cfg_; }
  const nlohmann::json& metadata() const override { return md_; }
  const std::string& path() const override { return path_; }

  void add(const std::string& name, ds4::DType t, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    bufs_.push_back(std::move(bytes));
    ds4::TensorInfo i;
    i.name = name;
    i.type = t;
    i.shape = std::move(shape);
    i.data = bufs_.back().data();
    i.bytes = bufs_.back().size();
    i.file = path_;
    infos_.push_back(std::move(i));
  }

 private:
  nlohmann::json cfg_, md_ = nlohmann::json::object();
  std::string path_ = "<synthetic>";
  std::deque<std::vector<uint8_t>> bufs_;  // stable addresses
  std::vector<ds4::TensorInfo> infos_;
};

struct Synth {
  std::mt19937 rng{7};
  MemSource& s;

  std::vector<uint8_t> f32(int64_t n, float std, float mean = 0) {
    std::normal_distribution<float> d(mean, std);
    std::vector<uint8_t> b(size_t(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = d(rng);
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
    return b;
  }
  void mat(const std::string& n, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    s.add(n, ds4::DType::F32, shape, f32(numel, 1.0f / std::sqrt(float(shape.back()))));
  }
  void vec(const std::string& n, int64_t len, float mean, float std) { s.add(n, ds4::DType::F32, {len}, f32(len, std, mean)); }
  // Random valid blocks: any payload byte is a valid grid / sign / scale index; only the
  // f16 super-block scales are set, small enough to keep activations in range.
  void blocks(const std::string& n, ds4::DType t, std::vector<int64_t> shape) {
    const int64_t rows = shape[0] * shape[1], bytes = ds4::row_bytes(t, shape[2]) * rows;
    std::vector<uint8_t> b(static_cast<size_t>(bytes));
    for (auto& x : b) x = uint8_t(rng());
    const int64_t blk = ds4::block_geometry(t).bytes;
    const uint16_t d = ds4::f32_to_f16(t == ds4::DType::IQ2_XXS ? 0.002f : 0.004f);
    for (int64_t o = 0; o < bytes; o += blk) {
      if (t == ds4::DType::IQ2_XXS) std::memcpy(b.data() + o, &d, 2);
      else std::memcpy(b.data() + o + blk - 4, &d, 2), std::memcpy(b.data() + o + blk - 2, &d, 2);  // Q2_K: d, dmin
    }
    s.add(n, t, shape, std::move(b));
  }
};

inline nlohmann::json synth_config(bool ds4_dims = false) {
  std::ifstream f(kModelDir + "/config.json");
  nlohmann::json c = nlohmann::json::parse(f);
  if (ds4_dims) {  // ds4's storage simulation needs nope % 64 == 0 and 128-wide indexer rows
    c["head_dim"] = 128;
    c["partial_rotary_factor"] = 0.5;
    c["rope_parameters"]["main"]["partial_rotary_factor"] = 0.5;
    c["rope_parameters"]["compress"]["partial_rotary_factor"] = 0.5;
    c["num_attention_heads"] = 2;
    c["index_head_dim"] = 128;
    c["index_n_heads"] = 4;
  }
  c["hidden_size"] = 256;
  c["moe_intermediate_size"] = 256;
  c["num_hidden_layers"] = 3;
  c["layer_types"] = {"sliding_attention", "sliding_attention", "compressed_sparse_attention"};
  c["mlp_layer_types"] = {"hash_moe", "hash_moe", "moe"};
  return c;
}

inline void build(MemSource& s, const dsv4::Config& c) {
  Synth g{std::mt19937(7), s};
  const int64_t H = c.hidden, n = c.hc, mix = (2 + n) * n, hd = c.head_dim, F = c.expert_ff, E = c.experts;
  g.mat("model.embed_tokens.weight", {c.vocab, H});
  g.mat("lm_head.weight", {c.vocab, H});
  g.vec("model.norm.weight", H, 1, 0.1f);
  g.mat("model.hc_head.hc_fn", {n, n * H});
  g.vec("model.hc_head.hc_base", n, 0, 0.5f);
  g.vec("model.hc_head.hc_scale", 1, 0.7f, 0.1f);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* hc : {"attn_hc.", "ffn_hc."}) {
      g.mat(p + hc + "fn", {mix, n * H});
      g.vec(p + hc + "base", mix, 0, 0.5f);
      g.vec(p + hc + "scale", 3, 0.7f, 0.1f);
    }
    g.vec(p + "input_layernorm.weight", H, 1, 0.1f);
    g.vec(p + "post_attention_layernorm.weight", H, 1, 0.1f);
    const std::string a = p + "self_attn.";
    g.mat(a + "q_a_proj.weight", {c.q_lora, H});
    g.vec(a + "q_a_norm.weight", c.q_lora, 1, 0.1f);
    g.mat(a + "q_b_proj.weight", {c.heads * hd, c.q_lora});
    g.mat(a + "kv_proj.weight", {hd, H});
    g.vec(a + "kv_norm.weight", hd, 1, 0.1f);
    g.vec(a + "sinks", c.heads, 0, 1);
    g.mat(a + "o_a_proj.weight", {c.o_groups * c.o_lora, c.heads * hd / c.o_groups});
    g.mat(a + "o_b_proj.weight", {H, c.o_groups * c.o_lora});
    if (c.ratio(l) > 0) {  // CSA only in this config
      const std::string cp = a + "compressor.", ix = cp + "indexer.";
      g.mat(cp + "position_bias", {c.ratio(l), 2 * hd});
      g.mat(cp + "kv_proj.weight", {2 * hd, H});
      g.mat(cp + "gate_proj.weight", {2 * hd, H});
      g.vec(cp + "kv_norm.weight", hd, 1, 0.1f);
      g.mat(ix + "q_b_proj.weight", {c.index_heads * c.index_dim, c.q_lora});
      g.mat(ix + "scorer.weights_proj.weight", {c.index_heads, H});
      g.mat(ix + "position_bias", {c.ratio(l), 2 * c.index_dim});
      g.mat(ix + "kv_proj.weight", {2 * c.index_dim, H});
      g.mat(ix + "gate_proj.weight", {2 * c.index_dim, H});
      g.vec(ix + "kv_norm.weight", c.index_dim, 1, 0.1f);
    }
    const std::string m = p + "mlp.";
    g.mat(m + "gate.weight", {E, H});
    if (c.hash_moe[size_t(l)]) {
      std::vector<uint8_t> t(size_t(c.vocab * c.experts_used) * 4);
      for (int64_t i = 0; i < c.vocab; ++i)
        for (int64_t k = 0; k < c.experts_used; ++k) {
          const int32_t e = int32_t((i + k * 3) % E);  // distinct per token since 3 * k < E
          std::memcpy(t.data() + 4 * (i * c.experts_used + k), &e, 4);
        }
      s.add(m + "gate.tid2eid", ds4::DType::I32, {c.vocab, c.experts_used}, std::move(t));
    } else {
      g.vec(m + "gate.e_score_correction_bias", E, 0, 0.05f);
    }
    g.blocks(m + "experts.gate_up_proj", ds4::DType::IQ2_XXS, {E, 2 * F, H});
    g.blocks(m + "experts.down_proj", ds4::DType::Q2_K, {E, H, F});
    g.mat(m + "shared_experts.gate_proj.weight", {F, H});
    g.mat(m + "shared_experts.up_proj.weight", {F, H});
    g.mat(m + "shared_experts.down_proj.weight", {H, F});
  }
}

}  // namespace ds4_test
