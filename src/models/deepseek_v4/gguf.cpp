#include "models/deepseek_v4/gguf.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"
#include "core/weight.h"
#include "formats/gguf.h"

namespace ds4::deepseek_v4 {
namespace {

const nlohmann::json& need(const nlohmann::json& g, const char* key, const std::string& where) {
  if (!g.contains(key)) throw InputError(where + ": GGUF metadata key 'deepseek4." + std::string(key) + "' is missing");
  return g[key];
}

}  // namespace

nlohmann::json hf_config_from_ds4(const nlohmann::json& g, const std::string& w) {
  nlohmann::json c;
  c["model_type"] = "deepseek_v4";
  c["vocab_size"] = need(g, "vocab_size", w);
  c["hidden_size"] = need(g, "embedding_length", w);
  c["num_hidden_layers"] = need(g, "block_count", w);
  c["num_attention_heads"] = need(g, "attention.head_count", w);
  c["num_key_value_heads"] = need(g, "attention.head_count_kv", w);
  c["head_dim"] = need(g, "attention.key_length", w);
  if (need(g, "attention.value_length", w) != c["head_dim"])
    throw InputError(w + ": deepseek4.attention.value_length must equal key_length (K == V)");
  c["qk_rope_head_dim"] = need(g, "rope.dimension_count", w);
  c["q_lora_rank"] = need(g, "attention.q_lora_rank", w);
  c["o_lora_rank"] = need(g, "attention.output_lora_rank", w);
  c["o_groups"] = need(g, "attention.output_group_count", w);
  c["n_routed_experts"] = need(g, "expert_count", w);
  c["num_experts_per_tok"] = need(g, "expert_used_count", w);
  c["moe_intermediate_size"] = need(g, "expert_feed_forward_length", w);
  c["n_shared_experts"] = need(g, "expert_shared_count", w);
  c["num_hash_layers"] = need(g, "hash_layer_count", w);
  c["routed_scaling_factor"] = need(g, "expert_weights_scale", w);
  c["norm_topk_prob"] = need(g, "expert_weights_norm", w);
  c["scoring_func"] = "sqrtsoftplus";  // ds4 hard-codes sqrt(softplus)
  c["sliding_window"] = need(g, "attention.sliding_window", w);
  c["index_n_heads"] = need(g, "attention.indexer.head_count", w);
  c["index_head_dim"] = need(g, "attention.indexer.key_length", w);
  c["index_topk"] = need(g, "attention.indexer.top_k", w);
  c["hc_mult"] = need(g, "hyper_connection.count", w);
  c["hc_sinkhorn_iters"] = need(g, "hyper_connection.sinkhorn_iterations", w);
  c["hc_eps"] = need(g, "hyper_connection.epsilon", w);
  c["rms_norm_eps"] = need(g, "attention.layer_norm_rms_epsilon", w);
  c["rope_theta"] = need(g, "rope.freq_base", w);
  c["compress_rope_theta"] = need(g, "attention.compress_rope_freq_base", w);
  if (g.contains("context_length")) c["max_position_embeddings"] = g["context_length"];
  // ds4: ratio 0 = sliding only, 4 = CSA (overlapping windows + indexer), else HCA.
  const auto& ratios = need(g, "attention.compress_ratios", w);
  nlohmann::json types = nlohmann::json::array(), rates = nlohmann::json::object();
  for (const auto& r : ratios) {
    const int64_t v = r.get<int64_t>();
    types.push_back(v == 0 ? "sliding_attention" : v == 4 ? "compressed_sparse_attention" : "heavily_compressed_attention");
    if (v == 4) rates["compressed_sparse_attention"] = v;
    else if (v != 0) {
      if (rates.contains("heavily_compressed_attention") && rates["heavily_compressed_attention"] != v)
        throw InputError(w + ": deepseek4.attention.compress_ratios mixes HCA ratios");
      rates["heavily_compressed_attention"] = v;
    }
  }
  c["layer_types"] = types;
  c["compress_rates"] = rates;
  const auto& clamp = need(g, "swiglu_clamp_exp", w);
  if (!clamp.is_array() || clamp.empty()) throw InputError(w + ": deepseek4.swiglu_clamp_exp must be a non-empty array");
  for (const auto& v : clamp)
    if (v.get<double>() != clamp[0].get<double>())
      throw InputError(w + ": deepseek4.swiglu_clamp_exp differs between layers (unsupported)");
  c["swiglu_limit"] = clamp[0];
  nlohmann::json yarn = {{"rope_type", "yarn"},
                         {"factor", need(g, "rope.scaling.factor", w)},
                         {"original_max_position_embeddings", need(g, "rope.scaling.original_context_length", w)},
                         {"beta_fast", need(g, "rope.scaling.yarn_beta_fast", w)},
                         {"beta_slow", need(g, "rope.scaling.yarn_beta_slow", w)}};
  // flat form: applies to the compressed layers only; ds4 skips YaRN unless factor > 1
  c["rope_parameters"] = yarn["factor"].get<double>() > 1.0 ? yarn : nlohmann::json{{"rope_type", "default"}};
  return c;
}

}  // namespace ds4::deepseek_v4
