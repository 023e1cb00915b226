#include "models/glm5/config.h"

#include "core/error.h"

namespace ds4::glm5 {
namespace {

template <class T>
void get(const nlohmann::json& j, const char* key, T& v, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    v = it->get<T>();
  } catch (const std::exception&) {
    throw InputError(where + ": config field '" + key + "' has the wrong type: " + it->dump());
  }
}

void positive(int64_t v, const char* key, const std::string& where) {
  if (v <= 0) throw InputError(where + ": config field '" + key + "' must be > 0, got " + std::to_string(v));
}

std::vector<std::string> strings(const nlohmann::json& j, const char* key, size_t n, const std::string& where) {
  std::vector<std::string> out;
  get(j, key, out, where);
  if (!out.empty() && out.size() != n)
    throw InputError(where + ": config field '" + key + "' has " + std::to_string(out.size()) +
                     " entries, expected num_hidden_layers = " + std::to_string(n));
  return out;
}

void parse_schedules(const nlohmann::json& j, Config& c, const std::string& where) {
  const auto n = size_t(c.num_hidden_layers);
  auto lt = strings(j, "layer_types", n, where);
  for (size_t l = 0; l < n; ++l) {
    std::string t = lt.empty() ? (l % 4 != 3 ? "linear_attention" : "indexed_attention") : lt[l];
    if (t == "linear_attention") c.layer_types.push_back(LayerKind::kLinear);
    else if (t == "indexed_attention" || t == "full_attention") c.layer_types.push_back(LayerKind::kIndexed);
    else throw InputError(where + ": layer_types[" + std::to_string(l) + "] = '" + t + "' is unknown");
  }
  auto mt = strings(j, "mlp_layer_types", n, where);
  for (size_t l = 0; l < n; ++l) {
    std::string t = mt.empty() ? (l < 3 ? "dense" : "sparse") : mt[l];
    if (t != "dense" && t != "sparse")
      throw InputError(where + ": mlp_layer_types[" + std::to_string(l) + "] = '" + t + "' is unknown");
    c.mlp_sparse.push_back(t == "sparse");
  }
  auto it = strings(j, "indexer_types", n, where);
  if (it.empty() && j.contains("index_topk_pattern") && j["index_topk_pattern"].is_string()) {
    for (char ch : j["index_topk_pattern"].get<std::string>()) it.push_back(ch == 'S' ? "shared" : "full");
    if (it.size() != n) throw InputError(where + ": index_topk_pattern length differs from num_hidden_layers");
  }
  int64_t freq = 1, offset = 2;
  get(j, "index_topk_freq", freq, where);
  get(j, "index_skip_topk_offset", offset, where);
  freq = std::max<int64_t>(freq, 1);
  for (size_t l = 0; l < n; ++l) {
    std::string t = !it.empty() ? it[l] : (std::max<int64_t>(int64_t(l) - offset + 1, 0) % freq == 0 ? "full" : "shared");
    if (t != "full" && t != "shared")
      throw InputError(where + ": indexer_types[" + std::to_string(l) + "] = '" + t + "' is unknown");
    c.indexer_shared.push_back(t == "shared");
  }
}

void validate_values(const Config& c, const std::string& where) {
  for (auto [v, k] : {std::pair{c.vocab_size, "vocab_size"}, {c.hidden_size, "hidden_size"},
                      {c.num_hidden_layers, "num_hidden_layers"}, {c.num_attention_heads, "num_attention_heads"},
                      {c.kv_lora_rank, "kv_lora_rank"}, {c.q_lora_rank, "q_lora_rank"},
                      {c.qk_nope_head_dim, "qk_nope_head_dim"}, {c.v_head_dim, "v_head_dim"},
                      {c.index_kpool, "index_kpool"}, {c.index_topk, "index_topk"}, {c.hc_mult, "hc_mult"},
                      {c.linear_num_heads, "linear_num_heads"}, {c.linear_head_dim, "linear_head_dim"},
                      {c.n_group, "n_group"}, {c.num_experts_per_tok, "num_experts_per_tok"}})
    positive(v, k, where);
  if (c.index_topk % c.index_kpool != 0)
    throw InputError(where + ": index_topk (" + std::to_string(c.index_topk) + ") must be a multiple of index_kpool (" +
                     std::to_string(c.index_kpool) + ")");
  if (!c.index_kpool_always_select_tail)
    throw InputError(where + ": index_kpool_always_select_tail = false is not supported (a query would not see its "
                             "own incomplete pool)");
  if (c.n_routed_experts % c.n_group != 0 || c.topk_group > c.n_group)
    throw InputError(where + ": n_routed_experts/n_group/topk_group inconsistent: " + std::to_string(c.n_routed_experts) +
                     "/" + std::to_string(c.n_group) + "/" + std::to_string(c.topk_group));
  if (c.num_experts_per_tok > c.n_routed_experts)
    throw InputError(where + ": num_experts_per_tok > n_routed_experts");
}

}  // namespace

