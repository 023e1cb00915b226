// Synthetic full-size Qwen3.8 Flash Next (see synthetic_full.h): the tensor names and shapes
// weights.cpp binds, MLX q4 g64 matrices as shapes only, small vectors generated on the host.
#include "models/qwen_next/synthetic_full.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/synthetic_fill_blocks.h"
#include "core/error.h"
#include "core/synthetic_weights.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/ple_hash.h"
#include "models/qwen_next/weights.h"

namespace ds4::qwen_next {
namespace {

class Source final : public TensorSource {
 public:
  Source(nlohmann::json config, uint64_t seed, bool materialize)
      : config_(std::move(config)), seed_(seed), materialize_(materialize) {}
  void info(const std::string& name, std::vector<int64_t> shape, DType t, const void* data = nullptr) {
    if (!data && materialize_) data = host_data(name, shape, t);
    TensorInfo i;
    i.name = name;
    i.type = t;
    i.shape = std::move(shape);
    i.bytes = size_t(i.numel()) * size_t(t == DType::U32 || t == DType::F32 ? 4 : 2);
    i.data = data;
    i.file = path_;
    tensors_.push_back(std::move(i));
  }
  // MLX q4 g64 linear "<name>.weight/.scales/.biases" {rows, cols} (or {n, rows, cols}).
  void linear(const std::string& name, std::vector<int64_t> shape) {
    const int64_t cols = shape.back();
    amp_ = 1.0f / std::sqrt(float(cols));
    if (cols % 64) throw InputError("qwen synthetic-full: " + name + " cols " + std::to_string(cols) + " not a multiple of 64");
    std::vector<int64_t> w = shape, s = shape;
    w.back() = cols / 8, s.back() = cols / 64;
    info(name + ".weight", w, DType::U32);
    info(name + ".scales", s, DType::BF16);
    info(name + ".biases", s, DType::BF16);
  }
  void vec(const std::string& name, int64_t n, float center, float spread) {
    data_.emplace_back(size_t(n) * 4);
    fill_synthetic(DType::F32, 1, n, seed_from_name(name.c_str(), seed_), SyntheticFill{center, spread},
                   data_.back().data());
    info(name, {n}, DType::F32, data_.back().data());
  }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const nlohmann::json& config() const override { return config_; }
  const nlohmann::json& metadata() const override { return empty_; }
  const std::string& path() const override { return path_; }
  std::string format() const override { return "synthetic"; }

