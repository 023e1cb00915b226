#include "models/deepseek_v4/config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ds4::deepseek_v4 {
namespace {

struct Reader {
  const nlohmann::json& j;
  const std::string& where;

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw InputError(where + ": config field '" + field + "' " + why);
  }
  int64_t i(const char* k, int64_t lo = 1) const {
    if (!j.contains(k) || !j[k].is_number_integer()) fail(k, "is missing or not an integer");
    const int64_t v = j[k].get<int64_t>();
    if (v < lo) fail(k, "= " + std::to_string(v) + " is below " + std::to_string(lo));
    return v;
  }
  int64_t i_or(const char* k, int64_t def) const { return j.contains(k) && !j[k].is_null() ? i(k, 0) : def; }
  double f_or(const char* k, double def) const {
    if (!j.contains(k) || j[k].is_null()) return def;
    if (!j[k].is_number()) fail(k, "is not a number");
    return j[k].get<double>();
  }
};

AttnType attn_type(const std::string& s, const Reader& r) {
  if (s == "sliding_attention") return AttnType::kSliding;
  if (s == "compressed_sparse_attention") return AttnType::kCompressedSparse;
  if (s == "heavily_compressed_attention") return AttnType::kHeavilyCompressed;
  r.fail("layer_types", "has unknown entry '" + s + "'");
}

RopeConfig rope(const nlohmann::json& p, double theta_default, const Reader& r, const char* label) {
  RopeConfig c;
  c.theta = p.value("rope_theta", theta_default);
  const std::string type = p.value("rope_type", p.value("type", std::string("default")));
  if (type == "yarn") {
    c.yarn = true;
    c.yarn_params.factor = p.value("factor", 1.0);
    c.yarn_params.original_max_positions = p.value("original_max_position_embeddings", int64_t(0));
    c.yarn_params.beta_fast = p.value("beta_fast", 32.0);
    c.yarn_params.beta_slow = p.value("beta_slow", 1.0);
    if (c.yarn_params.original_max_positions <= 0)
      r.fail(std::string("rope_parameters.") + label, "yarn needs original_max_position_embeddings");
    if (p.contains("attention_factor") && p["attention_factor"].get<double>() != 1.0)
      r.fail(std::string("rope_parameters.") + label, "attention_factor != 1 is not DeepSeek V4");
  } else if (type != "default") {
    r.fail(std::string("rope_parameters.") + label, "has unsupported rope_type '" + type + "'");
  }
  return c;
}

void parse_schedule(const nlohmann::json& j, const Reader& r, Config& c) {
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    for (const auto& s : j["layer_types"]) c.attn_types.push_back(attn_type(s.get<std::string>(), r));
  } else if (j.contains("compress_ratios") && j["compress_ratios"].is_array()) {
    for (const auto& v : j["compress_ratios"]) {
      const int64_t x = v.get<int64_t>();
      c.attn_types.push_back(x == 0 ? AttnType::kSliding : x == 4 ? AttnType::kCompressedSparse
                                                                   : AttnType::kHeavilyCompressed);
    }
  } else {
    r.fail("layer_types", "is missing (and no compress_ratios)");
  }
  if (int64_t(c.attn_types.size()) < c.layers)
    r.fail("layer_types", "has " + std::to_string(c.attn_types.size()) + " entries for " +
                              std::to_string(c.layers) + " layers");
  c.attn_types.resize(size_t(c.layers));
  if (j.contains("mlp_layer_types") && j["mlp_layer_types"].is_array()) {
    for (const auto& s : j["mlp_layer_types"]) {
      const std::string t = s.get<std::string>();
      if (t != "hash_moe" && t != "moe") r.fail("mlp_layer_types", "has unknown entry '" + t + "'");
      c.hash_moe.push_back(t == "hash_moe");
    }
  } else {
    const int64_t n_hash = r.i_or("num_hash_layers", 3);
    for (int64_t l = 0; l < c.layers; ++l) c.hash_moe.push_back(l < n_hash);
  }
  if (int64_t(c.hash_moe.size()) < c.layers) r.fail("mlp_layer_types", "is shorter than num_hidden_layers");
  c.hash_moe.resize(size_t(c.layers));
  if (j.contains("compress_rates") && j["compress_rates"].is_object()) {
    c.csa_ratio = j["compress_rates"].value("compressed_sparse_attention", int64_t(4));
    c.hca_ratio = j["compress_rates"].value("heavily_compressed_attention", int64_t(128));
  }
  if (c.csa_ratio < 1 || c.hca_ratio < 1) r.fail("compress_rates", "must be positive");
}

