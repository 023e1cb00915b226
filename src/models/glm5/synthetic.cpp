// Synthetic GLM 5.x weights (see synthetic.h). The names and shapes are the ones
// weights.cpp binds; test_glm5_synthetic loads them through the CPU model, so the two cannot
// drift apart.
#include "models/glm5/synthetic.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/synthetic_weights.h"
#include "models/glm5/config.h"

namespace ds4::glm5 {

struct SyntheticWeights {
  nlohmann::json config;
  std::vector<TensorInfo> tensors;
  std::vector<std::vector<uint8_t>> data;  // one buffer per tensor
};

namespace {

class Builder {
 public:
  Builder(SyntheticWeights& w, DType type, uint64_t seed) : w_(w), type_(type), seed_(seed) {}
  // Matrix {rows, cols} or stacked {n, rows, cols}, values uniform in +-1/sqrt(cols).
  void mat(const std::string& name, std::vector<int64_t> shape) {
    const int64_t cols = shape.back();
    add(name, std::move(shape), type_, SyntheticFill{0.0f, 1.0f / std::sqrt(float(cols))});
  }
  void vec(const std::string& name, std::vector<int64_t> shape, float center, float spread) {
    add(name, std::move(shape), DType::F32, SyntheticFill{center, spread});
  }

 private:
  void add(const std::string& name, std::vector<int64_t> shape, DType t, const SyntheticFill& how) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const int64_t cols = shape.back(), rows = numel / cols;
    std::vector<uint8_t> buf(size_t(rows * row_bytes(t, cols)));
    fill_synthetic(t, rows, cols, seed_from_name(name.c_str(), seed_), how, buf.data());
    TensorInfo info;
    info.name = name;
    info.type = t;
    info.shape = std::move(shape);
    info.bytes = buf.size();
    info.file = "synthetic:glm5";
    w_.data.push_back(std::move(buf));
    w_.tensors.push_back(std::move(info));
  }
  SyntheticWeights& w_;
  DType type_;
  uint64_t seed_;
};

void hc(Builder& b, const Config& c, const std::string& p) {
  const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
  b.mat(p + ".fn", {mix, c.hc_mult * c.hidden_size});
  b.vec(p + ".base", {mix}, 0.0f, 0.5f);
  b.vec(p + ".scale", {3}, 0.5f, 0.1f);
}

void attention(Builder& b, const Config& c, int64_t l, const std::string& p) {
  const int64_t H = c.hidden_size;
  if (c.layer_types[size_t(l)] == LayerKind::kLinear) {
    const int64_t hd = c.linear_head_dim, nh = c.linear_num_heads, qkv = hd * nh;
    for (const char* n : {"q_proj.weight", "k_proj.weight", "v_proj.weight"}) b.mat(p + n, {qkv, H});
    b.mat(p + "forget_gate.f_a_proj.weight", {hd, H});
    b.mat(p + "forget_gate.f_b_proj.weight", {qkv, hd});
    b.mat(p + "b_proj.weight", {nh, H});
    b.mat(p + "g_a_proj.weight", {hd, H});
    b.mat(p + "g_b_proj.weight", {qkv, hd});
    b.mat(p + "o_proj.weight", {H, qkv});
    b.vec(p + "conv1d.weight", {3 * qkv, 1, c.linear_conv_kernel_dim}, 0.0f, 0.5f);
    b.vec(p + "forget_gate.dt_bias", {qkv}, 0.0f, 0.5f);
    b.vec(p + "forget_gate.A_log", {nh}, 0.0f, 0.5f);
    b.vec(p + "o_norm.weight", {hd}, 1.0f, 0.05f);
    return;
  }
  const int64_t nh = c.num_attention_heads, nope = c.qk_nope_head_dim, vd = c.v_head_dim;
  const int64_t kvr = c.kv_lora_rank, qr = c.q_lora_rank;
  b.mat(p + "q_a_proj.weight", {qr, H});
  b.mat(p + "q_b_proj.weight", {nh * nope, qr});
  b.mat(p + "kv_a_proj_with_mqa.weight", {kvr, H});
  b.mat(p + "o_proj.weight", {H, nh * vd});
  b.vec(p + "q_a_layernorm.weight", {qr}, 1.0f, 0.05f);
  b.vec(p + "kv_a_layernorm.weight", {kvr}, 1.0f, 0.05f);
  b.mat(p + "kv_b_proj.weight", {nh * (nope + vd), kvr});
  if (c.indexer_shared[size_t(l)]) return;
  const int64_t ih = c.index_n_heads, id = c.index_head_dim;
  b.mat(p + "indexer.wq_b.weight", {ih * id, qr});
  b.mat(p + "indexer.wk.weight", {id, H});
  b.mat(p + "indexer.weights_proj.weight", {ih, H});
  b.mat(p + "indexer.index_kpool_compress_gate", {id, H});
  b.vec(p + "indexer.k_norm.weight", {id}, 1.0f, 0.05f);
  b.vec(p + "indexer.k_norm.bias", {id}, 0.0f, 0.05f);
  b.vec(p + "indexer.index_kpool_compress_ape", {c.index_kpool, id}, 0.0f, 0.5f);
}

void mlp(Builder& b, const Config& c, int64_t l, const std::string& p) {
  const int64_t H = c.hidden_size;
  auto dense = [&](const std::string& q, int64_t inter) {
    b.mat(q + "gate_proj.weight", {inter, H});
    b.mat(q + "up_proj.weight", {inter, H});
    b.mat(q + "down_proj.weight", {H, inter});
  };
  if (!c.mlp_sparse[size_t(l)]) return dense(p, c.intermediate_size);
  const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size;
  b.mat(p + "gate.weight", {E, H});
  b.vec(p + "gate.e_score_correction_bias", {E}, 0.0f, 0.01f);
  b.mat(p + "experts.gate_up_proj", {E, 2 * I, H});
  b.mat(p + "experts.down_proj", {E, H, I});
  dense(p + "shared_experts.", I * c.n_shared_experts);
}

class Source final : public TensorSource {
 public:
  explicit Source(std::shared_ptr<const SyntheticWeights> w) : w_(std::move(w)), tensors_(w_->tensors) {
    for (size_t i = 0; i < tensors_.size(); ++i) tensors_[i].data = w_->data[i].data();
  }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const nlohmann::json& config() const override { return w_->config; }
  const nlohmann::json& metadata() const override { return empty_; }
  const std::string& path() const override { return path_; }
  std::string format() const override { return "synthetic"; }

