// The tensor list of a DeepSeek V4 config with shapes only (see synthetic.h). The shapes are
// the ones bind_weights() asks for (weights.cpp); test_synthetic checks both against the
// tiny reference model, tensor by tensor, so the two cannot drift apart.
#include "models/deepseek_v4/synthetic.h"

#include <string>
#include <vector>

#include "models/deepseek_v4/weights.h"

namespace ds4::deepseek_v4 {
namespace {

class SyntheticSource final : public TensorSource {
 public:
  explicit SyntheticSource(nlohmann::json cfg) : cfg_(std::move(cfg)), c_(parse_config(cfg_, "synthetic config")) {
    const int64_t H = c_.hidden, n = c_.hc;
    add("model.embed_tokens.weight", {c_.vocab, H});
    add("lm_head.weight", {c_.vocab, H});
    add("model.norm.weight", {H});
    add("model.hc_head.hc_fn", {n, n * H});
    add("model.hc_head.hc_base", {n});
    add("model.hc_head.hc_scale", {1});
    for (int64_t l = 0; l < c_.layers; ++l) layer("model.layers." + std::to_string(l) + ".", l, c_);
    // ds4's MTP head (weights.cpp bind_mtp, HF names): e_proj, h_proj, norms, its HC head and a
    // decoder block (sliding, top-k routed) at layer index c.layers.
    if (cfg_.value("num_nextn_predict_layers", 0) > 0) {
      for (const char* m : {"e_proj.weight", "h_proj.weight"}) add(std::string("mtp.0.") + m, {H, H});
      for (const char* v : {"enorm.weight", "hnorm.weight", "norm.weight"}) add(std::string("mtp.0.") + v, {H});
      add("mtp.0.hc_head.hc_fn", {n, n * H});
      add("mtp.0.hc_head.hc_base", {n});
      add("mtp.0.hc_head.hc_scale", {1});
      layer("mtp.0.block.", c_.layers, with_mtp_layer(c_));
    }
  }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const nlohmann::json& config() const override { return cfg_; }
  const nlohmann::json& metadata() const override { return empty_; }
  const std::string& path() const override { return path_; }
  std::string format() const override { return "synthetic"; }

 private:
  void add(std::string name, std::vector<int64_t> shape, DType type = DType::F32) {
    TensorInfo t;
    t.name = std::move(name);
    t.type = type;
    t.shape = std::move(shape);
    t.file = path_;
    tensors_.push_back(std::move(t));
  }
  // Decoder layer l's tensors under prefix p (c: the config that has layer l).
  void layer(const std::string& p, int64_t l, const Config& c) {
    const int64_t H = c.hidden, n = c.hc, mix = (2 + n) * n, hd = c.head_dim;
    for (const char* s : {"attn_hc.", "ffn_hc."}) {
      add(p + s + "fn", {mix, n * H});
      add(p + s + "base", {mix});
      add(p + s + "scale", {3});
    }
    add(p + "input_layernorm.weight", {H});
    add(p + "post_attention_layernorm.weight", {H});
    const std::string a = p + "self_attn.";
    add(a + "q_a_proj.weight", {c_.q_lora, H});
    add(a + "q_a_norm.weight", {c_.q_lora});
    add(a + "q_b_proj.weight", {c_.heads * hd, c_.q_lora});
    add(a + "kv_proj.weight", {hd, H});
    add(a + "kv_norm.weight", {hd});
    add(a + "sinks", {c_.heads});
    add(a + "o_a_proj.weight", {c_.o_groups * c_.o_lora, c_.heads * hd / c_.o_groups});
    add(a + "o_b_proj.weight", {H, c_.o_groups * c_.o_lora});
    const int64_t ratio = c.ratio(l);
    if (ratio > 0) {
      const bool csa = c.attn_types[size_t(l)] == AttnType::kCompressedSparse;
      compressor(a + "compressor.", ratio, hd, csa ? 2 * hd : hd);
      if (csa) {
        const std::string ix = a + "compressor.indexer.";
        compressor(ix, ratio, c_.index_dim, 2 * c_.index_dim);
        add(ix + "q_b_proj.weight", {c_.index_heads * c_.index_dim, c_.q_lora});
        add(ix + "scorer.weights_proj.weight", {c_.index_heads, H});
      }
    }
    const std::string m = p + "mlp.";
    add(m + "gate.weight", {c_.experts, H});
    if (c.hash_moe[size_t(l)]) add(m + "gate.tid2eid", {c_.vocab, c_.experts_used}, DType::I32);
    else add(m + "gate.e_score_correction_bias", {c_.experts});
    add(m + "experts.gate_up_proj", {c_.experts, 2 * c_.expert_ff, H});
    add(m + "experts.down_proj", {c_.experts, H, c_.expert_ff});
    add(m + "shared_experts.gate_proj.weight", {c_.expert_ff, H});
    add(m + "shared_experts.up_proj.weight", {c_.expert_ff, H});
    add(m + "shared_experts.down_proj.weight", {H, c_.expert_ff});
  }
  // Compressor of `width` = 2 x dim (overlapping windows) or dim, as weights.cpp binds it.
  void compressor(const std::string& pre, int64_t ratio, int64_t dim, int64_t width) {
    add(pre + "kv_proj.weight", {width, c_.hidden});
    add(pre + "gate_proj.weight", {width, c_.hidden});
    add(pre + "position_bias", {ratio, width});
    add(pre + "kv_norm.weight", {dim});
  }