void parse_rope(const nlohmann::json& j, const Reader& r, Config& c) {
  double partial = r.f_or("partial_rotary_factor", 0.0);
  if (partial <= 0) partial = j.contains("qk_rope_head_dim") ? double(r.i("qk_rope_head_dim")) / double(c.head_dim)
                                                              : 64.0 / 512.0;
  c.rope_dim = int64_t(std::lround(double(c.head_dim) * partial));
  if (c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim)
    r.fail("partial_rotary_factor", "gives an invalid rope dim " + std::to_string(c.rope_dim));
  const nlohmann::json rp = j.contains("rope_parameters") && j["rope_parameters"].is_object()
                                ? j["rope_parameters"] : j.value("rope_scaling", nlohmann::json::object());
  const double theta = r.f_or("rope_theta", 10000.0), ctheta = r.f_or("compress_rope_theta", 160000.0);
  if (rp.contains("main") && rp.contains("compress")) {
    c.rope_main = rope(rp["main"], theta, r, "main");
    c.rope_compress = rope(rp["compress"], ctheta, r, "compress");
  } else {  // flat legacy form: the scaling applies to the compressed layers only
    c.rope_main.theta = theta;
    nlohmann::json comp = rp.is_null() ? nlohmann::json::object() : rp;
    comp["rope_theta"] = ctheta;
    c.rope_compress = rope(comp, ctheta, r, "compress");
  }
}

void parse_dspark(const nlohmann::json& j, const Reader& r, Config& c) {
  c.dspark_noise = r.i_or("dspark_noise_token_id", -1);
  if (c.dspark_noise >= c.vocab) r.fail("dspark_noise_token_id", "is outside the vocabulary");
  if (j.contains("dspark_target_layer_ids") && j["dspark_target_layer_ids"].is_array()) {
    for (const auto& v : j["dspark_target_layer_ids"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.layers)
        r.fail("dspark_target_layer_ids", "has an entry outside [0, num_hidden_layers)");
      c.dspark_taps.push_back(v.get<int64_t>());
    }
  } else {
    for (int64_t l = std::max<int64_t>(0, c.layers - 3); l < c.layers; ++l) c.dspark_taps.push_back(l);
  }
}

}  // namespace

int64_t Config::ratio(int64_t layer) const {
  switch (attn_types[size_t(layer)]) {
    case AttnType::kSliding: return 0;
    case AttnType::kCompressedSparse: return csa_ratio;
    case AttnType::kHeavilyCompressed: return hca_ratio;
  }
  return 0;
}

Config parse_config(const nlohmann::json& j, const std::string& where) {
  const Reader r{j, where};
  Config c;
  c.vocab = r.i("vocab_size");
  c.hidden = r.i("hidden_size");
  c.layers = r.i("num_hidden_layers");
  c.heads = r.i("num_attention_heads");
  if (r.i_or("num_key_value_heads", 1) != 1) r.fail("num_key_value_heads", "must be 1 (shared-KV MQA)");
  c.head_dim = r.i("head_dim");
  c.q_lora = r.i("q_lora_rank");
  c.o_groups = r.i("o_groups");
  c.o_lora = r.i("o_lora_rank");
  if (c.heads % c.o_groups) r.fail("o_groups", "does not divide num_attention_heads");
  c.experts = r.i("n_routed_experts");
  c.experts_used = r.i("num_experts_per_tok");
  if (c.experts_used > c.experts) r.fail("num_experts_per_tok", "exceeds n_routed_experts");
  c.expert_ff = r.i("moe_intermediate_size");
  if (r.i_or("n_shared_experts", 1) != 1) r.fail("n_shared_experts", "must be 1");
  c.routed_scale = r.f_or("routed_scaling_factor", 1.0);
  const std::string sf = j.value("scoring_func", std::string("sqrtsoftplus"));
  if (sf == "sqrtsoftplus") c.score = ScoreFunc::kSqrtSoftplus;
  else if (sf == "sigmoid") c.score = ScoreFunc::kSigmoid;
  else if (sf == "softmax") c.score = ScoreFunc::kSoftmax;
  else r.fail("scoring_func", "has unsupported value '" + sf + "'");
  if (j.contains("norm_topk_prob")) {  // GGUF metadata may carry it as a bool or an integer
    const auto& v = j["norm_topk_prob"];
    c.norm_topk = v.is_boolean() ? v.get<bool>() : v.is_number() ? v.get<double>() != 0 : true;
  }
  parse_schedule(j, r, c);
  parse_rope(j, r, c);
  c.hc = r.i_or("hc_mult", 4);
  c.sinkhorn_iters = int(r.i_or("hc_sinkhorn_iters", 20));
  c.hc_eps = float(r.f_or("hc_eps", 1e-6));
  c.swiglu_limit = float(r.f_or("swiglu_limit", 0.0));
  c.window = r.i("sliding_window");
  c.index_heads = r.i("index_n_heads");
  c.index_dim = r.i("index_head_dim");
  c.index_topk = r.i("index_topk");
  if (c.index_dim < c.rope_dim) r.fail("index_head_dim", "is smaller than the rope dim");
  c.rms_eps = float(r.f_or("rms_norm_eps", 1e-6));
  c.max_positions = r.i_or("max_position_embeddings", 1 << 20);
  if (j.contains("tie_word_embeddings") && !j["tie_word_embeddings"].is_null()) {
    if (!j["tie_word_embeddings"].is_boolean()) r.fail("tie_word_embeddings", "is not a boolean");
    c.tie_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  parse_dspark(j, r, c);
  if (j.contains("eos_token_id")) {
    const auto& e = j["eos_token_id"];
    if (e.is_array()) for (const auto& v : e) c.eos.push_back(v.get<int32_t>());
    else if (e.is_number_integer()) c.eos.push_back(e.get<int32_t>());
  }
  return c;
}

}  // namespace ds4::deepseek_v4