 private:
  // Host values with the device generator: packed words, or per-group scales (".scales") and
  // biases (".biases") of the last linear(), or plain BF16 values (the PLE table).
  const void* host_data(const std::string& name, const std::vector<int64_t>& shape, DType t) {
    namespace sy = ds4::synth;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const uint64_t seed = seed_from_name(name.substr(0, name.rfind('.')).c_str(), seed_);
    data_.emplace_back(size_t(n) * (t == DType::U32 ? 4 : 2));
    uint8_t* p = data_.back().data();
    const bool scales = name.size() > 7 && name.compare(name.size() - 7, 7, ".scales") == 0;
    const bool biases = name.size() > 7 && name.compare(name.size() - 7, 7, ".biases") == 0;
    for (int64_t i = 0; i < n; ++i) {
      if (t == DType::U32) {
        const uint32_t v = sy::mlx_word(seed, uint64_t(i));
        std::memcpy(p + 4 * i, &v, 4);
      } else if (scales) {
        sy::put16(p + 2 * i, sy::mlx_scale(seed, uint64_t(i), amp_, 4, true));
      } else if (biases) {
        sy::put16(p + 2 * i, sy::mlx_bias(seed, uint64_t(i), amp_, true));
      } else {
        sy::put16(p + 2 * i, sy::to_bf16(sy::plain(seed, uint64_t(i), 0.f, 0.05f)));
      }
    }
    return p;
  }
  nlohmann::json config_;
  uint64_t seed_;
  bool materialize_;
  float amp_ = 0.f;
  std::vector<TensorInfo> tensors_;
  std::vector<std::vector<uint8_t>> data_;
  nlohmann::json empty_ = nlohmann::json::object();
  std::string path_ = "synthetic-full:qwen_next";
};

void hyper(Source& s, const Config& c, const std::string& p, bool inject) {
  s.vec(p + ".hc_norm.weight", c.wide(), 0.0f, 0.05f);  // stored as w, used as 1 + w
  s.linear(p + ".input_mix_weight_down", {c.hc_rank, c.wide()});
  s.linear(p + ".input_mix_weight_up", {c.wide(), c.hc_rank});
  if (inject) s.linear(p + ".block_inject_weight", {c.hc, c.wide()});
}

// Layer `p`: GDN (linear) or QSA attention, a PLE block when pi >= 0, the MoE (bind_weights' layer()).
void layer(Source& s, const Config& c, const std::string& p, bool linear, int64_t pi) {
  const int64_t d = c.hidden;
  hyper(s, c, p + ".attn_hyper_connection", true);
  hyper(s, c, p + ".mlp_hyper_connection", true);
  if (linear) {
    const std::string g = p + ".linear_attn";
    s.linear(g + ".in_proj_qkv", {c.conv_dim(), d});
    s.linear(g + ".in_proj_z", {c.value_dim(), d});
    s.linear(g + ".in_proj_b", {c.v_heads, d});
    s.linear(g + ".in_proj_a", {c.v_heads, d});
    s.linear(g + ".out_proj", {d, c.value_dim()});
    s.vec(g + ".conv1d.weight", c.conv_dim() * c.conv_k, 0.0f, 0.5f);
    s.vec(g + ".A_log", c.v_heads, 0.0f, 0.5f);
    s.vec(g + ".dt_bias", c.v_heads, 0.0f, 0.5f);
    s.vec(g + ".norm.weight", c.v_dim, 1.0f, 0.05f);
  } else {
    const std::string a = p + ".self_attn";
    const int64_t hd = c.head_dim;
    s.linear(a + ".q_proj", {c.heads * hd * 2, d});
    s.linear(a + ".k_proj", {c.kv_heads * hd, d});
    s.linear(a + ".v_proj", {c.kv_heads * hd, d});
    s.linear(a + ".o_proj", {d, c.heads * hd});
    s.vec(a + ".q_norm.weight", hd, 0.0f, 0.05f);
    s.vec(a + ".k_norm.weight", hd, 0.0f, 0.05f);
    s.linear(a + ".indexer.index_qk_proj", {(c.idx_heads + 1) * c.idx_dim, d});
    s.vec(a + ".indexer.q_layernorm.weight", c.idx_dim, 0.0f, 0.05f);
    s.vec(a + ".indexer.k_layernorm.weight", c.idx_dim, 0.0f, 0.05f);
  }
  if (pi >= 0) {
    const std::string q = p + ".ple";
    PleWeights pw;
    ple_hash_constants(c, pi, pw);
    const int64_t heads = (c.ngram - 1) * c.heads_per_ngram;
    const int64_t total = pw.head_offset.back() + pw.head_vocab.back();
    const int64_t padded = (total + c.ngram_divisor - 1) / c.ngram_divisor * c.ngram_divisor;
    // Shape only: the CUDA model replaces the table by generated rows (never read here).
    s.info(q + ".ple_embedding.ngram_embedding.weight", {padded, c.ple_dim / heads}, DType::BF16);
    s.linear(q + ".key_proj", {c.wide(), c.ple_dim});
    s.linear(q + ".value_proj", {c.hidden, c.ple_dim});
    for (const char* n : {".norm_key.weight", ".norm_query.weight", ".norm_conv.weight"})
      s.vec(q + n, c.wide(), 0.0f, 0.05f);
    s.vec(q + ".conv1d.weight", c.wide() * c.ple_conv_k, 0.0f, 0.5f);
  }
  const std::string m = p + ".mlp";
  s.linear(m + ".gate", {c.experts, d});
  s.linear(m + ".experts.gate_up_proj", {c.experts, 2 * c.moe_inter, d});
  s.linear(m + ".experts.down_proj", {c.experts, d, c.moe_inter});
  s.linear(m + ".shared_expert.gate_proj", {c.shared_inter, d});
  s.linear(m + ".shared_expert.up_proj", {c.shared_inter, d});
  s.linear(m + ".shared_expert.down_proj", {d, c.shared_inter});
  s.linear(m + ".shared_expert_gate", {1, d});
}

}  // namespace

nlohmann::json synthetic_full_config(const SyntheticFullOptions& o) {
  const int64_t layers = o.layers > 0 ? o.layers : 48;
  nlohmann::json types = nlohmann::json::array();
  for (int64_t l = 0; l < layers; ++l) types.push_back(l % 4 == 3 ? "full_attention" : "linear_attention");
  nlohmann::json t = {
      {"model_type", "qwen4_exp_text"}, {"vocab_size", o.vocab > 0 ? o.vocab : 248320}, {"hidden_size", 2560}, {"num_hidden_layers", layers},
      {"layer_types", types}, {"num_attention_heads", 24}, {"num_key_value_heads", 2}, {"head_dim", 256},
      {"linear_num_key_heads", 16}, {"linear_num_value_heads", 48}, {"linear_key_head_dim", 128},
      {"linear_value_head_dim", 128}, {"linear_conv_kernel_dim", 4}, {"output_gate_type", "sigmoid"},
      {"num_experts", o.n_experts > 0 ? o.n_experts : 512}, {"num_experts_per_tok", 10},
      {"moe_intermediate_size", 640}, {"shared_expert_intermediate_size", 640}, {"norm_topk_prob", true},
      {"hc_count", 4}, {"hc_lowrank", 320}, {"ple_layer_ids", {1}}, {"ple_embed_dim", 2560},
      {"ple_conv_kernel_size", 4}, {"ngram_size", 3}, {"heads_per_ngram", 8}, {"ngram_vocab_size_base", o.ngram_base > 0 ? o.ngram_base : 20000000},
      {"make_ngram_vocab_size_divisible_by", 128}, {"seed", 1234}, {"indexer_n_heads", 4}, {"indexer_kv_heads", 1},
      {"indexer_head_dim", 128}, {"indexer_budget", 2048}, {"indexer_compress_ratio", 4},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000000.0}, {"partial_rotary_factor", 0.25}}},
      {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 262144}, {"tie_word_embeddings", false},
      {"eos_token_id", {o.vocab > 0 ? o.vocab - 1 : 248046}}};
  return {{"model_type", "qwen4_exp"}, {"_name_or_path", "synthetic-full-qwen3.8-flash-next"}, {"text_config", t}};
}

