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

// One rope sub-dict as transformers' rope init functions read it. `nested`: the config
// carried {main, compress} itself, so transformers did not default attention_factor to 1 and
// would scale cos / sin by YaRN's mscale; ds4 never does, so that form is refused.
RopeConfig rope(const nlohmann::json& p, double theta_default, const Reader& r, const char* label,
                double max_positions, bool nested) {
  const std::string field = std::string("rope_parameters.") + label;
  if (!p.is_object()) r.fail(field, "is not an object");
  RopeConfig c;
  c.theta = p.contains("rope_theta") && p["rope_theta"].is_number() ? p["rope_theta"].get<double>() : theta_default;
  const std::string type = p.value("rope_type", p.value("type", std::string("default")));
  const auto num = [&](const char* k) { return p.contains(k) && p[k].is_number() ? p[k].get<double>() : 0.0; };
  if (type == "yarn") {
    c.yarn = true;
    c.yarn_params.original_max_positions = int64_t(num("original_max_position_embeddings"));
    if (c.yarn_params.original_max_positions <= 0) r.fail(field, "yarn needs original_max_position_embeddings");
    // transformers: a missing factor is max_position_embeddings / original; beta_* `or` their defaults
    c.yarn_params.factor = num("factor") != 0 ? num("factor") : max_positions / double(c.yarn_params.original_max_positions);
    c.yarn_params.beta_fast = num("beta_fast") != 0 ? num("beta_fast") : 32.0;
    c.yarn_params.beta_slow = num("beta_slow") != 0 ? num("beta_slow") : 1.0;
    if (!p.contains("attention_factor") || p["attention_factor"].is_null()) {
      if (nested) r.fail(field, "yarn without attention_factor (transformers would scale cos/sin by mscale; DeepSeek V4 uses 1)");
    } else if (!p["attention_factor"].is_number() || p["attention_factor"].get<double>() != 1.0) {
      r.fail(field, "attention_factor != 1 is not DeepSeek V4");
    }
  } else if (type != "default") {
    r.fail(field, "has unsupported rope_type '" + type + "'");
  }
  return c;
}

// The spellings transformers 5.17 .. 5.25 load (DeepseekV4Config.__post_init__): explicit
// layer_types > legacy per-layer compress_ratios (0 / 4 / 128 only) > the V4-Pro default
// (two HCA layers, then CSA on odd and HCA on even indices); compress_rates with legacy
// top-level compress_rate_csa / compress_rate_hca overriding it; mlp_layer_types > legacy
// num_hash_layers (default 3).
void parse_schedule(const nlohmann::json& j, const Reader& r, Config& c) {
  const bool has_types = j.contains("layer_types") && !j["layer_types"].is_null();
  const bool has_ratios = j.contains("compress_ratios") && !j["compress_ratios"].is_null();
  if (has_types) {
    if (!j["layer_types"].is_array()) r.fail("layer_types", "is not a list");
    for (const auto& s : j["layer_types"]) {
      if (!s.is_string()) r.fail("layer_types", "has a non-string entry");
      c.attn_types.push_back(attn_type(s.get<std::string>(), r));
    }
  } else if (has_ratios) {
    if (!j["compress_ratios"].is_array()) r.fail("compress_ratios", "is not a list");
    for (const auto& v : j["compress_ratios"]) {
      const int64_t x = v.is_number_integer() ? v.get<int64_t>() : -1;
      if (x != 0 && x != 4 && x != 128)
        r.fail("compress_ratios", "has entry " + v.dump() + " (transformers maps only 0, 4 and 128)");
      c.attn_types.push_back(x == 0 ? AttnType::kSliding : x == 4 ? AttnType::kCompressedSparse
                                                                   : AttnType::kHeavilyCompressed);
    }
  } else {
    for (int64_t l = 0; l < c.layers; ++l)
      c.attn_types.push_back(l < 2 || (l - 2) % 2 == 0 ? AttnType::kHeavilyCompressed : AttnType::kCompressedSparse);
  }
  const char* types_field = has_types ? "layer_types" : "compress_ratios";
  if (int64_t(c.attn_types.size()) < c.layers)
    r.fail(types_field, "has " + std::to_string(c.attn_types.size()) + " entries for " +
                            std::to_string(c.layers) + " layers");
  c.attn_types.resize(size_t(c.layers));
  if (j.contains("mlp_layer_types") && !j["mlp_layer_types"].is_null()) {
    if (!j["mlp_layer_types"].is_array()) r.fail("mlp_layer_types", "is not a list");
    for (const auto& s : j["mlp_layer_types"]) {
      const std::string t = s.is_string() ? s.get<std::string>() : s.dump();
      if (t != "hash_moe" && t != "moe") r.fail("mlp_layer_types", "has unknown entry '" + t + "'");
      c.hash_moe.push_back(t == "hash_moe");
    }
  } else {
    const int64_t n_hash = r.i_or("num_hash_layers", 3);
    for (int64_t l = 0; l < c.layers; ++l) c.hash_moe.push_back(l < n_hash);
  }
  if (int64_t(c.hash_moe.size()) < c.layers) r.fail("mlp_layer_types", "is shorter than num_hidden_layers");
  c.hash_moe.resize(size_t(c.layers));
  const auto rate = [&](const char* type, const char* legacy, int64_t def) {
    if (j.contains(legacy) && !j[legacy].is_null()) return r.i(legacy);
    if (!j.contains("compress_rates") || j["compress_rates"].is_null()) return def;
    const auto& d = j["compress_rates"];
    if (!d.is_object()) r.fail("compress_rates", "is not an object");
    if (!d.contains(type)) return int64_t(0);  // transformers: KeyError when a layer of the type exists
    if (!d[type].is_number_integer() || d[type].get<int64_t>() < 1)
      r.fail(std::string("compress_rates.") + type, "is not a positive integer");
    return d[type].get<int64_t>();
  };
  c.csa_ratio = rate("compressed_sparse_attention", "compress_rate_csa", 4);
  c.hca_ratio = rate("heavily_compressed_attention", "compress_rate_hca", 128);
  for (int64_t l = 0; l < c.layers; ++l)
    if (c.ratio(l) == 0 && c.attn_types[size_t(l)] != AttnType::kSliding)
      r.fail("compress_rates", std::string("has no rate for ") +
                                   (c.attn_types[size_t(l)] == AttnType::kCompressedSparse
                                        ? "compressed_sparse_attention" : "heavily_compressed_attention") +
                                   ", which layer " + std::to_string(l) + " uses");
}

