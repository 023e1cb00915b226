#include "formats/config_checks.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "core/error.h"

namespace ds4 {
namespace {

constexpr int64_t kMaxId = 2147483647;  // token ids are int32 everywhere

struct Checker {
  const std::string& origin;
  std::string prefix;  // "" or "text_config." / "rope_parameters."

  [[noreturn]] void fail(const std::string& key, const nlohmann::json& v, const std::string& why) const {
    std::string shown = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (shown.size() > 60) shown = shown.substr(0, 60) + "...";
    throw InputError(origin + ": config field '" + prefix + key + "' = " + shown + " " + why);
  }
  const nlohmann::json* get(const nlohmann::json& j, const char* key) const {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  void positive(const nlohmann::json& j, std::initializer_list<const char*> keys, double below = INFINITY) const {
    for (const char* k : keys)
      if (const auto* v = get(j, k)) {
        if (!v->is_number()) fail(k, *v, "is not a number");
        const double x = v->get<double>();
        if (!(x > 0) || !(x < below)) fail(k, *v, below < INFINITY ? "is not in (0, " + std::to_string(below) + ")" : "is not > 0");
      }
  }
  void sizes(const nlohmann::json& j, std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
      if (const auto* v = get(j, k)) {
        if (!v->is_number_integer()) fail(k, *v, "is not an integer");
        if (v->is_number_unsigned() ? v->get<uint64_t>() > uint64_t(kMaxId) : (v->get<int64_t>() < 0 || v->get<int64_t>() > kMaxId))
          fail(k, *v, "is not in 0 .. " + std::to_string(kMaxId));
      }
  }
  void typed(const nlohmann::json& j, std::initializer_list<const char*> keys, bool (nlohmann::json::*is)() const noexcept,
             const char* what) const {
    for (const char* k : keys)
      if (const auto* v = get(j, k); v && !(v->*is)()) fail(k, *v, std::string("is not a ") + what);
  }
  void token_ids(const nlohmann::json& j, int64_t vocab) const {
    for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
      const auto* v = get(j, k);
      if (!v) continue;
      auto one = [&](const nlohmann::json& id) {
        // The end-of-sequence id must be a real token (else generation never stops); the others
        // only need to be token ids (some configs name a pad id past the vocabulary).
        const int64_t top = std::string(k) == "eos_token_id" && vocab > 0 ? vocab - 1 : kMaxId;
        const bool ok = id.is_number_integer() &&
                        (id.is_number_unsigned() ? id.get<uint64_t>() <= uint64_t(top) : id.get<int64_t>() >= 0 && id.get<int64_t>() <= top);
        if (!ok) fail(k, *v, "is not a token id (0 .. " + std::to_string(top) + ")");
      };
      if (v->is_array()) {
        for (const auto& id : *v) one(id);
      } else {
        one(*v);
      }
    }
  }
  void finite(const nlohmann::json& j, const std::string& path) const {
    if (j.is_number_float() && !std::isfinite(j.get<double>())) fail(path, j, "is not a finite number");
    if (j.is_object())
      for (auto it = j.begin(); it != j.end(); ++it) finite(*it, path.empty() ? it.key() : path + "." + it.key());
    if (j.is_array())
      for (size_t i = 0; i < j.size(); ++i) finite(j[i], path + "[" + std::to_string(i) + "]");
  }

  void check(const nlohmann::json& j) const {
    if (!j.is_object()) return;
    finite(j, "");
    sizes(j, {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
              "intermediate_size", "moe_intermediate_size", "num_experts", "n_routed_experts", "num_experts_per_tok",
              "max_position_embeddings", "num_nextn_predict_layers"});
    positive(j, {"rope_theta"});
    positive(j, {"rms_norm_eps", "layer_norm_eps", "norm_eps"}, 1.0);
    positive(j, {"partial_rotary_factor"}, 1.0 + 1e-12);
    typed(j, {"tie_word_embeddings", "norm_topk_prob", "attention_bias", "use_cache"}, &nlohmann::json::is_boolean, "boolean");
    typed(j, {"hidden_act", "model_type", "rope_type", "torch_dtype", "output_gate_type"}, &nlohmann::json::is_string, "string");
    typed(j, {"layer_types", "architectures"}, &nlohmann::json::is_array, "list");
    const auto* vocab = get(j, "vocab_size");
    token_ids(j, vocab ? vocab->get<int64_t>() : 0);
    for (const char* sub : {"rope_parameters", "rope_scaling"})
      if (const auto* r = get(j, sub)) {
        if (!r->is_object()) fail(sub, *r, "is not an object");
        Checker{origin, prefix + sub + "."}.check(*r);
      }
  }
};

}  // namespace

void check_config_values(const nlohmann::json& config, const std::string& origin) {
  Checker{origin, ""}.check(config);
  if (auto it = config.find("text_config"); it != config.end() && it->is_object()) Checker{origin, "text_config."}.check(*it);
}

}  // namespace ds4
