#include "models/qwen_next/config.h"

#include <algorithm>

#include "core/error.h"

namespace ds4::qwen_next {
namespace {

struct Reader {
  const nlohmann::json& j;
  const std::string& origin;
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw InputError(origin + ": config field '" + key + "' " + why);
  }
  int64_t i(const std::string& key, int64_t min = 1) const {
    if (!j.contains(key) || !j[key].is_number_integer()) fail(key, "is missing or not an integer");
    const int64_t v = j[key].get<int64_t>();
    if (v < min) fail(key, "= " + std::to_string(v) + " is below " + std::to_string(min));
    return v;
  }
  int64_t i_or(const std::string& key, int64_t def, int64_t min = 1) const {
    return j.contains(key) && !j[key].is_null() ? i(key, min) : def;
  }
  double f_or(const std::string& key, double def) const {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_number()) fail(key, "is not a number");
    return j[key].get<double>();
  }
};

// Every layer-type name some transformers version loads for a qwen4_exp layer: 5.17 writes
// qwen_sparse_attention, 5.24+ indexed_attention, real checkpoints full_attention; 5.25 also
// remaps the legacy mamba and deepseek_sparse_attention. Both 5.17 and 5.25 refuse the rest
// ("attention" included: 5.25 remaps it to full_attention only after Qwen's own remap).
bool layer_is_linear(const Reader& r, const nlohmann::json& t) {
  const std::string s = t.is_string() ? t.get<std::string>() : "";
  if (s == "linear_attention" || s == "mamba") return true;
  if (s == "indexed_attention" || s == "full_attention" || s == "qwen_sparse_attention" ||
      s == "deepseek_sparse_attention")
    return false;
  r.fail("layer_types", "has unsupported entry " + t.dump() +
                            " (linear_attention/mamba or indexed_attention/full_attention/qwen_sparse_attention/"
                            "deepseek_sparse_attention)");
}

void parse_layout(const Reader& r, Config& c) {
  const auto& j = r.j;
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    for (const auto& t : j["layer_types"]) c.is_linear.push_back(layer_is_linear(r, t));
    if (int64_t(c.is_linear.size()) != c.layers) r.fail("layer_types", "length differs from num_hidden_layers");
  } else {
    const int64_t every = r.i_or("full_attention_interval", 4);
    for (int64_t l = 0; l < c.layers; ++l) c.is_linear.push_back((l + 1) % every != 0);
  }
  if (j.contains("ple_layer_ids") && j["ple_layer_ids"].is_array()) {
    for (const auto& v : j["ple_layer_ids"]) {
      const int64_t id = v.is_number_integer() ? v.get<int64_t>() : 0;
      if (id < 1 || id > c.layers) r.fail("ple_layer_ids", "has id " + v.dump() + " outside [1, layers]");
      if (!c.is_linear[size_t(id - 1)]) r.fail("ple_layer_ids", "names a non-linear-attention layer " + v.dump());
      c.ple_layers.push_back(id - 1);
    }
    std::sort(c.ple_layers.begin(), c.ple_layers.end());
    c.ple_layers.erase(std::unique(c.ple_layers.begin(), c.ple_layers.end()), c.ple_layers.end());
  }
}

void parse_eos(const Reader& r, Config& c) {
  const auto& j = r.j;
  if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer()) {
    c.eos_ids.push_back(j["eos_token_id"].get<int32_t>());
  } else if (j.contains("eos_token_id") && j["eos_token_id"].is_array()) {
    for (const auto& v : j["eos_token_id"]) c.eos_ids.push_back(v.get<int32_t>());
  }
  if (!c.eos_ids.empty()) c.eos = c.eos_ids[0];
  if (!c.ple_layers.empty() && c.eos < 0) r.fail("eos_token_id", "must be set when PLE layers exist");
}

}  // namespace

int64_t Config::ple_index(int64_t layer) const {
  auto it = std::find(ple_layers.begin(), ple_layers.end(), layer);
  return it == ple_layers.end() ? -1 : int64_t(it - ple_layers.begin());
}