// Rope dim = int(head_dim * partial_rotary_factor), truncated as transformers does. Flat form:
// top-level partial_rotary_factor, else legacy qk_rope_head_dim / head_dim, else 64 / 512; the
// rope dict (rope_parameters, legacy rope_scaling) scales the compressed layers only. Nested
// {main, compress} form: each sub-dict's own partial_rotary_factor (default 1) sizes its rope.
void parse_rope(const nlohmann::json& j, const Reader& r, Config& c) {
  const auto dim_of = [&](double partial, const std::string& field) {
    const int64_t d = int64_t(double(c.head_dim) * partial);
    if (d <= 0 || d % 2 || d > c.head_dim) r.fail(field, "gives an invalid rope dim " + std::to_string(d));
    return d;
  };
  const nlohmann::json rp = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? j["rope_parameters"]
                            : j.contains("rope_scaling") && j["rope_scaling"].is_object()   ? j["rope_scaling"]
                                                                                            : nlohmann::json::object();
  const double theta = r.f_or("rope_theta", 10000.0), ctheta = r.f_or("compress_rope_theta", 160000.0);
  const double max_pos = double(r.i_or("max_position_embeddings", 1048576));
  if (rp.contains("main") && rp.contains("compress") && rp["main"].is_object() && rp["compress"].is_object()) {
    const auto partial = [&](const char* label) {
      const auto& d = rp[label];
      return d.contains("partial_rotary_factor") && d["partial_rotary_factor"].is_number()
                 ? d["partial_rotary_factor"].get<double>() : 1.0;
    };
    c.rope_dim = dim_of(partial("main"), "rope_parameters.main.partial_rotary_factor");
    if (dim_of(partial("compress"), "rope_parameters.compress.partial_rotary_factor") != c.rope_dim)
      r.fail("rope_parameters.compress.partial_rotary_factor", "gives a rope dim other than main's");
    c.rope_main = rope(rp["main"], theta, r, "main", max_pos, true);
    c.rope_compress = rope(rp["compress"], ctheta, r, "compress", max_pos, true);
  } else {
    double partial = r.f_or("partial_rotary_factor", 0.0);
    if (partial <= 0) partial = j.contains("qk_rope_head_dim") && !j["qk_rope_head_dim"].is_null()
                                    ? double(r.i("qk_rope_head_dim")) / double(c.head_dim) : 64.0 / 512.0;
    c.rope_dim = dim_of(partial, "partial_rotary_factor");
    c.rope_main.theta = theta;
    nlohmann::json comp = rp;
    comp["rope_theta"] = ctheta;
    c.rope_compress = rope(comp, ctheta, r, "compress", max_pos, false);
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
  // num_key_value_heads and n_shared_experts are written by the config but never read by
  // transformers' modeling (one shared KV head, one shared expert MLP), so any value loads.
  c.head_dim = r.i("head_dim");
  c.q_lora = r.i("q_lora_rank");
  c.o_groups = r.i("o_groups");
  c.o_lora = r.i("o_lora_rank");
  if (c.heads % c.o_groups) r.fail("o_groups", "does not divide num_attention_heads");
  c.experts = r.i("n_routed_experts");
  c.experts_used = r.i("num_experts_per_tok");
  if (c.experts_used > c.experts) r.fail("num_experts_per_tok", "exceeds n_routed_experts");
  c.expert_ff = r.i("moe_intermediate_size");
  c.routed_scale = r.f_or("routed_scaling_factor", 1.0);
  const std::string sf = j.value("scoring_func", std::string("sqrtsoftplus"));
  if (sf == "sqrtsoftplus") c.score = ScoreFunc::kSqrtSoftplus;
  else if (sf == "sigmoid") c.score = ScoreFunc::kSigmoid;
  else if (sf == "softmax") c.score = ScoreFunc::kSoftmax;
  else r.fail("scoring_func", "has unsupported value '" + sf + "'");
  // norm_topk_prob: transformers' router always normalizes the chosen weights and ds4 requires
  // expert_weights_norm = true, so the flag is accepted and ignored (docs/reference-differences.md).
  c.norm_topk = true;
  const std::string act = j.value("hidden_act", std::string("silu"));  // transformers: swish is silu
  if (act != "silu" && act != "swish") r.fail("hidden_act", "must be silu (SwiGLU experts), is '" + act + "'");
  if (j.contains("mlp_bias") && j["mlp_bias"].is_boolean() && j["mlp_bias"].get<bool>())
    r.fail("mlp_bias", "is true; DeepSeek V4's shared expert has no biases");
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
