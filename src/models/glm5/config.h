#pragma once
// GLM 5.x Flash (HF `glm5_next`) hyper-parameters, read from config.json (flat text-only or
// nested under "text_config") or the GGUF's stored config. Defaults are HF's.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds4::glm5 {

enum class LayerKind { kLinear, kIndexed };  // KDA linear attention | MLA + DSA

struct Config {
  int64_t vocab_size = 154880, hidden_size = 4096, intermediate_size = 12288;
  int64_t moe_intermediate_size = 2048, num_hidden_layers = 45;
  int64_t num_attention_heads = 64;
  int64_t n_shared_experts = 1, n_routed_experts = 288, num_experts_per_tok = 8;
  int64_t n_group = 1, topk_group = 1;
  float routed_scaling_factor = 2.5f;
  bool norm_topk_prob = true;
  int64_t kv_lora_rank = 512, q_lora_rank = 1536, qk_nope_head_dim = 256, v_head_dim = 256;
  float rms_norm_eps = 1e-5f;
  int64_t index_topk = 2048, index_head_dim = 128, index_n_heads = 32, index_kpool = 16;
  bool index_kpool_always_select_tail = true;
  float swiglu_limit = 10.0f;
  int64_t linear_head_dim = 128, linear_num_heads = 64, linear_conv_kernel_dim = 4;
  bool has_lower_bound = true;
  float linear_lower_bound = -5.0f;
  int64_t hc_mult = 4, hc_sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  int64_t max_position_embeddings = 1048576;
  bool tie_word_embeddings = false;  // a checkpoint without lm_head.weight reads the embeddings
  std::vector<int32_t> eos_token_ids;
  std::vector<LayerKind> layer_types;
  std::vector<bool> mlp_sparse;      // per layer: MoE (true) or dense MLP
  std::vector<bool> indexer_shared;  // per layer: reuse the previous full layer's top-k

  // Index of the full indexed layer whose selection layer `l` uses (l itself if full).
  int64_t selection_source(int64_t l) const;
  int64_t kpool_budget() const { return index_topk / index_kpool; }
};

// Throws ds4::InputError naming `where` and the bad field/value.
Config parse_config(const nlohmann::json& j, const std::string& where);

}  // namespace ds4::glm5