std::unique_ptr<TensorSource> synthetic_full_source(const SyntheticFullOptions& o) {
  const nlohmann::json j = synthetic_full_config(o);
  const Config c = parse_config(j, "synthetic-full qwen_next config");
  auto s = std::make_unique<Source>(j, o.seed, o.materialize);
  s->linear("model.embed_tokens", {c.vocab, c.hidden});  // rows made per token (never read)
  s->linear("lm_head", {c.vocab, c.hidden});
  for (int64_t l = 0; l < c.layers; ++l)
    layer(*s, c, "model.layers." + std::to_string(l), c.is_linear[size_t(l)], c.ple_index(l));
  hyper(*s, c, "model.hyper_connection_mixer", false);
  if (o.mtp) {
    s->vec("mtp.pre_fc_norm_embedding.weight", c.hidden, 0.0f, 0.05f);
    s->vec("mtp.pre_fc_norm_hidden.weight", c.wide(), 0.0f, 0.05f);
    s->linear("mtp.fc_embedding", {c.hidden, c.hidden});
    s->linear("mtp.fc_hidden", {c.hidden, c.hidden});
    layer(*s, c, "mtp.layers.0", false, -1);
    hyper(*s, c, "mtp.hyper_connection_mixer", false);
  }
  return s;
}

bool parse_synthetic_full(const std::string& spec, SyntheticFullOptions& o) {
  const std::string head = "synthetic-full";
  if (spec.rfind(head, 0) != 0) return false;
  try {
    size_t at = head.size();
    if (at < spec.size() && spec[at] == ':') {
      const size_t next = spec.find(':', at + 1);
      const std::string e = spec.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
      if (!e.empty()) o.n_experts = std::stoll(e);
      if (next != std::string::npos) o.layers = std::stoll(spec.substr(next + 1));
    } else if (at != spec.size()) {
      throw std::invalid_argument("spec");
    }
  } catch (const std::logic_error&) {
    throw InputError("synthetic-full: bad field in '" + spec + "' (synthetic-full[:EXPERTS[:LAYERS]])");
  }
  return true;
}

}  // namespace ds4::qwen_next
