#pragma once
// Hyper-parameters of Qwen3.8 Flash Next (HF model_type qwen4_exp / qwen4_exp_text), read
// from the HF config (top level or its "text_config"). Every shape comes from here.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds4::qwen_next {

struct Config {
  int64_t vocab = 0, hidden = 0, layers = 0;
  float rms_eps = 1e-6f;
  int64_t max_position = 0;
  bool tie_embeddings = false;
  std::vector<bool> is_linear;     // per layer: GDN (true) or QSA attention (false)
  int32_t eos = -1;                // first eos_token_id (PLE segment marker)
  std::vector<int32_t> eos_ids;
  // QSA attention
  int64_t heads = 0, kv_heads = 0, head_dim = 0, rot_dim = 0;
  double rope_theta = 1e7;
  int64_t idx_heads = 0, idx_dim = 0, idx_budget = 0, idx_ratio = 0;
  // Gated DeltaNet
  int64_t conv_k = 0, k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0;
  bool gate_sigmoid = true;        // output_gate_type: sigmoid (Flash-Next) or silu
  // MoE
  int64_t experts = 0, top_k = 0, moe_inter = 0, shared_inter = 0;
  bool norm_topk = true;
  // hyper-connections
  int64_t hc = 0, hc_rank = 0;
  // PLE n-gram embedding
  std::vector<int64_t> ple_layers;  // zero-indexed decoder layers carrying PLE
  int64_t ple_dim = 0, ple_conv_k = 0, ngram = 0, heads_per_ngram = 0;
  int64_t ngram_vocab_base = 0, ngram_divisor = 0, seed = 0;

  int64_t key_dim() const { return k_heads * k_dim; }
  int64_t value_dim() const { return v_heads * v_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  int64_t wide() const { return hc * hidden; }  // widened residual {hc * hidden}
  int64_t ple_index(int64_t layer) const;       // index among PLE layers or -1
};

// Throws ds4::InputError naming `origin` and the field on a missing or bad value.
Config parse_config(const nlohmann::json& j, const std::string& origin);

}  // namespace ds4::qwen_next