int64_t Config::selection_source(int64_t l) const {
  if (!indexer_shared[size_t(l)]) return l;
  return l - 1;  // validated: a shared layer directly follows an indexed layer with a selection
}

Config parse_config(const nlohmann::json& root, const std::string& where) {
  const nlohmann::json& j = root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
  Config c;
  get(j, "vocab_size", c.vocab_size, where);
  get(j, "hidden_size", c.hidden_size, where);
  get(j, "intermediate_size", c.intermediate_size, where);
  get(j, "moe_intermediate_size", c.moe_intermediate_size, where);
  get(j, "num_hidden_layers", c.num_hidden_layers, where);
  get(j, "num_attention_heads", c.num_attention_heads, where);
  get(j, "n_shared_experts", c.n_shared_experts, where);
  get(j, "n_routed_experts", c.n_routed_experts, where);
  get(j, "num_experts_per_tok", c.num_experts_per_tok, where);
  get(j, "n_group", c.n_group, where);
  get(j, "topk_group", c.topk_group, where);
  get(j, "routed_scaling_factor", c.routed_scaling_factor, where);
  get(j, "norm_topk_prob", c.norm_topk_prob, where);
  get(j, "kv_lora_rank", c.kv_lora_rank, where);
  get(j, "q_lora_rank", c.q_lora_rank, where);
  get(j, "qk_nope_head_dim", c.qk_nope_head_dim, where);
  get(j, "v_head_dim", c.v_head_dim, where);
  get(j, "rms_norm_eps", c.rms_norm_eps, where);
  get(j, "index_topk", c.index_topk, where);
  get(j, "index_head_dim", c.index_head_dim, where);
  get(j, "index_n_heads", c.index_n_heads, where);
  get(j, "index_kpool", c.index_kpool, where);
  get(j, "index_kpool_always_select_tail", c.index_kpool_always_select_tail, where);
  get(j, "swiglu_limit", c.swiglu_limit, where);
  get(j, "linear_head_dim", c.linear_head_dim, where);
  get(j, "linear_num_heads", c.linear_num_heads, where);
  get(j, "linear_conv_kernel_dim", c.linear_conv_kernel_dim, where);
  if (j.contains("linear_lower_bound")) {
    c.has_lower_bound = !j["linear_lower_bound"].is_null();
    get(j, "linear_lower_bound", c.linear_lower_bound, where);
  }
  if (j.contains("linear_attn_config") && j["linear_attn_config"].is_object()) {
    const auto& la = j["linear_attn_config"];
    get(la, "head_dim", c.linear_head_dim, where);
    get(la, "num_heads", c.linear_num_heads, where);
    get(la, "short_conv_kernel_size", c.linear_conv_kernel_dim, where);
    if (la.contains("gate_lower_bound")) {
      c.has_lower_bound = !la["gate_lower_bound"].is_null();
      get(la, "gate_lower_bound", c.linear_lower_bound, where);
    }
    bool safe = true;
    get(la, "safe_gate", safe, where);
    if (safe && !c.has_lower_bound) c.has_lower_bound = true, c.linear_lower_bound = -5.0f;
  }
  get(j, "hc_mult", c.hc_mult, where);
  get(j, "hc_sinkhorn_iters", c.hc_sinkhorn_iters, where);
  get(j, "hc_eps", c.hc_eps, where);
  get(j, "max_position_embeddings", c.max_position_embeddings, where);
  if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer()) c.eos_token_ids = {j["eos_token_id"].get<int32_t>()};
  else get(j, "eos_token_id", c.eos_token_ids, where);
  int64_t rope = 0;
  get(j, "qk_rope_head_dim", rope, where);
  if (rope != 0) throw InputError(where + ": qk_rope_head_dim = " + std::to_string(rope) + " (GLM 5.x DSA layers are NoPE; expected 0)");

  validate_values(c, where);
  parse_schedules(j, c, where);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.layer_types[size_t(l)] != LayerKind::kIndexed || !c.indexer_shared[size_t(l)]) continue;
    // HF hands a selection only from the directly preceding decoder layer (a KDA layer in
    // between passes None and HF raises); mirror that contract.
    if (l == 0 || c.layer_types[size_t(l - 1)] != LayerKind::kIndexed || c.indexer_shared[size_t(l - 1)])
      throw InputError(where + ": layer " + std::to_string(l) + " is a shared-indexer DSA layer but layer " +
                       std::to_string(l - 1) + " is not a full-indexer DSA layer (HF passes top-k only from there)");
  }
  return c;
}

}  // namespace ds4::glm5
