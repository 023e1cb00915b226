#include "models/glm5/config.h"

#include "core/error.h"

namespace ds4::glm5 {
namespace {

// HF's config is a strict dataclass: a null int/float/bool field is refused there, so it is
// here (only the Optional fields -- token ids, schedules, the KDA lower bound -- take null,
// and those are read without get()).
template <class T>
void get(const nlohmann::json& j, const char* key, T& v, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return;
  if (it->is_null()) throw InputError(where + ": config field '" + key + "' is null (transformers refuses it too)");
  try {
    v = it->get<T>();
  } catch (const std::exception&) {
    throw InputError(where + ": config field '" + key + "' has the wrong type: " + it->dump());
  }
}

void positive(int64_t v, const char* key, const std::string& where) {
  if (v <= 0) throw InputError(where + ": config field '" + key + "' must be > 0, got " + std::to_string(v));
}

// A per-layer list (null or absent: empty). `at_least`: HF indexes it by layer only, so a
// longer list loads there (indexer_types); layer_types / mlp_layer_types must match exactly.
std::vector<std::string> strings(const nlohmann::json& j, const char* key, size_t n, const std::string& where,
                                 bool at_least = false) {
  std::vector<std::string> out;
  if (j.contains(key) && !j[key].is_null()) get(j, key, out, where);
  if (!out.empty() && (at_least ? out.size() < n : out.size() != n))
    throw InputError(where + ": config field '" + key + "' has " + std::to_string(out.size()) + " entries, expected " +
                     (at_least ? "at least " : "") + "num_hidden_layers = " + std::to_string(n));
  return out;
}

// Every layer_types spelling transformers 5.17..5.25 runs as a GLM layer. 5.17 writes
// "deepseek_sparse_attention"; 5.25 writes "indexed_attention" and remaps the legacy names
// (configuration_utils._LEGACY_LAYER_TYPE_REMAP: mamba, deepseek_sparse_attention,
// qwen_sparse_attention); both map "full_attention" (real checkpoints) to the DSA layer.
// "attention" and the other generic names load in HF's config but its model has no mask
// for them (KeyError), so they are refused here.
bool layer_kind(const std::string& t, LayerKind& k) {
  if (t == "linear_attention" || t == "mamba") return k = LayerKind::kLinear, true;
  if (t == "indexed_attention" || t == "full_attention" || t == "deepseek_sparse_attention" ||
      t == "qwen_sparse_attention")
    return k = LayerKind::kIndexed, true;
  return false;
}

void parse_schedules(const nlohmann::json& j, Config& c, const std::string& where) {
  const auto n = size_t(c.num_hidden_layers);
  auto lt = strings(j, "layer_types", n, where);
  for (size_t l = 0; l < n; ++l) {
    std::string t = lt.empty() ? (l % 4 != 3 ? "linear_attention" : "indexed_attention") : lt[l];
    LayerKind k{};
    if (!layer_kind(t, k))
      throw InputError(where + ": layer_types[" + std::to_string(l) + "] = '" + t +
                       "' is not a GLM 5.x layer (linear_attention / mamba for KDA; indexed_attention, "
                       "full_attention, deepseek_sparse_attention or qwen_sparse_attention for MLA+DSA)");
    c.layer_types.push_back(k);
  }
  auto mt = strings(j, "mlp_layer_types", n, where);
  for (size_t l = 0; l < n; ++l) {
    std::string t = mt.empty() ? (l < 3 ? "dense" : "sparse") : mt[l];
    if (t != "dense" && t != "sparse")
      throw InputError(where + ": mlp_layer_types[" + std::to_string(l) + "] = '" + t + "' is unknown");
    c.mlp_sparse.push_back(t == "sparse");
  }
  auto it = strings(j, "indexer_types", n, where, /*at_least=*/true);
  // HF: a pattern string of F/S (any other letter raises there), or a list taken as
  // indexer_types; only used when indexer_types is absent.
  if (it.empty() && j.contains("index_topk_pattern") && !j["index_topk_pattern"].is_null()) {
    if (j["index_topk_pattern"].is_string()) {
      const auto pat = j["index_topk_pattern"].get<std::string>();
      for (size_t i = 0; i < pat.size(); ++i) {
        if (pat[i] != 'F' && pat[i] != 'S')
          throw InputError(where + ": index_topk_pattern[" + std::to_string(i) + "] = '" + std::string(1, pat[i]) +
                           "' (expected F = full or S = shared)");
        it.push_back(pat[i] == 'S' ? "shared" : "full");
      }
    } else {
      it = strings(j, "index_topk_pattern", n, where, /*at_least=*/true);
    }
    if (it.size() < n)
      throw InputError(where + ": index_topk_pattern has " + std::to_string(it.size()) +
                       " entries, expected at least num_hidden_layers = " + std::to_string(n));
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
  // HF's router takes the top-2 of each group (of all experts when n_group = 1), and picks the
  // experts among the kept groups only; beyond that it would pick masked (-inf) experts.
  if (c.n_routed_experts / c.n_group < 2)
    throw InputError(where + ": n_routed_experts / n_group = " + std::to_string(c.n_routed_experts / c.n_group) +
                     " experts per group (the router needs at least 2)");
  if (c.topk_group < 1 || c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group))
    throw InputError(where + ": num_experts_per_tok (" + std::to_string(c.num_experts_per_tok) +
                     ") > topk_group x experts per group (" + std::to_string(c.topk_group) + " x " +
                     std::to_string(c.n_routed_experts / c.n_group) + ")");
  for (auto [v, k] : {std::pair{c.linear_conv_kernel_dim, "linear_conv_kernel_dim"},
                      {c.index_head_dim, "index_head_dim"}, {c.index_n_heads, "index_n_heads"}})
    positive(v, k, where);
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
  get(j, "num_local_experts", c.n_routed_experts, where);  // HF attribute_map alias; set last, it wins
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
    c.has_lower_bound = !j["linear_lower_bound"].is_null();  // null: the softplus gate
    if (c.has_lower_bound) get(j, "linear_lower_bound", c.linear_lower_bound, where);
  }
  if (j.contains("linear_attn_config") && j["linear_attn_config"].is_object()) {
    const auto& la = j["linear_attn_config"];
    get(la, "head_dim", c.linear_head_dim, where);
    get(la, "num_heads", c.linear_num_heads, where);
    get(la, "short_conv_kernel_size", c.linear_conv_kernel_dim, where);
    if (la.contains("gate_lower_bound")) {
      c.has_lower_bound = !la["gate_lower_bound"].is_null();
      if (c.has_lower_bound) get(la, "gate_lower_bound", c.linear_lower_bound, where);
    }
    bool safe = true;  // HF: dict.get("safe_gate", True); an explicit null is falsy there
    if (la.contains("safe_gate") && la["safe_gate"].is_null()) safe = false;
    else get(la, "safe_gate", safe, where);
    if (safe && !c.has_lower_bound) c.has_lower_bound = true, c.linear_lower_bound = -5.0f;
  }
  get(j, "hc_mult", c.hc_mult, where);
  get(j, "hc_sinkhorn_iters", c.hc_sinkhorn_iters, where);
  get(j, "hc_eps", c.hc_eps, where);
  get(j, "max_position_embeddings", c.max_position_embeddings, where);
  // HF's generation model ties lm_head to the embeddings when the outer or the text config says so.
  if (&j != &root) get(root, "tie_word_embeddings", c.tie_word_embeddings, where);
  get(j, "tie_word_embeddings", c.tie_word_embeddings, where);
  if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer()) c.eos_token_ids = {j["eos_token_id"].get<int32_t>()};
  else if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) get(j, "eos_token_id", c.eos_token_ids, where);
  int64_t rope = 0, kv_heads = c.num_attention_heads;
  if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null())  // HF: null = heads
    get(j, "num_key_value_heads", kv_heads, where);
  if (kv_heads != c.num_attention_heads)
    throw InputError(where + ": num_key_value_heads = " + std::to_string(kv_heads) + " differs from num_attention_heads = " +
                     std::to_string(c.num_attention_heads) + " (transformers refuses it too)");
  // What HF reads but we do not implement: refuse instead of computing something else.
  std::string act = "silu";
  get(j, "hidden_act", act, where);
  if (act != "silu" && act != "swish")
    throw InputError(where + ": hidden_act = '" + act + "' is not supported (GLM 5.x uses silu)");
  bool attn_bias = false;
  get(j, "attention_bias", attn_bias, where);
  if (attn_bias)
    throw InputError(where + ": attention_bias = true is not supported (no GLM 5.x checkpoint has MLA biases)");
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