Config parse_config(const nlohmann::json& root, const std::string& origin) {
  const nlohmann::json& j = root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
  Reader r{j, origin};
  Config c;
  c.vocab = r.i("vocab_size");
  c.hidden = r.i("hidden_size");
  c.layers = r.i("num_hidden_layers");
  c.rms_eps = float(r.f_or("rms_norm_eps", 1e-6));
  c.max_position = r.i_or("max_position_embeddings", 262144);
  c.tie_embeddings = j.value("tie_word_embeddings", false);
  // transformers loads these too, but every shipped checkpoint has them as refused here; the
  // engine implements neither attention biases nor another MLP/conv activation than silu
  if (j.contains("attention_bias") && j["attention_bias"].is_boolean() && j["attention_bias"].get<bool>())
    r.fail("attention_bias", "= true is not supported (no q/k/v/o biases)");
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    r.fail("hidden_act", "= " + j["hidden_act"].dump() + " is not supported (only \"silu\")");
  c.heads = r.i("num_attention_heads");
  c.kv_heads = r.i("num_key_value_heads");
  c.head_dim = r.i_or("head_dim", c.hidden / c.heads);
  if (c.heads % c.kv_heads) r.fail("num_key_value_heads", "does not divide num_attention_heads");
  const nlohmann::json rope = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? j["rope_parameters"] : j;
  Reader rr{rope, origin};
  const std::string rope_type = rope.value("rope_type", std::string("default"));
  if (rope_type != "default") rr.fail("rope_parameters.rope_type", "= '" + rope_type + "' is not supported (only 'default')");
  c.rope_theta = rr.f_or("rope_theta", j.value("rope_theta", 1e7));
  // A missing partial_rotary_factor is 0.25 in MTPLX (TextArgs), 1.0 in HF: MTPLX wins.
  const double partial = rr.f_or("partial_rotary_factor", r.f_or("partial_rotary_factor", 0.25));
  c.rot_dim = int64_t(double(c.head_dim) * partial);
  if (c.rot_dim % 2 || c.rot_dim <= 0) r.fail("partial_rotary_factor", "gives an odd or empty rotary dim");
  // Missing indexer fields: MTPLX's TextArgs defaults (HF cannot build the model without them).
  c.idx_heads = r.i_or("indexer_n_heads", 4);
  c.idx_dim = r.i_or("indexer_head_dim", 128);
  c.idx_budget = r.i_or("indexer_budget", 2048);
  c.idx_ratio = r.i_or("indexer_compress_ratio", 4);
  if (r.i_or("indexer_kv_heads", 1) != 1) r.fail("indexer_kv_heads", "must be 1");
  if (c.idx_budget % c.idx_ratio) r.fail("indexer_budget", "is not a multiple of indexer_compress_ratio");
  if (c.rot_dim > c.idx_dim) r.fail("indexer_head_dim", "is smaller than the rotary dim");
  c.conv_k = r.i("linear_conv_kernel_dim");
  c.k_heads = r.i("linear_num_key_heads");
  c.v_heads = r.i("linear_num_value_heads");
  c.k_dim = r.i("linear_key_head_dim");
  c.v_dim = r.i("linear_value_head_dim");
  if (c.v_heads % c.k_heads) r.fail("linear_num_value_heads", "is not a multiple of linear_num_key_heads");
  std::string gate = j.contains("output_gate_type") && j["output_gate_type"].is_string()
                         ? j["output_gate_type"].get<std::string>() : j.value("hidden_act", std::string("silu"));
  if (gate != "sigmoid" && gate != "silu") r.fail("output_gate_type", "= '" + gate + "' is not sigmoid/silu");
  c.gate_sigmoid = gate == "sigmoid";
  c.experts = r.i("num_experts");
  c.top_k = r.i("num_experts_per_tok");
  if (c.top_k > c.experts) r.fail("num_experts_per_tok", "exceeds num_experts");
  c.moe_inter = r.i("moe_intermediate_size");
  c.shared_inter = r.i("shared_expert_intermediate_size");
  c.norm_topk = j.value("norm_topk_prob", true);
  c.hc = r.i("hc_count", 2);
  c.hc_rank = r.i("hc_lowrank");
  parse_layout(r, c);
  if (!c.ple_layers.empty()) {
    c.ple_dim = r.i_or("ple_embed_dim", c.hidden);
    c.ple_conv_k = r.i_or("ple_conv_kernel_size", 4);
    c.ngram = r.i_or("ngram_size", 3, 2);
    c.heads_per_ngram = r.i_or("heads_per_ngram", 8);
    c.ngram_vocab_base = r.i_or("ngram_vocab_size_base", 20000000);
    c.ngram_divisor = r.i_or("make_ngram_vocab_size_divisible_by", 128);
    c.seed = r.i_or("seed", 1234, 0);
    if (c.ple_dim % ((c.ngram - 1) * c.heads_per_ngram)) r.fail("ple_embed_dim", "is not divisible by the n-gram head count");
  }
  parse_eos(r, c);
  return c;
}

}  // namespace ds4::qwen_next