  nlohmann::json cfg_, empty_ = nlohmann::json::object();
  Config c_;
  std::string path_ = "synthetic:deepseek_v4";
  std::vector<TensorInfo> tensors_;
};

}  // namespace

nlohmann::json flash_hf_config() {
  const int64_t layers = 43;
  nlohmann::json types = nlohmann::json::array(), mlp = nlohmann::json::array();
  // ds4's compress_ratios: 0 for layers 0-1, then 4 (CSA) on even and 128 (HCA) on odd layers;
  // the first three layers route by token hash.
  for (int64_t l = 0; l < layers; ++l) {
    types.push_back(l < 2 ? "sliding_attention" : l % 2 == 0 ? "compressed_sparse_attention" : "heavily_compressed_attention");
    mlp.push_back(l < 3 ? "hash_moe" : "moe");
  }
  return {
      {"model_type", "deepseek_v4"}, {"_name_or_path", "synthetic-deepseek-v4-flash"},
      {"vocab_size", 129280}, {"hidden_size", 4096}, {"num_hidden_layers", layers},
      {"num_attention_heads", 64}, {"num_key_value_heads", 1}, {"head_dim", 512}, {"qk_rope_head_dim", 64},
      {"partial_rotary_factor", 0.125}, {"q_lora_rank", 1024}, {"o_lora_rank", 1024}, {"o_groups", 8},
      {"n_routed_experts", 256}, {"num_experts_per_tok", 6}, {"moe_intermediate_size", 2048},
      {"n_shared_experts", 1}, {"routed_scaling_factor", 1.5}, {"scoring_func", "sqrtsoftplus"},
      {"norm_topk_prob", true}, {"layer_types", types}, {"mlp_layer_types", mlp},
      {"compress_rates", {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 128}}},
      {"compress_rope_theta", 160000.0}, {"rope_theta", 10000.0},
      {"rope_parameters",
       {{"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.125}}},
        {"compress",
         {{"rope_type", "yarn"}, {"rope_theta", 160000.0}, {"factor", 16.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
          {"original_max_position_embeddings", 65536}, {"attention_factor", 1.0}, {"partial_rotary_factor", 0.125}}}}},
      {"hc_mult", 4}, {"hc_sinkhorn_iters", 20}, {"hc_eps", 1e-6}, {"swiglu_limit", 10.0},
      {"sliding_window", 128}, {"index_n_heads", 64}, {"index_head_dim", 128}, {"index_topk", 512},
      {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 1048576}, {"bos_token_id", 0}, {"eos_token_id", 1},
      {"num_nextn_predict_layers", 0}};
}

std::unique_ptr<TensorSource> synthetic_source(const nlohmann::json& hf_config) {
  return std::make_unique<SyntheticSource>(hf_config);
}

}  // namespace ds4::deepseek_v4