 private:
  std::shared_ptr<const SyntheticWeights> w_;
  std::vector<TensorInfo> tensors_;
  nlohmann::json empty_ = nlohmann::json::object();
  std::string path_ = "synthetic:glm5";
};

}  // namespace

nlohmann::json synthetic_config(int64_t layers, int64_t experts, int64_t vocab) {
  nlohmann::json types = nlohmann::json::array(), mlp_types = nlohmann::json::array(), idx = nlohmann::json::array();
  for (int64_t l = 0; l < layers; ++l) {
    types.push_back(l % 4 == 3 ? "indexed_attention" : "linear_attention");
    mlp_types.push_back(l == 0 ? "dense" : "sparse");
    idx.push_back("full");
  }
  return {{"model_type", "glm5_next"}, {"_name_or_path", "synthetic-glm5-flash"}, {"num_hidden_layers", layers},
          {"n_routed_experts", experts}, {"vocab_size", vocab}, {"layer_types", types},
          {"mlp_layer_types", mlp_types}, {"indexer_types", idx}, {"eos_token_id", {int64_t(vocab - 1)}},
          {"max_position_embeddings", 65536}};
}

std::shared_ptr<const SyntheticWeights> make_synthetic(const nlohmann::json& config, DType type, uint64_t seed) {
  if (type != DType::F32 && type != DType::F16 && type != DType::BF16)
    throw InputError("glm5 synthetic: weight type " + std::string(dtype_name(type)) + " is not F32, F16 or BF16");
  const Config c = parse_config(config, "synthetic glm5 config");
  auto w = std::make_shared<SyntheticWeights>();
  w->config = config;
  Builder b(*w, type, seed);
  const int64_t H = c.hidden_size;
  b.mat("model.embed_tokens.weight", {c.vocab_size, H});
  b.vec("model.norm.weight", {H}, 1.0f, 0.05f);
  b.mat("lm_head.weight", {c.vocab_size, H});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    attention(b, c, l, p + "self_attn.");
    mlp(b, c, l, p + "mlp.");
    b.vec(p + "input_layernorm.weight", {H}, 1.0f, 0.05f);
    b.vec(p + "post_attention_layernorm.weight", {H}, 1.0f, 0.05f);
    hc(b, c, p + "attn_hc");
    hc(b, c, p + "ffn_hc");
  }
  return w;
}

std::unique_ptr<TensorSource> synthetic_source(std::shared_ptr<const SyntheticWeights> w) {
  return std::make_unique<Source>(std::move(w));
}

}  // namespace ds4::glm5
